"""The logged gain compares the policy and both baselines over one set of inputs.

A user's env written in the test (exact base laws and oracle references, different per input) and
a plain single-env loop with a scripted policy; the reference is a hand count: the policy's AUC
over the inputs with a complete run, and the iid / oracle AUCs from their closed forms over the
same inputs.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from seffi.callbacks.core import CoverageMonitor

STRATEGIES = ("a", "b", "c")
#: Each input's base law over match sets (the exact iid baseline): different per input, so the
#: mean baseline AUC depends on which inputs it is taken over.
LAWS: dict[str, dict[frozenset[str], float]] = {
    "x1": {frozenset("a"): 0.7, frozenset("b"): 0.2, frozenset("c"): 0.1},
    "x2": {frozenset("a"): 0.4, frozenset("b"): 0.3, frozenset("c"): 0.3},
    "x3": {frozenset("a"): 0.9, frozenset("b"): 0.1},
}
K = 3


class ScriptedEnv(gym.Env):
    """One step is one sample of the input set by ``reset(options={"input_id": ...})``."""

    strategies = STRATEGIES
    input_ids = tuple(LAWS)

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Discrete(1)
        self.action_space = gym.spaces.Discrete(len(STRATEGIES))
        self.x, self.k = "x1", 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.x, self.k = (options or {}).get("input_id", self.x), 0
        return 0, {}

    def step(self, action: int):
        self.k += 1
        info = {"input_id": self.x, "strategy_matches": (STRATEGIES[action],), "sample_index": self.k}
        return 0, 0.0, True, False, info

    def base_match_distribution(self, x: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        return dict(LAWS[x])

    def reference_match_sets(self, x: str) -> dict[str, frozenset[str]]:
        return {s: frozenset({s}) for s in STRATEGIES}


def _iid_auc(law: dict[frozenset[str], float]) -> float:
    """AUC of iid sampling by inclusion–exclusion: P(s found by k) = 1 - (1 - P(s in a sample))^k."""
    p = {s: sum(q for ms, q in law.items() if s in ms) for s in STRATEGIES}
    return float(np.mean([sum(1 - (1 - p[s]) ** k for s in STRATEGIES) / 3 for k in range(1, K + 1)]))


def _oracle_auc() -> float:
    """The oracle never repeats a strategy: min(k, M) / M found by k."""
    return float(np.mean([min(k, 3) / 3 for k in range(1, K + 1)]))


def _policy_auc(actions: list[int]) -> float:
    found = [len({STRATEGIES[a] for a in actions[:k]}) / 3 for k in range(1, K + 1)]
    return float(np.mean(found))


def _hand_gain(runs: dict[str, list[int]]) -> float:
    complete = [x for x, acts in runs.items() if len(acts) >= K]
    auc = np.mean([_policy_auc(runs[x]) for x in complete])
    iid = np.mean([_iid_auc(LAWS[x]) for x in complete])
    oracle = _oracle_auc()
    return float((auc - iid) / (oracle - iid))


@pytest.mark.parametrize("window", [None, 4096])
def test_every_logged_gain_uses_the_baselines_of_the_inputs_with_a_complete_run(
    tmp_path: Any, window: int | None
) -> None:
    env = ScriptedEnv()
    monitor = CoverageMonitor.for_env(
        env, budget=K, out_dir=tmp_path, wandb="disabled", plots=False, log_every=1, window=window
    )
    # Each input completes one run after the next input was seen: some logs see an incomplete input.
    script = [("x1", 0), ("x1", 0), ("x2", 2), ("x1", 1), ("x2", 1), ("x3", 0), ("x2", 0), ("x3", 0)]
    runs: dict[str, list[int]] = {}
    checked = 0
    for step, (x, a) in enumerate(script, start=1):
        env.reset(options={"input_id": x}) if x not in runs else None
        env.x, env.k = x, len(runs.get(x, []))
        *_, info = env.step(a)
        monitor.update_infos(info)
        runs.setdefault(x, []).append(a)
        scalars = monitor.log(step)
        if scalars is None:  # no complete run yet
            assert all(len(acts) < K for acts in runs.values())
            continue
        complete = [x for x, acts in runs.items() if len(acts) >= K]
        assert scalars["seffi/auc"] == pytest.approx(np.mean([_policy_auc(runs[x]) for x in complete]))
        assert scalars["seffi/gain_vs_iid"] == pytest.approx(_hand_gain(runs), abs=1e-9), step
        checked += 1
    assert checked == 5
    # Averaging the baselines over every input seen (x3 too) gives another number: the case tells
    # the two sets of inputs apart.
    iid_seen = np.mean([_iid_auc(LAWS[x]) for x in LAWS])
    assert abs(np.mean([_iid_auc(LAWS[x]) for x in ("x1", "x2")]) - iid_seen) > 0.01
    # The snapshot path (curves with the paired gain) gives the same number over the same inputs.
    _, snap = monitor.snapshot(exact=True)
    assert snap["seffi/gain_vs_iid"] == pytest.approx(_hand_gain(runs), abs=1e-9)
    monitor.close()


@pytest.mark.parametrize("user", [False, True])
def test_windowed_gain_averages_the_baselines_over_the_windows_inputs(tmp_path: Any, user: bool) -> None:
    """With a window shorter than the run, each windowed log's gain compares the window's runs with
    the iid and oracle AUCs of the window's inputs only: the env's baselines, or the user's
    ``iid=``/``oracle=`` (per-input laws, so a mean over other inputs gives another number)."""
    from seffi.coverage import IidBaseline, OracleBaseline

    env = ScriptedEnv()
    given = {}
    if user:
        given = {
            "iid": IidBaseline.from_match_distribution(LAWS, strategies=STRATEGIES),
            "oracle": OracleBaseline({x: env.reference_match_sets(x) for x in LAWS}, strategies=STRATEGIES),
        }
    W = 2 * K
    monitor = CoverageMonitor.for_env(
        env, budget=K, out_dir=tmp_path, wandb="disabled", plots=False, log_every=K, window=W, **given
    )
    # One input at a time, K samples each: every log's window holds the last two runs.
    script = [("x1", (0, 0, 1)), ("x3", (0, 1, 1)), ("x2", (2, 1, 0)), ("x1", (1, 1, 1)), ("x3", (0, 0, 0))]
    done: list[tuple[str, list[int]]] = []
    checked = 0
    for x, actions in script:
        env.reset(options={"input_id": x})
        for a in actions:
            monitor.update_infos(env.step(a)[-1])
        done.append((x, list(actions)))
        scalars = monitor.log(monitor.episodes)
        recent = done[-2:]
        auc = np.mean(
            [np.mean([_policy_auc(acts) for y, acts in recent if y == x]) for x in {y for y, _ in recent}]
        )
        iid = np.mean([_iid_auc(LAWS[x]) for x in {y for y, _ in recent}])
        assert scalars["seffi/window/runs"] == len(recent)
        assert scalars["seffi/window/auc"] == pytest.approx(auc, abs=1e-12)
        assert scalars["seffi/window/gain_vs_iid"] == pytest.approx(
            (auc - iid) / (_oracle_auc() - iid), abs=1e-9
        )
        checked += len({y for y, _ in recent}) < len({y for y, _ in done})  # a part of the inputs seen
    assert checked >= 3
    monitor.close()

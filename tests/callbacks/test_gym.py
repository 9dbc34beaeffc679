from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import seffi.envs  # noqa: F401 - registers the env ids
from seffi.callbacks import CoverageMonitor
from seffi.callbacks.gym import CoverageVectorWrapper
from seffi.errors import SeffiError
from tests.callbacks.fake_env import FakeCoverageEnv
from tests.callbacks.helpers import assert_curves_match, hand_tracker, load_report

K = 6
ENV = "seffi/SortSwapsRouter-v0"


class RecordFinals(gym.Wrapper):
    def __init__(self, env: gym.Env, index: int, sink: list) -> None:
        super().__init__(env)
        self.index, self.sink = index, sink

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        if out[2] or out[3]:
            self.sink.append((self.index, dict(out[4])))
        return out


def _sync(mode: AutoresetMode, finals: list, n: int = 3) -> SyncVectorEnv:
    fns = [lambda i=i: RecordFinals(gym.make(ENV, n_inputs=4, budget=K), i, finals) for i in range(n)]
    return SyncVectorEnv(fns, autoreset_mode=mode)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_plain_loop_matches_hand_tracker(tmp_path: Path, mode: AutoresetMode) -> None:
    finals: list = []
    envs = _sync(mode, finals)
    monitor = CoverageMonitor.for_env(
        envs, budget=K, out_dir=tmp_path, wandb="disabled", log_every=30, n_boot=0
    )
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for step in range(0, 300 * envs.num_envs, envs.num_envs):
        _, _, term, trunc, infos = envs.step(envs.action_space.sample())
        monitor.update_infos(infos, term | trunc)
        monitor.maybe_log(step)
    monitor.close()
    # SAME_STEP: every step ends an episode; NEXT_STEP: every other step is a reset step.
    assert monitor.episodes == len(finals) == (900 if mode == AutoresetMode.SAME_STEP else 450)
    ref = hand_tracker(finals, envs.envs[0].unwrapped.strategies, K)
    (comp,) = load_report(tmp_path)["comparisons"]
    assert_curves_match(comp["policies"][0]["curves"], ref.curves(K, n_boot=0))
    # A log every 30 episodes, none before the first run reaches K (no curves from
    # incomplete runs); the attempts before it are skipped, not shifted.
    first = 1 + next(i for i, (_, info) in enumerate(finals) if info["sample_index"] == K)
    assert monitor.episodes // 30 - (first + 29) // 30 <= monitor.n_logs <= monitor.episodes // 30
    # The iid baseline is exact: mean over inputs of sum_s 1 - (1 - pi_s)^k, over M, from the env's law.
    env0 = envs.envs[0].unwrapped
    ks = np.arange(1, K + 1)
    want = []
    for x in env0.input_ids:
        law = env0.base_match_distribution(x)
        pi = [sum(p for ms, p in law.items() if s in ms) for s in env0.strategies]
        want.append(sum(1 - (1 - q) ** ks for q in pi) / len(env0.strategies))
    np.testing.assert_allclose(comp["iid"]["coverage"], np.mean(want, axis=0), rtol=1e-9)
    # The oracle never repeats: full coverage by k = M on every input.
    assert comp["oracle"]["coverage"][len(env0.strategies) - 1] == pytest.approx(1.0)


def test_native_vector_wrapper_equals_sync_loop(tmp_path: Path) -> None:
    finals: list = []
    sync = _sync(AutoresetMode.NEXT_STEP, finals)
    native = gym.make_vec(ENV, num_envs=3, vectorization_mode="vector_entry_point", n_inputs=4, budget=K)
    wrapped = CoverageVectorWrapper(native, budget=K, out_dir=tmp_path, wandb="disabled", n_boot=0)
    for envs in (sync, wrapped):
        envs.reset(seed=0)
        envs.action_space.seed(0)
    for _ in range(200):
        actions = sync.action_space.sample()
        sync.step(actions)
        wrapped.step(actions)
    wrapped.close()
    ref = hand_tracker(finals, native.unwrapped.strategies, K)
    (comp,) = load_report(tmp_path)["comparisons"]
    assert_curves_match(comp["policies"][0]["curves"], ref.curves(K, n_boot=0))


def test_out_of_order_steps_never_reach_the_sinks(tmp_path: Path) -> None:
    env = gym.make(ENV, n_inputs=2, budget=K)
    monitor = CoverageMonitor.for_env(env, budget=K, out_dir=tmp_path, wandb="offline", n_boot=0)
    run = monitor.sinks.wandb.run
    sent: list[int] = []
    real_log = run.log
    run.log = lambda data, step: sent.append(step) or real_log(data, step)  # spy on what W&B receives
    env.reset(seed=0)
    for _ in range(20):
        _, _, te, tr, info = env.step(env.action_space.sample())
        monitor.update_infos(info, te or tr)
        env.reset()
    assert monitor.log(100) is not None
    with pytest.warns(RuntimeWarning, match="steps must increase"):
        assert monitor.log(50) is None
    assert monitor.log(100) is None  # equal step: refused too
    assert monitor.log(101) is not None
    monitor.close()
    steps = [json.loads(x)["seffi/step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [100, 101]
    assert sent and 50 not in sent and sent == sorted(sent) and set(sent) == {100, 101}


def test_unknown_env_needs_strategies_and_logs_without_gain(tmp_path: Path) -> None:
    env = FakeCoverageEnv()
    with pytest.raises(SeffiError, match="needs `strategies`"):
        CoverageMonitor.for_env(env, budget=3, out_dir=tmp_path, wandb="disabled")
    monitor = CoverageMonitor(3, ("a", "b", "c"), env=env, out_dir=tmp_path, wandb="disabled", n_boot=0)
    env.reset(seed=0)
    for t in range(40):
        _, _, te, tr, info = env.step(t % 3)
        monitor.update_infos(info, te or tr)
        if te or tr:
            env.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = monitor.close()
    pol = report.comparisons[0].policies[0]
    assert pol.gain.value is None and "baseline" in pol.gain.reason
    # The fake env's sample_index keeps growing (one long run per input): only the first K count.
    per_input = [sum(e[0] == x for e in env.log) for x in env.inputs]
    assert pol.curves.n_samples == sum(min(3, n) for n in per_input) == 6
    assert monitor.skipped_beyond_budget == len(env.log) - 6


def test_bad_arguments() -> None:
    with pytest.raises(SeffiError, match="budget"):
        CoverageMonitor(0, ("a",), wandb="disabled", sinks=object())
    with pytest.raises(SeffiError, match="log_unit"):
        CoverageMonitor(2, ("a",), log_unit="hours", sinks=object())  # type: ignore[arg-type]

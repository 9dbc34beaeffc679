"""``EnvAccess`` reads a user env through every Gymnasium container without breaking a worker.

The envs are the researcher's own (``tests/integration/user_env.py``): ``PlannerEnv`` holds a lambda
attribute, so anything that pickles the env or one of its bound methods fails on it. The SB3
containers are covered in ``tests/integration/test_vector_envs.py``.
"""

from __future__ import annotations

import functools
import gc
import json
import sys
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers.vector import NormalizeReward, RecordEpisodeStatistics

import seffi.envs  # noqa: F401 - registers the env ids
from seffi.callbacks import CoverageMonitor
from seffi.callbacks.env_access import EnvAccess
from seffi.callbacks.gym import CoverageVectorWrapper
from seffi.coverage import IidBaseline, OracleBaseline
from seffi.coverage.env_baselines import EnvBaselines
from seffi.errors import SeffiError
from tests.integration.user_env import BASE_LAW, INPUTS, STRATEGIES, PlannerEnv, make_planner

K = 4


def _fns(n: int = 2, laws: bool = True, **kwargs: Any) -> list[Any]:
    return [functools.partial(make_planner, K, i, None, laws, **kwargs) for i in range(n)]


class ProbeLog(gym.Wrapper):
    """Writes every attribute name asked of the env (``get/has_wrapper_attr``) to a file, in any process."""

    def __init__(self, env: gym.Env, path: str) -> None:
        super().__init__(env)
        self.path = path

    def _note(self, name: str) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(name) + "\n")

    def has_wrapper_attr(self, name: str) -> bool:
        self._note(name)
        return super().has_wrapper_attr(name)

    def get_wrapper_attr(self, name: str) -> Any:
        self._note(name)
        return super().get_wrapper_attr(name)


def _probed(path: str, laws: bool) -> gym.Env:
    return ProbeLog(make_planner(K, 0, None, laws), path)


def _asked(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line) for line in path.read_text().splitlines()}


def _steps_ok(envs: gym.vector.VectorEnv, n: int = 6) -> None:
    """The env still steps: no worker was shut down by a probe."""
    envs.reset(seed=0)
    for _ in range(n):
        _, rewards, *_ = envs.step(np.full(envs.num_envs, 1))
        assert rewards.shape == (envs.num_envs,)


def test_async_vector_env_probes_missing_attributes_without_killing_a_worker() -> None:
    envs = gym.vector.AsyncVectorEnv(_fns(laws=True))
    try:
        access = EnvAccess(envs)
        for missing in ("task", "config", "n_latents", "not_there"):
            assert not access.has(missing)
        assert access.has("base_match_distribution") and access.has("reference_match_sets")
        assert access.get("strategies") == STRATEGIES
        assert access.get("input_ids") == INPUTS
        # A method is called in the worker with its arguments; only the law comes back.
        assert access.call("base_match_distribution", "maze-b") == BASE_LAW
        assert access.call("base_match_distribution", "maze-b", valid_only=True) == {
            s: p for s, p in BASE_LAW.items() if s
        }
        assert access.num_latents() == 0 and access.task_name("fallback") == "fallback"
        _steps_ok(envs)
        assert all(envs.call("has_wrapper_attr", "strategies"))  # every worker still answers
        assert access.kind == "gym_async"
    finally:
        envs.close()


def test_async_vector_env_of_a_user_env_gives_the_exact_baselines() -> None:
    env = make_planner(K)
    local = EnvBaselines(
        STRATEGIES, K, base_law=env.base_match_distribution, references=env.reference_match_sets
    )
    envs = gym.vector.AsyncVectorEnv(_fns(laws=True))
    try:
        remote = EnvAccess(envs).baselines(STRATEGIES, K)
        assert remote.available
        assert remote.aucs(list(INPUTS)) == pytest.approx(local.aucs(list(INPUTS)), abs=1e-12)
        iid, oracle = remote.curves(INPUTS, pool=True)
        assert np.allclose(iid.coverage, local.curves(INPUTS)[0].coverage, atol=1e-12)
        assert oracle.auc == pytest.approx(local.curves(INPUTS)[1].auc, abs=1e-12)
        _steps_ok(envs)
    finally:
        envs.close()


def test_async_seffi_env_from_make_vec_under_the_wrapper_logs_with_exact_baselines(tmp_path: Path) -> None:
    envs = gym.make_vec("seffi/HanoiRouter-v0", num_envs=2, vectorization_mode="async", budget=K)
    local = gym.make("seffi/HanoiRouter-v0", budget=K)
    wrapped = CoverageVectorWrapper(
        envs, K, out_dir=tmp_path / "run", wandb="disabled", plots=False, n_boot=0, log_every=4
    )
    wrapped.reset(seed=0)
    wrapped.action_space.seed(0)
    for _ in range(80):  # a row cycles through the 8 inputs: K samples each take 64 steps (NEXT_STEP)
        wrapped.step(wrapped.action_space.sample())
    monitor = wrapped.monitor
    assert monitor.task_name == local.unwrapped.task.name and monitor.env_name == "seffi/HanoiRouter-v0"
    assert monitor.num_latents == local.unwrapped.n_latents
    inputs = monitor.inputs
    exact = EnvBaselines.from_env(local.unwrapped, K)
    assert monitor.env_baselines.aucs(inputs) == pytest.approx(exact.aucs(inputs), abs=1e-12)
    assert monitor.n_logs >= 1
    wrapped.close()
    local.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_wrappers_on_top_are_looked_through(mode: str) -> None:
    base = gym.vector.SyncVectorEnv(_fns()) if mode == "sync" else gym.vector.AsyncVectorEnv(_fns())
    envs = NormalizeReward(RecordEpisodeStatistics(base))
    try:
        access = EnvAccess(envs)
        assert access.get("strategies") == STRATEGIES
        assert access.call("reference_match_sets", "maze-a")["greedy"] == frozenset({"astar", "greedy"})
        _steps_ok(envs)
        assert access.kind == ("local" if mode == "sync" else "gym_async")
    finally:
        envs.close()


def test_single_env_under_gym_wrappers_is_looked_through() -> None:
    env = gym.wrappers.RecordEpisodeStatistics(gym.wrappers.TimeLimit(PlannerEnv(budget=K), 10))
    access = EnvAccess(env)
    assert access.get("strategies") == STRATEGIES and access.get("input_ids") == INPUTS
    assert not access.has("base_match_distribution")
    assert access.baselines(STRATEGIES, K).available is False


def test_nothing_the_caller_passes_is_asked_of_a_subprocess_env(tmp_path: Path) -> None:
    log = tmp_path / "asked.jsonl"
    envs = gym.vector.AsyncVectorEnv([functools.partial(_probed, str(log), True)] * 2)
    try:
        iid = IidBaseline.from_match_distribution({x: BASE_LAW for x in INPUTS}, strategies=STRATEGIES)
        oracle = OracleBaseline(
            {x: make_planner(K).reference_match_sets(x) for x in INPUTS}, strategies=STRATEGIES
        )
        monitor = CoverageMonitor(
            K,
            STRATEGIES,
            env=envs,
            iid=iid,
            oracle=oracle,
            task_name="planning",
            env_name="user/Planner-v0",
            sinks=_NoSink(),
            n_boot=0,
        )
        skipped = {
            "strategies",
            "task",
            "spec",
            "base_match_distribution",
            "reference_match_sets",
            "input_ids",
        }
        assert not _asked(log) & skipped, _asked(log)
        assert monitor.env_baselines.available and monitor.task_name == "planning"
        _steps_ok(envs)
    finally:
        envs.close()


class _NoSink:
    """Sinks that keep nothing (the monitor's sinks are not under test here)."""

    def log(self, *args: Any, **kwargs: Any) -> None:
        return None

    log_snapshot = log
    finish = log


def test_method_that_raises_in_an_async_worker_is_one_seffi_error() -> None:
    envs = gym.vector.AsyncVectorEnv(_fns(laws=True))
    try:
        access = EnvAccess(envs)
        with pytest.raises(
            SeffiError, match="`base_match_distribution` raised in the Gymnasium AsyncVectorEnv"
        ):
            access.call("base_match_distribution")  # missing input_id: a TypeError in the worker
    finally:
        envs.close(terminate=True)


def test_env_strategies_that_are_no_list_of_ids_are_one_error() -> None:
    class Odd(PlannerEnv):
        def strategies(self) -> tuple[str, ...]:  # type: ignore[override]
            return STRATEGIES

    with pytest.raises(SeffiError, match="the env's `strategies` must be a sequence of strategy ids"):
        CoverageMonitor(K, env=Odd(), sinks=_NoSink())


def test_failed_wrapper_construction_leaves_the_env_open_and_reports_nothing_at_collection(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)  # no strategies at all
    with pytest.raises(SeffiError, match="needs `strategies`"):
        CoverageVectorWrapper(envs, K, out_dir=tmp_path / "run", wandb="disabled")
    gc.collect()
    assert unraisable == []  # no "Exception ignored in __del__"
    assert not envs.closed  # the half-made wrapper did not close the caller's env
    envs.close()


class _IntIdEnv(gym.Env):
    """A user's one-step env whose input ids are ints, and whose facts are keyed by those ints."""

    observation_space, action_space = gym.spaces.Discrete(1), gym.spaces.Discrete(2)
    strategies = ("a", "b")
    input_ids = (0, 1)
    laws: ClassVar = {
        0: {frozenset("a"): 0.9, frozenset("b"): 0.1},
        1: {frozenset("a"): 0.5, frozenset("b"): 0.5},
    }

    def __init__(self) -> None:
        self.x = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        self.x = (options or {}).get("input_id", self.x)
        return 0, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        return 0, 0.0, True, False, {"input_id": self.x, "strategy_matches": (("a", "b")[action],)}

    def base_match_distribution(self, input_id: int, valid_only: bool = False) -> dict:
        return self.laws[input_id]  # a KeyError for "0": the env's own ids must come back as ints

    def reference_match_sets(self, input_id: int) -> dict:
        return {s: {s} for s in self.strategies} if input_id in self.input_ids else {}


def test_an_env_with_int_ids_gets_its_facts_asked_by_its_own_ids(tmp_path: Path) -> None:
    """Ids are kept as str; an env that reports int ids is asked its laws and references by int, and
    the report's iid curve is the exact one of those laws (K = 2, M = 2: C(1) = 1/2, C(2) by hand)."""
    env = _IntIdEnv()
    monitor = CoverageMonitor.for_env(env, budget=2, wandb="disabled", plots=False, out_dir=tmp_path / "run")
    for x in (0, 1):
        env.reset(options={"input_id": x})
        for action in (0, 1):
            monitor.update_infos(env.step(action)[4], True)
    report = monitor.finalize(step=4)
    iid = next(c for c in report.comparisons[0].curve_sets() if c.label == "iid")
    # C(2) of a law {a: p, b: 1 - p} over M = 2: (1 + (1 - p^2 - (1-p)^2)) / 2 per input, C(1) = 1/2.
    c2 = np.mean([(1 + 1 - p**2 - (1 - p) ** 2) / 2 for p in (0.9, 0.5)])
    assert iid.coverage == pytest.approx([0.5, c2], abs=1e-12)

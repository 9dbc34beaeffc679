"""A researcher's own env under every vector container: C(k) equals a hand count of what the envs emitted.

The matrix: SB3 ``DummyVecEnv``/``SubprocVecEnv`` (each with and without ``VecNormalize``) trained
with PPO and :class:`seffi.callbacks.sb3.CoverageCallback`; hand-written Gymnasium loops over
``SyncVectorEnv``/``AsyncVectorEnv`` (with and without ``RecordEpisodeStatistics`` +
``NormalizeReward`` on top) under :class:`~seffi.callbacks.gym.CoverageVectorWrapper` or a
:class:`~seffi.callbacks.CoverageMonitor`; seffi's native vector env under the same wrappers. Each
case runs three ways: the env has the laws (exact baselines from the env), it has only
``strategies`` (no gain, with its reason), or it has only ``strategies`` and the caller passes
``iid=``/``oracle=`` (gain again).

Every env appends the final info of each episode to a log file from whichever process runs it, so
``hand_coverage`` counts C(k) from what the envs really emitted, independently of the monitor.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers.vector import NormalizeReward, RecordEpisodeStatistics

import seffi.envs  # noqa: F401 - registers the env ids
from seffi.callbacks import CoverageMonitor
from seffi.callbacks.gym import CoverageVectorWrapper
from tests.callbacks.helpers import load_report, tiny_ppo
from tests.callbacks.test_env_access import _asked, _probed
from tests.docs.test_docs import python_blocks
from tests.helpers import require
from tests.integration.caller_baselines import LAWS, REFERENCES, explicit_baselines
from tests.integration.user_env import (
    INPUTS,
    STRATEGIES,
    hand_coverage,
    hand_iid_coverage,
    log_paths,
    make_planner,
    read_log,
)

pytestmark = pytest.mark.integration

sb3 = require("stable_baselines3", "sb3")
torch = require("torch", "sb3")
torch.set_num_threads(1)  # tiny nets: extra threads only fight over the shared cores
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback, CallbackList  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize  # noqa: E402

from seffi.callbacks.sb3 import CoverageCallback  # noqa: E402

K = 4
N_ENVS = 2
ROOT = Path(__file__).resolve().parents[2]
MONITOR_OPTIONS = {"wandb": "disabled", "plots": False, "n_boot": 20, "log_every": 16}


def _sb3_planner(start: int, log_path: str, laws: bool) -> gym.Env:
    """SB3's ``make_vec_env`` puts a ``Monitor`` around each env; so does this (module-level: picklable)."""
    return Monitor(make_planner(K, start, log_path, laws))


def _env_fns(folder: Path, laws: str, sb3_monitor: bool = False) -> tuple[list[Any], list[str]]:
    paths = list(log_paths(folder, N_ENVS))
    # SB3's Monitor imports torch: in-process envs only (a subprocess would import it again).
    make = _sb3_planner if sb3_monitor else functools.partial(make_planner, K)
    return [functools.partial(make, i, paths[i], laws == "env") for i in range(N_ENVS)], paths


def hand_oracle_coverage(budget: int) -> np.ndarray:
    """The no-repeat oracle's C(k) by enumerating every order of its uniform choices (M = 4)."""
    refs = {s: frozenset(v) for s, v in REFERENCES.items()}
    total = np.zeros(budget)

    def walk(covered: frozenset[str], k: int, prob: float) -> None:
        if k == budget:
            return
        options = [s for s, r in refs.items() if s not in covered and not r <= covered]
        if not options:
            total[k:] += prob * len(covered) / len(STRATEGIES)
            return
        for s in options:
            nxt = covered | refs[s]
            total[k] += prob / len(options) * len(nxt) / len(STRATEGIES)
            walk(nxt, k + 1, prob / len(options))

    walk(frozenset(), 0, 1.0)
    return total


def check_report(out_dir: Path, episodes: list[dict[str, Any]], laws: str, episodes_seen: int) -> None:
    """The report's policy C(k), runs and gain against the hand count of ``episodes``."""
    hand, runs = hand_coverage(episodes, K)
    assert runs >= 2 * len(INPUTS)  # enough complete runs that a wrong split would show
    assert episodes_seen == len(episodes)
    comparison = load_report(out_dir)["comparisons"][0]
    policy = comparison["policies"][0]
    assert np.allclose(policy["curves"]["coverage"], hand, rtol=0, atol=1e-9)
    assert policy["curves"]["n_runs"] == runs
    gain = policy["gain"]
    if laws == "none":
        assert comparison["iid"] is None and comparison["oracle"] is None
        assert gain["value"] is None and "baseline" in gain["reason"]
        return
    iid, oracle = hand_iid_coverage(K), hand_oracle_coverage(K)
    assert np.allclose(comparison["iid"]["coverage"], iid, rtol=0, atol=1e-9)
    assert np.allclose(comparison["oracle"]["coverage"], oracle, rtol=0, atol=1e-9)
    expected = (hand.mean() - iid.mean()) / (oracle.mean() - iid.mean())
    assert gain["value"] == pytest.approx(expected, abs=1e-9)
    assert gain["lo"] <= gain["value"] <= gain["hi"]


def _logged(paths: list[str]) -> list[dict[str, Any]]:
    return [e for p in paths for e in (read_log(p) if Path(p).exists() else [])]


# -- Stable-Baselines3 -------------------------------------------------------------------------------------


def _ppo(venv: Any) -> PPO:
    return tiny_ppo(venv, n_steps=32, width=16)


@pytest.mark.parametrize("laws", LAWS)
@pytest.mark.parametrize(
    ("container", "normalize"), list(itertools.product(["dummy", "subproc"], [False, True]))
)
def test_sb3_ppo_with_coverage_callback_counts_what_the_envs_emitted(
    container: str, normalize: bool, laws: str, tmp_path: Path
) -> None:
    fns, paths = _env_fns(tmp_path, laws, sb3_monitor=container == "dummy")
    # fork: the workers start in milliseconds (forkserver's import torch again, ~10 s each here)
    venv = DummyVecEnv(fns) if container == "dummy" else SubprocVecEnv(fns, start_method="fork")
    if normalize:
        venv = VecNormalize(venv)
    callback = CoverageCallback(K, out_dir=tmp_path / "run", **MONITOR_OPTIONS, **explicit_baselines(laws))
    try:
        _ppo(venv).learn(256, callback=callback)  # 4 rollouts of 2 x 32 steps; one step = one sample
    finally:
        venv.close()
    assert callback.monitor.strategies == STRATEGIES
    check_report(callback.out_dir, _logged(paths), laws, callback.monitor.episodes)


def test_sb3_subproc_env_is_asked_nothing_the_caller_passes(tmp_path: Path) -> None:
    """strategies=, iid=, oracle=, task_name= and env_name= given: the workers are never asked for them."""
    log = tmp_path / "asked.jsonl"
    venv = VecNormalize(
        SubprocVecEnv([functools.partial(_probed, str(log), False)] * N_ENVS, start_method="fork")
    )
    callback = CoverageCallback(
        K,
        strategies=STRATEGIES,
        task_name="planning",
        env_name="user/Planner-v0",
        out_dir=tmp_path / "run",
        **MONITOR_OPTIONS,
        **explicit_baselines("explicit"),
    )
    try:
        _ppo(venv).learn(64, callback=callback)
    finally:
        venv.close()
    skipped = {"strategies", "task", "spec", "base_match_distribution", "reference_match_sets", "input_ids"}
    assert not _asked(log) & skipped, _asked(log)
    report = load_report(callback.out_dir)["comparisons"][0]
    assert report["task"] == "planning" and report["env_id"] == "user/Planner-v0"
    assert report["policies"][0]["gain"]["value"] is not None


class Recorder(BaseCallback):
    """Every finished episode's info, as SB3 hands it to callbacks (an independent record)."""

    def __init__(self) -> None:
        super().__init__()
        self.episodes: list[dict[str, Any]] = []

    def _on_step(self) -> bool:
        for i, (info, done) in enumerate(zip(self.locals["infos"], self.locals["dones"], strict=True)):
            if done:
                self.episodes.append({"pid": 0, "env": i, **info})
        return True


def test_docs_custom_env_trains_under_subproc_vec_env_with_exact_gain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 30-line env of docs/custom-env.md, as written there, in SB3 subprocesses with VecNormalize."""
    monkeypatch.chdir(tmp_path)  # the page's first block writes runs/my_env
    first = python_blocks((ROOT / "docs" / "custom-env.md").read_text(encoding="utf-8"))[0]
    page: dict[str, Any] = {"__name__": "custom_env_page"}  # not importable: pickled by value
    exec(compile(first.code, "docs/custom-env.md", "exec"), page)  # the page's own code
    env_cls, strategies, budget = page["SortStyleEnv"], page["STRATEGIES"], 3
    venv = VecNormalize(SubprocVecEnv([env_cls] * N_ENVS, start_method="fork"), norm_obs=False)
    recorder = Recorder()
    callback = CoverageCallback(budget, out_dir=tmp_path / "ppo", **MONITOR_OPTIONS)
    try:
        _ppo(venv).learn(128, callback=CallbackList([recorder, callback]))
    finally:
        venv.close()
    hand, runs = hand_coverage(recorder.episodes, budget, m=len(strategies))
    comparison = load_report(callback.out_dir)["comparisons"][0]
    policy = comparison["policies"][0]
    assert runs == N_ENVS  # each row stays on input x0: one run of K samples per row
    assert np.allclose(policy["curves"]["coverage"], hand, rtol=0, atol=1e-9)
    pi = np.array(list(page["BASE_LAW"].values()))
    iid = [np.sum(1 - (1 - pi) ** k) / len(strategies) for k in range(1, budget + 1)]
    assert np.allclose(comparison["iid"]["coverage"], iid, rtol=0, atol=1e-9)
    assert policy["gain"]["value"] is not None


# -- Gymnasium vector envs ---------------------------------------------------------------------------------


def _gym_vector(fns: list[Any], mode: str, wrapped: bool, **kwargs: Any) -> gym.vector.VectorEnv:
    envs = (
        gym.vector.SyncVectorEnv(fns, **kwargs)
        if mode == "sync"
        else gym.vector.AsyncVectorEnv(fns, **kwargs)
    )
    return NormalizeReward(RecordEpisodeStatistics(envs)) if wrapped else envs


@pytest.mark.parametrize("laws", LAWS)
@pytest.mark.parametrize(("mode", "wrapped"), list(itertools.product(["sync", "async"], [False, True])))
def test_gymnasium_vector_wrapper_counts_what_the_envs_emitted(
    mode: str, wrapped: bool, laws: str, tmp_path: Path
) -> None:
    fns, paths = _env_fns(tmp_path, laws)
    envs = CoverageVectorWrapper(
        _gym_vector(fns, mode, wrapped),
        K,
        out_dir=tmp_path / "run",
        **MONITOR_OPTIONS,
        **explicit_baselines(laws),
    )
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    for _ in range(80):  # NEXT_STEP autoreset: every other step of a row is a reset step
        envs.step(rng.integers(0, 5, size=N_ENVS))
    envs.close()
    check_report(envs.monitor.out_dir, _logged(paths), laws, envs.monitor.episodes)


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hand_written_gymnasium_loop_with_the_monitor_counts_what_the_envs_emitted(
    mode: str, autoreset: str, tmp_path: Path
) -> None:
    fns, paths = _env_fns(tmp_path, "env")
    reset_mode = (
        gym.vector.AutoresetMode.NEXT_STEP if autoreset == "next_step" else gym.vector.AutoresetMode.SAME_STEP
    )
    envs = _gym_vector(fns, mode, wrapped=autoreset == "next_step", autoreset_mode=reset_mode)
    monitor = CoverageMonitor.for_env(envs, budget=K, out_dir=tmp_path / "run", **MONITOR_OPTIONS)
    rng = np.random.default_rng(1)
    envs.reset(seed=0)
    for step in range(1, 61):
        _, _, terminated, truncated, infos = envs.step(rng.integers(0, 5, size=N_ENVS))
        monitor.update_infos(infos, terminated | truncated)
        monitor.maybe_log(step * N_ENVS)
    monitor.close()
    envs.close()
    check_report(monitor.out_dir, _logged(paths), "env", monitor.episodes)


def _final_rows(infos: dict[str, Any], done: np.ndarray) -> list[dict[str, Any]]:
    """The finished episodes of one step; a seffi env row cycles through its inputs, so a run is
    one (row, input) pair's consecutive samples: that pair is the hand count's "env"."""
    keys = ("input_id", "strategy_matches", "sample_index")
    rows = [{k: infos[k][i] for k in keys} | {"row": int(i)} for i in np.flatnonzero(done)]
    return [{"pid": 0, "env": f"{e['row']}/{e['input_id']}", **e} for e in rows]


@pytest.mark.parametrize("wrapped", [False, True])
def test_native_seffi_vector_env_under_wrappers_counts_what_it_emitted(wrapped: bool, tmp_path: Path) -> None:
    envs = gym.make_vec(
        "seffi/HanoiRouter-v0", num_envs=N_ENVS, vectorization_mode="vector_entry_point", budget=K
    )
    base = envs.unwrapped
    if wrapped:
        envs = NormalizeReward(RecordEpisodeStatistics(envs))
    covered = CoverageVectorWrapper(envs, K, out_dir=tmp_path / "run", **MONITOR_OPTIONS)
    covered.reset(seed=0)
    covered.action_space.seed(0)
    episodes: list[dict[str, Any]] = []
    for _ in range(80):
        _, _, terminated, truncated, infos = covered.step(covered.action_space.sample())
        episodes += _final_rows(infos, terminated | truncated)
    covered.close()
    strategies = base.strategies
    hand, runs = hand_coverage(episodes, K, m=len(strategies))
    comparison = load_report(covered.monitor.out_dir)["comparisons"][0]
    policy = comparison["policies"][0]
    assert runs > 0 and policy["curves"]["n_runs"] == runs
    assert np.allclose(policy["curves"]["coverage"], hand, rtol=0, atol=1e-9)
    # The exact iid curve over the inputs with complete runs, by hand from the env's own law.
    seen = sorted({e["input_id"] for e in episodes})
    curves = []
    for x in seen:
        law = base.base_match_distribution(x)
        pi = np.array([sum(p for a, p in law.items() if s in a) for s in strategies])
        curves.append([np.sum(1 - (1 - pi) ** k) / len(strategies) for k in range(1, K + 1)])
    assert comparison["n_inputs"] == len(seen)
    assert np.allclose(comparison["iid"]["coverage"], np.mean(curves, axis=0), rtol=0, atol=1e-9)
    assert policy["gain"]["value"] is not None

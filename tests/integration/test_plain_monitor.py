"""The plain monitor on a researcher's single env under Gymnasium wrappers: C(k) equals a hand count.

The env is registered and made with ``gym.make`` (so Gymnasium's own checker wrappers sit on it), with
``TimeLimit`` and ``RecordEpisodeStatistics`` on top; the monitor reads ``strategies`` and the laws
through all of them. Run with :class:`~seffi.callbacks.CoverageMonitor` in a hand-written loop and with
:class:`~seffi.callbacks.gym.CoverageWrapper`, for an env with the laws, one with only ``strategies``
and one whose baselines the caller passes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from seffi.callbacks import CoverageMonitor
from seffi.callbacks.gym import CoverageWrapper
from tests.callbacks.helpers import load_report
from tests.integration.caller_baselines import LAWS, explicit_baselines
from tests.integration.user_env import (
    INPUTS,
    hand_coverage,
    hand_iid_coverage,
    make_planner,
    read_log,
)

pytestmark = pytest.mark.integration

K = 4
ENV_ID = "user/Planner-v0"
if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=make_planner)
OPTIONS = {"wandb": "disabled", "plots": False, "n_boot": 20, "log_every": 8}


def _env(tmp_path: Path, laws: str) -> tuple[gym.Env, Path]:
    log = tmp_path / "env.jsonl"
    env = gym.make(ENV_ID, budget=K, log_path=str(log), laws=laws == "env")
    return gym.wrappers.RecordEpisodeStatistics(gym.wrappers.TimeLimit(env, max_episode_steps=50)), log


def _check(out_dir: Path, log: Path, laws: str, monitor: CoverageMonitor) -> None:
    episodes = read_log(log)
    hand, runs = hand_coverage(episodes, K)
    assert runs == 3 * len(INPUTS) and monitor.episodes == len(episodes)
    assert np.allclose(monitor.curves().coverage, hand, rtol=0, atol=1e-9)  # the read API
    comparison = load_report(out_dir)["comparisons"][0]
    policy = comparison["policies"][0]
    assert np.allclose(policy["curves"]["coverage"], hand, rtol=0, atol=1e-9)
    assert policy["curves"]["n_runs"] == runs
    if laws == "none":
        assert comparison["iid"] is None and policy["gain"]["value"] is None
        assert "baseline" in policy["gain"]["reason"]
    else:
        assert np.allclose(comparison["iid"]["coverage"], hand_iid_coverage(K), rtol=0, atol=1e-9)
        assert policy["gain"]["value"] is not None and np.isfinite(policy["gain"]["value"])


@pytest.mark.parametrize("laws", LAWS)
def test_plain_monitor_on_a_wrapped_single_env_counts_what_it_emitted(laws: str, tmp_path: Path) -> None:
    env, log = _env(tmp_path, laws)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reading through the wrappers warns about nothing
        monitor = CoverageMonitor.for_env(
            env, budget=K, out_dir=tmp_path / "run", **OPTIONS, **explicit_baselines(laws)
        )
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    for step in range(1, 3 * K * len(INPUTS) + 1):  # three complete runs per input, then stop
        _, _, terminated, truncated, info = env.step(int(rng.integers(0, 5)))
        monitor.update_infos(info, terminated or truncated)
        monitor.maybe_log(step)
        if terminated or truncated:
            env.reset()
    monitor.close()
    env.close()
    _check(monitor.out_dir, log, laws, monitor)


@pytest.mark.parametrize("laws", LAWS)
def test_coverage_wrapper_on_a_wrapped_single_env_counts_what_it_emitted(laws: str, tmp_path: Path) -> None:
    inner, log = _env(tmp_path, laws)
    env = CoverageWrapper(inner, K, out_dir=tmp_path / "run", **OPTIONS, **explicit_baselines(laws))
    rng = np.random.default_rng(1)
    env.reset(seed=0)
    for _ in range(3 * K * len(INPUTS)):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 5)))
        if terminated or truncated:
            env.reset()
    env.close()
    _check(env.monitor.out_dir, log, laws, env.monitor)

"""RLlib: PPO with 2 env runners in local Ray; the driver's merged tracker is exact.

One Ray session for the module (startup is the slow part). The reference is recorded independently:
a second, plain callback keeps every episode's final info on its runner; the test fetches those and
feeds one monitor by hand.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.helpers import require

ray = require("ray", "rllib")
require("ray.rllib", "rllib")

from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.rllib.callbacks.callbacks import RLlibCallback  # noqa: E402

import seffi.envs  # noqa: E402,F401  (registers the env ids)
from seffi.callbacks.core import CoverageMonitor  # noqa: E402
from seffi.callbacks.rllib import CoverageCallback, finalize  # noqa: E402
from seffi.callbacks.workers import worker_snapshot  # noqa: E402

ENV_ID = "seffi/HanoiRouter-v0"
ENV_CONFIG = {"budget": 4, "n_inputs": 3}
KEEP = ("input_id", "strategy_matches", "valid", "sample_index", "run_index", "z")


class Recorder(RLlibCallback):
    """Independent record: every finished episode's final info, per runner process."""

    episodes: list = []  # noqa: RUF012  (per process: each runner is its own actor process)

    def on_episode_end(self, *, episode, env_runner=None, env_index=0, **kwargs):
        info = episode.get_infos(-1)
        Recorder.episodes.append(
            (env_runner.worker_index, env_index, {k: info[k] for k in KEEP if k in info})
        )


class _Null:
    def log(self, *a, **k):
        pass

    log_snapshot = finish = log


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _config(out_dir, callbacks):
    return (
        PPOConfig()
        .environment(ENV_ID, env_config=ENV_CONFIG)
        .env_runners(num_env_runners=2, num_envs_per_env_runner=2, rollout_fragment_length=16)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .fault_tolerance(restart_failed_env_runners=True)
        .callbacks(callbacks)
    )


def _reference(records):
    env = __import__("gymnasium").make(ENV_ID, **ENV_CONFIG)
    ref = CoverageMonitor(ENV_CONFIG["budget"], env=env, sinks=_Null(), n_boot=0)
    for worker, env_index, info in sorted(records, key=lambda r: (r[0], r[1])):
        # Keep each runner's own order: sorted() is stable and records arrive in episode order.
        ref.ingest_episode(info, env_index=1000 * worker + env_index)
    return ref


def test_ppo_two_runners_merge_exact_and_report(ray_session, tmp_path):
    out = tmp_path / "report"
    cov = CoverageCallback.configure(out_dir=str(out), wandb="offline", n_boot=50)
    algo = _config(out, [cov, Recorder]).build_algo()
    try:
        results = [algo.train() for _ in range(2)]
        seffi = results[-1]["seffi"]
        assert seffi["runners_contributed"] == 2 and seffi["runners_unreachable"] == []
        records = [
            r
            for rs in algo.env_runner_group.foreach_env_runner(
                lambda r: list(Recorder.episodes), local_env_runner=False
            )
            for r in rs
        ]
        driver = next(cb for cb in algo.callbacks if isinstance(cb, CoverageCallback))
        report = finalize(algo)
    finally:
        algo.stop()

    merged = driver.monitor.tracker
    ref = _reference(records)
    assert merged.n_samples == ref.tracker.n_samples == ref.samples
    assert len(merged) == len(ref.tracker)
    assert driver.monitor.episodes == len(records)
    a, b = merged.curves(4, n_boot=0), ref.tracker.curves(4, n_boot=0)
    for name in ("coverage", "novelty", "expected_new", "full_coverage", "valid_coverage", "runs_at_k"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-12, err_msg=name)
    assert a.auc == pytest.approx(b.auc, abs=1e-12)

    # the merge is a union of runs: the same multiset of per-run states
    def strip(st):  # every run's state without its stream number
        runs, ids = st["runs"], st["inputs"]["input_id"]
        fields = ("n", "n_valid", "first_valid", "first_hit", "first_valid_hit")
        return sorted(
            json.dumps([ids[u], *(runs[f][r] for f in fields)]) for r, u in enumerate(runs["input"])
        )

    assert strip(merged.state_dict()) == strip(ref.tracker.state_dict())

    assert report.meta["runners_contributed"] == 2
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["meta"]["runners_contributed"] == 2
    assert (out / "metrics.jsonl").stat().st_size > 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("seffi/auc" in rec for rec in lines)


def test_dead_runner_keeps_last_state_and_restart_is_new_incarnation(ray_session, tmp_path):
    cov = CoverageCallback.configure(out_dir=str(tmp_path / "r"), wandb="disabled", n_boot=0, plots=False)
    algo = _config(tmp_path, [cov]).build_algo()
    try:
        algo.train()
        driver = next(cb for cb in algo.callbacks if isinstance(cb, CoverageCallback))
        before = {k: s["episodes"] for k, s in driver.workers.snapshots.items()}
        dead = next(k for k in before if k[0] == 2)
        try:  # kill runner 2's process
            algo.env_runner_group.foreach_env_runner(
                lambda r: os._exit(1), local_env_runner=False, remote_worker_ids=[2], timeout_seconds=5
            )
        except Exception:
            pass
        driver.gather(algo)
        assert driver.workers.summary()["runners_unreachable"] == [2]
        assert driver.workers.snapshots[dead]["episodes"] == before[dead]  # its last state counts
        algo.train()
        algo.train()
        summary = driver.workers.summary()
        merged = driver.merged_tracker()
        total = sum(s["samples"] for s in driver.workers.snapshots.values())
        assert merged.n_samples == total
        assert driver.workers.snapshots[dead]["episodes"] == before[dead]
        assert summary["runners_contributed"] == 2
        # runner 2 came back (restart) as a second incarnation, or is still missing
        assert summary["runner_incarnations"] in (2, 3)
        report = finalize(algo)
        assert report.meta["runner_incarnations"] == summary["runner_incarnations"]
    finally:
        algo.stop()


def test_runner_snapshots_merge_through_the_public_state_api():
    """Three runners that all used streams 0.. and env row 0: the driver keeps their runs apart."""
    runners, ref = [], CoverageMonitor(2, ("a", "b"), sinks=_Null(), n_boot=0)
    cb = CoverageCallback(budget=2)
    for w in range(3):
        m = CoverageMonitor(2, ("a", "b"), sinks=_Null(), n_boot=0)
        for x, ms, run in (("x", ("a",), 0), ("x", ("b",) if w else (), 0), ("y", ("a", "b"), 0)):
            info = {"input_id": x, "strategy_matches": ms, "valid": True, "run_index": run}
            m.ingest_episode(info)
            ref.ingest_episode(info, env_index=w)  # the reference keeps runners apart by env row
        runners.append(m)
        cb.workers.add(worker_snapshot(m, {"worker_index": w + 1, "incarnation": "i", "pid": 0}))
    cb.monitor = CoverageMonitor(2, ("a", "b"), sinks=_Null(), n_boot=0)
    merged = cb.merged_tracker()
    assert len(merged) == 6 and merged.n_samples == 9 == ref.samples
    np.testing.assert_array_equal(
        merged.curves(2, n_boot=0).coverage, ref.tracker.curves(2, n_boot=0).coverage
    )
    assert cb.workers.summary()["runners_contributed"] == 3


def test_configure_validates_on_the_driver():
    from seffi.errors import SeffiError

    with pytest.raises(SeffiError, match="log_every"):
        CoverageCallback.configure(log_every=0)


def test_callback_takes_a_monitor_config(tmp_path):
    """issue 12 step 4: CoverageCallback(config=MonitorConfig(n_boot=0, wandb="disabled")) builds the
    driver's and the runners' monitors with those values; an unknown option is one SeffiError."""
    import gymnasium as gym

    from seffi.callbacks import MonitorConfig
    from seffi.errors import SeffiError

    with pytest.raises(SeffiError, match=r"unknown monitor option\(s\) \['n_bot'\]"):
        CoverageCallback.configure(n_bot=0)
    cfg = MonitorConfig(n_boot=0, wandb="disabled", seed=3)
    env = gym.make(ENV_ID, **ENV_CONFIG)
    cb = CoverageCallback.configure(env=env, config=cfg, out_dir=str(tmp_path))()
    cb.on_algorithm_init(algorithm=None)
    m = cb.monitor
    assert (m.budget, m.n_boot, m.seed, m.sinks.wandb) == (ENV_CONFIG["budget"], 0, 3, None)
    assert m.out_dir == tmp_path

    class Runner:
        worker_index = 4

    x, s = env.unwrapped.input_ids[0], env.unwrapped.strategies[0]

    class Episode:
        def get_infos(self, i):
            return {"input_id": x, "strategy_matches": (s,), "valid": True, "run_index": 0}

    cb.on_episode_end(episode=Episode(), env_runner=Runner(), env=env)
    assert (cb.runner.n_boot, cb.runner.budget, cb.runner.episodes) == (0, ENV_CONFIG["budget"], 1)
    assert cb.identity["worker_index"] == 4

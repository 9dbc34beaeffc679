"""RLlib: PPO with 2 env runners in local Ray; the driver's merged tracker is exact.

One Ray session for the module (startup is the slow part). The reference is recorded independently:
a second, plain callback keeps every episode's final info on its runner; the test fetches those and
feeds one monitor by hand.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

from tests.helpers import require

ray = require("ray", "rllib")
require("ray.rllib", "rllib")

from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.rllib.callbacks.callbacks import RLlibCallback  # noqa: E402

import seffi.envs  # noqa: E402,F401  (registers the env ids)
from seffi.callbacks.core import CoverageMonitor  # noqa: E402
from seffi.callbacks.rllib import (  # noqa: E402
    CoverageCallback,
    coverage_callback,
    curves,
    finalize,
    metrics,
    to_dataframe,
    worker_snapshot,
)
from seffi.coverage import IidBaseline, OracleBaseline  # noqa: E402

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
        ref.update_infos(info, True, env_offset=1000 * worker + env_index)
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
        assert driver.workers.load_into(driver.monitor)
        merged = driver.monitor.tracker
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
            m.update_infos(info, True)
            ref.update_infos(info, True, env_offset=w)  # the reference keeps runners apart by env row
        runners.append(m)
        cb.workers.add(worker_snapshot(m, {"worker_index": w + 1, "incarnation": "i", "pid": 0}))
    cb.monitor = CoverageMonitor(2, ("a", "b"), sinks=_Null(), n_boot=0)
    assert cb.workers.load_into(cb.monitor)
    merged = cb.monitor.tracker
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
    """CoverageCallback(config=MonitorConfig(n_boot=0, wandb="disabled")) builds the
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


# -- the driver and its runners in one process: RLlib's calls, made by hand ----------------------------
#
# RLlib builds the callback list once on the driver and once on every env runner; the driver asks
# the runners through ``env_runner_group.foreach_env_runner``. These fakes make those calls in this
# process, with the user env of tests/integration/user_env.py, so each behaviour is checked in
# milliseconds against a hand count of the envs' own log files.


class FakeRunner:
    """An env runner: its own callback instances and a SyncVectorEnv of user envs that log."""

    def __init__(self, worker_index, callbacks, subs):
        import gymnasium as gym

        self.worker_index, self.subs = worker_index, subs
        self.config = SimpleNamespace(in_evaluation=False)
        self.callbacks = [factory() for factory in callbacks]
        self.env = gym.vector.SyncVectorEnv([lambda e=e: e for e in subs])
        for cb in self.callbacks:
            cb.on_environment_created(env_runner=self, env=self.env, env_context={})

    def sample(self, rng, episodes):
        for _ in range(episodes):
            for i, sub in enumerate(self.subs):
                sub.reset()
                info = sub.step(int(rng.integers(sub.action_space.n)))[-1]
                episode = type("Episode", (), {"get_infos": lambda self, t, info=info: info})()
                for cb in self.callbacks:
                    cb.on_episode_end(episode=episode, env_runner=self, env=self.env, env_index=i)


class FakeAlgo:
    """The driver: its callback instances, an env runner group, train() calling on_train_result."""

    def __init__(self, callbacks, runners, env=None):
        self.callbacks = [factory() for factory in callbacks]
        self.runners, self.iteration = runners, 0
        self.env_runner_group = self
        self.config = SimpleNamespace(env=env, env_config={})
        for cb in self.callbacks:
            cb.on_algorithm_init(algorithm=self)

    def foreach_env_runner(self, fn, **kwargs):
        return [fn(r) for r in self.runners]

    def train(self, rng, episodes=12):
        for r in self.runners:
            r.sample(rng, episodes)
        self.iteration += 1
        result = {"num_env_steps_sampled_lifetime": self.iteration * 100}
        for cb in self.callbacks:
            cb.on_train_result(algorithm=self, result=result)
        return result


def _user_runners(tmp_path, callbacks, laws=True, n=2, envs=2):
    from tests.integration.user_env import log_paths, make_planner

    paths = iter(log_paths(tmp_path, n * envs))
    return [
        FakeRunner(
            w, callbacks, [make_planner(4, start=w + i, log_path=next(paths), laws=laws) for i in range(envs)]
        )
        for w in range(1, n + 1)
    ]


def _hand(tmp_path):
    from tests.integration.user_env import hand_coverage, read_log

    episodes = [e for p in sorted(tmp_path.glob("env*.jsonl")) for e in read_log(p)]
    return hand_coverage(episodes, 4), len(episodes)


def _cov(tmp_path, name, **options):
    return CoverageCallback.configure(
        out_dir=str(tmp_path / name), wandb="disabled", plots=False, n_boot=0, **options
    )


def test_two_seffi_callbacks_on_one_algorithm_each_count_every_episode_once(tmp_path):
    from tests.integration.user_env import make_planner

    covs = [_cov(tmp_path, "a"), _cov(tmp_path, "b", label="second")]
    runners = _user_runners(tmp_path, covs, laws=False)
    algo = FakeAlgo(covs, runners, env=lambda cfg: make_planner(4, laws=False))
    rng = np.random.default_rng(0)
    results = [algo.train(rng) for _ in range(2)]
    (hand_c, hand_runs), episodes = _hand(tmp_path)
    first, second = (cb for cb in algo.callbacks if isinstance(cb, CoverageCallback))
    for cb in (first, second):
        assert cb.monitor.episodes == episodes  # not twice: each driver callback gathers its own part
        np.testing.assert_allclose(cb.curves(algo).coverage, hand_c, rtol=0, atol=1e-9)
        assert cb.curves(algo).runs_at_k[-1] == hand_runs
    assert results[-1]["seffi"]["seffi/episodes"] == results[-1]["seffi_1"]["seffi/episodes"] == episodes


def test_driver_builds_its_monitor_from_the_runners_envs_with_exact_baselines(tmp_path):
    """The config's env is a name only the runners can resolve (a ``register_env`` name): the driver
    builds nothing; the runners send budget, strategies and the laws of the inputs they saw."""
    from tests.integration.user_env import hand_iid_coverage

    covs = [_cov(tmp_path, "a")]
    algo = FakeAlgo(covs, _user_runners(tmp_path, covs), env="user-planner")
    driver = algo.callbacks[0]
    assert (driver.monitor.budget, driver.monitor.strategies) == (4, ("astar", "bfs", "dfs", "greedy"))
    algo.train(np.random.default_rng(1))
    (hand_c, _), _ = _hand(tmp_path)
    report = finalize(algo)
    comp = report.comparisons[0]
    np.testing.assert_allclose(comp.policies[0].curves.coverage, hand_c, rtol=0, atol=1e-9)
    np.testing.assert_allclose(comp.iid.coverage, hand_iid_coverage(4), rtol=0, atol=1e-9)
    assert comp.oracle is not None and comp.policies[0].gain.value is not None


def test_user_baselines_mean_the_runners_never_ask_the_env_for_laws(tmp_path):
    from tests.integration.user_env import BASE_LAW, INPUTS, STRATEGIES, PlannerEnvWithLaws

    asked = []

    class Counting(PlannerEnvWithLaws):
        def base_match_distribution(self, input_id, valid_only=False):
            asked.append(("law", input_id))
            return super().base_match_distribution(input_id, valid_only)

        def reference_match_sets(self, input_id):
            asked.append(("refs", input_id))
            return super().reference_match_sets(input_id)

    iid = IidBaseline.from_match_distribution({x: dict(BASE_LAW) for x in INPUTS}, strategies=STRATEGIES)
    refs = PlannerEnvWithLaws().reference_match_sets("maze-a")
    oracle = OracleBaseline({x: refs for x in INPUTS}, strategies=STRATEGIES)
    covs = [_cov(tmp_path, "a", iid=iid, oracle=oracle)]
    runners = [FakeRunner(1, covs, [Counting(4, log_path=str(tmp_path / "env0.jsonl"))])]
    algo = FakeAlgo(covs, runners, env="user-planner")
    algo.train(np.random.default_rng(2))
    expected = algo.callbacks[0].monitor.point_scalars()["seffi/gain_vs_iid"]
    assert metrics(algo)["seffi/gain_vs_iid"] == pytest.approx(expected)
    assert asked == []


def test_a_runner_whose_env_has_no_strategies_fails_the_build_with_one_message(tmp_path):
    from seffi.errors import SeffiError
    from tests.integration.user_env import PlannerEnv

    class NoStrategies(PlannerEnv):
        @property
        def strategies(self):  # hides the class attribute: this env declares no strategies
            raise AttributeError("strategies")

    covs = [_cov(tmp_path, "a")]
    with pytest.raises(SeffiError, match=r"env runner 1: .*needs `strategies`"):
        FakeAlgo(covs, [FakeRunner(1, covs, [NoStrategies(4)])], env="user-planner")
    covs = [_cov(tmp_path, "b", strategies=("astar", "bfs", "dfs", "greedy"))]
    algo = FakeAlgo(covs, [FakeRunner(1, covs, [NoStrategies(4)])], env="user-planner")
    assert algo.callbacks[0].monitor.strategies == ("astar", "bfs", "dfs", "greedy")


def test_runners_that_disagree_on_the_strategies_are_refused(tmp_path):
    from seffi.errors import SeffiError
    from tests.integration.user_env import PlannerEnv

    class Fewer(PlannerEnv):
        strategies = ("astar", "bfs")

    covs = [_cov(tmp_path, "a")]
    runners = [FakeRunner(1, covs, [PlannerEnv(4)]), FakeRunner(2, covs, [Fewer(4)])]
    with pytest.raises(SeffiError, match=r"env runners 1 and 2 disagree on the env's strategies"):
        FakeAlgo(covs, runners, env="x")


def test_an_env_law_that_raises_is_one_seffi_error_naming_the_runner(tmp_path):
    from seffi.errors import SeffiError
    from tests.integration.user_env import PlannerEnvWithLaws

    class Broken(PlannerEnvWithLaws):
        def base_match_distribution(self, input_id, valid_only=False):
            raise ValueError("no law for " + input_id)

    covs = [_cov(tmp_path, "a")]
    algo = FakeAlgo(covs, [FakeRunner(1, covs, [Broken(4)])], env="x")
    message = r"env runner 1 could not read the env's base law of input 'maze-a'.*no law"
    with pytest.raises(SeffiError, match=message):
        algo.train(np.random.default_rng(3))


def test_read_api_on_the_driver_before_and_after_training(tmp_path):
    from seffi.errors import SeffiError

    with pytest.raises(SeffiError, match="no seffi CoverageCallback"):
        metrics(type("Algo", (), {"callbacks": []})())
    with pytest.raises(SeffiError, match="not been built"):
        CoverageCallback(budget=4).curves()
    covs = [_cov(tmp_path, "a")]
    algo = FakeAlgo(covs, _user_runners(tmp_path, covs, laws=False), env="x")
    assert metrics(algo) == {}
    with pytest.raises(SeffiError, match="no coverage recorded yet"):
        curves(algo)
    empty = to_dataframe(algo)
    assert len(empty) == 0 and "coverage" in empty.columns
    result = algo.train(np.random.default_rng(4))
    (hand_c, _), episodes = _hand(tmp_path)
    scalars = metrics(algo)
    assert scalars and all(result["seffi"][k] == v for k, v in scalars.items())
    assert scalars["seffi/episodes"] == episodes and "seffi/gain_vs_iid" not in scalars
    assert scalars["seffi/auc"] == pytest.approx(float(np.mean(hand_c)), abs=1e-12)
    np.testing.assert_allclose(curves(algo).coverage, hand_c, rtol=0, atol=1e-12)
    frame = to_dataframe(algo)
    assert set(frame["method"]) == {"policy"}
    np.testing.assert_allclose(frame.sort_values("k")["coverage"].to_numpy(), hand_c, rtol=0, atol=1e-12)
    assert coverage_callback(algo) is algo.callbacks[0]


def test_driver_checkpoint_holds_the_runner_counts_of_a_user_env(tmp_path):
    """A checkpoint that comes due at a driver log writes report.json with the runners' summary."""
    import json

    cov = _cov(tmp_path, "ckpt", checkpoint_every=1)
    runners = _user_runners(tmp_path, [cov], laws=False)
    algo = FakeAlgo([cov], runners)
    algo.train(np.random.default_rng(0))
    (_, _), episodes = _hand(tmp_path)
    driver = algo.callbacks[0]
    meta = json.loads((driver.monitor.out_dir / "report.json").read_text())["meta"]
    assert meta["checkpoint"] is True and meta["runners_contributed"] == 2
    assert driver.monitor.episodes == episodes

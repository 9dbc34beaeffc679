"""RLlib PPO (new API stack, 2 env runners) on a researcher's own env registered with ``register_env``.

The env is ``tests/integration/user_env.py``: no seffi import, no ``task``/``config`` attributes, a
lambda attribute. Each sub-env appends every final info it emits to its own log file, so the test
counts coverage by hand over all runners' files and compares it with the driver's merged numbers.

One Ray session for the module (its startup is the slow part), the smallest PPO that samples.
"""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
import pytest

from tests.helpers import require
from tests.integration import user_env

pytestmark = pytest.mark.integration

ray = require("ray", "rllib")
require("ray.rllib", "rllib")

from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.tune.registry import register_env  # noqa: E402

from seffi.callbacks import rllib as seffi_rllib  # noqa: E402
from seffi.coverage import IidBaseline, OracleBaseline  # noqa: E402

ENV_NAME = "user-planner"
BUDGET = 4
NUM_RUNNERS = 2
ENVS_PER_RUNNER = 2

#: Sub-envs made in this process: RLlib's new stack hands every sub-env of a runner the same
#: EnvContext (``vector_index`` is 0 for all), so the count keeps their log files apart.
_MADE = itertools.count()


def make_user_env(ctx):
    """The researcher's env creator: budget, start and log file per runner from the EnvContext."""
    n = next(_MADE)
    name = f"runner{ctx.worker_index}-vec{ctx.vector_index}-{os.getpid()}-{n}.jsonl"
    return user_env.make_planner(
        budget=ctx["budget"],
        start=ctx["start"] + ctx.worker_index + n,
        log_path=os.path.join(ctx["log_dir"], name),
        laws=ctx["laws"],
    )


@pytest.fixture(scope="module")
def ray_session():
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ray.init(
        num_cpus=2,
        object_store_memory=80 * 1024**2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    register_env(ENV_NAME, make_user_env)
    yield
    ray.shutdown()


def _train(tmp_path, laws, *variants, iterations=2, vectorize="sync"):
    """PPO on the user env with one seffi callback per ``variants`` (monitor options each).

    ``vectorize="async"``: every runner steps its sub-envs in subprocesses (a Gymnasium
    ``AsyncVectorEnv``), so the runner reads the env's facts and laws through pipes.

    Trains, reads each driver callback (the first through the module functions, the others through
    their methods), finalizes. Returns one dict per variant and the log folder.
    """
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    covs = [
        seffi_rllib.CoverageCallback.configure(
            out_dir=str(tmp_path / f"report{i}"), wandb="disabled", plots=False, n_boot=0, **options
        )
        for i, options in enumerate(variants)
    ]
    env_config = {"budget": BUDGET, "start": 0, "log_dir": str(log_dir), "laws": laws}
    config = (
        PPOConfig()
        .environment(ENV_NAME, env_config=env_config)
        .env_runners(
            num_env_runners=NUM_RUNNERS,
            num_envs_per_env_runner=ENVS_PER_RUNNER,
            rollout_fragment_length=16,
            gym_env_vectorize_mode=vectorize,
        )
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8], "vf_share_layers": True})
        .callbacks(covs)
    )
    started = time.perf_counter()
    algo = config.build_algo()
    built = time.perf_counter()
    try:
        results = [algo.train() for _ in range(iterations)]
        trained = time.perf_counter()
        drivers = [cb for cb in algo.callbacks if isinstance(cb, seffi_rllib.CoverageCallback)]
        assert seffi_rllib.coverage_callback(algo) is drivers[0]
        assert [cb.result_key for cb in drivers] == ["seffi", "seffi_1"][: len(drivers)]
        runs = [{
            "metrics": seffi_rllib.metrics(algo),
            "curves": seffi_rllib.curves(algo),
            "frame": seffi_rllib.to_dataframe(algo),
        }] + [
            {"metrics": cb.metrics(), "curves": cb.curves(algo), "frame": cb.to_dataframe(algo)}
            for cb in drivers[1:]
        ]  # fmt: skip
        others = [cb.finalize(algo) for cb in drivers[1:]]
        reports = [seffi_rllib.finalize(algo), *others]  # finalize(algo): every seffi callback left
        assert seffi_rllib.finalize(algo) is None  # each finalizes once
    finally:
        algo.stop()
    print(f"\nPPO on the user env: build {built - started:.1f} s, {iterations} iterations "
          f"{trained - built:.1f} s")  # fmt: skip
    for run, driver, report in zip(runs, drivers, reports, strict=True):
        run.update(report=report, driver=driver, log_dir=log_dir, result=results[-1][driver.result_key])
    return runs


def _hand(log_dir):
    episodes = [e for path in sorted(log_dir.iterdir()) for e in user_env.read_log(path)]
    return user_env.hand_coverage(episodes, BUDGET), episodes


def _hand_oracle(budget):
    """The no-repeat oracle's exact C(k) by recursion over covered sets: each step a uniformly chosen
    strategy not yet covered whose reference trace still adds something."""
    refs = user_env.PlannerEnvWithLaws().reference_match_sets("maze-a")
    m = len(user_env.STRATEGIES)
    law = {frozenset(): 1.0}
    curve = []
    for _ in range(budget):
        nxt = {}
        for covered, p in law.items():
            options = [s for s in refs if s not in covered and not refs[s] <= covered]
            for s in options or [None]:
                after = covered | refs[s] if s else covered
                nxt[after] = nxt.get(after, 0.0) + p / max(len(options), 1)
        law = nxt
        curve.append(sum(p * len(c) for c, p in law.items()) / m)
    return np.array(curve)


def _check_policy_matches_hand(run):
    """The merged C(k), run count and episode count equal the hand count over every runner's logs."""
    (hand_c, hand_runs), episodes = _hand(run["log_dir"])
    writers = {p.name.split("-")[0] for p in run["log_dir"].iterdir()}
    assert writers == {"runner1", "runner2"}  # both runners sampled (their own log files)
    assert hand_runs > 0
    comp = run["report"].comparisons[0]
    assert comp.num_strategies == len(user_env.STRATEGIES)
    policy = comp.policies[0].curves
    np.testing.assert_allclose(policy.coverage, hand_c, rtol=0, atol=1e-9)
    assert policy.n_runs == hand_runs
    assert run["driver"].monitor.episodes == len(episodes)
    # the read API on the driver: the same numbers
    curves = run["curves"]
    np.testing.assert_allclose(curves.coverage, hand_c, rtol=0, atol=1e-9)
    assert curves.runs_at_k[-1] == hand_runs
    frame = run["frame"]
    rows = frame[frame["method"] == "policy"].sort_values("k")
    assert rows["k"].tolist() == list(range(1, BUDGET + 1))
    np.testing.assert_allclose(rows["coverage"].to_numpy(), hand_c, rtol=0, atol=1e-9)
    metrics, result = run["metrics"], run["result"]
    assert metrics and all(result[key] == value for key, value in metrics.items())
    assert metrics["seffi/auc"] == pytest.approx(float(np.mean(hand_c)), abs=1e-9)
    assert result["runners_contributed"] == NUM_RUNNERS
    return comp, hand_c, frame


def test_ppo_two_runners_async_user_env_with_laws_matches_hand_count_with_exact_gain(ray_session, tmp_path):
    (run,) = _train(tmp_path, True, {}, vectorize="async")
    comp, hand_c, frame = _check_policy_matches_hand(run)
    iid_c, oracle_c = user_env.hand_iid_coverage(BUDGET), _hand_oracle(BUDGET)
    np.testing.assert_allclose(comp.iid.coverage, iid_c, rtol=0, atol=1e-9)
    np.testing.assert_allclose(comp.oracle.coverage, oracle_c, rtol=0, atol=1e-9)
    for method, curve in (("iid", iid_c), ("oracle", oracle_c)):
        rows = frame[frame["method"] == method].sort_values("k")
        np.testing.assert_allclose(rows["coverage"].to_numpy(), curve, rtol=0, atol=1e-9, err_msg=method)
    gain = comp.policies[0].gain
    assert gain is not None and gain.value is not None
    expected = (np.mean(hand_c) - np.mean(iid_c)) / (np.mean(oracle_c) - np.mean(iid_c))
    assert gain.value == pytest.approx(expected, abs=1e-9)
    assert run["metrics"]["seffi/gain_vs_iid"] == pytest.approx(expected, abs=1e-9)


def test_ppo_two_runners_user_env_without_laws_gain_absent_unless_baselines_given(ray_session, tmp_path):
    """Two seffi callbacks on one algorithm: strategies only (no gain, a reason), and iid=/oracle=."""
    law = {x: dict(user_env.BASE_LAW) for x in user_env.INPUTS}
    iid = IidBaseline.from_match_distribution(law, strategies=user_env.STRATEGIES)
    refs = user_env.PlannerEnvWithLaws().reference_match_sets("maze-a")
    oracle = OracleBaseline({x: refs for x in user_env.INPUTS}, strategies=user_env.STRATEGIES)
    plain, given = _train(tmp_path, False, {}, {"iid": iid, "oracle": oracle})

    comp, _, frame = _check_policy_matches_hand(plain)
    assert comp.iid is None and comp.oracle is None
    assert set(frame["method"]) == {"policy"}
    gain = comp.policies[0].gain
    assert gain is not None and gain.value is None and gain.reason
    assert "seffi/gain_vs_iid" not in plain["metrics"]

    comp, hand_c, _ = _check_policy_matches_hand(given)  # the same episodes, counted once
    iid_c, oracle_c = user_env.hand_iid_coverage(BUDGET), _hand_oracle(BUDGET)
    np.testing.assert_allclose(comp.iid.coverage, iid_c, rtol=0, atol=1e-9)
    np.testing.assert_allclose(comp.oracle.coverage, oracle_c, rtol=0, atol=1e-9)
    gain = comp.policies[0].gain
    assert gain is not None and gain.value is not None
    expected = (np.mean(hand_c) - np.mean(iid_c)) / (np.mean(oracle_c) - np.mean(iid_c))
    assert gain.value == pytest.approx(expected, abs=1e-9)

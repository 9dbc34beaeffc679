"""Router envs: the exact base law against Monte Carlo, the hidden mapping, the observation layout."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tests.envs.common import TASKS, make, make_vec


def monte_carlo(task: str, valid_only: bool, n: int = 4096, **kwargs) -> tuple[dict, Counter]:
    vec = make_vec(task, "router", 64, n_inputs=1, budget=10**6, **kwargs)
    u = vec.unwrapped
    xid = u.input_ids[0]
    rng = np.random.default_rng(1)
    vec.reset(seed=0)
    counts: Counter = Counter()
    while sum(counts.values()) < n:
        actions = np.array([u.sample_base_action(xid, rng) for _ in range(64)])
        _, _, _, _, infos = vec.step(actions)
        for i in np.flatnonzero(infos.get("_strategy_matches", [])):
            ok = infos["valid"][i] or not valid_only
            counts[frozenset(infos["strategy_matches"][i]) if ok else frozenset()] += 1
    return u.base_match_distribution(xid, valid_only=valid_only), counts


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("valid_only", [False, True])
def test_base_match_distribution_is_the_law_of_prior_driven_episodes(task: str, valid_only: bool) -> None:
    law, counts = monte_carlo(task, valid_only)
    total = sum(counts.values())
    assert abs(sum(law.values()) - 1.0) < 1e-12
    assert set(counts) <= set(law)
    for key, p in law.items():
        sd = np.sqrt(p * (1 - p) / total)
        assert abs(counts[key] / total - p) <= 5 * sd + 1e-9, (key, counts[key] / total, p)


@pytest.mark.parametrize("task", ["sort_swaps", "edit_script"])
def test_noiseless_router_pushes_the_prior_through_a_deterministic_assignment(task: str) -> None:
    cfg = {"invalid_rate": 0.0, "off_strategy_rate": 0.0}
    env = make(task, "router", n_inputs=2, budget=10**6, noise=0.0, task_config=cfg)
    u = env.unwrapped
    env.reset(seed=0)
    for x in u.inputs:
        by_latent = {}
        for z in range(u.n_latents):
            got = set()
            for _ in range(3):  # deterministic: the same latent always gives the same strategy
                env.reset(options={"input_id": x.id})
                got.add(env.step(z)[4]["strategy_matches"])
            assert len(got) == 1
            by_latent[z] = frozenset(got.pop())
        expected: dict = {}
        for z, matches in by_latent.items():
            expected[matches] = expected.get(matches, 0.0) + u.latent_prior(x.id)[z]
        law = u.base_match_distribution(x.id)
        assert law.keys() == expected.keys()
        assert all(abs(law[k] - expected[k]) < 1e-12 for k in law)
        # Every feasible strategy is reachable: the assignment covers them all.
        assert {frozenset(m) for m in u.reference_match_sets(x.id).values()} == set(by_latent.values())


@pytest.mark.parametrize("task", TASKS)
def test_valid_coverage_law_differs_from_raw(task: str) -> None:
    u = make(task, "router").unwrapped
    xid = u.input_ids[0]
    raw, valid = u.base_match_distribution(xid), u.base_match_distribution(xid, valid_only=True)
    assert valid[frozenset()] > raw.get(frozenset(), 0.0) + 0.05  # invalid traces lose their matches
    prior = u.latent_prior(xid)
    assert prior.shape == (u.n_latents,) and abs(prior.sum() - 1) < 1e-12 and (prior > 0).all()


def test_history_observation_layout() -> None:
    env = make("graph_traversal", "router", n_inputs=3, budget=4)
    u = env.unwrapped
    lay = u.obs_layout
    z_count, m = u.n_latents, len(u.strategies)
    assert [(k, s.stop - s.start) for k, s in lay.items()] == [
        ("input", 3),
        ("prior", z_count),
        ("tried", z_count),
        ("found", m),
        ("used", 1),
    ]
    obs, _ = env.reset(seed=0, options={"input_id": u.input_ids[1]})
    assert obs[lay["input"]].tolist() == [0, 1, 0]
    assert np.allclose(obs[lay["prior"]], u.latent_prior(u.input_ids[1]))
    assert not obs[lay["tried"]].any() and obs[lay["used"]][0] == 0
    found = set()
    for step, z in enumerate([2, 2, 0], 1):
        obs, _, _, _, info = env.step(z)
        if info["valid"]:
            found |= set(info["strategy_matches"])
        tried = np.zeros(z_count)
        for zz in [2, 2, 0][:step]:
            tried[zz] += 1 / 4
        assert np.allclose(obs[lay["tried"]], tried)
        assert obs[lay["found"]].tolist() == [float(s in found) for s in u.strategies]
        assert obs[lay["used"]][0] == pytest.approx(step / 4)
        env.reset(options={"input_id": u.input_ids[1]})
    no_history = make("graph_traversal", "router", n_inputs=3, history=False).unwrapped
    assert list(no_history.obs_layout) == ["input", "prior"]
    assert no_history.observation_space.shape == (3 + no_history.n_latents,)


def test_large_pool_builds_steps_and_stores_no_n_by_n_one_hot_table() -> None:
    """The input one-hot is built per observed row, never as a dense (N, N) table.

    The config allows N = 100,000 inputs; an ``np.eye(N)`` table per engine
    raises MemoryError at N = 20,000. Here N = 1,000: the table's float64 build alone takes 8 MB,
    while an engine (single and 4-row vector) over an already built pool must take a small multiple of
    N * (Z + M) bytes.
    """
    import tracemalloc

    from seffi.envs import RouterEnv, RouterVectorEnv

    n = 1000
    RouterEnv(task="sort_swaps", n_inputs=n)  # builds (and caches) the pool: only the engines are measured
    tracemalloc.start()
    try:
        env = RouterEnv(task="sort_swaps", n_inputs=n)
        lay = env.obs_layout
        xid = env.input_ids[n - 7]
        obs, _ = env.reset(seed=0, options={"input_id": xid})
        obs, _, terminated, _, info = env.step(3)
        venv = RouterVectorEnv(4, task="sort_swaps", n_inputs=n)
        vobs, _ = venv.reset(seed=0, options={"input_id": env.input_ids[:4]})
        venv.step(np.array([0, 1, 2, 3]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n * n * 4 // 2, f"{peak} bytes: half of a float32 N x N table"
    assert terminated and info["input_id"] == xid and info["sample_index"] == 1
    assert obs.shape == (n + 2 * env.n_latents + len(env.strategies) + 1,)
    one_hot = obs[lay["input"]]
    assert np.flatnonzero(one_hot).tolist() == [n - 7] and one_hot[n - 7] == 1.0
    assert np.array_equal(obs[lay["prior"]], env.latent_prior(xid).astype(np.float32))
    assert obs[lay["tried"]][3] == pytest.approx(1 / env.budget)
    assert [np.flatnonzero(row[lay["input"]]).tolist() for row in vobs] == [[0], [1], [2], [3]]

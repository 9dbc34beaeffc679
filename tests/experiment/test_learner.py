from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import seffi.envs  # noqa: F401  (registers the env ids)
from seffi.experiment.learner import ReinforceRouter, RouterFeatures, softmax


def test_softmax_matches_definition():
    x = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, -5.0]])
    assert np.allclose(softmax(x)[0], np.exp(x[0]) / np.exp(x[0]).sum())
    assert np.allclose(softmax(x)[1], [0.5, 0.5, 0.0], atol=1e-12)


def test_policy_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    router = ReinforceRouter(4, 5, lr=1.0)
    router.weights = rng.normal(size=(4, 5))
    phi, base, a = rng.normal(size=5), np.log([0.4, 0.3, 0.2, 0.1]), 2
    eps = 1e-6
    num = np.zeros_like(router.weights)
    w0 = router.weights.copy()
    for i in range(4):
        for j in range(5):
            for sign in (1, -1):
                router.weights = w0.copy()
                router.weights[i, j] += sign * eps
                num[i, j] += sign * np.log(router.probs(phi, base)[a]) / (2 * eps)
    router.weights = w0.copy()
    # One update from a single one-step run with reward 1 and a zero baseline is lr * d log pi / dW.
    router.update(phi[None, None], base[None, None], np.array([[a]]), np.array([[1.0]]))
    assert np.allclose(router.weights - w0, num, atol=1e-6)


def test_returns_are_discounted_sums():
    router = ReinforceRouter(2, 1, gamma=0.5)
    assert np.allclose(router.returns(np.array([[1.0, 0.0, 1.0]])), [[1.25, 0.5, 1.0]])


def test_baseline_is_the_previous_mean_return_per_step():
    router = ReinforceRouter(2, 1, lr=0.1, baseline_decay=0.5)
    phi, base = np.ones((2, 2, 1)), np.zeros((2, 2, 2))
    acts = np.array([[0, 1], [1, 0]])
    router.update(phi, base, acts, np.array([[1.0, 0.0], [3.0, 2.0]]))
    assert np.allclose(router.baseline, [2.0, 1.0])  # first update: the batch mean outright
    router.update(phi, base, acts, np.array([[0.0, 0.0], [0.0, 0.0]]))
    assert np.allclose(router.baseline, [1.0, 0.5])  # then an EMA with decay 0.5


def test_untrained_router_is_the_base_model_of_the_env():
    env = gym.make("seffi/SortSwapsRouter-v0", n_inputs=3, budget=4)
    u = env.unwrapped
    feats = RouterFeatures(u.obs_layout)
    router = ReinforceRouter(u.n_latents, feats.size)
    for x in u.input_ids:
        obs, _ = env.reset(options={"input_id": x})
        phi, base = feats(obs)
        assert np.allclose(router.probs(phi, base)[0], u.latent_prior(x))
    # act() draws from probs(): a chi-square-free check of the frequencies on 20k draws.
    rng = np.random.default_rng(1)
    p = router.probs(phi, base)[0]
    draws = router.act(np.repeat(phi, 20_000, 0), np.repeat(base, 20_000, 0), rng)
    freq = np.bincount(draws, minlength=u.n_latents) / draws.size
    assert np.abs(freq - p).max() < 4 * np.sqrt(p.max() / draws.size)


def test_features_follow_the_observation_history():
    env = gym.make("seffi/EditScriptRouter-v0", n_inputs=2, budget=4)
    u = env.unwrapped
    feats = RouterFeatures(u.obs_layout, use_input=False)
    z, m = u.n_latents, len(u.strategies)
    assert feats.size == z + m + 1
    obs, _ = env.reset(seed=0, options={"input_id": u.input_ids[1]})
    _, _, _, _, info = env.step(3)
    obs, _ = env.reset(options={"input_id": u.input_ids[1]})
    phi, _ = feats(obs)
    assert phi[0, :z].tolist() == [1.0 if j == 3 else 0.0 for j in range(z)]
    found = [1.0 if s in info["strategy_matches"] and info["valid"] else 0.0 for s in u.strategies]
    assert phi[0, z : z + m].tolist() == found
    assert phi[0, -1] == pytest.approx(1 / 4)
    assert RouterFeatures(u.obs_layout).size == z + m + 1 + 2  # + the input one-hot
    with pytest.raises(ValueError, match="history=True"):
        RouterFeatures(gym.make("seffi/EditScriptRouter-v0", history=False).unwrapped.obs_layout)


def _mean_new(router, feats, envs, ids, budget, rng, learn):
    """One round on a router vector env: every row runs its input for K samples; returns strategies found."""
    obs, _ = envs.reset(options={"input_id": ids})
    rows, f, z = len(ids), feats.size, router.n_latents
    phi, base = np.zeros((rows, budget, f)), np.zeros((rows, budget, z))
    acts, rewards = np.zeros((rows, budget), dtype=np.int64), np.zeros((rows, budget))
    found = 0
    for k in range(budget):
        if k:
            obs, _ = envs.reset(options={"input_id": ids})
        phi[:, k], base[:, k] = feats(obs)
        acts[:, k] = router.act(phi[:, k], base[:, k], rng)
        obs, rewards[:, k], _, _, info = envs.step(acts[:, k])
        found += int(info["num_new_strategies"].sum())
    if learn:
        router.update(phi, base, acts, rewards)
    return found / rows


def test_learns_to_find_more_strategies_than_the_base_model():
    # The real router env with a steep prior: the base model keeps redrawing its top latent.
    envs = gym.make_vec(
        "seffi/SortSwapsRouter-v0",
        num_envs=32,
        vectorization_mode="vector_entry_point",
        n_inputs=8,
        budget=6,
        prior_skew=2.0,
        reward="novel",
    )
    u = envs.unwrapped
    ids = [x for x in u.input_ids for _ in range(4)]
    envs.reset(seed=0, options={"input_id": ids})
    feats = RouterFeatures(u.obs_layout)
    router = ReinforceRouter(u.n_latents, feats.size, lr=1.0)
    rng = np.random.default_rng(0)
    before = np.mean([_mean_new(router, feats, envs, ids, 6, rng, learn=False) for _ in range(5)])
    for _ in range(60):
        _mean_new(router, feats, envs, ids, 6, rng, learn=True)
    after = np.mean([_mean_new(router, feats, envs, ids, 6, rng, learn=False) for _ in range(5)])
    assert after > before + 0.3, (before, after)
    # What it learned first of all: do not repeat a latent (weight of z on "z was tried" is negative).
    tried = router.weights[:, : u.n_latents]
    assert np.diag(tried).mean() < -0.5 < tried[~np.eye(u.n_latents, dtype=bool)].mean()


def test_bad_arguments():
    with pytest.raises(ValueError, match="lr"):
        ReinforceRouter(2, 2, lr=0)
    with pytest.raises(ValueError, match="gamma"):
        ReinforceRouter(2, 2, gamma=2)
    with pytest.raises(ValueError, match="first two dimensions"):
        ReinforceRouter(2, 2).update(
            np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), np.zeros((1, 3), dtype=int), np.zeros((1, 3))
        )

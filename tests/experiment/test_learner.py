from __future__ import annotations

import numpy as np
import pytest

from seffi.experiment.learner import Episode, HistoryFeatures, ReinforceRouter, softmax


def _run_bandit(router, feats, mapping, budget, n_inputs, rng, learn):
    """Toy router env: latent z yields strategy mapping[z]; novelty reward. Returns mean coverage curve."""
    m = len(feats.strategies)
    curves = np.zeros(budget)
    episodes = []
    for _ in range(n_inputs):
        h = feats.new_history()
        ep = Episode()
        for k in range(budget):
            phi = feats(h, budget)
            z = router.act(phi, rng)
            r = feats.record(h, z, [mapping[z]] if mapping[z] is not None else [])
            ep.add(phi, z, r)
            curves[k] += h.found.sum() / m
        episodes.append(ep)
    if learn:
        router.update(episodes)
    return curves / n_inputs


def test_softmax_matches_definition():
    x = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, -5.0]])
    ref0 = np.exp(x[0]) / np.exp(x[0]).sum()
    assert np.allclose(softmax(x)[0], ref0)
    assert np.allclose(softmax(x)[1], [0.5, 0.5, 0.0], atol=1e-12)


def test_policy_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    router = ReinforceRouter(4, 5, lr=1.0, seed=0)
    router.weights = rng.normal(size=(4, 5))
    phi = rng.normal(size=5)
    a = 2
    # analytic score (onehot - p) outer phi
    p = router.probs(phi)
    score = (np.eye(4)[a] - p)[:, None] * phi[None, :]
    eps = 1e-6
    num = np.zeros_like(score)
    for i in range(4):
        for j in range(5):
            w = router.weights.copy()
            router.weights[i, j] += eps
            up = np.log(router.probs(phi)[a])
            router.weights = w.copy()
            router.weights[i, j] -= eps
            dn = np.log(router.probs(phi)[a])
            router.weights = w
            num[i, j] = (up - dn) / (2 * eps)
    assert np.allclose(num, score, atol=1e-6)
    # one update with a single one-step episode, reward 1, zero baseline == lr * score
    ep = Episode()
    ep.add(phi, a, 1.0)
    before = router.weights.copy()
    router.update([ep])
    assert np.allclose(router.weights - before, score, atol=1e-12)


def test_returns_are_discounted_sums():
    router = ReinforceRouter(2, 1, gamma=0.5)
    assert np.allclose(router.returns(np.array([1.0, 0.0, 1.0])), [1.25, 0.5, 1.0])


def test_untrained_router_is_the_prior():
    prior = np.array([0.7, 0.2, 0.1])
    feats = HistoryFeatures(3, ("a", "b", "c"))
    router = ReinforceRouter(3, feats.size, prior=prior)
    h = feats.new_history()
    assert np.allclose(router.probs(feats(h, 4)), prior)


def test_learns_not_to_repeat_on_a_toy_bandit():
    # Z = M = 4, latent z -> strategy z, a skewed prior: iid repeats latent 0 a lot. The known
    # optimum (the oracle) tries each latent once: coverage k / M.
    z, budget = 4, 4
    strategies = ("a", "b", "c", "d")
    mapping = list(strategies)
    prior = np.array([0.7, 0.15, 0.1, 0.05])
    feats = HistoryFeatures(z, strategies)
    router = ReinforceRouter(z, feats.size, lr=0.5, prior=prior, seed=1)
    rng = np.random.default_rng(2)
    before = _run_bandit(router, feats, mapping, budget, 400, np.random.default_rng(3), learn=False)
    for _ in range(150):
        _run_bandit(router, feats, mapping, budget, 16, rng, learn=True)
    after = _run_bandit(router, feats, mapping, budget, 400, np.random.default_rng(3), learn=False)
    oracle = np.arange(1, budget + 1) / 4
    # exact iid coverage under the prior: mean over s of 1 - (1 - p_s)^k
    iid = np.array([np.mean(1 - (1 - prior) ** k) for k in range(1, budget + 1)])
    assert np.allclose(before, iid, atol=0.04)  # untrained = base sampler (MC check)
    assert after.mean() > iid.mean() + 0.5 * (oracle.mean() - iid.mean())
    assert after[-1] > 0.9
    # the policy puts little mass on a latent it already tried
    h = feats.new_history()
    feats.record(h, 0, ["a"])
    assert router.probs(feats(h, budget))[0] < 0.1


def test_learns_from_found_strategies_with_a_many_to_one_mapping():
    # Latents 0 and 1 both give strategy "a", latent 2 gives "b", latent 3 is junk (no match). After
    # "a" was found via latent 0, latent 1 is useless too: only the `found` features can say so.
    strategies = ("a", "b")
    mapping = ["a", "a", "b", None]
    prior = np.array([0.4, 0.4, 0.1, 0.1])
    feats = HistoryFeatures(4, strategies)
    router = ReinforceRouter(4, feats.size, lr=0.5, prior=prior, seed=0)
    rng = np.random.default_rng(5)
    for _ in range(200):
        _run_bandit(router, feats, mapping, 2, 16, rng, learn=True)
    h = feats.new_history()
    feats.record(h, 0, ["a"])
    p = router.probs(feats(h, 2))
    assert p[2] > 0.7
    assert p[1] < 0.15


def test_record_rejects_unknown_strategies_and_bad_args():
    feats = HistoryFeatures(2, ("a",))
    with pytest.raises(ValueError, match="unknown strategy 'zz'"):
        feats.record(feats.new_history(), 0, ["zz"])
    with pytest.raises(ValueError, match="input_features"):
        feats(feats.new_history(), 3, np.ones(2))
    with pytest.raises(ValueError, match="lr"):
        ReinforceRouter(2, 3, lr=0)
    with pytest.raises(ValueError, match="prior"):
        ReinforceRouter(2, 3, prior=np.array([1.0, 0.0]))

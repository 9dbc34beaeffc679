"""``mixture_router``: rung 2's trained router choosing the codes of the bench's factorised explorer."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

import seffi.envs  # noqa: F401  (registers the env ids)
from seffi.experiment.bench_sampling import CodeRouter, Sampler
from seffi.experiment.learner import ReinforceRouter, RouterFeatures


class FixedUniforms:
    """A stand-in for ``np.random.Generator`` whose ``random`` returns the given uniforms."""

    def __init__(self, *u: float) -> None:
        self.u = np.array(u)

    def random(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.u.reshape(shape)


def _router(n_latents: int, strategies: tuple[str, ...], budget: int, **weights: float) -> CodeRouter:
    """A router whose weights are zero except ``w_<z>_<feature column>``."""
    r = ReinforceRouter(n_latents, n_latents + len(strategies) + 1)
    for name, w in weights.items():
        _, z, f = name.split("_")
        r.weights[int(z), int(f)] = w
    return CodeRouter(r, strategies, budget)


def test_router_codes_are_the_hand_computed_draws_of_its_softmax() -> None:
    """Prior (0.5, 0.25, 0.25); tried code 0 weighs -ln 2 on code 0, strategy a found weighs +ln 2 on code
    2. Columns: tried 0-2, found a-b 3-4, used 5. With uniforms 0.6, 0.4, 0.55 the inverse CDF gives
    1 (cdf 0.5, 0.75, 1), 1 (1/3, 2/3, 1 once code 0 is tried) and 2 (0.25, 0.5, 1 once a is found)."""
    router = _router(3, ("a", "b"), 4, w_0_0=-np.log(2), w_2_3=np.log(2))
    prior = np.array([[0.5, 0.25, 0.25]] * 3)
    tried = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0]])
    found = np.array([[False, False], [False, False], [True, False]])
    codes = router.choose(prior, tried, found, 2, FixedUniforms(0.6, 0.4, 0.55))
    assert codes.tolist() == [1, 1, 2]
    # The same draws without the learned weights: the prior alone gives 1, 0, 1.
    plain = _router(3, ("a", "b"), 4)
    assert plain.choose(prior, tried, found, 2, FixedUniforms(0.6, 0.4, 0.55)).tolist() == [1, 0, 1]
    phi, base = router.features(prior, tried, found, 2)
    np.testing.assert_allclose(phi[2], [1, 1, 0, 1, 0, 0.5])
    np.testing.assert_allclose(base, np.log(prior), rtol=1e-6)


def test_router_features_equal_the_router_env_observation_features() -> None:
    """Along a run of the router env, the features built from the run's own history (codes tried,
    strategies of valid traces, samples used) equal `RouterFeatures` of the env's observation."""
    env = gym.make_vec("seffi/GridRoutesRouter-v0", num_envs=1, vectorization_mode="vector_entry_point",
                       n_inputs=3, budget=6)  # fmt: skip
    u = env.unwrapped
    strategies = tuple(u.strategies)
    env_feats = RouterFeatures(u.obs_layout, use_input=False)
    router = CodeRouter(ReinforceRouter(u.n_latents, env_feats.size), strategies, 6)
    x = u.input_ids[1]
    obs, _ = env.reset(seed=0, options={"input_id": [x]})
    tried, found = np.zeros((1, u.n_latents), dtype=np.int64), np.zeros((1, len(strategies)), dtype=bool)
    rng = np.random.default_rng(0)
    for t in range(6):
        if t:
            obs, _ = env.reset(options={"input_id": [x]})
        phi, base = router.features(u.latent_prior(x)[None], tried, found, t)
        want_phi, want_base = env_feats(obs)
        np.testing.assert_array_equal(phi, want_phi)
        np.testing.assert_array_equal(base, want_base)
        z = int(rng.integers(u.n_latents))
        obs, _, _, _, info = env.step(np.array([z]))
        tried[0, z] += 1
        if info["valid"][0]:
            found[0, [strategies.index(s) for s in info["strategy_matches"][0]]] = True
    assert tried.sum() == 6


@pytest.fixture(scope="module")
def mixture(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A tiny mixture LM (seconds of training): the rollout's generator."""
    from tests.helpers import require

    require("torch", "lm")
    require("transformers", "lm")
    import torch

    from seffi.models import grpo
    from seffi.models.cache import train_ladder_models
    from seffi.models.config import LMConfig
    from seffi.models.lm import Layout

    torch.set_num_threads(1)
    mix = {"rounds": 1, "epochs_per_round": 0.5, "final_epochs": 0.5, "prior": "input"}
    cfg = LMConfig(task="grid_routes", n_train_inputs=40, rows_per_input=2, d_model=16, n_layer=1, n_head=2,
                   epochs=1, batch_size=32, mixture=mix)  # fmt: skip
    models = train_ladder_models(cfg, Path(tmp_path_factory.mktemp("cache")))
    policy = grpo.trl_policy(models.mixture_dir, models.task)
    return SimpleNamespace(policy=policy, code0=Layout(models.task.vocabulary()).code0)


def test_rollout_forces_the_codes_the_router_chooses_from_the_groups_labels(mixture: SimpleNamespace) -> None:
    """K = 3, two groups. Weights: tried 0/1/2 at -100/-100/-200 on their own code, strategy s0 found at
    +100 on code 2, samples used at +60 on code 0 and +30 on code 1. Prompt A (every completion valid,
    strategy s0; prior peaked on code 0): 0, then 2 (s0 found), then 1. Prompt B (nothing valid; prior
    peaked on code 1): 1, then 0, then 2. Without the labels A's codes would be 0, 1, 2."""
    from seffi.models import grpo  # noqa: F401  (the lm extra: the fixture skipped without it)

    policy, code0 = mixture.policy, mixture.code0
    router = _router(3, ("s0", "s1"), 3, w_0_0=-100, w_1_1=-100, w_2_2=-200, w_2_3=100, w_0_5=60, w_1_5=30)
    a, b = "grid 3 3 walls <sep>", "grid 4 3 walls 1 1 <sep>"
    tiny = 1e-9
    priors = {a: np.array([1 - 2 * tiny, tiny, tiny]), b: np.array([tiny, 1 - 2 * tiny, tiny])}
    seen: list[tuple[str, str]] = []

    def labeler(x: str, text: str) -> SimpleNamespace:
        seen.append((x, text))
        return SimpleNamespace(valid=x == "A", strategy_matches=frozenset({"s0"} if x == "A" else ()))

    sampler = Sampler(policy, "router", priors, code0=code0, budget=3, router=router, labeler=labeler,
                      inputs={a: "A", b: "B"})  # fmt: skip
    args = SimpleNamespace(max_completion_length=policy.max_new_tokens + 1,
                           generation_kwargs={"suppress_tokens": policy.suppress})  # fmt: skip
    trainer = SimpleNamespace(num_generations=3, processing_class=policy.tokenizer, args=args,
                              model=policy.model)  # fmt: skip
    got = sampler.rollout_func(seed=3)([a, a, a, b, b, b], trainer)
    assert [c[0] - code0 for c in got["completion_ids"]] == [0, 2, 1, 1, 0, 2]
    assert all(m[0] == 0 and all(v == 1 for v in m[1:]) for m in got["env_mask"])
    assert [len(m) for m in got["env_mask"]] == [len(c) for c in got["completion_ids"]]
    # Every completion was labelled once, as its trace text (the code dropped).
    assert sorted(x for x, _ in seen) == ["A"] * 3 + ["B"] * 3
    assert sorted(t for _, t in seen) == sorted(sampler.decode(c) for c in got["completion_ids"])
    # Held-out sampling runs the same router, each run of K with its own history.
    from seffi.callbacks import trl_model

    gen = trl_model.generation_config(args, policy.model, policy.tokenizer)
    ids = trl_model.prompt_token_ids(policy.tokenizer, [a, b])
    runs = sampler.routed(policy.model, [(a, ids[0], 3), (b, ids[1], 2), (a, ids[0], 3)], gen, 5,
                          np.random.default_rng(0))  # fmt: skip
    assert [[c[0] - code0 for c in run] for run in runs] == [[0, 2, 1], [1, 0], [0, 2, 1]]
    texts = sampler.texts(policy.model, policy.tokenizer, [a, b], 6, gen, seed=5)
    assert [len(row) for row in texts] == [6, 6] and sampler.ordered

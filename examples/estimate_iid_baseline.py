"""Estimate the iid baseline of an *unknown* base model from its samples, then compare a policy with it.

For an LLM you cannot write down the law of its strategies; you can only sample it. Given n base
samples per input, seffi estimates the iid coverage curve without bias for k <= n (rarefaction,
i.e. pass@k summed over strategies), extrapolates it beyond n (Chao et al. 2014, marked as
extrapolated), and puts iNEXT bootstrap-assemblage intervals around it. Here the "unknown" model is
a router env's base model, so the script can also show the exact curve the estimate is aiming at.

    python examples/estimate_iid_baseline.py --task sort_swaps --base-samples 12 --budget 24
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

import seffi.envs
from seffi.coverage import CoverageTracker, IidBaseline, OracleBaseline
from seffi.experiment.example_args import parse_args


@dataclass
class Args:
    """Estimate an iid baseline from base samples (rarefaction, extrapolation, CIs) and compare a policy."""

    task: str = "sort_swaps"  # any task of `seffi tasks`
    n_inputs: int = 16  # size of the env's input pool
    base_samples: int = 12  # n, base-model samples per input available for the estimate
    budget: int = 24  # K; k > n is extrapolated
    policy_runs: int = 4  # runs of the policy per input
    seed: int = 0  # seed of the env, the samples and the bootstrap
    smoke: bool = False  # tiny sizes, for CI


def sample(env: gym.Env, input_id: str, latent: int) -> tuple[tuple[str, ...], bool]:
    """One one-step episode of a router env on ``input_id``: (matched strategies, valid)."""
    env.reset(options={"input_id": input_id})
    *_, info = env.step(latent)
    return info["strategy_matches"], info["valid"]


def main(args: Args) -> None:
    if args.smoke:
        args.n_inputs, args.base_samples, args.budget, args.policy_runs = 4, 6, 10, 2
    env = gym.make(
        seffi.envs.env_id(args.task, "router"),
        n_inputs=args.n_inputs,
        budget=max(args.budget, args.base_samples),
    )
    u = env.unwrapped
    rng = np.random.default_rng(args.seed)
    env.reset(seed=args.seed)

    # 1. n samples per input from the base model (we only look at what they matched).
    base = {
        x: [sample(env, x, u.sample_base_action(x, rng))[0] for _ in range(args.base_samples)]
        for x in u.input_ids
    }
    estimated = IidBaseline.from_samples(base, strategies=u.strategies).curves(
        args.budget, n_boot=200, seed=args.seed
    )
    exact = IidBaseline.from_match_distribution(
        {x: u.base_match_distribution(x) for x in u.input_ids}, strategies=u.strategies
    ).curves(args.budget)
    oracle = OracleBaseline(
        {x: u.reference_match_sets(x) for x in u.input_ids}, strategies=u.strategies
    ).curves(args.budget)

    # 2. A policy: the base model that never re-draws a latent it already tried on this input.
    tracker = CoverageTracker(strategies=u.strategies, task=args.task)
    for x in u.input_ids:
        prior = u.latent_prior(x)
        for run in range(args.policy_runs):
            left = np.ones_like(prior, dtype=bool)
            for _ in range(args.budget):
                p = prior * left if left.any() else prior
                z = int(rng.choice(p.size, p=p / p.sum()))
                left[z] = False
                matches, valid = sample(env, x, z)
                tracker.update(x, matches, valid=valid, stream=run)
    policy = tracker.curves(args.budget, n_boot=200, seed=args.seed)

    n = args.base_samples
    print(f"{args.task}: {args.n_inputs} inputs, n={n} base samples each; k > n is extrapolated (*)")
    print(f"{'k':>3} {'estimated iid [95% CI]':>24} {'exact iid':>10} {'policy':>7}")
    for k in range(1, args.budget + 1):
        i = k - 1
        mark = "*" if estimated.extrapolated is not None and estimated.extrapolated[i] else " "
        lo, hi = estimated.coverage_lo[i], estimated.coverage_hi[i]
        band = f"{estimated.coverage[i]:.3f} [{lo:.3f}, {hi:.3f}]{mark}"
        print(f"{k:>3} {band:>24} {exact.coverage[i]:>10.3f} {policy.coverage[i]:>7.3f}")
    for name, iid in (("estimated", estimated), ("exact", exact)):
        g = policy.gain(iid, oracle)
        shown = (
            "undefined: " + str(g.reason) if g.value is None else f"{g.value:.3f} [{g.lo:.3f}, {g.hi:.3f}]"
        )
        print(f"gain of the policy vs the {name} iid baseline: {shown}")
    for note in estimated.notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main(parse_args(Args))

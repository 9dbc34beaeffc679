"""A plain Gymnasium vector-env loop (CleanRL style) that feeds a CoverageTracker by hand.

No callback, no framework: step a native vector router env, read the final-step infos, call
``tracker.update`` for every finished episode, then compare the curves with the exact iid baseline
and the oracle that the env exposes. The policy is a hand-written heuristic — sample the router prior
but never repeat a latent already tried on this input — which needs the per-input history that the
router env puts in its observation.

    python examples/gym_vector_loop.py --task edit_script --budget 8 --runs 8
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
    """Feed a CoverageTracker from a Gymnasium vector loop and compare with iid and the oracle."""

    task: str = "edit_script"  # any task of `seffi tasks`
    n_inputs: int = 16  # size of the env's fixed input pool
    budget: int = 8  # K, samples per input and run
    runs: int = 8  # runs per input (rows of the vector env per input)
    seed: int = 0  # seed of the env, the policy and the bootstrap
    smoke: bool = False  # tiny sizes, for CI


def no_repeat_policy(obs: np.ndarray, layout: dict[str, slice], rng: np.random.Generator) -> np.ndarray:
    """Draw a latent from the router prior restricted to latents not yet tried in this run.

    Args:
        obs: float array, shape (E, D): router-env observations.

    Returns:
        int array, shape (E,).
    """
    p = obs[:, layout["prior"]] * (obs[:, layout["tried"]] == 0)
    p = np.where(p.sum(axis=1, keepdims=True) > 0, p, obs[:, layout["prior"]])  # all tried: fall back
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    return np.minimum((cdf <= rng.random((len(p), 1))).sum(axis=1), p.shape[1] - 1)


def main(args: Args) -> None:
    if args.smoke:
        args.n_inputs, args.runs = 4, 2
    envs = gym.make_vec(
        seffi.envs.env_id(args.task, "router"),
        num_envs=args.n_inputs * args.runs,
        vectorization_mode="vector_entry_point",
        n_inputs=args.n_inputs,
        budget=args.budget,
    )
    env = envs.unwrapped  # the pool API: input_ids, strategies, base_match_distribution, ...
    ids = [x for x in env.input_ids for _ in range(args.runs)]  # row i samples input ids[i]
    tracker = CoverageTracker(strategies=env.strategies, task=args.task)
    rng = np.random.default_rng(args.seed)

    obs, _ = envs.reset(seed=args.seed, options={"input_id": ids})
    for k in range(args.budget):
        if k:  # one-step episodes: pin every row to its input again (NEXT_STEP autoreset would pick one)
            obs, _ = envs.reset(options={"input_id": ids})
        obs, _, terminated, truncated, infos = envs.step(no_repeat_policy(obs, env.obs_layout, rng))
        for i in np.flatnonzero(terminated | truncated):
            # The final-step info of a seffi env: input_id, strategy_matches, valid, sample_index, ...
            tracker.update(
                infos["input_id"][i],
                infos["strategy_matches"][i],
                valid=bool(infos["valid"][i]),
                stream=int(i),
            )

    K = args.budget
    iid = IidBaseline.from_match_distribution(
        {x: env.base_match_distribution(x) for x in env.input_ids}, strategies=env.strategies
    ).curves(K)
    oracle = OracleBaseline(
        {x: env.reference_match_sets(x) for x in env.input_ids}, strategies=env.strategies
    )
    oracle_curves = oracle.curves(K)
    policy = tracker.curves(K, n_boot=500, seed=args.seed)
    gain = policy.gain(iid, oracle_curves)

    print(f"{args.task}: {tracker.n_samples} samples, {len(tracker)} runs on {args.n_inputs} inputs, K={K}")
    print(f"{'k':>3} {'no-repeat':>10} {'iid':>7} {'oracle':>7}")
    for k in range(1, K + 1):
        print(
            f"{k:>3} {policy.coverage[k - 1]:>10.3f} {iid.coverage[k - 1]:>7.3f} "
            f"{oracle_curves.coverage[k - 1]:>7.3f}"
        )
    print(
        f"AUC@{K}: no-repeat {policy.auc:.3f} [{policy.auc_lo:.3f}, {policy.auc_hi:.3f}], "
        f"iid {iid.auc:.3f}, oracle {oracle_curves.auc:.3f}"
    )
    if gain.value is None:
        print(f"gain vs iid: undefined ({gain.reason})")
    else:
        print(f"gain vs iid: {gain.value:.3f} [{gain.lo:.3f}, {gain.hi:.3f}]  (0 = iid, 1 = oracle)")


if __name__ == "__main__":
    main(parse_args(Args))

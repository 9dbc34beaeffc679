"""PPO (Ray RLlib, new API stack) on a seffi router env, with exploration coverage merged across env runners.

Every env runner records its episodes; after each iteration the driver merges the runners' tracker
states exactly and logs coverage C(k), novelty and gain vs iid to W&B (offline by default) and a local
report folder (report.json / report.md / plots). In code, the driver's numbers are read with
``seffi_rllib.metrics(algo)`` (the latest logged scalars), ``seffi_rllib.curves(algo)`` (the merged
policy ``Curves``) and ``seffi_rllib.to_dataframe(algo)`` (pandas, one row per method and k).

    python examples/rllib_ppo_coverage.py --smoke          # 1-1.5 min on 2 busy CPUs (Ray start-up)
    python examples/rllib_ppo_coverage.py --env-id seffi/SortSwapsRouter-v0 --iterations 50
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from seffi.experiment.example_args import parse_args


@dataclass
class Args:
    """Command-line arguments (each field is a ``--flag``)."""

    env_id: str = "seffi/HanoiRouter-v0"
    """registered seffi router env"""
    budget: int = 8
    """per-input sample budget K (one run = K episodes of one input)"""
    n_inputs: int = 8
    """size of the env's input pool"""
    iterations: int = 20
    """PPO training iterations"""
    num_env_runners: int = 2
    """Ray env runners (actors) sampling in parallel"""
    train_batch_size: int = 512
    """env steps per iteration"""
    out_dir: str = "runs/rllib-ppo-coverage"
    """local report folder"""
    wandb: str = "offline"
    """W&B mode: offline, online or disabled"""
    seed: int = 0
    """seed of PPO and of the bootstrap"""
    smoke: bool = False
    """tiny run for CI: 2 iterations, small batches"""


def main(args: Args) -> dict:
    """Train and return the final report's headline numbers."""
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig

    from seffi.callbacks import rllib as seffi_rllib

    if args.smoke:
        args = dataclasses.replace(args, iterations=2, train_batch_size=64, budget=4, n_inputs=3)
    ray.init(num_cpus=max(2, args.num_env_runners), include_dashboard=False, log_to_driver=False)
    try:
        config = (
            PPOConfig()
            .environment(args.env_id, env_config={"budget": args.budget, "n_inputs": args.n_inputs})
            .env_runners(num_env_runners=args.num_env_runners, rollout_fragment_length="auto")
            .training(
                train_batch_size_per_learner=args.train_batch_size,
                minibatch_size=min(64, args.train_batch_size),
                num_epochs=2,
            )
            .debugging(seed=args.seed)
            .callbacks(
                seffi_rllib.CoverageCallback.configure(out_dir=args.out_dir, wandb=args.wandb, seed=args.seed)
            )
        )
        algo = config.build_algo()
        for i in range(args.iterations):
            runners = algo.train().get("seffi", {}).get("runners_contributed")
            seffi = seffi_rllib.metrics(algo)  # the scalars just logged ({} until some run is complete)
            print(
                f"iter {i + 1}: auc={seffi.get('seffi/auc', float('nan')):.3f} "
                f"gain_vs_iid={seffi.get('seffi/gain_vs_iid', float('nan')):.3f} runners={runners}"
            )
        coverage = seffi_rllib.curves(algo).coverage  # the merged C(k), k = 1..K
        print("C(k):", " ".join(f"{c:.3f}" for c in coverage))
        report = seffi_rllib.finalize(algo)  # before algo.stop(): one last gather, report + W&B summary
        algo.stop()
    finally:
        ray.shutdown()
    comp = report.comparisons[0]
    out = {"policy_auc": comp.policies[0].curves.auc, "gain": comp.policies[0].gain.value, **report.meta}
    print(json.dumps(out, default=str))
    return out


if __name__ == "__main__":
    main(parse_args(Args, extra="rllib", modules=("ray.rllib",)))

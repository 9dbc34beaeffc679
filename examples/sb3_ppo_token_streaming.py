"""Stable-Baselines3 PPO on a token-level seffi env, with the streaming coverage callback attached.

The agent writes a solution trace one vocabulary token at a time (``seffi/<Name>-v0``); every finished
episode is validated by the task, and its final-step info says which strategies the trace followed.
``CoverageCallback`` treats the training episodes as the exploration process: it logs strategy
coverage C(k), novelty and the gain vs iid sampling from the task's base sampler to W&B (offline by
default) and writes a local report folder. A freshly initialised PPO writes junk for a long time —
expect coverage near 0 for small budgets; this example shows the wiring, not a tuned agent.

    python examples/sb3_ppo_token_streaming.py --task coin_sum --timesteps 20000
"""

from __future__ import annotations

from dataclasses import dataclass

import seffi.envs
from seffi.experiment.example_args import parse_args


@dataclass
class Args:
    """SB3 PPO on a token-level env with the streaming coverage callback."""

    task: str = "coin_sum"  # short traces: a token-level agent can finish episodes early on
    n_inputs: int = 8  # the env's fixed input pool
    budget: int = 8  # K, samples per input and run (the coverage curves go to k = K)
    n_envs: int = 4  # parallel training envs (SB3 make_vec_env)
    timesteps: int = 20_000  # PPO timesteps (tokens written)
    seed: int = 0  # seed of the envs and of PPO
    out: str = "runs/sb3_token"  # local report folder (report.json, report.md, plots)
    wandb: str = "offline"  # offline | online | disabled
    smoke: bool = False  # tiny sizes, for CI


def main(args: Args) -> None:
    # Imported here, not at the top, so that --help works without the sb3 extra.
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from seffi.callbacks.sb3 import CoverageCallback

    if args.smoke:
        args.timesteps, args.n_inputs, args.budget, args.n_envs = 256, 2, 2, 2
    env_id = seffi.envs.env_id(args.task, "token")
    # reward="novel": 1 for a valid trace plus 1 per strategy it adds to its input's run.
    env = make_vec_env(
        env_id,
        n_envs=args.n_envs,
        seed=args.seed,
        env_kwargs={"n_inputs": args.n_inputs, "budget": args.budget, "reward": "novel", "history": True},
    )
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=64, seed=args.seed, verbose=0, device="cpu")
    callback = CoverageCallback(
        budget=args.budget, out_dir=args.out, wandb=args.wandb, log_every=32, n_boot=100, verbose=1
    )
    model.learn(args.timesteps, callback=callback)
    print(f"report folder: {args.out}")


if __name__ == "__main__":
    main(parse_args(Args, extra="sb3", modules=("stable_baselines3",)))

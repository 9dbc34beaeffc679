"""Stable-Baselines3 PPO on a router env, measured by the periodic-evaluation coverage callback.

A router env (``seffi/<Name>Router-v0``) factorises generation: the action is a latent code z, a
hidden noisy generator turns (input, z) into a trace, and the iid base model draws z from a skewed
prior. PPO sees the per-input history in the observation (latents tried, strategies found) and is
rewarded for novelty, so it can learn to explore. Like SB3's ``EvalCallback``, the coverage callback
with an ``eval_env`` lets the current policy spend K samples on every eval input every ``eval_freq``
steps and logs ``seffi/eval/gain_vs_iid`` over training, to W&B (offline by default) and a local
report folder.

    python examples/sb3_ppo_router_eval.py --task edit_script --timesteps 30000
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

import seffi.envs
from seffi.experiment.example_args import parse_args


@dataclass
class Args:
    """SB3 PPO on a router env with the periodic-evaluation coverage callback."""

    task: str = "edit_script"  # any task of `seffi tasks`
    n_inputs: int = 16  # the env's fixed input pool (the eval env uses the same pool)
    budget: int = 8  # K, samples per input in training runs and in each evaluation
    n_envs: int = 8  # parallel training envs (SB3 make_vec_env)
    timesteps: int = 30_000  # PPO timesteps (one per sample: router episodes are one step long)
    eval_freq: int = 500  # evaluate every this many vector-env steps (x n_envs timesteps)
    seed: int = 0  # seed of the envs and of PPO
    out: str = "runs/sb3_router"  # local report folder (report.json, report.md, plots)
    wandb: str = "offline"  # offline | online | disabled
    smoke: bool = False  # tiny sizes, for CI


def main(args: Args) -> None:
    # Imported here, not at the top, so that --help works without the sb3 extra.
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from seffi.callbacks.sb3 import CoverageCallback

    if args.smoke:
        args.timesteps, args.n_inputs, args.n_envs, args.eval_freq = 256, 4, 2, 64
    env_id = seffi.envs.env_id(args.task, "router")
    pool = {"n_inputs": args.n_inputs, "budget": args.budget}
    env = make_vec_env(env_id, n_envs=args.n_envs, seed=args.seed, env_kwargs={**pool, "reward": "novel"})
    eval_env = gym.make(env_id, **pool)  # a separate single env on the same pool
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=128, ent_coef=0.01, seed=args.seed, device="cpu")
    callback = CoverageCallback(
        budget=args.budget,
        eval_env=eval_env,
        eval_freq=args.eval_freq,
        out_dir=args.out,
        wandb=args.wandb,
        verbose=1,
    )
    model.learn(args.timesteps, callback=callback)
    for line in gain_lines(str(callback.out_dir)):  # the folder used: a taken --out moves to OUT-2
        print(line)


def gain_lines(out: str) -> list[str]:
    """The evaluated gain vs iid with its 95% CI, per evaluation (the numbers of the report's table)."""
    from seffi.report import load_report
    from seffi.report.plots import eval_series

    (comp,) = load_report(out).comparisons
    lines = ["gain vs iid [95% CI] per evaluation (0 = iid, 1 = oracle):"]
    # eval_series needs two earlier evaluations; with fewer, the "<label>@<step>" labels give the steps.
    steps = [(int(p.label.rsplit("@", 1)[1]) if "@" in p.label else None, p) for p in comp.policies]
    for step, pol in eval_series(comp) or sorted(steps, key=lambda t: (t[0] is None, t[0] or 0)):
        g = pol.gain
        if g is None or g.value is None:
            text = f"undefined ({'no gain' if g is None else g.reason})"
        elif g.lo is None or g.hi is None:
            text = f"{g.value:.3f}"
        else:
            text = f"{g.value:.3f} [{g.lo:.3f}, {g.hi:.3f}]"
        lines.append(f"  {'final' if step is None else f'step {step:>6}'}: {text}")
    return lines


if __name__ == "__main__":
    main(parse_args(Args, extra="sb3", modules=("stable_baselines3",)))

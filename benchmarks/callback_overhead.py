"""Overhead of seffi's coverage callback: SB3 PPO and a Gymnasium vector loop, with vs without.

Prints, in one run, wall times side by side and their ratio (goal: PPO with the callback <= 1.03x).
Repetitions are interleaved (without, with, without, with, ...) so machine noise hits both arms
alike; the reported ratio is the median over repetitions of the per-pair ratio.

    python benchmarks/callback_overhead.py                 # defaults: ~1 minute on 2 cores
    python benchmarks/callback_overhead.py --ppo-steps 20000 --reps 5 --wandb offline
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings

import gymnasium as gym
import numpy as np

import seffi.envs  # noqa: F401 - registers the env ids
from seffi.callbacks import CoverageMonitor

ENV = "seffi/SortSwapsRouter-v0"


def ppo_time(
    steps: int, n_envs: int, budget: int, with_cb: bool, wandb: str, out: str, plots: bool = True
) -> float:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from seffi.callbacks.sb3 import CoverageCallback

    venv = make_vec_env(
        ENV, n_envs=n_envs, seed=0, env_kwargs={"n_inputs": 16, "budget": budget, "render_mode": None}
    )
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=256, n_epochs=4, seed=0, device="cpu")
    cb = CoverageCallback(budget=budget, out_dir=out, wandb=wandb, plots=plots) if with_cb else None
    t0 = time.perf_counter()
    model.learn(steps, callback=cb)
    return time.perf_counter() - t0


def loop_time(steps: int, n_envs: int, budget: int, with_cb: bool, out: str) -> float:
    envs = gym.make_vec(
        ENV, num_envs=n_envs, vectorization_mode="vector_entry_point", n_inputs=64, budget=budget
    )
    monitor = CoverageMonitor.for_env(envs, budget=budget, out_dir=out, wandb="disabled") if with_cb else None
    rng = np.random.default_rng(0)
    actions = rng.integers(0, envs.single_action_space.n, size=(steps, n_envs))
    envs.reset(seed=0)
    t0 = time.perf_counter()
    for t in range(steps):
        _, _, term, trunc, infos = envs.step(actions[t])
        if monitor is not None:
            monitor.ingest_infos(infos, term | trunc)
            monitor.maybe_log(t * n_envs)
    if monitor is not None:
        monitor.close()
    return time.perf_counter() - t0


def interleaved(fn, reps: int) -> tuple[list[float], list[float]]:
    base, cb = [], []
    for r in range(reps):
        order = (False, True) if r % 2 == 0 else (True, False)
        for with_cb in order:
            with tempfile.TemporaryDirectory() as out:
                (cb if with_cb else base).append(fn(with_cb, out))
    return base, cb


def show(name: str, base: list[float], cb: list[float]) -> None:
    ratios = [c / b for b, c in zip(base, cb, strict=True)]
    print(
        f"{name:<44} without {statistics.median(base):8.3f} s   with {statistics.median(cb):8.3f} s   "
        f"ratio {statistics.median(ratios):.3f}x  (per-pair: {', '.join(f'{r:.3f}' for r in ratios)})"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ppo-steps", type=int, default=8192)
    p.add_argument("--ppo-envs", type=int, default=4)
    p.add_argument("--loop-steps", type=int, default=1000)
    p.add_argument("--loop-envs", type=int, default=64)
    p.add_argument("--budget", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--wandb", default="disabled", choices=["disabled", "offline"])
    a = p.parse_args()
    warnings.simplefilter("ignore")
    os.environ.setdefault("WANDB_SILENT", "true")
    import torch

    torch.set_num_threads(1)  # both arms on one thread: the comparison, not the speed, is the point
    print(f"env {ENV}, K={a.budget}, {a.reps} interleaved repetitions, W&B {a.wandb}")
    b, c = interleaved(lambda cb, out: ppo_time(a.ppo_steps, a.ppo_envs, a.budget, cb, a.wandb, out), a.reps)
    show(f"SB3 PPO, {a.ppo_steps} steps x{a.ppo_envs} envs", b, c)
    b, c = interleaved(
        lambda cb, out: ppo_time(a.ppo_steps, a.ppo_envs, a.budget, cb, a.wandb, out, plots=False), a.reps
    )
    show("  same, final PNG plots off (one-off cost)", b, c)
    b, c = interleaved(lambda cb, out: loop_time(a.loop_steps, a.loop_envs, a.budget, cb, out), a.reps)
    show(f"vector loop, random actions, {a.loop_steps}x{a.loop_envs} env-steps", b, c)


if __name__ == "__main__":
    main()

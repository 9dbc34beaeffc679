"""Throughput of the seffi envs: single env, SyncVectorEnv of it, and the native vector env.

Prints env-steps per second for each, side by side in one run, with Gymnasium's CartPole
(single, SyncVectorEnv, CartPoleVectorEnv) as a reference line. Actions are pre-drawn uniformly at
random so the policy costs nothing; NEXT_STEP autoreset steps count as steps, as they do in training.

    python benchmarks/envs.py [--task sort_swaps] [--num-envs 256] [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import seffi.envs  # noqa: F401  (registers the envs)
from seffi.envs import env_id
from seffi.tasks import list_tasks


def timed(step: Callable[[int], None], per_call: int, seconds: float) -> float:
    """Env-steps per second of calling ``step(i)`` for about ``seconds`` (each call = ``per_call`` steps)."""
    calls, start = 0, time.perf_counter()
    while True:
        for _ in range(16):
            step(calls)
            calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * per_call / elapsed


def single_rate(env: gym.Env, seconds: float) -> float:
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, env.action_space.n, size=4096)

    def step(i: int) -> None:
        _, _, term, trunc, _ = env.step(actions[i % 4096])
        if term or trunc:
            env.reset()

    return timed(step, 1, seconds)


def vector_rate(envs: gym.vector.VectorEnv, seconds: float) -> float:
    envs.reset(seed=0)
    n = int(envs.single_action_space.n)
    actions = np.random.default_rng(0).integers(0, n, size=(64, envs.num_envs))

    def step(i: int) -> None:
        envs.step(actions[i % 64])

    return timed(step, envs.num_envs, seconds)


def measure(eid: str, num_envs: int, seconds: float, **kwargs: object) -> tuple[float, float, float]:
    single = single_rate(gym.make(eid, **kwargs), seconds)
    sync = vector_rate(gym.make_vec(eid, num_envs=num_envs, vectorization_mode="sync", **kwargs), seconds)
    native = vector_rate(
        gym.make_vec(eid, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs), seconds
    )
    return single, sync, native


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="sort_swaps", choices=list_tasks())
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args()
    rows = [
        (env_id(args.task, "token"), measure(env_id(args.task, "token"), args.num_envs, args.seconds)),
        (env_id(args.task, "router"), measure(env_id(args.task, "router"), args.num_envs, args.seconds)),
        ("CartPole-v1 (reference)", measure("CartPole-v1", args.num_envs, args.seconds)),
    ]
    print(f"env-steps/s, {args.num_envs} envs for the vector columns (gymnasium {gym.__version__})")
    header = f"{'env':<28}{'single':>12}{'SyncVectorEnv':>15}{'native vector':>15}{'native/sync':>13}"
    print(header)
    print("-" * len(header))
    for name, (single, sync, native) in rows:
        print(f"{name:<28}{single:>12,.0f}{sync:>15,.0f}{native:>15,.0f}{native / sync:>12.1f}x")
    print("single: one step() (+ reset() when the episode ends) = one env-step; vector: one row of step().")


if __name__ == "__main__":
    main()

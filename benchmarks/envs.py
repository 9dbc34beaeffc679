"""Throughput of the seffi envs: single env, SyncVectorEnv of it, and the native vector env.

Prints env-steps per second for each, side by side in one run, with Gymnasium's CartPole
(single, SyncVectorEnv, CartPoleVectorEnv) as a reference line. Actions are pre-drawn uniformly at
random so the policy costs nothing; NEXT_STEP autoreset steps count as steps, as they do in training.

The seffi rows add the native vector env in ``SAME_STEP`` autoreset mode and its gain in *episodes*
(samples) per second over the default ``NEXT_STEP`` mode: a one-step router episode costs two NEXT_STEP
vector steps (the step, then a reset-only step) but one SAME_STEP step. With random actions the gain
is only the env's own cost (a native reset-only step is cheap); the last column (router env) puts a
policy in the loop as training does — CleanRL's default 64-64 MLP, in numpy — which NEXT_STEP also
evaluates on its reset-only steps, whose actions are thrown away.

    python benchmarks/envs.py [--task sort_swaps] [--num-envs 256] [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from itertools import pairwise

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


def mlp_policy(envs: gym.vector.VectorEnv) -> Callable[[np.ndarray], np.ndarray]:
    """CleanRL's default actor size in numpy (two tanh layers of 64, softmax sampled by Gumbel-max):
    obs, shape (E, D) -> actions, shape (E,)."""
    rng = np.random.default_rng(0)
    sizes = [envs.single_observation_space.shape[0], 64, 64, int(envs.single_action_space.n)]
    weights = [rng.normal(size=(a, b)) / np.sqrt(a) for a, b in pairwise(sizes)]

    def act(obs: np.ndarray) -> np.ndarray:
        h = obs
        for w in weights[:-1]:
            h = np.tanh(h @ w)
        logits = h @ weights[-1]
        return np.argmax(logits - np.log(-np.log(rng.random(logits.shape))), axis=1)

    return act


def vector_rate(
    envs: gym.vector.VectorEnv, seconds: float, policy: Callable[[np.ndarray], np.ndarray] | None = None
) -> tuple[float, float]:
    """(env-steps/s, episodes ended/s) of stepping ``envs`` with pre-drawn actions or ``policy``."""
    obs = [envs.reset(seed=0)[0]]
    n = int(envs.single_action_space.n)
    actions = np.random.default_rng(0).integers(0, n, size=(64, envs.num_envs))
    ended = [0]

    def step(i: int) -> None:
        obs[0], _, term, trunc, _ = envs.step(actions[i % 64] if policy is None else policy(obs[0]))
        ended[0] += int(np.count_nonzero(term | trunc))

    start = time.perf_counter()
    steps = timed(step, envs.num_envs, seconds)
    return steps, ended[0] / (time.perf_counter() - start)


NAN = float("nan")


def paired_gain(
    next_step: gym.vector.VectorEnv,
    same_step: gym.vector.VectorEnv,
    seconds: float,
    policy: Callable[[gym.vector.VectorEnv], Callable[[np.ndarray], np.ndarray]] | None = None,
    rounds: int = 5,
) -> float:
    """Median over ``rounds`` of SAME_STEP / NEXT_STEP episodes per second, measured back to back.

    Interleaving short windows keeps the ratio honest on a shared machine, where the load changes
    between two long serial windows.
    """
    ratios = []
    for _ in range(rounds):
        rates = [
            vector_rate(env, seconds / (2 * rounds), None if policy is None else policy(env))[1]
            for env in (next_step, same_step)
        ]
        ratios.append(rates[1] / rates[0])
    return float(np.median(ratios))


def measure(
    eid: str, num_envs: int, seconds: float, same_step: bool = True, policy: bool = False
) -> tuple[float, ...]:
    """single, sync, native (NEXT_STEP) and native SAME_STEP steps/s; SAME/NEXT episodes/s gains."""
    single = single_rate(gym.make(eid), seconds)
    sync, _ = vector_rate(gym.make_vec(eid, num_envs=num_envs, vectorization_mode="sync"), seconds)
    native = gym.make_vec(eid, num_envs=num_envs, vectorization_mode="vector_entry_point")
    next_steps, _ = vector_rate(native, seconds)
    if not same_step:  # CartPoleVectorEnv has NEXT_STEP only
        return single, sync, next_steps, NAN, NAN, NAN
    same = gym.make_vec(
        eid,
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    same_steps, _ = vector_rate(same, seconds)
    gain = paired_gain(native, same, 2 * seconds)
    gain_policy = paired_gain(native, same, 2 * seconds, mlp_policy) if policy else NAN
    return single, sync, next_steps, same_steps, gain, gain_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="sort_swaps", choices=list_tasks())
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args()
    token, router = env_id(args.task, "token"), env_id(args.task, "router")
    rows = [
        (token, measure(token, args.num_envs, args.seconds)),
        (router, measure(router, args.num_envs, args.seconds, policy=True)),
        ("CartPole-v1 (reference)", measure("CartPole-v1", args.num_envs, args.seconds, same_step=False)),
    ]
    print(f"env-steps/s, {args.num_envs} envs for the vector columns (gymnasium {gym.__version__})")
    header = (
        f"{'env':<28}{'single':>11}{'SyncVectorEnv':>15}{'native vector':>15}{'native/sync':>13}"
        f"{'native SAME_STEP':>18}{'episodes/s SAME/NEXT':>22}{'+MLP policy':>16}"
    )
    print(header)
    print("-" * len(header))
    for name, (single, sync, native, same, gain, gain_policy) in rows:
        cells = [
            f"{name:<28}{single:>11,.0f}{sync:>15,.0f}{native:>15,.0f}{native / sync:>12.1f}x",
            f"{'-':>18}" if np.isnan(same) else f"{same:>18,.0f}",
            f"{'-':>22}" if np.isnan(gain) else f"{gain:>21.2f}x",
            f"{'-':>16}" if np.isnan(gain_policy) else f"{gain_policy:>15.2f}x",
        ]
        print("".join(cells))
    print("single: one step() (+ reset() when the episode ends) = one env-step; vector: one row of step().")
    print("native vector = NEXT_STEP autoreset (the default); SAME_STEP resets inside the step that ends.")
    print("episodes/s SAME/NEXT: median of 5 back-to-back pairs (random actions, then the MLP acting).")


if __name__ == "__main__":
    main()

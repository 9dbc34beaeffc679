"""Helpers shared by the env tests: small env factories and scripted policies that read only obs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import seffi.envs
from seffi.envs import env_id
from seffi.tasks import list_tasks

TASKS = list_tasks()
KINDS = ("token", "router")
CASES = [(t, k) for t in TASKS for k in KINDS]
SMALL: dict[str, Any] = {"n_inputs": 3, "budget": 4}

assert seffi.envs  # registration happens at import


def make(task: str, kind: str, **kwargs: Any) -> gym.Env:
    return gym.make(env_id(task, kind), **{**SMALL, **kwargs})


def make_vec(task: str, kind: str, num_envs: int, mode: str = "vector_entry_point", **kwargs: Any) -> Any:
    return gym.make_vec(env_id(task, kind), num_envs=num_envs, vectorization_mode=mode, **{**SMALL, **kwargs})


class TokenScript:
    """Per row: at the start of an episode write either a reference trace of a random feasible strategy
    of the input named by the prompt, or random tokens ending in <eos> with probability 0.2 per step."""

    def __init__(self, env: Any, num_envs: int, seed: int = 0) -> None:
        self.u = env.unwrapped
        spec = self.u._engine.spec
        self.by_prompt = {row.tobytes(): i for i, row in reversed(list(enumerate(spec.prompt_tokens)))}
        self.plans: list[list[int]] = [[] for _ in range(num_envs)]
        self.rng = np.random.default_rng(seed)
        self.v = len(self.u.vocabulary)

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        actions = np.zeros(len(self.plans), dtype=np.int64)
        for r, plan in enumerate(self.plans):
            if obs["length"][r] == 0:
                x = self.u.inputs[self.by_prompt[obs["prompt"][r].tobytes()]]
                if self.rng.random() < 0.5:
                    feasible = self.u.task.feasible_strategies(x)
                    s = feasible[int(self.rng.integers(len(feasible)))]
                    plan[:] = self.u.encode(self.u.task.reference(x, s))
                else:
                    plan[:] = []
            if plan:
                actions[r] = plan.pop(0)
            else:
                actions[r] = 1 if self.rng.random() < 0.2 else int(self.rng.integers(2, self.v))
        return actions


def policy_for(kind: str, env: Any, num_envs: int, seed: int = 0) -> Any:
    if kind == "token":
        return TokenScript(env, num_envs, seed)
    rng = np.random.default_rng(seed)
    z = env.unwrapped.n_latents
    return lambda obs: rng.integers(0, z, size=num_envs)

"""A researcher's own env, written without any seffi import, and an independent coverage count.

``PlannerEnv`` is what a user writes: one step is one sample, the action picks a search strategy and
the final info carries the contract keys (``input_id``, ``strategy_matches``, ``valid``,
``sample_index``). It holds a lambda attribute and a lock-free log file, so anything that pickles the
env or ships its bound methods through a pipe fails on it, as it would on a real user env.

``PlannerEnvWithLaws`` adds the two optional methods (``base_match_distribution``,
``reference_match_sets``) from which a monitor computes the exact iid baseline and the oracle.

Every emitted final info is appended as one JSON line to ``log_path`` (when given), so a test reads
back exactly what the env produced, from any process, and counts coverage by hand.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

STRATEGIES = ("astar", "bfs", "dfs", "greedy")
INPUTS = ("maze-a", "maze-b", "maze-c")
#: What each action's trace follows: action 3 writes a trace that is both A* and greedy best-first.
ACTION_MATCHES: tuple[tuple[str, ...], ...] = (("bfs",), ("dfs",), ("astar",), ("astar", "greedy"), ())
#: The base model's law over match sets (the same for every input): the exact iid baseline.
BASE_LAW: dict[frozenset[str], float] = {
    frozenset({"bfs"}): 0.55,
    frozenset({"dfs"}): 0.25,
    frozenset({"astar"}): 0.08,
    frozenset({"astar", "greedy"}): 0.04,
    frozenset(): 0.08,
}


class PlannerEnv(gym.Env):
    """One step = one sample; after ``budget`` samples on an input the next reset moves to the next one."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012
    strategies = STRATEGIES

    def __init__(self, budget: int = 4, start: int = 0, log_path: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(ACTION_MATCHES))
        self.budget, self.log_path = int(budget), log_path
        self.input_ids = INPUTS
        self._input_index, self._k = int(start) % len(INPUTS), 0
        self.score = lambda text: len(text)  # a user attribute that cannot be pickled

    @property
    def input_id(self) -> str:
        return INPUTS[self._input_index]

    def _obs(self) -> np.ndarray:
        return np.array([self._input_index / len(INPUTS), self._k / self.budget], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if options and "input_id" in options:
            self._input_index, self._k = INPUTS.index(options["input_id"]), 0
        elif self._k >= self.budget:  # the run on this input is complete: the next input
            self._input_index, self._k = (self._input_index + 1) % len(INPUTS), 0
        return self._obs(), {}

    def step(self, action: Any):
        self._k += 1
        matches = ACTION_MATCHES[int(action)]
        info = {
            "input_id": self.input_id,
            "y_text": f"{'+'.join(matches) or 'junk'}: path 0-1-2",
            "strategy_matches": matches,
            "valid": bool(matches),
            "sample_index": self._k,
        }
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"pid": os.getpid(), "env": id(self), **info}) + "\n")
        return self._obs(), 1.0 if matches else 0.0, True, False, info


class PlannerEnvWithLaws(PlannerEnv):
    """``PlannerEnv`` plus the optional methods that give exact iid and oracle baselines."""

    def base_match_distribution(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        if valid_only:
            return {s: p for s, p in BASE_LAW.items() if s}
        return dict(BASE_LAW)

    def reference_match_sets(self, input_id: str) -> dict[str, frozenset[str]]:
        return {"astar": frozenset({"astar"}), "bfs": frozenset({"bfs"}), "dfs": frozenset({"dfs"}),
                "greedy": frozenset({"astar", "greedy"})}


def read_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every final info the envs wrote to ``path``, in write order."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def hand_coverage(
    episodes: Iterable[Mapping[str, Any]], budget: int, m: int = len(STRATEGIES)
) -> tuple[np.ndarray, int]:
    """C(k), k = 1..K, counted by hand: runs split per (process, env object) where sample_index restarts.

    Each input's complete runs (K samples) are averaged, then inputs are averaged with equal weight,
    which is the design's estimator for an adaptive policy. Returns (C, number of complete runs).
    """
    runs: dict[tuple[Any, Any], list[list[Mapping[str, Any]]]] = defaultdict(list)
    for e in episodes:
        rows = runs[(e["pid"], e["env"])]
        if not rows or e["sample_index"] <= rows[-1][-1]["sample_index"]:
            rows.append([])
        rows[-1].append(e)
    per_input: dict[str, list[list[float]]] = defaultdict(list)
    for rows in runs.values():
        for run in rows:
            if len(run) < budget:
                continue  # an incomplete run is not a sample of C(K)
            seen: set[str] = set()
            curve = []
            for e in run[:budget]:
                seen |= set(e["strategy_matches"])
                curve.append(len(seen) / m)
            per_input[run[0]["input_id"]].append(curve)
    if not per_input:
        return np.zeros(budget), 0
    means = [np.mean(curves, axis=0) for curves in per_input.values()]
    return np.mean(means, axis=0), sum(len(c) for c in per_input.values())


def hand_iid_coverage(budget: int, law: Mapping[frozenset[str], float] = BASE_LAW,
                      m: int = len(STRATEGIES)) -> np.ndarray:
    """Exact iid C(k) from a match-set law: sum over strategies of 1 - (1 - pi_s)^k, divided by M."""
    pi = {s: sum(p for a, p in law.items() if s in a) for s in STRATEGIES}
    return np.array([sum(1 - (1 - pi[s]) ** k for s in STRATEGIES) / m for k in range(1, budget + 1)])


def make_planner(
    budget: int = 4, start: int = 0, log_path: str | None = None, laws: bool = True
) -> PlannerEnv:
    """A module-level factory (picklable with ``functools.partial``, as subprocess vector envs need)."""
    cls = PlannerEnvWithLaws if laws else PlannerEnv
    return cls(budget=budget, start=start, log_path=log_path)


def log_paths(folder: str | os.PathLike[str], n: int) -> Sequence[str]:
    """One log file per sub-env (appends from several processes never interleave within a file)."""
    return [os.path.join(folder, f"env{i}.jsonl") for i in range(n)]

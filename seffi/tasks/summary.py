"""Per-task statistics on a seeded input pool: ambiguity rates, feasibility, trace lengths.

Ambiguity (a trace matching several strategies) is measured on reference traces and, exactly, on
base-sampler draws.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from seffi._seeding import SeedLike, rngs
from seffi.errors import SeffiError
from seffi.tasks.base import Task, get_task, list_tasks


@dataclass(frozen=True)
class TaskSummary:
    """Statistics of one task on a pool of ``inputs`` distinct inputs.

    Attributes:
        reference_ambiguity: Fraction of the (input, feasible strategy) reference traces that match
            more than one strategy (what the no-repeat oracle sees).
        base_ambiguity: Mean probability that a base sample matches more than one strategy (exact;
            raw matches, incorrect traces included).
        mean_feasible: Mean feasible strategies per input; with fewer than M, the oracle's C(K) stays
            below 1 at K >= M.
        base_strategy_mass: Mean base mass of the strategies' correct reference traces;
            ``base_invalid`` of incorrect traces, ``base_off_strategy`` of correct off-strategy ones.
        mean_trace_tokens: Mean vocabulary tokens of a reference trace (no ``<eos>``).
    """

    name: str
    strategies: tuple[str, ...]
    inputs: int
    reference_ambiguity: float
    base_ambiguity: float
    mean_feasible: float
    mean_trace_tokens: float
    max_trace_tokens: int
    min_feasible: int = 0
    max_feasible: int = 0
    base_strategy_mass: float = 0.0
    base_invalid: float = 0.0
    base_off_strategy: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "strategies": list(self.strategies)}


def input_pool(task: Task[Any, Any], n_draws: int, seed: SeedLike = 0) -> list[Any]:
    """The distinct inputs among ``n_draws`` seeded draws (fewer, not an error, for hanoi's 18)."""
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws}")
    pool: dict[str, Any] = {}
    for rng in rngs(seed, n_draws):
        x = task.make_input(**task._generate(rng))
        pool.setdefault(x.id, x)
    return list(pool.values())


def summarize(task: Task[Any, Any], n_inputs: int = 200, seed: SeedLike = 0) -> TaskSummary:
    """Ambiguity rates and trace statistics of ``task`` on ``input_pool(task, n_inputs, seed)``."""
    inputs = input_pool(task, n_inputs, seed)
    vocab = task.vocabulary()
    sets = [task.reference_match_sets(x) for x in inputs]
    ambiguous = [len(m) > 1 for s in sets for m in s.values()]
    tokens = [len(vocab.encode(task.reference(x, k))) for x, s in zip(inputs, sets, strict=True) for k in s]
    feasible = [len(s) for s in sets]
    laws = [task.base_match_distribution(x) for x in inputs]
    rest = [task.base_remainder(x) for x in inputs]
    return TaskSummary(
        name=task.name,
        strategies=task.strategies(),
        inputs=len(inputs),
        reference_ambiguity=sum(ambiguous) / len(ambiguous) if ambiguous else 0.0,
        base_ambiguity=float(np.mean([sum(p for m, p in law.items() if len(m) > 1) for law in laws])),
        mean_feasible=float(np.mean(feasible)),
        mean_trace_tokens=float(np.mean(tokens)) if tokens else 0.0,
        max_trace_tokens=max(tokens, default=0),
        min_feasible=min(feasible, default=0),
        max_feasible=max(feasible, default=0),
        base_strategy_mass=float(np.mean([sum(task.base_distribution(x).values()) for x in inputs])),
        base_invalid=float(np.mean([r["invalid"] for r in rest])),
        base_off_strategy=float(np.mean([r["off_strategy"] for r in rest])),
    )


def collect(names: list[str] | None = None, pool: int = 200, seed: int = 0) -> list[TaskSummary]:
    """Summaries of ``names`` (default: every registered task) with default configs."""
    if pool < 1:
        raise SeffiError(f"--pool must be >= 1, got {pool}")
    if seed < 0:
        raise SeffiError(f"--seed must be >= 0, got {seed}")
    return [summarize(get_task(name), n_inputs=pool, seed=seed) for name in (names or list_tasks())]

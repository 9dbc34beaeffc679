"""Per-task statistics on a fixed seeded input pool: ambiguity rates, feasibility, trace lengths.

*Ambiguity* is how often one trace matches several strategies:

* ``reference`` — the fraction of (input, feasible strategy) reference traces whose match set has
  more than one strategy (what the no-repeat oracle sees);
* ``base`` — the probability that a base-sampler draw has a match set with more than one strategy,
  averaged over inputs (exact, from ``base_match_distribution``; raw matches, incorrect traces included).

Examples:
    >>> from seffi.tasks import get_task
    >>> s = summarize(get_task("hanoi"), n_inputs=20, seed=0)
    >>> s.reference_ambiguity, s.name
    (1.0, 'hanoi')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from seffi._seeding import SeedLike, rngs
from seffi.errors import SeffiError
from seffi.tasks.base import Task
from seffi.tasks.registry import get_task, list_tasks


@dataclass(frozen=True)
class TaskSummary:
    """Statistics of one task on a pool of inputs.

    Attributes:
        name: Task name.
        strategies: Declared strategy ids.
        inputs: Distinct inputs in the pool.
        reference_ambiguity: Fraction of reference traces matching more than one strategy.
        base_ambiguity: Mean probability that a base sample matches more than one strategy.
        mean_feasible: Mean number of feasible strategies per input (the oracle covers only these:
            with fewer than M feasible, its C(K) and F(K) stay below 1 at K >= M).
        min_feasible: Fewest feasible strategies on an input of the pool.
        max_feasible: Most feasible strategies on an input of the pool.
        base_strategy_mass: Mean mass of ``base_distribution`` (base samples that are a strategy's
            correct reference trace).
        base_invalid: Mean base mass of incorrect traces (``base_remainder(x)["invalid"]``).
        base_off_strategy: Mean base mass of correct traces that follow no declared strategy.
        mean_trace_tokens: Mean vocabulary tokens of a reference trace (no ``<eos>``).
        max_trace_tokens: Longest reference trace in tokens.
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
        out = asdict(self)
        out["strategies"] = list(self.strategies)
        return out


def input_pool(task: Task[Any, Any], n_draws: int, seed: SeedLike = 0) -> list[Any]:
    """The distinct inputs among ``n_draws`` seeded draws.

    A task with few possible inputs (Hanoi has 18) yields fewer than ``n_draws`` instead of failing
    the way ``make_inputs`` does when it cannot find ``n`` distinct inputs.
    """
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
    ambiguous, references, base, feasible, tokens = 0, 0, [], [], []
    mass, invalid, off = [], [], []
    for x in inputs:
        match_sets = task.reference_match_sets(x)
        feasible.append(len(match_sets))
        for strategy, matches in match_sets.items():
            references += 1
            ambiguous += len(matches) > 1
            tokens.append(len(vocab.encode(task.reference(x, strategy))))
        law = task.base_match_distribution(x)
        base.append(sum(p for m, p in law.items() if len(m) > 1))
        rest = task.base_remainder(x)
        mass.append(sum(task.base_distribution(x).values()))
        invalid.append(rest["invalid"])
        off.append(rest["off_strategy"])
    return TaskSummary(
        name=task.name,
        strategies=task.strategies(),
        inputs=len(inputs),
        reference_ambiguity=ambiguous / references if references else 0.0,
        base_ambiguity=float(np.mean(base)),
        mean_feasible=float(np.mean(feasible)),
        mean_trace_tokens=float(np.mean(tokens)) if tokens else 0.0,
        max_trace_tokens=max(tokens, default=0),
        min_feasible=min(feasible, default=0),
        max_feasible=max(feasible, default=0),
        base_strategy_mass=float(np.mean(mass)),
        base_invalid=float(np.mean(invalid)),
        base_off_strategy=float(np.mean(off)),
    )


def collect(names: list[str] | None = None, pool: int = 200, seed: int = 0) -> list[TaskSummary]:
    """Summaries of ``names`` (default: every registered task) with default configs."""
    if pool < 1:
        raise SeffiError(f"--pool must be >= 1, got {pool}")
    if seed < 0:
        raise SeffiError(f"--seed must be >= 0, got {seed}")
    return [summarize(get_task(name), n_inputs=pool, seed=seed) for name in (names or list_tasks())]

"""Per-input metrics declared torchmetrics-style: ``add_state`` in ``setup``, then ``update``, ``compute``.

Each ``add_state`` is a `Part` of the tracker's state (stored, checked and merged from it); the monitor
logs ``seffi/<name>`` and the report holds its `Estimate`.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from seffi.coverage.room import grow

__all__ = ["Estimate", "InputMetric", "Part", "registered"]


@dataclass(frozen=True)
class Part:
    """One part of a tracker's state: its type, bounds [lo, hi), default (``fill``) and merge rule.

    ``merge``: "agree" (equal in both), "keep" (the merged-into tracker's), "union", "key" (rows join
    by it), "disjoint" (a run in both is an error), "sum", "max", "or". ``hi`` may be a function of the
    parts checked before; ``width``: the setting giving a matrix's width; ``derive``: a counter's value.
    """

    name: str
    merge: str
    doc: str
    kind: str = "int"  # "int", "bool", "str", "ids" (a list of str), "list" (ints, in a record)
    null: bool = False
    lo: int = 0
    hi: int | Callable[[Mapping[str, Any]], int] = 2**53  # counts stay exact as JSON numbers
    width: str | None = None
    fill: int = 0
    where: str = ""  # "setting", "counter", "metrics", or the table holding it
    wide: bool = False  # int64 in a narrow run table
    derive: Callable[[Mapping[str, Any]], Any] | None = None

    @functools.cached_property
    def key(self) -> str:  # the name inside its table (runs.first_hit -> first_hit)
        return self.name.rsplit(".", 1)[-1]


class Estimate(BaseModel):
    """A per-input metric's mean over inputs, its interval, and the iid baseline's figure."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    value: float | None = None  # None (with ``reason``) when undefined
    lo: float | None = None  # the interval (None: none, e.g. one input)
    hi: float | None = None
    iid: float | None = None  # the iid baseline over the same inputs (None: no base law)
    n_inputs: int = 0  # the inputs behind ``value``
    reason: str | None = None  # why ``value`` is None, or a caveat


class InputMetric:
    """A metric kept per input: ``name`` (logged as ``seffi/<name>``), ``setup``, ``update``, ``compute``.

    ``update(codes, hits, valid)`` folds samples in (input codes (N,), hits (N, C), valid (N,));
    ``compute(strata, law_of)``: the `Estimate` given each input's task stratum and ``law_of(code)``,
    the base sampler's probability of each strategy id (for the iid figure; None: none).
    """

    name: ClassVar[str] = ""
    setup: Callable[[], None]  # the `add_state` calls, and any cache derived from the state
    update: Callable[[np.ndarray, np.ndarray, np.ndarray], None]
    compute: Callable[[np.ndarray, Callable[[int], Mapping[str, float]] | None], Estimate]

    def __init__(self) -> None:
        self.specs: dict[str, Part] = {}
        self.n_inputs, self.n_columns = 0, 0
        self.partial = False  # loaded from a state without this metric: it counts samples since
        self.setup()

    def add_state(
        self, name: str, *, per_strategy: bool, merge: Literal["sum", "max"] = "sum", lo: int = 0
    ) -> None:
        """Declare an int array with a row per input (and a column per strategy if ``per_strategy``)."""
        if merge not in ("sum", "max"):
            raise ValueError(f"merge must be 'sum' or 'max', got {merge!r}")
        self.specs[name] = Part(
            name, merge, self.name, lo=lo, fill=lo, width="columns" if per_strategy else None
        )
        setattr(self, name, np.full((self.n_inputs, self.n_columns)[: 1 + per_strategy], lo, dtype=np.int64))

    def grow(self, n_inputs: int, n_columns: int) -> None:
        """Room for ``n_inputs`` input codes and ``n_columns`` strategy columns (new cells at ``lo``)."""
        rows, cols = max(n_inputs, self.n_inputs), max(n_columns, self.n_columns)
        for p in self.specs.values():
            old = getattr(self, p.name)
            if p.width and old.shape[1] != cols:  # a new strategy column: a wider copy
                new = np.full((len(old), cols), p.fill, dtype=old.dtype)
                new[:, : old.shape[1]] = old
                setattr(self, p.name, new)
            del old  # held here, the array could not grow in place
            grow(self, p.name, rows, p.fill)
        self.n_inputs, self.n_columns = rows, cols

    def rows(self, name: str) -> np.ndarray:
        """The declared state ``name``, one row per input code seen (a view)."""
        return getattr(self, name)[: self.n_inputs]


def registered() -> tuple[type[InputMetric], ...]:
    """Every `InputMetric` defined in the modules of `seffi.coverage.metrics`, by name."""
    metrics = importlib.import_module("seffi.coverage.metrics")  # discovery: every module in it
    found: dict[str, type[InputMetric]] = {}
    for info in pkgutil.iter_modules(metrics.__path__):
        module = importlib.import_module(f"{metrics.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, InputMetric) and obj is not InputMetric and obj.name:
                found[obj.name] = obj
    return tuple(found[n] for n in sorted(found))

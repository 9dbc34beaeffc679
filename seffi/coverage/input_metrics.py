"""Per-input metrics declared torchmetrics-style: ``add_state`` in ``setup``, then ``update``, ``compute``.

A metric is an `InputMetric` subclass in a module of `seffi.coverage.metrics`. Each `add_state`
declares an integer array with a row per input (and a column per strategy if ``per_strategy``) and
how two trackers' rows of one input merge; `seffi.coverage.state` derives the metric's storage,
check and exact merge from these declarations. The tracker records into every registered metric,
the monitor logs ``seffi/<name>`` and the report holds each one's `Estimate` per policy.

Examples:
    >>> class Samples(InputMetric):                               # doctest: +SKIP
    ...     name = "samples_per_input"
    ...     def setup(self): self.add_state("n", per_strategy=False, merge="sum")
    ...     def update(self, codes, hits, valid): np.add.at(self.n, codes, 1)
    ...     def compute(self, strata, law_of=None): return Estimate(value=float(self.n.mean()))
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from typing import ClassVar, Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict

__all__ = ["Estimate", "InputMetric", "registered"]


class Estimate(BaseModel):
    """A per-input metric's estimate over inputs, its interval, and the iid baseline's figure.

    Attributes:
        value: the mean over inputs, or None with ``reason`` when undefined.
        lo, hi: the interval's bounds (None: no interval, e.g. one input).
        iid: the same figure for the iid baseline over the same inputs (None: no base law).
        n_inputs: the inputs behind ``value``.
        reason: why ``value`` is None, or a caveat.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    iid: float | None = None
    n_inputs: int = 0
    reason: str | None = None


class StateSpec(NamedTuple):
    """One declared state: its name, width (None, or "columns": one per strategy), merge rule, least value."""

    name: str
    width: Literal["columns"] | None
    merge: Literal["sum", "max"]
    lo: int


class InputMetric:
    """A metric kept per input: ``name`` (logged as ``seffi/<name>``), ``setup``, ``update``, ``compute``."""

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self.specs: dict[str, StateSpec] = {}
        self.n_inputs, self.n_columns = 0, 0
        #: Loaded from a state that did not hold this metric: it counts only samples recorded since.
        self.partial = False
        self.setup()

    def setup(self) -> None:
        """Declare the state (`add_state` calls) and set up any cache derived from it."""
        raise NotImplementedError

    def update(self, codes: np.ndarray, hits: np.ndarray, valid: np.ndarray) -> None:
        """Fold recorded samples in: input codes (N,), matched strategy columns (N, C), correct (N,)."""
        raise NotImplementedError

    def compute(
        self, strata: np.ndarray, law_of: Callable[[int], Mapping[str, float]] | None = None
    ) -> Estimate:
        """The estimate over inputs, given each input code's task stratum (U,).

        ``law_of(code)``: the base sampler's probability that a sample of that input matches each
        strategy id, for the iid figure beside the policy's; None: no such figure.
        """
        raise NotImplementedError

    def add_state(
        self, name: str, *, per_strategy: bool, merge: Literal["sum", "max"] = "sum", lo: int = 0
    ) -> None:
        """Declare an int64 array with a row per input (and a column per strategy if ``per_strategy``)."""
        if merge not in ("sum", "max"):
            raise ValueError(f"merge must be 'sum' or 'max', got {merge!r}")
        self.specs[name] = StateSpec(name, "columns" if per_strategy else None, merge, lo)
        setattr(self, name, self._empty(self.specs[name], self.n_inputs, self.n_columns))

    @staticmethod
    def _empty(spec: StateSpec, rows: int, cols: int) -> np.ndarray:
        return np.full((rows, cols) if spec.width else (rows,), spec.lo, dtype=np.int64)

    def grow(self, n_inputs: int, n_columns: int) -> None:
        """Room for ``n_inputs`` input codes and ``n_columns`` strategy columns (new cells at ``lo``)."""
        if n_inputs <= self.n_inputs and n_columns <= self.n_columns:
            return
        rows, cols = max(n_inputs, self.n_inputs), max(n_columns, self.n_columns)
        for spec in self.specs.values():  # rows double (kept beyond n_inputs at lo); the integer type stays
            old = getattr(self, spec.name)
            if len(old) >= rows and (not spec.width or old.shape[1] == cols):
                continue
            cap = max(rows, 2 * len(old)) if rows > len(old) else len(old)  # amortised doubling
            new = np.full((cap, cols) if spec.width else (cap,), spec.lo, dtype=old.dtype)
            new[tuple(slice(0, n) for n in old.shape)] = old
            setattr(self, spec.name, new)
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

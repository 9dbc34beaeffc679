"""Per-input metrics declared once: state with its merge rule, ``update`` and ``compute``.

A metric is a subclass of `InputMetric` in a module of `seffi.coverage.metrics`. It declares its
state with `InputMetric.add_state` (an integer array with a row per input, optionally a column per
strategy, and how two trackers' values merge) and writes ``update`` (fold a batch of recorded
samples) and ``compute`` (its estimate over inputs). Everything else follows from the declaration:
growing with new inputs and strategies, ``state_dict``, and in `seffi.coverage.state` the
check of a loaded state and the exact merge. The tracker records into every registered metric, its
state carries them under ``metrics``, the monitor logs ``seffi/<name>`` and the report holds each
one's `Estimate` per policy.

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
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

__all__ = ["Estimate", "InputMetric", "registered"]

Merge = Literal["sum", "max"]


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


@dataclass(frozen=True)
class StateSpec:
    """One declared piece of a metric's state.

    Attributes:
        name: attribute name (and key in the stored state).
        per_strategy: a column per strategy (shape (U, C)), else one value per input (shape (U,)).
        merge: how two trackers' rows of one input combine: ``"sum"`` or ``"max"``.
        lo: smallest allowed value (loaded states are checked against it).
    """

    name: str
    per_strategy: bool
    merge: Merge
    lo: int = 0


class InputMetric:
    """A metric kept per input, its state declared once (see the module docstring).

    Subclasses set ``name`` (the key: ``seffi/<name>``) and write ``setup`` (calls to `add_state`),
    ``update`` and ``compute``.
    """

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self.specs: dict[str, StateSpec] = {}
        self.n_inputs, self.n_columns = 0, 0
        #: Loaded from a state that did not hold this metric: it counts only samples recorded since.
        self.partial = False
        self.setup()

    # -- what a metric writes -----------------------------------------------------------------------

    def setup(self) -> None:
        """Declare the state (`add_state` calls) and set up any cache derived from it."""
        raise NotImplementedError

    def update(self, codes: np.ndarray, hits: np.ndarray, valid: np.ndarray) -> None:
        """Fold recorded samples in.

        Args:
            codes: int array, shape (N,): each sample's input code (a row of the state).
            hits: bool array, shape (N, C): the strategies each sample matched (the tracker's columns).
            valid: bool array, shape (N,): the sample is a correct solution.
        """
        raise NotImplementedError

    def compute(
        self, strata: np.ndarray, law_of: Callable[[int], Mapping[str, float]] | None = None
    ) -> Estimate:
        """The estimate over the inputs recorded.

        Args:
            strata: int array, shape (U,): the task stratum of each input code.
            law_of: ``law_of(code)``: the base sampler's probability that a sample of that input
                matches each strategy id, for the iid figure beside the policy's; None: no figure.
        """
        raise NotImplementedError

    # -- derived from the declaration --------------------------------------------------------------

    def add_state(self, name: str, *, per_strategy: bool, merge: Merge = "sum", lo: int = 0) -> None:
        """Declare an int64 array with a row per input (and a column per strategy if ``per_strategy``)."""
        if merge not in ("sum", "max"):
            raise ValueError(f"merge must be 'sum' or 'max', got {merge!r}")
        self.specs[name] = StateSpec(name, per_strategy, merge, lo)
        setattr(self, name, self._empty(self.specs[name], self.n_inputs, self.n_columns))

    @staticmethod
    def _empty(spec: StateSpec, rows: int, cols: int) -> np.ndarray:
        shape = (rows, cols) if spec.per_strategy else (rows,)
        return np.full(shape, spec.lo, dtype=np.int64)

    def grow(self, n_inputs: int, n_columns: int) -> None:
        """Room for ``n_inputs`` input codes and ``n_columns`` strategy columns (new cells at ``lo``)."""
        if n_inputs <= self.n_inputs and n_columns <= self.n_columns:
            return
        rows, cols = max(n_inputs, self.n_inputs), max(n_columns, self.n_columns)
        for spec in self.specs.values():  # rows double (kept beyond n_inputs at lo); the integer type stays
            old = getattr(self, spec.name)
            if old.shape[0] >= rows and (not spec.per_strategy or old.shape[1] == cols):
                continue
            cap = max(rows, 2 * old.shape[0]) if rows > old.shape[0] else old.shape[0]
            new = np.full((cap, cols) if spec.per_strategy else (cap,), spec.lo, dtype=old.dtype)
            new[tuple(slice(0, n) for n in old.shape)] = old
            setattr(self, spec.name, new)
        self.n_inputs, self.n_columns = rows, cols

    def rows(self, name: str) -> np.ndarray:
        """The declared state ``name``, one row per input code seen (a view)."""
        return getattr(self, name)[: self.n_inputs]

    def state_dict(self) -> dict[str, Any] | None:
        """JSON-safe state, a row per input code (and ``partial``); None: partial with nothing recorded.

        A state that did not hold this metric writes back without it, so it stays what it was.
        """
        out: dict[str, Any] = {s.name: self.rows(s.name).tolist() for s in self.specs.values()}
        if not self.partial:
            return out
        empty = all((self.rows(s.name) == s.lo).all() for s in self.specs.values())
        return None if empty else {**out, "partial": True}

    def taken(self, order: np.ndarray) -> InputMetric:
        """A copy whose row i is this one's row ``order[i]`` (int array, shape (U,))."""
        out = type(self)()
        out.grow(order.size, self.n_columns)
        out.partial = self.partial
        have = order < self.n_inputs
        for spec in self.specs.values():
            out.rows(spec.name)[have] = getattr(self, spec.name)[order[have]]
        return out


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

"""The tracker's recorded state, declared once: every part with its type, bounds and merge rule.

`STATE` lists each part of a ``CoverageTracker``'s state — its settings, the per-input and
per-run arrays, the open runs, the barcode rows and the counters — with the rule by which two
trackers' parts merge and the bounds a stored value must respect. Everything else follows from it:
the empty state (``COUNTERS``, ``RUN_TABLE_FIELDS``), `seffi.coverage.state_check.check` (a
stored state bounded by its own declaration before anything is allocated) and the operations of
`seffi.coverage.state_io` (``dump`` / ``to_json`` for ``state_dict``, ``load``, ``merge``,
``shift_streams``). The stored layout is
format 2 (``seffi.coverage.tracker/2``: integer arrays, inputs and runs in sorted key order, first-hit
rows packed one character per cell when every index is below 36); format-1 states and format-1
monitor states are converted by `seffi.coverage.state_v1`. Per-input sums are never stored:
they are derived from the runs when a state is loaded, so a state holds each run once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    pass

__all__ = [
    "MAX_BUDGET",
    "MAX_LATENTS",
    "MAX_STRATEGIES",
    "MAX_SUM_CELLS",
    "STATE",
    "STATE_FORMAT",
    "Part",
]

STATE_FORMAT = "seffi.coverage.tracker/2"
#: Caps on the sizes a state (or a tracker) may declare: each sizes an allocation.
MAX_BUDGET = 2**16  # K: samples per run (the per-input sums hold K values per statistic)
MAX_LATENTS = 2**16  # Z: latent codes (a column per code in every run)
MAX_STRATEGIES = 2**20  # M: strategies (a column per strategy in every run)
#: Inputs with a complete run x K: the per-input sums a loaded state needs (7 integers a cell).
MAX_SUM_CELLS = 2**28
_BIG = 2**53  # counts, streams and indices stay below this (exact as JSON numbers)

Where = Literal["setting", "counter", "inputs", "runs", "open_runs", "barcode"]
Bound = int | Callable[[Mapping[str, Any]], int]


@dataclass(frozen=True)
class Part:
    """One part of the state.

    Attributes:
        name: key in the state; ``inputs.*`` / ``runs.*`` are columns of those tables.
        where: which part of the state it belongs to.
        merge: how two trackers' values combine (see `MERGE_RULES`).
        doc: one line saying what it is.
        kind: "int", "bool", "str" or "ids" (a list of str).
        null: the value may be null (settings).
        lo: smallest allowed integer.
        hi: exclusive upper bound: an int, or a function of the (checked) settings.
        width: for a matrix column, the setting whose value is its width ("columns": their count).
        fill: value of a fresh row (the empty state).
        stream: holds stream numbers (moved by `shift_streams`).
        when: the part is present only when this holds of the settings.
    """

    name: str
    where: Where
    merge: str
    doc: str
    kind: Literal["int", "bool", "str", "ids"] = "int"
    null: bool = False
    lo: int = 0
    hi: Bound = _BIG
    width: str | None = None
    fill: int = 0
    stream: bool = False
    when: Callable[[Mapping[str, Any]], bool] | None = None

    @property
    def key(self) -> str:
        """The name inside its table (``runs.first_hit`` -> ``first_hit``)."""
        return self.name.split(".", 1)[-1]


#: What each merge rule means.
MERGE_RULES: dict[str, str] = {
    "agree": "must be equal in both trackers",
    "keep": "the value of the tracker merged into (barcode bounds: the other's rows are cut to fit)",
    "union": "the tracker merged into's, then the other's new ones in its order",
    "key": "a key column: inputs are a union by (task, input_id), runs a disjoint union by (input, stream)",
    "max": "the larger (and above every stream a merged run uses)",
    "disjoint": "a run in both trackers is an error (give each worker its own streams)",
    "open": "the tracker merged into's open runs stay open; the other's are closed",
    "lowest_stream": "per input the row of its lowest stream, for the barcode_rows smallest (task, input_id)",
    "sum": "the sum",
    "or": "true if true in either",
}


def _m_hi(s: Mapping[str, Any]) -> int:
    return int(s["num_strategies"] or MAX_STRATEGIES) + 1


def _n_hi(s: Mapping[str, Any]) -> int:
    return int(s["budget"]) + 1 if s["budget"] is not None else _BIG


def _u_hi(s: Mapping[str, Any]) -> int:
    return max(len(s["inputs"]["input_id"]), 1)


#: Every part of a tracker's state, in storage order.
STATE: tuple[Part, ...] = (
    Part("strategies", "setting", "agree", "declared strategy ids (the columns), or null", "ids", True),
    Part("num_strategies", "setting", "agree", "declared count M", null=True, lo=1, hi=MAX_STRATEGIES + 1),
    Part("task", "setting", "keep", "task name (a bootstrap stratum)", "str"),
    Part("budget", "setting", "agree", "K: samples per run kept", null=True, lo=1, hi=MAX_BUDGET + 1),
    Part("barcode_rows", "setting", "keep", "inputs with a barcode row", hi=2**31 + 1),
    Part("barcode_cols", "setting", "keep", "samples per barcode row", hi=MAX_BUDGET + 1),
    Part("num_latents", "setting", "agree", "Z: latent codes recorded per run", hi=MAX_LATENTS + 1),
    Part("stream_offset", "setting", "keep", "first stream number of record()'s runs", stream=True),
    Part("columns", "setting", "union", "strategy id of each column of the first-hit rows", "ids"),
    Part("inputs.task", "inputs", "key", "task of each input", "str"),
    Part("inputs.input_id", "inputs", "key", "id of each input", "str"),
    Part("inputs.m", "inputs", "agree", "M_x: the input's strategy count", lo=1, hi=_m_hi),
    Part("inputs.next_stream", "inputs", "max", "next stream record() opens for the input (local)"),
    Part("runs.input", "runs", "key", "the run's input (index into inputs)", hi=_u_hi),
    Part("runs.stream", "runs", "key", "the run's stream", stream=True),
    Part(
        "runs.first_hit",
        "runs",
        "disjoint",
        "first sample matching each column",
        lo=-1,
        width="columns",
        fill=-1,
    ),
    Part(
        "runs.first_valid_hit",
        "runs",
        "disjoint",
        "first correct sample matching each column",
        lo=-1,
        width="columns",
        fill=-1,
    ),
    Part("runs.n", "runs", "disjoint", "samples in the run", lo=1, hi=_n_hi),
    Part("runs.n_valid", "runs", "disjoint", "correct samples in the run"),
    Part(
        "runs.first_valid", "runs", "disjoint", "index of the first correct sample, -1 none", lo=-1, fill=-1
    ),
    Part(
        "runs.latent_first_hit",
        "runs",
        "disjoint",
        "first sample with each latent code",
        lo=-1,
        width="num_latents",
        fill=-1,
        when=lambda s: s["num_latents"] > 0,
    ),
    Part("open_runs", "open_runs", "open", "runs record() continues: (run, env_index, count, indices)"),
    Part("barcode", "barcode", "lowest_stream", "barcode rows: (input, stream, cells, new)"),
    Part("samples", "counter", "sum", "samples recorded (in runs)"),
    Part("valid", "counter", "sum", "correct samples recorded"),
    Part("skipped", "counter", "sum", "samples beyond their run's budget (not recorded)"),
    Part("has_latent", "counter", "or", "some sample carried a latent code", "bool"),
)
BY_NAME = {p.name: p for p in STATE}
SETTINGS = tuple(p for p in STATE if p.where == "setting")
COUNTERS = tuple(p for p in STATE if p.where == "counter")
INPUT_FIELDS = tuple(p for p in STATE if p.where == "inputs")
RUN_FIELDS = tuple(p for p in STATE if p.where == "runs")
#: Per-run fields kept in the tracker's run table (the keys live in its run assigner).
RUN_TABLE_FIELDS = tuple(p for p in RUN_FIELDS if p.merge != "key")
OPEN_FIELDS = ("run", "env_index", "count", "sample_index", "run_index")


def present(part: Part, s: Mapping[str, Any]) -> bool:
    """Whether ``part`` is part of a state with settings ``s``."""
    return part.when is None or bool(part.when(s))


def width(part: Part, s: Mapping[str, Any]) -> int | None:
    """The width of a matrix column under settings ``s`` (None for a vector)."""
    if part.width is None:
        return None
    return len(s["columns"]) if part.width == "columns" else int(s[part.width])


def _hi(part: Part, s: Mapping[str, Any]) -> int:
    return part.hi(s) if callable(part.hi) else part.hi


# -- values -----------------------------------------------------------------------------------------------


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not lo <= value < hi:
        raise ValueError(f"{where} must be an int in [{lo}, {hi}), got {_short(value)}")
    return int(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def pack_rows(matrix: np.ndarray) -> list[str] | list[list[int]]:
    """First-hit rows, compact: one character per cell ("-" = never, else a base-36 digit).

    Used when every index is below 36 (any budget K <= 36), else lists of ints: ~3x smaller states.
    """
    if matrix.size and matrix.max() >= len(_DIGITS):
        return matrix.tolist()
    table = np.array(["-", *_DIGITS])
    return ["".join(row) for row in table[matrix + 1].tolist()]

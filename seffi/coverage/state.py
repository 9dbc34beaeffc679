"""The tracker's state, declared once, and every operation on it derived from the declaration.

`STATE` lists each part of a ``CoverageTracker``'s state (its settings, the inputs and runs tables,
the open runs, the barcode rows and the counters) with its bounds and the rule by which two
trackers' parts merge. From it follow `check` (a stored state bounded by its own declaration, the
sizes that allocate memory capped before anything is allocated, every problem one ValueError
line), the stored layout `to_json` (format ``seffi.coverage.tracker/2``: integer columns, inputs and
runs in sorted key order, first-hit rows packed one base-36 character per cell when every index is
below 36), `merge` and `shift_streams`; `dump` and `load` move a tracker in and out of the checked
form. Per-input metrics (`seffi.coverage.input_metrics`) are checked and merged from their own
declarations. Older formats are converted in `seffi.coverage.state_v1`. Per-input sums are never
stored: they are derived from the runs at load, so a state holds each run once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi.coverage import state_v1
from seffi.coverage.input_metrics import InputMetric, registered

if TYPE_CHECKING:
    from seffi.coverage.tracker import CoverageTracker

__all__ = ["MAX_BUDGET", "MAX_LATENTS", "MAX_STRATEGIES", "STATE", "STATE_FORMAT", "Part", "check"]

STATE_FORMAT = state_v1.STATE_FORMAT
#: Caps on the sizes a state (or a tracker) may declare: each sizes an allocation.
MAX_BUDGET = 2**16  # K: samples per run
MAX_LATENTS = 2**16  # Z: latent codes (a column per code in every run)
MAX_STRATEGIES = 2**20  # M: strategies (a column per strategy in every run)
#: Inputs with a complete run x K: the per-input sums a loaded state needs (7 integers a cell).
MAX_SUM_CELLS = 2**28
_BIG = 2**53  # counts, streams and indices stay below this (exact as JSON numbers)
Bound = int | Callable[[Mapping[str, Any]], int]


@dataclass(frozen=True)
class Part:
    """One part of the state.

    Attributes:
        name: key in the state; ``inputs.*`` / ``runs.*`` are columns of those tables.
        merge: how two trackers' values combine: "agree" (must be equal), "keep" (the tracker merged
            into's), "union" (its ids then the other's new ones), "key" (inputs: a union by (task,
            input_id); runs: a disjoint union by (input, stream)), "disjoint" (a run in both is an
            error), "open" (only the tracker merged into's runs stay open), "lowest_stream" (per input
            the row of its lowest stream, for the ``barcode_rows`` smallest keys), "sum", "or".
        doc: what it is.
        kind: "int", "bool", "str", "ids" (a list of str) or "list" (a list of ints per record).
        null: the value may be null.
        lo: smallest allowed integer.
        hi: exclusive upper bound: an int, or a function of the (checked) settings and tables.
        width: for a matrix column, the setting whose value is its width ("columns": their count); a
            matrix whose width setting is 0 is not stored.
        fill: value of a fresh row or counter.
        stream: holds stream numbers (moved by `shift_streams`).
        fields: the fields of each record (a part that is a list of records).
        where: "setting", "counter", "records", or the table holding it.
        wide: a count the budget does not bound (held as int64 in the run table).
    """

    name: str
    merge: str
    doc: str
    kind: str = "int"
    null: bool = False
    lo: int = 0
    hi: Bound = _BIG
    width: str | None = None
    fill: int = 0
    stream: bool = False
    fields: tuple[Part, ...] = ()
    where: str = ""
    wide: bool = False

    @property
    def key(self) -> str:
        """The name inside its table (``runs.first_hit`` -> ``first_hit``)."""
        return self.name.split(".", 1)[-1]


def _rows(table: str) -> Callable[[Mapping[str, Any]], int]:
    return lambda s: max(len(s[table]["input_id" if table == "inputs" else "n"]), 1)


def _in(where: str, *parts: Part) -> tuple[Part, ...]:
    return tuple(
        replace(p, name=f"{where}.{p.name}" if where in TABLES else p.name, where=where) for p in parts
    )


TABLES = ("inputs", "runs", "open_runs", "barcode")
_M_HI = lambda s: int(s["num_strategies"] or MAX_STRATEGIES) + 1  # noqa: E731
_N_HI = lambda s: int(s["budget"] or _BIG - 1) + 1  # noqa: E731
_HIT = {"lo": -1, "width": "columns", "fill": -1}
SETTINGS = _in(
    "setting",
    Part("strategies", "agree", "declared strategy ids (the columns), or null", "ids", True),
    Part("num_strategies", "agree", "declared count M", null=True, lo=1, hi=MAX_STRATEGIES + 1),
    Part("task", "keep", "task name (a bootstrap stratum)", "str"),
    Part("budget", "agree", "K: samples per run kept", null=True, lo=1, hi=MAX_BUDGET + 1),
    Part("barcode_rows", "keep", "inputs with a barcode row", hi=2**31 + 1),
    Part("barcode_cols", "keep", "samples per barcode row", hi=MAX_BUDGET + 1),
    Part("num_latents", "agree", "Z: latent codes recorded per run", hi=MAX_LATENTS + 1),
    Part("stream_offset", "keep", "first stream number of record()'s runs", stream=True),
    Part("columns", "union", "strategy id of each column of the first-hit rows", "ids"),
)
INPUT_FIELDS = _in(
    "inputs",
    Part("task", "key", "task of each input", "str"),
    Part("input_id", "key", "id of each input", "str"),
    Part("m", "agree", "M_x", lo=1, hi=_M_HI),
    Part("next_stream", "keep", "next stream record() opens for the input"),
)
RUN_FIELDS = _in(
    "runs",
    Part("input", "key", "the run's input (index into inputs)", hi=_rows("inputs")),
    Part("stream", "key", "the run's stream", stream=True),
    Part("first_hit", "disjoint", "first sample matching each column", **_HIT),
    Part("first_valid_hit", "disjoint", "first correct sample matching each column", **_HIT),
    Part("n", "disjoint", "samples", lo=1, hi=_N_HI),
    Part("n_valid", "disjoint", "correct samples"),
    Part("first_valid", "disjoint", "first correct sample, -1 none", lo=-1, fill=-1),
    Part(
        "latent_first_hit",
        "disjoint",
        "first sample with each latent code",
        **_HIT | {"width": "num_latents"},
    ),
    Part("beyond", "disjoint", "samples beyond the budget (counted, not recorded)", wide=True),
)
OPEN_RUNS = Part(
    "open_runs",
    "open",
    "runs record() continues",
    where="records",
    fields=_in(
        "open_runs",
        Part("run", "", "the run (index into runs)", hi=lambda s: len(s["runs"]["n"])),
        Part("env_index", "", "its env row"),
        Part("count", "", "samples so far (also those beyond the budget)"),
        Part("sample_index", "", "last sample_index reported", lo=-1),
        Part("run_index", "", "last run_index reported", lo=-1),
    ),
)
BARCODE = Part(
    "barcode",
    "lowest_stream",
    "barcode rows",
    where="records",
    fields=_in(
        "barcode",
        Part("input", "", "the row's input", hi=_rows("inputs")),
        Part("stream", "", "its run's stream", stream=True),
        Part("cells", "", "strategy column per sample", "list", lo=-1, hi=lambda s: len(s["columns"])),
        Part("new", "", "the sample added a strategy", "list", hi=2),
    ),
)
COUNTERS = _in(
    "counter",
    Part("samples", "sum", "samples recorded (in runs)"),
    Part("valid", "sum", "correct samples recorded"),
    Part("skipped", "sum", "samples beyond their run's budget (not recorded): the runs' beyond"),
    Part("has_latent", "or", "some sample carried a latent code", "bool"),
)
#: Every part of a tracker's state, in storage order.
STATE: tuple[Part, ...] = (*SETTINGS, *INPUT_FIELDS, *RUN_FIELDS, OPEN_RUNS, BARCODE, *COUNTERS)
#: Per-run fields kept in the tracker's run table (the keys live in its run assigner).
RUN_TABLE_FIELDS = tuple(p for p in RUN_FIELDS if p.merge != "key")


def _hi(p: Part, s: Mapping[str, Any]) -> int:
    return p.hi(s) if callable(p.hi) else p.hi


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not lo <= value < hi:
        text = repr(value)
        raise ValueError(
            f"{where} must be an int in [{lo}, {hi}), got {text[:57] + '...' * (len(text) > 60)}"
        )
    return int(value)


# -- the stored layout ------------------------------------------------------------------------------------

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_UNPACK = np.full(256, -2, dtype=np.int64)  # byte -> cell (-2: not a packed character)
_UNPACK[ord("-")] = -1
_UNPACK[[ord(c) for c in _DIGITS]] = np.arange(len(_DIGITS))


def _pack(matrix: np.ndarray) -> list[str] | list[list[int]]:
    """Rows packed one character per cell ("-" never, else base 36) when all fit, else lists of ints."""
    if matrix.size and matrix.max() >= len(_DIGITS):
        return matrix.tolist()
    return ["".join(row) for row in np.array(["-", *_DIGITS])[matrix + 1].tolist()]


def _column(value: Any, where: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """An int64 array of ``shape`` in [lo, hi) from an int array, a list, lists of ints or packed rows."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu":
            raise ValueError(f"{where} must hold ints")
        arr = value.astype(np.int64, copy=False)
    elif not isinstance(value, list):
        raise ValueError(f"{where} must be a list")
    elif len(shape) == 2 and len(value) != shape[0]:
        raise ValueError(f"{where} must have {shape[0]} rows, got {len(value)}")
    elif len(shape) == 2 and value and set(map(type, value)) == {str}:
        if set(map(len, value)) != {shape[1]} or not all(map(str.isascii, value)):
            raise ValueError(f"{where} must be {shape[0]} rows of {shape[1]} cells")
        arr = _UNPACK[np.frombuffer("".join(value).encode("ascii"), dtype=np.uint8)].reshape(shape)
        if (arr < -1).any():
            raise ValueError(f"{where} holds a bad packed row")
    else:
        if len(shape) == 2 and not (set(map(type, value)) <= {list} and set(map(len, value)) <= {shape[1]}):
            raise ValueError(f"{where} must be {shape[0]} rows of {shape[1]} cells")
        flat = [v for row in value for v in row] if len(shape) == 2 else value
        if not set(map(type, flat)) <= {int}:
            raise ValueError(f"{where} must hold ints")
        arr = np.array(flat, dtype=np.int64).reshape(shape)
    if arr.shape != shape:
        raise ValueError(f"{where} must have shape {shape}, got {arr.shape}")
    if arr.size and (arr.min() < lo or arr.max() >= hi):
        raise ValueError(f"{where} must hold ints in [{lo}, {hi})")
    return arr


def to_json(s: Mapping[str, Any]) -> dict[str, Any]:
    """A checked-form state as JSON-safe data (the stored layout)."""
    out: dict[str, Any] = {"format": STATE_FORMAT, "inputs": {}, "runs": {}}
    for p in STATE:
        if p.name == "runs.beyond" and not np.any(s["runs"][p.key]):
            continue  # stored only when a run has samples beyond the budget
        if p.where in ("inputs", "runs") and p.key in s[p.where]:
            v = s[p.where][p.key]
            v = list(v) if p.kind == "str" else np.asarray(v, dtype=np.int64)
            out[p.where][p.key] = _pack(v) if p.width else v if p.kind == "str" else v.tolist()
        elif p.where == "records":
            out[p.name] = [dict(r) for r in s[p.name]]
        elif p.where in ("setting", "counter"):
            out[p.name] = s[p.name]
    metrics = {name: m.state_dict() for name, m in s["metrics"].items()}
    if any(v is not None for v in metrics.values()):  # a state without metrics stays without them
        out["metrics"] = {name: v for name, v in metrics.items() if v is not None}
    return out


# -- checking ---------------------------------------------------------------------------------------------


def check(state: Any) -> dict[str, Any]:
    """A validated state (format 2; older formats converted), every value bounded by its declaration.

    Returns:
        The checked form: table columns as int arrays (packed rows unpacked), metrics as
        `InputMetric` objects; `check`, `load`, `merge` and `to_json` accept it.

    Raises:
        ValueError: one line, "corrupted CoverageTracker state: <the first problem>" (or "not a
            seffi CoverageTracker state" for another format).
    """
    state = state_v1.upgrade(state)
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"not a seffi CoverageTracker state (expected format {STATE_FORMAT!r})")
    try:
        return _checked(state)
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
        raise ValueError(f"corrupted CoverageTracker state: {type(exc).__name__}: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"corrupted CoverageTracker state: {exc}") from exc


def setting(p: Part, value: Any, s: Mapping[str, Any]) -> Any:
    """A setting or counter checked against its declaration (bounds from the settings ``s``)."""
    if value is None and p.null:
        return None
    if p.kind == "ids":
        if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
            raise ValueError(f"{p.name} must be a list of str" + " or null" * p.null)
        return list(value)
    if p.kind in ("str", "bool"):
        if not isinstance(value, str if p.kind == "str" else bool):
            raise ValueError(f"{p.name} must be a {p.kind}")
        return value
    return _int(value, p.name, p.lo, _hi(p, s))


def _checked(state: Mapping[str, Any]) -> dict[str, Any]:
    """Settings first (they bound the rest), then tables, records, counters, metrics, invariants."""
    s: dict[str, Any] = {"format": STATE_FORMAT}
    for p in SETTINGS:
        s[p.name] = setting(p, state[p.name], s)
    cols = s["columns"]
    if len(set(cols)) != len(cols) or len(cols) > MAX_STRATEGIES:
        raise ValueError(f"columns must be at most {MAX_STRATEGIES} unique strategy ids")
    if s["strategies"] is not None and cols != s["strategies"]:
        raise ValueError("columns must be the declared strategies")
    if s["strategies"] is not None and s["num_strategies"] != len(cols):
        raise ValueError(f"num_strategies={s['num_strategies']} but {len(cols)} strategies are declared")
    tasks, ids = state["inputs"]["task"], state["inputs"]["input_id"]
    if not isinstance(tasks, list) or not isinstance(ids, list) or len(tasks) != len(ids):
        raise ValueError("inputs.task and inputs.input_id must be lists of one length")
    if not set(map(type, tasks)) | set(map(type, ids)) <= {str}:
        raise ValueError("input tasks and ids must be strings")
    if any(a >= b for a, b in itertools.pairwise(zip(tasks, ids, strict=True))):
        raise ValueError("inputs must be unique and sorted")
    s["inputs"], s["runs"] = {"task": list(tasks), "input_id": list(ids)}, {}
    rows = {"inputs": len(ids), "runs": len(state["runs"]["input"])}
    for p in INPUT_FIELDS + RUN_FIELDS:
        if p.kind == "str":
            continue
        if p.width not in (None, "columns") and not s[p.width]:
            if p.key in state[p.where]:
                raise ValueError(f"{p.name} is present but its declaration says it is not")
            continue
        w = None if p.width is None else len(cols) if p.width == "columns" else s[p.width]
        shape = (rows[p.where],) if w is None else (rows[p.where], w)
        if p.name == "runs.beyond" and p.key not in state["runs"]:
            s["runs"]["beyond"] = _beyond_of_open_runs(state, rows["runs"])
            continue
        s[p.where][p.key] = _column(state[p.where][p.key], p.name, shape, p.lo, _hi(p, s))
    for p in COUNTERS:
        s[p.name] = setting(p, state[p.name], s)
    for p in (OPEN_RUNS, BARCODE):
        if not isinstance(state[p.name], list):
            raise ValueError(f"{p.name} must be a list")
        s[p.name] = [{f.key: _field(f, row[f.key], s) for f in p.fields} for row in state[p.name]]
    s["metrics"] = _metrics(state.get("metrics", {}), s)
    _invariants(s)
    return s


def _beyond_of_open_runs(state: Mapping[str, Any], n_runs: int) -> np.ndarray:
    """``runs.beyond`` of a state stored without it: the open runs' samples past their run's count.

    A closed run's samples beyond the budget are not known from such a state: `_invariants` then
    refuses a ``skipped`` larger than the open runs account for.
    """
    beyond = np.zeros(n_runs, dtype=np.int64)
    runs_n = state["runs"]["n"]
    for o in state["open_runs"] if isinstance(state["open_runs"], list) else ():
        run, count = o.get("run"), o.get("count")
        if isinstance(run, int) and isinstance(count, int) and 0 <= run < n_runs and isinstance(runs_n, list):
            beyond[run] = max(count - int(runs_n[run]), 0)
    return beyond


def _field(f: Part, value: Any, s: Mapping[str, Any]) -> Any:
    if f.kind != "list":
        return _int(value, f.name, f.lo, _hi(f, s))
    return _column(value, f.name, (len(value),) if isinstance(value, list) else (), f.lo, _hi(f, s)).tolist()


def _invariants(s: dict[str, Any]) -> None:
    """The rules tying parts together (each a ValueError naming it)."""
    r, m = s["runs"], s["inputs"]["m"]
    unit, n, nv, fv, fh, fvh = (
        r[k] for k in ("input", "n", "n_valid", "first_valid", "first_hit", "first_valid_hit")
    )
    if unit.size and np.unique(unit * (_BIG + 1) + r["stream"]).size != unit.size:
        raise ValueError("runs must be unique per (input, stream)")
    if (nv > n).any() or (fv >= n).any() or ((fv < 0) != (nv == 0)).any():
        raise ValueError("runs have inconsistent n / n_valid / first_valid")
    if (fh >= n[:, None]).any() or ((fvh >= 0) & ((fh < 0) | (fvh < fh) | (fvh >= n[:, None]))).any():
        raise ValueError("runs have first hits outside their samples")
    if unit.size and ((fh >= 0).sum(axis=1) > m[unit]).any():
        raise ValueError("a run matched more distinct strategies than its input's M_x")
    lat = r.get("latent_first_hit")
    if lat is not None and (lat >= n[:, None]).any():
        raise ValueError("runs have latent first hits outside their samples")
    if s["has_latent"] != bool(lat is not None and (lat >= 0).any()):
        raise ValueError("has_latent must say whether any run holds a latent code")
    if s["samples"] != int(n.sum()) or s["valid"] != int(nv.sum()):
        raise ValueError(
            f"samples={s['samples']} and valid={s['valid']} must be the runs' {int(n.sum())} samples and "
            f"{int(nv.sum())} correct ones"
        )
    if s["budget"] is not None and np.unique(unit[n >= s["budget"]]).size * s["budget"] > MAX_SUM_CELLS:
        raise ValueError(
            f"inputs with a complete run x budget exceed the cap of {MAX_SUM_CELLS} per-input sums"
        )
    beyond = r["beyond"]
    if ((beyond > 0) & (n != (s["budget"] or 0))).any():
        raise ValueError("a run has samples beyond the budget but fewer than budget samples")
    if s["skipped"] != int(beyond.sum()):
        raise ValueError(
            f"skipped={s['skipped']} must be the runs' {int(beyond.sum())} samples beyond the budget"
        )
    pairs = {(int(unit[o["run"]]), o["env_index"]) for o in s["open_runs"]}
    for o in s["open_runs"]:  # an open run counts every sample, its run only the first K
        if o["count"] != n[o["run"]] + beyond[o["run"]]:
            raise ValueError("an open run does not match its run (count = n + beyond)")
    if len(pairs) != len(s["open_runs"]):
        raise ValueError("two open runs share an (input, env_index)")
    bars = s["barcode"]
    if len(bars) > s["barcode_rows"]:
        raise ValueError(f"{len(bars)} barcode rows but barcode_rows={s['barcode_rows']}")
    if any(len(b["cells"]) != len(b["new"]) or len(b["cells"]) > s["barcode_cols"] for b in bars):
        raise ValueError("a barcode row needs cells and new flags of one length, at most barcode_cols")
    if len({b["input"] for b in bars}) != len(bars):
        raise ValueError("barcode rows must be one per input")


def _metrics(value: Any, s: Mapping[str, Any]) -> dict[str, InputMetric]:
    """Each registered metric's state checked against its declaration (`InputMetric.add_state`).

    A state without a metric loads it empty, marked partial (it counts the samples recorded after).
    """
    if not isinstance(value, Mapping):
        raise ValueError("metrics must be an object")
    U, C = len(s["inputs"]["input_id"]), len(s["columns"])
    out = {}
    for cls in registered():
        got = value.get(cls.name)
        if isinstance(got, InputMetric):  # a checked state (a merge's): taken as it is
            got.grow(U, C)
            out[cls.name] = got
            continue
        metric = out[cls.name] = cls()
        metric.grow(U, C)
        metric.partial = got is None
        if got is None:
            continue
        if not isinstance(got, Mapping) or not isinstance(got.get("partial", False), bool):
            raise ValueError(f"metrics.{cls.name} must be an object (partial a bool)")
        metric.partial = got.get("partial", False)
        for spec in metric.specs.values():
            shape = (U, C) if spec.per_strategy else (U,)
            where = f"metrics.{cls.name}.{spec.name}"
            metric.rows(spec.name)[...] = _column(got[spec.name], where, shape, spec.lo, _BIG)
    return out


# -- a tracker in and out ---------------------------------------------------------------------------------


def dump(t: CoverageTracker) -> dict[str, Any]:
    """Tracker ``t``'s state in checked form."""
    S, C = t.assigner.n_slots, len(t.columns)
    s: dict[str, Any] = {"format": STATE_FORMAT, **{p.name: getattr(t, p.name) for p in SETTINGS + COUNTERS}}
    s["strategies"], s["columns"] = None if t.strategies is None else list(t.strategies), list(t.columns)
    s["inputs"] = {"task": [k[0] for k in t.keys], "input_id": [k[1] for k in t.keys], "m": t.m}
    s["inputs"]["next_stream"] = t.assigner.next_stream[: len(t.keys)]
    s["runs"] = {"input": t.assigner.slot_input[:S], "stream": t.assigner.slot_stream[:S]}
    for p in t.runs.fields:
        v = getattr(t.runs, p.key)[:S]
        s["runs"][p.key] = v[:, :C] if p.width == "columns" else v
    names = [f.key for f in OPEN_RUNS.fields]
    s["open_runs"] = [
        dict(zip(names, (sl, env, c, si, ri), strict=True))
        for _, env, sl, c, si, ri in t.assigner.open_runs()
    ]
    s["barcode"] = [
        {"input": c, "stream": st, "cells": cells, "new": [int(b) for b in new]}
        for c, st, cells, new in t.bar.rows_held()
    ]
    s["metrics"] = {m.name: m for m in t.metrics}
    return _canonical(s)


def _canonical(s: dict[str, Any]) -> dict[str, Any]:
    """``s`` with its inputs sorted by key and its runs by (input, stream), one input's rows combined.

    The rows of one (task, input_id) combine by their merge rules, the first row's value first.

    Raises:
        ValueError: two rows of one input disagree on an "agree" part, or a run is in two rows.
    """
    keys = list(zip(s["inputs"]["task"], s["inputs"]["input_id"], strict=True))
    uniq = sorted(set(keys))
    index = {k: i for i, k in enumerate(uniq)}
    new = np.array([index[k] for k in keys], dtype=np.int64)  # row -> its key's row
    first = np.unique(new, return_index=True)[1]  # the first row of each key
    out = {**s, "inputs": {"task": [k[0] for k in uniq], "input_id": [k[1] for k in uniq]}}
    for p in INPUT_FIELDS[2:]:
        v = np.asarray(s["inputs"][p.key], dtype=np.int64)
        out["inputs"][p.key] = v[first]
        clash = np.flatnonzero(v[first][new] != v) if p.merge == "agree" else ()
        if len(clash):
            j = int(clash[0])
            raise ValueError(
                f"cannot merge: input {keys[j][1]!r} has {p.doc} {int(v[first][new[j]])} vs {int(v[j])}"
            )
    unit = new[np.asarray(s["runs"]["input"], dtype=np.int64)]
    stream = np.asarray(s["runs"]["stream"], dtype=np.int64)
    pair, counts = np.unique(unit * (_BIG + 1) + stream, return_counts=True)
    if (counts > 1).any():
        clash = [(*uniq[int(p // (_BIG + 1))], int(p % (_BIG + 1))) for p in pair[counts > 1][:3]]
        raise ValueError(f"cannot merge: both trackers hold run(s) {clash} (task, input_id, stream)")
    order = np.lexsort((stream, unit))
    pos = np.empty(order.size, dtype=np.int64)
    pos[order] = np.arange(order.size)
    out["runs"] = {k: (unit if k == "input" else np.asarray(v))[order] for k, v in s["runs"].items()}
    out["open_runs"] = sorted(
        ({**r, "run": int(pos[r["run"]])} for r in s["open_runs"]), key=lambda r: r["run"]
    )
    bars: dict[int, dict[str, Any]] = {}
    for row in s["barcode"]:  # per input the row of its lowest stream, for the barcode_rows smallest
        code, cut = int(new[row["input"]]), s["barcode_cols"]
        if code not in bars or row["stream"] < bars[code]["stream"]:
            bars[code] = {**row, "input": code, "cells": row["cells"][:cut], "new": row["new"][:cut]}
    out["barcode"] = [bars[c] for c in sorted(bars)[: s["barcode_rows"]]]
    out["metrics"] = {}
    for name, m in s["metrics"].items():
        m.grow(new.size, m.n_columns)  # rows for inputs it has not seen a sample of yet
        got = out["metrics"][name] = type(m)()
        got.grow(len(uniq), m.n_columns)
        got.partial = m.partial
        rest = np.setdiff1d(np.arange(new.size), first)
        for spec in m.specs.values():  # the first row of each key, then the others by the merge rule
            v = m.rows(spec.name)
            got.rows(spec.name)[...] = v[first]
            {"sum": np.add.at, "max": np.maximum.at}[spec.merge](got.rows(spec.name), new[rest], v[rest])
    return out


def load(cls: type[CoverageTracker], state: Any, *, barcode_rows: int | None = None) -> CoverageTracker:
    """A new tracker holding ``state`` (checked first; its open runs stay open).

    Args:
        cls: the tracker class.
        state: a stored or checked state.
        barcode_rows: keep this many barcode rows (the smallest keys) instead of the state's.
    """
    s = check(state)
    if barcode_rows is not None:
        rows = _int(barcode_rows, "barcode_rows", 0, 2**31 + 1)
        s = {**s, "barcode_rows": rows, "barcode": sorted(s["barcode"], key=lambda b: b["input"])[:rows]}
    spec = s["strategies"] if s["strategies"] is not None else s["num_strategies"]
    t = cls(spec, **{p.name: s[p.name] for p in SETTINGS[2:-1]})  # task .. stream_offset
    inp, runs = s["inputs"], s["runs"]
    for c in s["columns"]:
        t._column(c)
    t._add_inputs(list(zip(inp["task"], inp["input_id"], strict=True)), inp["m"])
    t.assigner.add_slots(runs["stream"], runs["input"])
    t.assigner.next_stream[: len(t.keys)] = np.maximum(
        t.assigner.next_stream[: len(t.keys)], inp["next_stream"]
    )
    t.runs.grow(len(runs["input"]))
    for p in t.runs.fields:
        getattr(t.runs, p.key)[: len(runs["input"])] = runs[p.key]
    for r in s["open_runs"]:
        fields = (r["env_index"], r["run"], r["count"], r["sample_index"], r["run_index"])
        t.assigner.restore_open(int(runs["input"][r["run"]]), *fields)
    t.bar.grow(len(t.keys))
    for b in s["barcode"]:
        t.bar.put(b["input"], b["stream"], list(b["cells"]), [bool(x) for x in b["new"]], t.keys)
    for p in COUNTERS:
        setattr(t, p.name, s[p.name])
    t.metrics = [s["metrics"][m.name] for m in t.metrics]
    t._rebuild_sums()
    return t


# -- merging and moving streams ---------------------------------------------------------------------------


def merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The checked-form state ``a`` with ``b``'s runs added, by the merge rules of `STATE`.

    Raises:
        ValueError: the settings differ, an input's M_x differs, or a run is in both.
    """
    agree = [(a[p.name], b[p.name]) for p in SETTINGS if p.merge == "agree"]
    if any(x != y for x, y in agree):
        mine, theirs = zip(*agree, strict=True)
        raise ValueError(
            "cannot merge trackers with different strategy sets, budget or latent codes: "
            f"{mine!r} vs {theirs!r}"
        )
    s: dict[str, Any] = {"format": STATE_FORMAT, **{p.name: a[p.name] for p in SETTINGS}}
    s["columns"] = list(a["columns"]) + [c for c in b["columns"] if c not in set(a["columns"])]
    C, col_of = len(s["columns"]), {c: j for j, c in enumerate(s["columns"])}
    cols = (np.arange(len(a["columns"])), np.array([col_of[c] for c in b["columns"]], dtype=np.int64))
    Ua = len(a["inputs"]["input_id"])
    s["inputs"] = {k: list(a["inputs"][k]) + list(b["inputs"][k]) for k in ("task", "input_id")}
    s["inputs"]["m"] = np.concatenate([a["inputs"]["m"], b["inputs"]["m"]])
    # b's runs are closed in the merged tracker: its next streams do not apply
    s["inputs"]["next_stream"] = np.concatenate(
        [a["inputs"]["next_stream"], np.zeros(len(b["inputs"]["m"]), dtype=np.int64)]
    )
    s["runs"] = {"input": np.concatenate([a["runs"]["input"], b["runs"]["input"] + Ua])}
    for p in RUN_FIELDS[1:]:
        if p.key in a["runs"]:
            parts = [x["runs"][p.key] for x in (a, b)]
            if p.width == "columns":  # each tracker's columns moved to their merged places
                parts = [_spread(v, c, C, p.fill) for v, c in zip(parts, cols, strict=True)]
            s["runs"][p.key] = np.concatenate(parts)
    s["open_runs"] = a["open_runs"]
    s["barcode"] = list(a["barcode"]) + [
        {**r, "input": r["input"] + Ua, "cells": [int(cols[1][c]) if c >= 0 else c for c in r["cells"]]}
        for r in b["barcode"]
    ]
    for p in COUNTERS:
        s[p.name] = (a[p.name] or b[p.name]) if p.merge == "or" else a[p.name] + b[p.name]
    s["metrics"] = {}
    for name, ma in a["metrics"].items():
        mb, m = b["metrics"][name], type(ma)()
        m.grow(Ua + mb.n_inputs, C)
        m.partial = ma.partial or mb.partial
        for spec in ma.specs.values():
            for src, rows, c in ((ma, slice(0, Ua), cols[0]), (mb, slice(Ua, None), cols[1])):
                v = src.rows(spec.name)
                m.rows(spec.name)[(rows, c[: v.shape[1]]) if spec.per_strategy else rows] = v
        s["metrics"][name] = m
    return _canonical(s)


def _spread(v: np.ndarray, cols: np.ndarray, C: int, fill: int) -> np.ndarray:
    out = np.full((v.shape[0], C), fill, dtype=np.int64)
    out[:, cols[: v.shape[1]]] = v
    return out


def shift_streams(state: Any, offset: int) -> dict[str, Any]:
    """A copy of a state (JSON-safe) with every stream moved up by ``offset``."""
    s = check(state)
    offset = _int(offset, "offset", 0, _BIG)
    s = {
        **s,
        "runs": dict(s["runs"]),
        "stream_offset": _int(s["stream_offset"] + offset, "stream_offset", 0, _BIG),
    }
    s["runs"]["stream"] = s["runs"]["stream"] + offset
    if s["runs"]["stream"].size and s["runs"]["stream"].max() >= _BIG:
        raise ValueError(f"shifting by {offset} moves streams past {_BIG}")
    s["barcode"] = [{**b, "stream": b["stream"] + offset} for b in s["barcode"]]
    return to_json(s)


def stream_span(state: Any) -> int:
    """1 + the highest stream number in a state (0 when it holds no run)."""
    streams = check(state)["runs"]["stream"]
    return int(streams.max()) + 1 if streams.size else 0

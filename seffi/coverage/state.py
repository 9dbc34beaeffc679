"""The tracker's state declared once; checking, the stored layout, merging and loading follow from it.

`STATE` lists every part of a ``CoverageTracker``'s state with its bounds and merge rule; each
per-input metric (`seffi.coverage.input_metrics`) adds the parts it declares (`metric_parts`). The
stored layout (format ``seffi.coverage.tracker/2``; older formats are converted at load by
`seffi.coverage.state_v1`) holds the inputs and runs tables as columns in key order, first-hit rows
packed one base-36 character per cell when all fit. Per-input sums are derived from the runs at
load, so a state holds each run once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi.coverage import state_v1
from seffi.coverage.input_metrics import registered

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


@dataclass(frozen=True)
class Part:
    """One part of the state: where it is held, its bounds, and how two trackers' values merge.

    ``merge``: "agree" (must be equal), "keep" (the merged-into tracker's; the other's rows read
    ``fill``), "union" (ids in order of appearance), "key" (rows join by it), "disjoint" (a run in
    both is an error), "open" (the merged-into's runs stay open), "lowest_stream" (per input its
    lowest stream's row, for the ``barcode_rows`` smallest), "sum", "max", "or". ``hi`` is exclusive
    (an int, or a function of the parts checked before). ``width``: the setting giving a matrix's
    width ("columns": their count; width 0: not stored). ``wide``: int64 in a narrow run table.
    """

    name: str
    merge: str
    doc: str
    kind: str = "int"  # "int", "bool", "str", "ids" (a list of str), "list" (ints, in a record)
    null: bool = False
    lo: int = 0
    hi: int | Callable[[Mapping[str, Any]], int] = _BIG
    width: str | None = None
    fill: int = 0
    fields: tuple[Part, ...] = ()  # of each record of a "records" part
    where: str = ""  # "setting", "counter", "records", or the table holding it
    wide: bool = False

    @functools.cached_property
    def key(self) -> str:
        """The name inside its table (``runs.first_hit`` -> ``first_hit``)."""
        return self.name.rsplit(".", 1)[-1]


def _in(where: str, *parts: Part) -> tuple[Part, ...]:
    prefix = f"{where}." if where in ("inputs", "runs", "open_runs", "barcode") else ""
    return tuple(replace(p, name=prefix + p.name, where=where) for p in parts)


_INPUTS = lambda s: max(len(s["inputs"]["input_id"]), 1)  # noqa: E731
_HIT = {"lo": -1, "fill": -1}
SETTINGS = _in(
    "setting",
    Part("strategies", "agree", "declared strategy ids (the columns), or null", "ids", True),
    Part("num_strategies", "agree", "declared count M", null=True, lo=1, hi=MAX_STRATEGIES + 1),
    Part("task", "keep", "task name (a bootstrap stratum)", "str"),
    Part("budget", "agree", "K: samples per run kept", null=True, lo=1, hi=MAX_BUDGET + 1),
    Part("barcode_rows", "keep", "inputs with a barcode row", hi=2**31 + 1),
    Part("barcode_cols", "keep", "samples per barcode row", hi=MAX_BUDGET + 1),
    Part("num_latents", "agree", "Z: latent codes recorded per run", hi=MAX_LATENTS + 1),
    Part("stream_offset", "keep", "first stream number of record()'s runs"),
    Part("columns", "union", "strategy id of each column of the first-hit rows", "ids"),
)
INPUT_FIELDS = _in(
    "inputs",
    Part("task", "key", "task of each input", "str"),
    Part("input_id", "key", "id of each input", "str"),
    Part("m", "agree", "M_x", lo=1, hi=lambda s: int(s["num_strategies"] or MAX_STRATEGIES) + 1),
    Part("next_stream", "keep", "next stream record() opens for the input"),
)
RUN_FIELDS = _in(
    "runs",
    Part("input", "key", "the run's input (index into inputs)", hi=_INPUTS),
    Part("stream", "key", "the run's stream"),
    Part("first_hit", "disjoint", "first sample matching each column", **_HIT, width="columns"),
    Part("first_valid_hit", "disjoint", "first correct sample matching each column", **_HIT, width="columns"),
    Part("n", "disjoint", "samples", lo=1, hi=lambda s: int(s["budget"] or _BIG - 1) + 1),
    Part("n_valid", "disjoint", "correct samples"),
    Part("first_valid", "disjoint", "first correct sample, -1 none", **_HIT),
    Part("latent_first_hit", "disjoint", "first sample with each latent code", **_HIT, width="num_latents"),
    Part("beyond", "disjoint", "samples beyond the budget (counted, not recorded)", wide=True),
)
_OPEN = _in(
    "open_runs",
    Part("run", "", "the run (index into runs)", hi=lambda s: len(s["runs"]["n"])),
    Part("env_index", "", "its env row"),
    Part("count", "", "samples so far (also those beyond the budget)"),
    Part("sample_index", "", "last sample_index reported", lo=-1),
    Part("run_index", "", "last run_index reported", lo=-1),
)
_BARCODE = _in(
    "barcode",
    Part("input", "", "the row's input", hi=_INPUTS),
    Part("stream", "", "its run's stream"),
    Part("cells", "", "strategy column per sample", "list", lo=-1, hi=lambda s: len(s["columns"])),
    Part("new", "", "the sample added a strategy", "list", hi=2),
)
RECORDS = _in(
    "records",
    Part("open_runs", "open", "runs record() continues", fields=_OPEN),
    Part("barcode", "lowest_stream", "barcode rows", fields=_BARCODE),
)
COUNTERS = _in(
    "counter",
    Part("samples", "sum", "samples recorded (in runs)"),
    Part("valid", "sum", "correct samples recorded"),
    Part("skipped", "sum", "samples beyond their run's budget (not recorded): the runs' beyond"),
    Part("has_latent", "or", "some sample carried a latent code", "bool"),
)
#: Every part of a tracker's state, in storage order (then the metrics' parts, `metric_parts`).
STATE: tuple[Part, ...] = (*SETTINGS, *INPUT_FIELDS, *RUN_FIELDS, *RECORDS, *COUNTERS)
#: Per-run fields kept in the tracker's run table (the keys live in its run assigner).
RUN_TABLE_FIELDS = tuple(p for p in RUN_FIELDS if p.merge != "key")
_OPEN_KEYS = tuple(f.key for f in _OPEN)
_HITS = ("first_hit", "first_valid_hit")


@functools.cache
def metric_parts() -> tuple[Part, ...]:
    """The parts each registered metric declares (`InputMetric.add_state`); ``doc``: the metric."""
    specs = [(cls.name, d) for cls in registered() for d in cls().specs.values()]
    return tuple(
        Part(f"metrics.{m}.{d.name}", d.merge, m, lo=d.lo, fill=d.lo, width=d.width, where="metrics")
        for m, d in specs
    )


def _table(s: Mapping[str, Any], p: Part) -> Any:
    """The mapping holding table part ``p`` in state ``s`` (a metric's parts: its entry of metrics)."""
    return s["metrics"][p.doc] if p.where == "metrics" else s[p.where]


def _hi(p: Part, s: Mapping[str, Any]) -> int:
    return p.hi(s) if callable(p.hi) else p.hi


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not lo <= value < hi:
        text = repr(value)
        raise ValueError(
            f"{where} must be an int in [{lo}, {hi}), got {text[:57] + '...' * (len(text) > 60)}"
        )
    return int(value)


def setting(p: Part, value: Any, s: Mapping[str, Any]) -> Any:
    """A setting, counter or record field checked against its declaration (bounds from ``s``)."""
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
    if p.kind == "list":
        return _column(
            value, p.name, (len(value) if isinstance(value, list) else 0,), p.lo, _hi(p, s)
        ).tolist()
    return _int(value, p.name, p.lo, _hi(p, s))


# -- the stored layout ------------------------------------------------------------------------------------

_DIGITS = "-0123456789abcdefghijklmnopqrstuvwxyz"  # a packed cell: "-" none, else its index in base 36
_UNPACK = np.full(256, -2, dtype=np.int64)  # byte -> cell (-2: not a packed character, out of bounds)
_UNPACK[[ord(c) for c in _DIGITS]] = np.arange(-1, len(_DIGITS) - 1)
_CHARS = np.array(list(_DIGITS))


def _column(value: Any, where: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """An int64 array of ``shape`` in [lo, hi) from an int array, a list (of rows) of ints or packed rows."""
    if isinstance(value, list) and len(shape) == 2:
        if len(value) != shape[0] or any(len(row) != shape[1] for row in value):
            raise ValueError(f"{where} must be {shape[0]} rows of {shape[1]} cells")
        packed = bool(value) and all(isinstance(row, str) for row in value)
        flat = [v for row in value for v in row] if not packed else None
        value = _UNPACK[np.frombuffer("".join(value).encode("ascii"), np.uint8)] if packed else flat
    if isinstance(value, list):
        if not set(map(type, value)) <= {int}:
            raise ValueError(f"{where} must hold ints")
        value = np.array(value, dtype=np.int64)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or value.size != np.prod(shape):
        raise ValueError(f"{where} must be a list of {' x '.join(map(str, shape))} ints")
    arr = value.astype(np.int64, copy=False).reshape(shape)
    if arr.size and (arr.min() < lo or arr.max() >= hi):
        raise ValueError(f"{where} must hold ints in [{lo}, {hi})")
    return arr


def to_json(s: Mapping[str, Any]) -> dict[str, Any]:
    """A checked-form state as JSON-safe data (the stored layout)."""
    out: dict[str, Any] = {"format": STATE_FORMAT, "inputs": {}, "runs": {}}
    for p in STATE:
        if p.where not in ("inputs", "runs"):
            out[p.name] = [dict(r) for r in s[p.name]] if p.fields else s[p.name]
        elif p.kind == "str":
            out[p.where][p.key] = list(s[p.where][p.key])
        elif p.key in s[p.where] and (p.key != "beyond" or s["runs"]["beyond"].any()):  # beyond: if any
            v = np.asarray(s[p.where][p.key], dtype=np.int64)
            packed = p.width and (v.size == 0 or v.max() < len(_DIGITS) - 1)
            out[p.where][p.key] = ["".join(r) for r in _CHARS[v + 1].tolist()] if packed else v.tolist()
    metrics: dict[str, Any] = {}
    for p in metric_parts():
        held = s["metrics"][p.doc]
        metrics.setdefault(p.doc, {"partial": True} if held["partial"] else {})[p.key] = held[p.key].tolist()
    used = {p.doc for p in metric_parts() if (s["metrics"][p.doc][p.key] != p.lo).any()}
    # A partial metric that recorded nothing is left out: a state stored without it stays so.
    metrics = {name: v for name, v in metrics.items() if name in used or not v.get("partial")}
    return out | ({"metrics": metrics} if metrics else {})


# -- checking ---------------------------------------------------------------------------------------------


def check(state: Any) -> dict[str, Any]:
    """A validated state (format 2; older formats converted), every value bounded by its declaration.

    Returns:
        The checked form (`load`, `merge`, `to_json` and `check` take it): table columns as int arrays,
        each registered metric's parts and ``partial`` flag under ``metrics[name]``.

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


def _checked(state: Mapping[str, Any]) -> dict[str, Any]:
    """Each part checked in storage order (the settings bound the rest), then the rules tying them."""
    s: dict[str, Any] = {"format": STATE_FORMAT, "inputs": {}, "runs": {}, "metrics": {}}
    stored = state.get("metrics", {})
    if not isinstance(stored, Mapping):
        raise ValueError("metrics must be an object")
    for name in dict.fromkeys(p.doc for p in metric_parts()):  # a metric the state lacks: empty, partial
        got = {"partial": True} if stored.get(name) is None else stored[name]
        if not isinstance(got, Mapping) or not isinstance(got.get("partial", False), bool):
            raise ValueError(f"metrics.{name} must be an object (partial a bool)")
        s["metrics"][name] = {"partial": got.get("partial", False)}
    for p in (*STATE, *metric_parts()):
        if p.where in ("setting", "counter"):
            s[p.name] = setting(p, state[p.name], s)
            _hold(_setting_rules(s) if p.name == "columns" else [])
        elif p.fields:
            if not isinstance(state[p.name], list):
                raise ValueError(f"{p.name} must be a list")
            s[p.name] = [{f.key: setting(f, row[f.key], s) for f in p.fields} for row in state[p.name]]
        else:
            held = stored.get(p.doc) if p.where == "metrics" else state[p.where]
            n = len(state["runs"]["input"] if p.where == "runs" else state["inputs"]["input_id"])
            if (v := _table_part(p, held, s, n)) is not None:
                _table(s, p)[p.key] = v
    _hold(_rules(s))
    return s


def _table_part(p: Part, held: Mapping[str, Any] | None, s: Mapping[str, Any], n: int) -> Any:
    """Table part ``p`` of ``n`` rows from ``held`` (None: a metric the state lacks, at its fill).

    Returns None for a matrix whose width setting (not "columns") is 0: it is not stored.
    """
    w = None if p.width is None else len(s["columns"]) if p.width == "columns" else s[p.width]
    absent = w == 0 and p.width != "columns"
    if absent and p.key in (held or {}):
        raise ValueError(f"{p.name} is present but its declaration says it is not")
    shape = (n,) if w is None else (n, w)
    if absent or held is None:
        return None if absent else np.full(shape, p.fill, dtype=np.int64)
    if p.kind != "str":
        return _column(held[p.key], p.name, shape, p.lo, _hi(p, s))
    if not isinstance(v := held[p.key], list) or len(v) != n or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{p.name} must be a list of {n} strings")
    return list(v)


def _hold(rules: Iterable[tuple[Any, str]]) -> None:
    for broken, message in rules:
        if broken:
            raise ValueError(message)


def _setting_rules(s: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """(broken, message) of each rule tying the settings together (they bound the tables)."""
    cols, M, declared = s["columns"], s["num_strategies"], s["strategies"] is not None
    unique = len(set(cols)) == len(cols) <= MAX_STRATEGIES
    return [
        (not unique, f"columns must be at most {MAX_STRATEGIES} unique strategy ids"),
        (declared and cols != s["strategies"], "columns must be the declared strategies"),
        (declared and M != len(cols), f"num_strategies={M} but {len(cols)} strategies are declared"),
    ]


def _rules(s: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """(broken, message) of each rule tying the parts together."""
    r, K, opened, bars = s["runs"], s["budget"], s["open_runs"], s["barcode"]
    u, n, nv, fv, fh, fvh, out = (r[k] for k in ("input", "n", "n_valid", "first_valid", *_HITS, "beyond"))
    lat, ids = r.get("latent_first_hit"), list(zip(s["inputs"]["task"], s["inputs"]["input_id"], strict=True))
    counts = (nv > n).any() or (fv >= n).any() or ((fv < 0) != (nv == 0)).any()
    hits = (fh >= n[:, None]).any() or ((fvh >= 0) & ((fh < 0) | (fvh < fh) | (fvh >= n[:, None]))).any()
    latent = lat is not None and (lat >= n[:, None]).any()
    cells = np.unique(u[n >= K]).size * K > MAX_SUM_CELLS if K else False
    short = ((out > 0) & (n != (K or 0))).any()
    over_m = ((fh >= 0).sum(axis=1) > s["inputs"]["m"][u]).any()
    has_latent = bool(lat is not None and (lat >= 0).any())
    counted = any(o["count"] != n[o["run"]] + out[o["run"]] for o in opened)  # all samples vs the first K
    shared = len({(u[o["run"]], o["env_index"]) for o in opened}) != len(opened)
    rows = any(len(b["cells"]) != len(b["new"]) or len(b["cells"]) > s["barcode_cols"] for b in bars)
    return [
        (ids != sorted(set(ids)), "inputs must be unique and sorted"),
        (_repeated(u, r["stream"])[1].size, "runs must be unique per (input, stream)"),
        (counts, "runs have inconsistent n / n_valid / first_valid"),
        (hits, "runs have first hits outside their samples"),
        (over_m, "a run matched more distinct strategies than its input's M_x"),
        (latent, "runs have latent first hits outside their samples"),
        (s["has_latent"] != has_latent, "has_latent must say whether any run holds a latent code"),
        (
            s["samples"] != n.sum() or s["valid"] != nv.sum(),
            f"samples={s['samples']} and valid={s['valid']} must be the runs' {n.sum()} samples and "
            f"{nv.sum()} correct ones",
        ),
        (cells, f"inputs with a complete run x budget exceed the cap of {MAX_SUM_CELLS} per-input sums"),
        (short, "a run has samples beyond the budget but fewer than budget samples"),
        (
            s["skipped"] != out.sum(),
            f"skipped={s['skipped']} must be the runs' {out.sum()} samples beyond the budget",
        ),
        (counted, "an open run does not match its run (count = n + beyond)"),
        (shared, "two open runs share an (input, env_index)"),
        (len(bars) > s["barcode_rows"], f"{len(bars)} barcode rows but barcode_rows={s['barcode_rows']}"),
        (rows, "a barcode row needs cells and new flags of one length, at most barcode_cols"),
        (len({b["input"] for b in bars}) != len(bars), "barcode rows must be one per input"),
    ]


def _repeated(unit: np.ndarray, stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order sorting runs by (input, stream), and where in it a run repeats the one before."""
    order = np.lexsort((stream, unit))
    u, st = unit[order], stream[order]
    return order, np.flatnonzero((u[1:] == u[:-1]) & (st[1:] == st[:-1])) + 1


# -- a tracker in and out ---------------------------------------------------------------------------------


def dump(t: CoverageTracker) -> dict[str, Any]:
    """Tracker ``t``'s state in checked form."""
    S, C, U = t.assigner.n_slots, len(t.columns), len(t.keys)
    s: dict[str, Any] = {"format": STATE_FORMAT, **{p.name: getattr(t, p.name) for p in SETTINGS + COUNTERS}}
    s["strategies"], s["columns"] = None if t.strategies is None else list(t.strategies), list(t.columns)
    s["inputs"] = {"task": [k[0] for k in t.keys], "input_id": [k[1] for k in t.keys], "m": t.m}
    s["inputs"]["next_stream"] = t.assigner.next_stream[:U]
    s["runs"] = {"input": t.assigner.slot_input[:S], "stream": t.assigner.slot_stream[:S]}
    for p in t.runs.fields:
        s["runs"][p.key] = (
            getattr(t.runs, p.key)[:S, :C] if p.width == "columns" else getattr(t.runs, p.key)[:S]
        )
    s["open_runs"] = [
        dict(zip(_OPEN_KEYS, (slot, env, count, si, ri), strict=True))
        for _, env, slot, count, si, ri in t.assigner.open_runs()
    ]
    s["barcode"] = [
        {"input": c, "stream": st, "cells": cells, "new": [int(b) for b in new]}
        for c, st, cells, new in t.bar.rows_held()
    ]
    s["metrics"] = {}
    for m in t.metrics:
        m.grow(U, C)
        s["metrics"][m.name] = {"partial": m.partial, **{k: m.rows(k) for k in m.specs}}
    return _canonical(s)


def _canonical(s: dict[str, Any]) -> dict[str, Any]:
    """``s`` with its inputs sorted by key and its runs by (input, stream), an input's rows combined.

    The rows of one (task, input_id) combine by their merge rules, the first row's value first.

    Raises:
        ValueError: two rows of one input disagree on an "agree" part, or a run is in two rows.
    """
    keys = list(zip(s["inputs"]["task"], s["inputs"]["input_id"], strict=True))
    uniq = sorted(set(keys))
    index = {k: i for i, k in enumerate(uniq)}
    new = np.array([index[k] for k in keys], dtype=np.int64)  # row -> its key's row
    first = np.unique(new, return_index=True)[1]  # the first row of each key
    rest = np.setdiff1d(np.arange(new.size), first)
    out = {**s, "inputs": {"task": [k[0] for k in uniq], "input_id": [k[1] for k in uniq]}}
    out["metrics"] = {name: {"partial": held["partial"]} for name, held in s["metrics"].items()}
    for p in (*INPUT_FIELDS[2:], *metric_parts()):
        v = np.asarray(_table(s, p)[p.key])
        got = _table(out, p)[p.key] = v[first]
        if p.merge in ("sum", "max"):
            {"sum": np.add.at, "max": np.maximum.at}[p.merge](got, new[rest], v[rest])
        clash = np.flatnonzero(got[new] != v) if p.merge == "agree" else ()
        if len(clash):
            j = int(clash[0])
            raise ValueError(f"cannot merge: input {keys[j][1]!r} has {p.doc} {got[new[j]]} vs {v[j]}")
    unit = new[np.asarray(s["runs"]["input"], dtype=np.int64)]
    stream = np.asarray(s["runs"]["stream"], dtype=np.int64)
    order, again = _repeated(unit, stream)
    if again.size:
        clash = [(*uniq[unit[order[j]]], int(stream[order[j]])) for j in again[:3]]
        raise ValueError(f"cannot merge: both trackers hold run(s) {clash} (task, input_id, stream)")
    pos = np.argsort(order)
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
    return out


def load(cls: type[CoverageTracker], state: Any, *, barcode_rows: int | None = None) -> CoverageTracker:
    """A new tracker of class ``cls`` holding ``state`` (stored or checked; its open runs stay open).

    ``barcode_rows``: keep this many barcode rows (the smallest keys) instead of the state's.
    """
    s = check(state)
    if barcode_rows is not None:
        rows = _int(barcode_rows, "barcode_rows", 0, 2**31 + 1)
        s = {**s, "barcode_rows": rows, "barcode": sorted(s["barcode"], key=lambda b: b["input"])[:rows]}
    spec = s["strategies"] if s["strategies"] is not None else s["num_strategies"]
    t = cls(spec, **{p.name: s[p.name] for p in SETTINGS[2:-1]})  # task .. stream_offset
    inp, runs, R = s["inputs"], s["runs"], len(s["runs"]["input"])
    for c in s["columns"]:
        t._column(c)
    t._add_inputs(list(zip(inp["task"], inp["input_id"], strict=True)), inp["m"])
    t.assigner.add_slots(runs["stream"], runs["input"])
    U = len(t.keys)
    t.assigner.next_stream[:U] = np.maximum(t.assigner.next_stream[:U], inp["next_stream"])
    t.runs.grow(R)
    for p in t.runs.fields:
        getattr(t.runs, p.key)[:R] = runs[p.key]
    for r in s["open_runs"]:
        fields = (r["env_index"], r["run"], r["count"], r["sample_index"], r["run_index"])
        t.assigner.restore_open(int(runs["input"][r["run"]]), *fields)
    t.bar.grow(U)
    for b in s["barcode"]:
        t.bar.put(b["input"], b["stream"], list(b["cells"]), [bool(x) for x in b["new"]], t.keys)
    for p in COUNTERS:
        setattr(t, p.name, s[p.name])
    for m in t.metrics:
        m.grow(U, len(t.columns))
        m.partial = s["metrics"][m.name]["partial"]
        for k in m.specs:
            m.rows(k)[...] = s["metrics"][m.name][k]
    t._rebuild_sums()
    return t


# -- merging and moving streams ---------------------------------------------------------------------------


def merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The checked-form state ``a`` with ``b``'s runs added, by the declared merge rules.

    Raises:
        ValueError: the settings differ, an input's M_x differs, or a run is in both.
    """
    agree = [(a[p.name], b[p.name]) for p in SETTINGS if p.merge == "agree"]
    if any(x != y for x, y in agree):
        mine, theirs = zip(*agree, strict=True)
        text = "cannot merge trackers with different strategy sets, budget or latent codes"
        raise ValueError(f"{text}: {mine!r} vs {theirs!r}")
    s: dict[str, Any] = {
        "format": STATE_FORMAT,
        **{p.name: a[p.name] for p in SETTINGS},
        "inputs": {},
        "runs": {},
    }
    s["columns"] = list(dict.fromkeys(a["columns"] + b["columns"]))
    C, col_of = len(s["columns"]), {c: j for j, c in enumerate(s["columns"])}
    cols = (np.arange(len(a["columns"])), np.array([col_of[c] for c in b["columns"]], dtype=np.int64))
    Ua = len(a["inputs"]["input_id"])
    s["metrics"] = {
        k: {"partial": v["partial"] or b["metrics"][k]["partial"]} for k, v in a["metrics"].items()
    }
    for p in (*INPUT_FIELDS, *RUN_FIELDS, *metric_parts()):
        if p.key in _table(a, p):  # b's rows after a's: the input codes shift, b's columns spread
            va, vb = _table(a, p)[p.key], _table(b, p)[p.key]
            if p.kind == "str":
                _table(s, p)[p.key] = list(va) + list(vb)
                continue
            vb = vb + Ua if p.name == "runs.input" else np.full_like(vb, p.fill) if p.merge == "keep" else vb
            both = zip((va, vb), cols, strict=True) if p.width == "columns" else ()
            both = [_spread(v, c, C, p.fill) for v, c in both] or [va, vb]
            _table(s, p)[p.key] = np.concatenate(both)
    s["open_runs"] = a["open_runs"]  # b's runs are closed in the merged tracker, and its next streams unused
    s["barcode"] = list(a["barcode"]) + [
        {**r, "input": r["input"] + Ua, "cells": [int(cols[1][c]) if c >= 0 else c for c in r["cells"]]}
        for r in b["barcode"]
    ]
    for p in COUNTERS:
        s[p.name] = (a[p.name] or b[p.name]) if p.merge == "or" else a[p.name] + b[p.name]
    return _canonical(s)


def _spread(v: np.ndarray, cols: np.ndarray, C: int, fill: int) -> np.ndarray:
    out = np.full((v.shape[0], C), fill, dtype=np.int64)
    out[:, cols] = v
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

"""The tracker's state declared once (`STATE`, each metric's ``add_state``): the rest follows from it.

Stored (format 2; older: `seffi.coverage.state_v1`) as columns in key order, first-hit rows packed
one base-36 character a cell when all fit; per-input sums are derived at load.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from seffi._convert import clip, json_default
from seffi.coverage import state_v1
from seffi.coverage.input_metrics import Part, registered

if TYPE_CHECKING:
    from seffi.coverage.tracker import CoverageTracker

__all__ = ["MAX_BUDGET", "MAX_STRATEGIES", "STATE", "STATE_FORMAT", "Part", "check"]

STATE_FORMAT = state_v1.STATE_FORMAT
MAX_BUDGET = MAX_LATENTS = 2**16  # caps on K, Z and M: each sizes an allocation
MAX_STRATEGIES = 2**20
MAX_SUM_CELLS = 2**28  # inputs with a complete run x K: the per-input sums a loaded state needs
_BIG = 2**53


def _in(where: str, *parts: Part) -> tuple[Part, ...]:
    prefix = "" if where in ("setting", "counter") else f"{where}."
    return tuple(replace(p, name=prefix + p.name, where=where) for p in parts)


_INPUTS = lambda s: max(len(s["inputs"]["input_id"]), 1)  # noqa: E731
_HIT = {"lo": -1, "fill": -1}
_M = lambda s: int(s["num_strategies"] or MAX_STRATEGIES) + 1  # noqa: E731
_LATENT = lambda s: "latent_first_hit" in s["runs"] and bool((s["runs"]["latent_first_hit"] >= 0).any())  # noqa: E731
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
    Part("m", "agree", "M_x", lo=1, hi=_M),
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
OPEN_FIELDS = _in(  # stored as a list of records, as is the barcode
    "open_runs",
    Part("run", "keep", "a run record() continues (index into runs)", hi=lambda s: len(s["runs"]["n"])),
    Part("env_index", "keep", "its env row"),
    Part("count", "keep", "samples so far (also those beyond the budget)"),
    Part("sample_index", "keep", "last sample_index reported", lo=-1),
    Part("run_index", "keep", "last run_index reported", lo=-1),
)
BARCODE_FIELDS = _in(  # rows: an input's lowest stream's, for the barcode_rows smallest inputs
    "barcode",
    Part("input", "union", "the row's input", hi=_INPUTS),
    Part("stream", "union", "its run's stream"),
    Part("cells", "union", "strategy column per sample", "list", lo=-1, hi=lambda s: len(s["columns"])),
    Part("new", "union", "the sample added a strategy", "list", hi=2),
)
COUNTERS = _in(
    "counter",
    Part("samples", "sum", "samples", derive=lambda s: int(s["runs"]["n"].sum())),
    Part("valid", "sum", "correct samples", derive=lambda s: int(s["runs"]["n_valid"].sum())),
    Part("skipped", "sum", "samples beyond the budget", derive=lambda s: int(s["runs"]["beyond"].sum())),
    Part("has_latent", "or", "(whether a run holds a latent code)", "bool", derive=_LATENT),
)
#: Every part of a tracker's state, in storage order (then the metrics' parts, `metric_parts`).
STATE: tuple[Part, ...] = (*SETTINGS, *INPUT_FIELDS, *RUN_FIELDS, *OPEN_FIELDS, *BARCODE_FIELDS, *COUNTERS)
#: Per-run fields kept in the tracker's run table (the keys live in its run assigner).
RUN_TABLE_FIELDS = tuple(p for p in RUN_FIELDS if p.merge != "key")
_HITS = ("first_hit", "first_valid_hit")
_RECORDS = {w: [p.key for p in STATE if p.where == w] for w in ("open_runs", "barcode")}  # their keys
_OPS = {"sum": operator.add, "max": np.maximum, "or": operator.or_}


@functools.cache
def metric_parts() -> tuple[Part, ...]:
    """The parts the registered metrics declare (``add_state``); ``doc``: the metric's name."""
    parts = (p for cls in registered() for p in cls().specs.values())
    return tuple(replace(p, name=f"metrics.{p.doc}.{p.name}", where="metrics") for p in parts)


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not lo <= value < hi:
        raise ValueError(f"{where} must be an int in [{lo}, {hi}), got {clip(repr(value), 57)}")
    return int(value)


def setting(p: Part, value: Any, s: Mapping[str, Any]) -> Any:
    """A setting or counter checked against its declaration (bounds from ``s``)."""
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
    return _int(value, p.name, p.lo, p.hi(s) if callable(p.hi) else p.hi)


_DIGITS = "-0123456789abcdefghijklmnopqrstuvwxyz"  # a packed cell: "-" none, else its index in base 36
_UNPACK = np.full(256, -2, dtype=np.int64)  # byte -> cell (-2: not a packed character, out of bounds)
_UNPACK[[ord(c) for c in _DIGITS]] = np.arange(-1, len(_DIGITS) - 1)
_CHARS = np.array(list(_DIGITS))


def _ints(value: Any, p: Part, shape: tuple[int, ...], s: Mapping[str, Any]) -> np.ndarray:
    """Part ``p``'s int64 array of ``shape`` from an int array, a list (of rows) of ints or packed rows."""
    if isinstance(value, list) and len(shape) == 2:
        if len(value) != shape[0] or any(len(row) != shape[1] for row in value):
            raise ValueError(f"{p.name} must be {shape[0]} rows of {shape[1]} cells")
        packed = bool(value) and all(isinstance(row, str) for row in value)
        flat = [v for row in value for v in row] if not packed else None
        value = _UNPACK[np.frombuffer("".join(value).encode("ascii"), np.uint8)] if packed else flat
    if isinstance(value, list):
        if not set(map(type, value)) <= {int}:
            raise ValueError(f"{p.name} must hold ints")
        value = np.array(value, dtype=np.int64)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or value.size != np.prod(shape):
        raise ValueError(f"{p.name} must be a list of {' x '.join(map(str, shape))} ints")
    arr, hi = value.astype(np.int64, copy=False).reshape(shape), p.hi(s) if callable(p.hi) else p.hi
    if arr.size and (arr.min() < p.lo or arr.max() >= hi):
        raise ValueError(f"{p.name} must hold ints in [{p.lo}, {hi})")
    return arr


class _Rows:
    """Rows ``index`` of a tracker's table, each slice taken when read (``take(index[part])``)."""

    def __init__(self, take: Any, index: np.ndarray) -> None:
        self.take, self.index = take, index

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, part: slice) -> Any:
        return self.take(self.index[part])


_CELLS = 1 << 14  # cells of a table read at a time: what writing a state holds beside the tracker
_SEP = (",", ":")


def _chunks(column: Any) -> Iterator[Any]:
    """A table column (an array, a list or `_Rows`) in slices of about `_CELLS` cells."""
    step = max(1, _CELLS // max(1, np.asarray(column[:1]).size))
    return (column[lo : lo + step] for lo in range(0, len(column), step))


class _Column(NamedTuple):
    rows: Any  # an array, a list or `_Rows`; records: a dict of such columns
    packed: bool = False  # int rows stored as strings of base-36 characters

    def lists(self) -> Iterator[list[Any]]:
        """The stored rows, JSON-safe, a slice at a time (records: a dict per row)."""
        if isinstance(self.rows, dict):
            step = max(1, _CELLS // len(self.rows))
            for lo in range(0, len(next(iter(self.rows.values()))), step):
                cols = [_list(c[lo : lo + step]) for c in self.rows.values()]
                yield [dict(zip(self.rows, r, strict=True)) for r in zip(*cols, strict=True)]
            return
        for rows in _chunks(self.rows):
            if self.packed:  # a string of base-36 characters per row
                rows = ["".join(r) for r in _CHARS[np.asarray(rows, dtype=np.int64) + 1].tolist()]
            yield _list(rows)


def _list(rows: Any) -> list[Any]:
    return rows.tolist() if isinstance(rows, np.ndarray) else list(rows)


def _layout(s: Mapping[str, Any]) -> dict[str, Any]:
    """The stored layout of checked-form state ``s``, each table column a `_Column` (read when written)."""
    out: dict[str, Any] = {"format": STATE_FORMAT, "inputs": {}, "runs": {}}
    for p in STATE:
        if p.where in ("setting", "counter"):
            out[p.name] = s[p.name]
        elif p.where in _RECORDS:
            out[p.where] = _Column(s[p.where])
        elif p.kind == "str":
            out[p.where][p.key] = _Column(s[p.where][p.key])
        elif p.key in s[p.where] and (
            p.key != "beyond" or any(c.any() for c in _chunks(s["runs"]["beyond"]))
        ):
            v = s[p.where][p.key]  # packed when every cell fits a character
            packed = p.width is not None and all(
                c.size == 0 or c.max() < len(_DIGITS) - 1 for c in _chunks(v)
            )
            out[p.where][p.key] = _Column(v, packed)
    metrics: dict[str, Any] = {}
    for p in metric_parts():
        held = s["metrics"][p.doc]
        metrics.setdefault(p.doc, {"partial": True} if held["partial"] else {})[p.key] = _Column(held[p.key])
    used = {
        p.doc for p in metric_parts() if any((c != p.fill).any() for c in _chunks(s["metrics"][p.doc][p.key]))
    }
    # A partial metric that recorded nothing is left out: a state stored without it stays so.
    metrics = {name: v for name, v in metrics.items() if name in used or not v.get("partial")}
    return out | ({"metrics": metrics} if metrics else {})


def _text(value: Any) -> Iterator[str]:
    """``json.dumps(value, sort_keys=True, separators=_SEP)`` in pieces (a `_Column` a slice at a time)."""
    if isinstance(value, dict):
        for i, key in enumerate(sorted(value)):
            yield ("," if i else "{") + json.dumps(key) + ":"
            yield from _text(value[key])
        yield "}" if value else "{}"
    elif isinstance(value, _Column):
        yield "["
        for i, rows in enumerate(value.lists()):
            yield ("," if i else "") + json.dumps(rows, sort_keys=True, separators=_SEP)[1:-1]
        yield "]"
    else:
        yield json.dumps(value, sort_keys=True, separators=_SEP, default=json_default)


def text(state: Mapping[str, Any] | CoverageTracker) -> Iterator[str]:
    """The stored form (JSON, keys sorted, a newline last) of a tracker or a checked-form state, in pieces.

    A tracker's tables are read a slice of rows at a time: writing holds little beside the tracker.
    """
    s = state if isinstance(state, Mapping) else dump(state, whole=False)
    yield from _text(_layout(s))
    yield "\n"


def to_json(s: Mapping[str, Any]) -> dict[str, Any]:
    """A checked-form state as JSON-safe data (the stored layout `text` writes)."""
    return _data(_layout(s))


def _data(value: Any) -> Any:
    if isinstance(value, _Column):
        return [row for rows in value.lists() for row in rows]
    return {k: _data(v) for k, v in value.items()} if isinstance(value, dict) else value


def check(state: Any) -> dict[str, Any]:
    """The checked form of a state (older formats converted): tables as int arrays, metrics by name.

    Raises ValueError in one line: "corrupted CoverageTracker state: <the first problem>" (or "not a
    seffi CoverageTracker state").
    """
    state = state_v1.upgrade(state)
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"not a seffi CoverageTracker state (expected format {STATE_FORMAT!r})")
    try:
        return _checked(state)
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError, ValueError) as exc:
        text = str(exc) if type(exc) is ValueError else f"{type(exc).__name__}: {exc}"
        raise ValueError(f"corrupted CoverageTracker state: {text}") from exc


def _checked(state: Mapping[str, Any]) -> dict[str, Any]:
    """Each part checked in storage order (the settings bound the rest), then the rules tying them."""
    s: dict[str, Any] = {"format": STATE_FORMAT, "metrics": {}}
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
            _hold(_setting_rules(s) if p.name == "columns" else ())
            continue
        held = stored.get(p.doc) if p.where == "metrics" else state[p.where]
        into = s["metrics"][p.doc] if p.where == "metrics" else s.setdefault(p.where, {})
        n = len(state["runs"]["input"] if p.where == "runs" else state["inputs"]["input_id"])
        if p.where in _RECORDS:  # a list of records, checked as columns (its checked form)
            columns = isinstance(held, Mapping) and held.keys() == set(_RECORDS[p.where])
            if not columns and not isinstance(held, list):
                raise ValueError(f"{p.where} must be a list")
            n = len(held[_RECORDS[p.where][0]] if columns else held)
            held = held if columns else {p.key: [r[p.key] for r in held]}
        w = None if p.width is None else len(s["columns"]) if p.width == "columns" else s[p.width]
        if w == 0 and p.width != "columns":  # a matrix of width 0 is not stored
            if p.key in (held or {}):
                raise ValueError(f"{p.name} is present but its declaration says it is not")
        elif held is None:  # a metric the state lacks
            into[p.key] = np.full((n,) if w is None else (n, w), p.fill, dtype=np.int64)
        elif p.kind == "list":  # a list of ints per row
            if len(held[p.key]) != n or not all(isinstance(v, list) for v in held[p.key]):
                raise ValueError(f"{p.name} must be a list of ints in each of {n} rows")
            _ints([x for v in held[p.key] for x in v], p, (sum(map(len, held[p.key])),), s)
            into[p.key] = [list(v) for v in held[p.key]]
        elif p.kind != "str":
            into[p.key] = _ints(held[p.key], p, (n,) if w is None else (n, w), s)
        elif not isinstance(v := held[p.key], list) or len(v) != n or set(map(type, v)) - {str}:
            raise ValueError(f"{p.name} must be a list of {n} strings")
        else:
            into[p.key] = list(v)
    _hold(_rules(s))
    return s


def _hold(rules: Any) -> None:
    """Raise the message of the first broken rule of ``rules`` ((broken, message) pairs)."""
    if broken := next((message for bad, message in rules if bad), None):
        raise ValueError(broken)


def _setting_rules(s: Mapping[str, Any]) -> Any:
    cols, M, declared = s["columns"], s["num_strategies"], s["strategies"] is not None
    unique = len(set(cols)) == len(cols) <= MAX_STRATEGIES
    yield not unique, f"columns must be at most {MAX_STRATEGIES} unique strategy ids"
    yield declared and cols != s["strategies"], "columns must be the declared strategies"
    yield declared and M != len(cols), f"num_strategies={M} but {len(cols)} strategies are declared"


def _repeats(a: np.ndarray, b: np.ndarray) -> bool:
    order = np.lexsort((b, a))  # a sort: np.unique(axis=0) takes 3x as long on 4M runs
    return bool(((np.diff(a[order]) == 0) & (np.diff(b[order]) == 0)).any())


def _rules(s: Mapping[str, Any]) -> Any:
    r, K, o, b, m = s["runs"], s["budget"] or 0, s["open_runs"], s["barcode"], s["inputs"]["m"]
    u, n, nv, fv, out, fh, fvh = (r[k] for k in ("input", "n", "n_valid", "first_valid", "beyond", *_HITS))
    lat, N = r.get("latent_first_hit"), n[:, None]
    ids = list(zip(s["inputs"]["task"], s["inputs"]["input_id"], strict=True))
    yield ids != sorted(set(ids)), "inputs must be unique and sorted"
    yield _repeats(u, r["stream"]), "runs must be unique per (input, stream)"
    bad = (nv > n).any() or (fv >= n).any() or ((fv < 0) != (nv == 0)).any()
    yield bad, "runs have inconsistent n / n_valid / first_valid"
    bad = (fh >= N).any() or ((fvh >= 0) & ((fh < 0) | (fvh < fh) | (fvh >= N))).any()
    yield bad, "runs have first hits outside their samples"
    yield ((fh >= 0).sum(axis=1) > m[u]).any(), "a run matched more distinct strategies than its input's M_x"
    yield lat is not None and (lat >= N).any(), "runs have latent first hits outside their samples"
    for p in COUNTERS:  # each counter is the runs' figure
        yield s[p.name] != (want := p.derive(s)), f"{p.name}={s[p.name]} must be the runs' {want} {p.doc}"
    bad = np.unique(u[n >= K]).size * K > MAX_SUM_CELLS
    yield bad, f"inputs with a complete run x budget exceed the cap of {MAX_SUM_CELLS} per-input sums"
    yield ((out > 0) & (n != K)).any(), "a run has samples beyond the budget but fewer than budget samples"
    bad = (o["count"] != n[o["run"]] + out[o["run"]]).any()  # all samples vs the first K
    yield bad, "an open run does not match its run (count = n + beyond)"
    yield _repeats(u[o["run"]], o["env_index"]), "two open runs share an (input, env_index)"
    bars, most = len(b["input"]), s["barcode_rows"]
    yield bars > most, f"{bars} barcode rows but barcode_rows={most}"
    rows = zip(b["cells"], b["new"], strict=True)
    bad = any(len(c) != len(f) or len(c) > s["barcode_cols"] for c, f in rows)
    yield bad, "a barcode row needs cells and new flags of one length, at most barcode_cols"
    yield np.unique(b["input"]).size < bars, "barcode rows must be one per input"


def _inverse(order: np.ndarray) -> np.ndarray:
    """The inverse of permutation ``order``, int32: a tracker holds far fewer than 2^31 inputs or runs."""
    inverse = np.empty(order.size, dtype=np.int32)
    inverse[order] = np.arange(order.size, dtype=np.int32)
    return inverse


def _open_runs(a: Any, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Assigner ``a``'s open runs in run order (``runs``: the slot of each run): rows, runs, env indices."""
    rows, env = a.open_runs()
    run = _inverse(runs)[a.o_slot[rows]]  # an open run's row is its slot's
    by_run = np.argsort(run)
    return rows[by_run], run[by_run], env[by_run]


def dump(t: CoverageTracker, *, whole: bool = True) -> dict[str, Any]:
    """Tracker ``t``'s state in checked form: inputs in key order, runs in (input, stream) order.

    ``whole=False``: each table column a `_Rows` of ``t``'s arrays, read a slice at a time (by `text`).
    """
    a, C, order = t.assigner, len(t.columns), t.input_order()
    rank = _inverse(order)  # input code -> its row
    unit = rank[a.slot_input]
    runs = np.lexsort((a.slot_stream, unit)).astype(np.int32)
    s: dict[str, Any] = {"format": STATE_FORMAT, **{p.name: getattr(t, p.name) for p in SETTINGS + COUNTERS}}
    s["strategies"], s["columns"] = None if t.strategies is None else list(t.strategies), list(t.columns)

    def stored(index: np.ndarray, take: Any) -> Any:  # rows ``index`` now, or a slice at a time (`text`)
        return take(index) if whole else _Rows(take, index)

    takes = (t.keys.task_names, t.keys.ids, t.m.__getitem__, a.next_stream.__getitem__)
    s["inputs"] = {p.key: stored(order, take) for p, take in zip(INPUT_FIELDS, takes, strict=True)}
    s["runs"] = {"input": stored(runs, unit.__getitem__), "stream": stored(runs, a.slot_stream.__getitem__)}
    for p in t.runs.fields:
        held = getattr(t.runs, p.key)
        take = (lambda r, x=held: x[r, :C]) if p.width == "columns" else held.__getitem__
        s["runs"][p.key] = stored(runs, take)
    rows, run, env = _open_runs(a, runs)
    fields = zip(_RECORDS["open_runs"][2:], (a.o_cnt, a.o_si, a.o_ri), strict=True)
    s["open_runs"] = {"run": run, "env_index": env} | {k: stored(rows, x.__getitem__) for k, x in fields}
    bars = sorted((int(rank[c]), st, x, list(map(int, f))) for c, st, x, f in t.bar.rows_held())
    cols = [list(c) for c in zip(*bars, strict=True)] or [[]] * 4
    ints = [np.array(c, dtype=np.int64) for c in cols[:2]]
    s["barcode"] = dict(zip(_RECORDS["barcode"], (*ints, *cols[2:]), strict=True))
    for m in t.metrics:
        m.grow(len(t.keys), C)
    s["metrics"] = {
        m.name: {"partial": m.partial} | {k: stored(order, m.rows(k).__getitem__) for k in m.specs}
        for m in t.metrics
    }
    return s


def load(cls: type[CoverageTracker], state: Any, *, barcode_rows: int | None = None) -> CoverageTracker:
    """A new tracker holding ``state`` (stored or checked; open runs stay open; ``barcode_rows``: kept)."""
    s = check(state)
    rows = s["barcode_rows"] if barcode_rows is None else barcode_rows  # checked by the tracker
    t = _add(_new(cls, {**s, "barcode_rows": rows}), s)  # its barcode keeps the smallest keys
    t._rebuild_sums()
    return t


def _new(cls: type[CoverageTracker], s: Mapping[str, Any]) -> CoverageTracker:
    spec = s["strategies"] if s["strategies"] is not None else s["num_strategies"]
    return cls(spec, **{p.name: s[p.name] for p in SETTINGS[2:-1]})  # task .. stream_offset


def _add(t: CoverageTracker, s: Mapping[str, Any], *, merged: bool = False) -> CoverageTracker:
    """``t`` with checked state ``s``'s runs added; ``merged``: ``t`` keeps its open runs, next streams."""
    inp, runs = s["inputs"], s["runs"]
    cols = np.array([t._column(c) for c in s["columns"]], dtype=np.int64)  # s's columns in t
    codes = np.full(len(inp["task"]), -1, dtype=np.int64)
    for task in set(inp["task"]):  # a few tasks: their inputs coded at once
        rows = [i for i, x in enumerate(inp["task"]) if x == task]
        codes[rows] = t.keys.codes(task, [inp["input_id"][i] for i in rows])
    if (clash := np.flatnonzero((codes >= 0) & (t._m[np.maximum(codes, 0)] != inp["m"]))).size:
        j, m = int(clash[0]), inp["m"]
        raise ValueError(f"cannot merge: input {inp['input_id'][j]!r} has M_x {t.m[codes[j]]} vs {m[j]}")
    new = np.flatnonzero(codes < 0)
    t._add_inputs([(inp["task"][i], inp["input_id"][i]) for i in new.tolist()], inp["m"][new])
    codes[new] = np.arange(len(t.keys) - new.size, len(t.keys))
    u = codes[runs["input"]]
    if merged and (both := np.flatnonzero(t._slots_of(u, runs["stream"]) >= 0)).size:
        held = [(*t.keys[int(u[j])], int(runs["stream"][j])) for j in both[:3]]
        raise ValueError(f"cannot merge: both trackers hold run(s) {held} (task, input_id, stream)")
    slots = t.assigner.add_slots(runs["stream"], u)
    t.runs.grow(t.assigner.n_slots)
    for p in t.runs.fields:
        getattr(t.runs, p.key)[np.ix_(slots, cols) if p.width == "columns" else slots] = runs[p.key]
    if not merged:
        t.assigner.raise_next(codes, inp["next_stream"])
        o, run = s["open_runs"], s["open_runs"]["run"]
        t.assigner.restore_open(
            u[run], o["env_index"], slots[run], o["count"], o["sample_index"], o["run_index"]
        )
    t.bar.grow(len(t.keys))
    b = s["barcode"]
    for c, st, x, f in zip(b["input"].tolist(), b["stream"].tolist(), b["cells"], b["new"], strict=True):
        t.bar.put(int(codes[c]), st, [int(cols[j]) if j >= 0 else j for j in x], [bool(y) for y in f], t.keys)
    for p in COUNTERS:
        setattr(t, p.name, _OPS[p.merge](getattr(t, p.name), s[p.name]))
    for m in t.metrics:
        m.grow(len(t.keys), len(t.columns))
        m.partial = m.partial or s["metrics"][m.name]["partial"]
        for k, p in m.specs.items():  # into int64 arrays (a tracker fits their type after)
            ix = np.ix_(codes, cols) if p.width else codes
            getattr(m, k)[ix] = _OPS[p.merge](getattr(m, k)[ix], s["metrics"][m.name][k])
    return t


def merge(cls: type[CoverageTracker], a: Mapping[str, Any], b: Mapping[str, Any]) -> CoverageTracker:
    """A tracker holding checked state ``a`` with ``b``'s runs added (ValueError: they do not mix)."""
    agree = [(a[p.name], b[p.name]) for p in SETTINGS if p.merge == "agree"]
    if any(x != y for x, y in agree):
        text = "cannot merge trackers with different strategy sets, budget or latent codes"
        raise ValueError(f"{text}: {tuple(x for x, _ in agree)!r} vs {tuple(y for _, y in agree)!r}")
    return load(cls, dump(_add(_add(_new(cls, a), a), b, merged=True)))  # in canonical order


def shift_streams(state: Any, offset: int) -> dict[str, Any]:
    """A copy of a state (JSON-safe) with every stream moved up by ``offset``."""
    s = check(state)
    offset = _int(offset, "offset", 0, _BIG)
    s = {**s, "runs": {**s["runs"], "stream": s["runs"]["stream"] + offset}}
    s["stream_offset"] = _int(s["stream_offset"] + offset, "stream_offset", 0, _BIG)
    if s["runs"]["stream"].size and s["runs"]["stream"].max() >= _BIG:
        raise ValueError(f"shifting by {offset} moves streams past {_BIG}")
    s["barcode"] = {**s["barcode"], "stream": s["barcode"]["stream"] + offset}
    return to_json(s)


def stream_span(state: Any) -> int:
    """1 + the highest stream number in a state (0 when it holds no run)."""
    return int(check(state)["runs"]["stream"].max(initial=-1)) + 1

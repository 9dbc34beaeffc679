"""Operations on the tracker's declared state (`seffi.coverage.state`): dump, load, merge, shift.

`dump` / `to_json` give ``state_dict``, `load` checks a stored state
(`seffi.coverage.state_check.check`) and fills a tracker from it, `merge` combines two
states by the declared merge rules, `shift_streams` moves a state's runs to other streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi.coverage.input_metrics import InputMetric, registered
from seffi.coverage.state import (
    _BIG,
    COUNTERS,
    INPUT_FIELDS,
    OPEN_FIELDS,
    RUN_FIELDS,
    RUN_TABLE_FIELDS,
    SETTINGS,
    STATE,
    STATE_FORMAT,
    _int,
    pack_rows,
    present,
)
from seffi.coverage.state_check import check
from seffi.coverage.sums import RunTable

if TYPE_CHECKING:
    from seffi.coverage.tracker import CoverageTracker

__all__ = ["check", "dump", "load", "merge", "shift_streams", "stream_span", "to_json"]


# -- writing ----------------------------------------------------------------------------------------------


def dump(t: CoverageTracker) -> dict[str, Any]:
    """Tracker ``t``'s state, checked-form (inputs and runs in sorted key order, columns as arrays)."""
    S = t.assigner.n_slots
    order = t.input_order()
    new_code = np.empty(len(t.keys), dtype=np.int64)
    new_code[order] = np.arange(order.size)
    unit = new_code[t.assigner.slot_input]
    stream = t.assigner.slot_stream
    runs = np.lexsort((stream, unit)) if S else np.zeros(0, dtype=np.int64)
    run_pos = np.empty(S, dtype=np.int64)
    run_pos[runs] = np.arange(S)
    s: dict[str, Any] = {"format": STATE_FORMAT}
    for p in SETTINGS:
        s[p.name] = list(t.columns) if p.name == "columns" else getattr(t, p.name)
    if s["strategies"] is not None:
        s["strategies"] = list(s["strategies"])
    keys = [t.keys[c] for c in order.tolist()]
    s["inputs"] = {"task": [k[0] for k in keys], "input_id": [k[1] for k in keys]}
    s["inputs"]["m"] = t.m[order]
    s["inputs"]["next_stream"] = t.assigner.next_stream[: len(t.keys)][order]
    s["runs"] = {"input": unit[runs], "stream": stream[runs]}
    C = len(t.columns)
    for p in RUN_TABLE_FIELDS:
        if present(p, s):
            values = getattr(t.runs, p.key)[:S][runs]
            s["runs"][p.key] = values[:, :C] if p.width == "columns" else values
    for p in COUNTERS:
        s[p.name] = getattr(t, p.name)
    s["open_runs"] = [
        dict(zip(OPEN_FIELDS, r, strict=True))
        for r in sorted(
            (int(run_pos[slot]), env, count, si, ri) for _, env, slot, count, si, ri in t.assigner.open_runs()
        )
    ]
    s["metrics"] = {m.name: m.taken(order) for m in t.metrics}
    s["barcode"] = [
        {"input": int(new_code[code]), "stream": st, "cells": cells, "new": [int(b) for b in new]}
        for code, st, cells, new in sorted(t.bar.rows_held(), key=lambda r: new_code[r[0]])
    ]
    return s


def to_json(s: Mapping[str, Any]) -> dict[str, Any]:
    """A checked-form state as JSON-safe data (the stored layout; first-hit rows packed)."""
    out: dict[str, Any] = {"format": STATE_FORMAT}
    for p in SETTINGS:
        out[p.name] = s[p.name]
    out["inputs"] = {
        "task": list(s["inputs"]["task"]),
        "input_id": list(s["inputs"]["input_id"]),
        **{p.key: np.asarray(s["inputs"][p.key]).tolist() for p in INPUT_FIELDS if p.merge != "key"},
    }
    out["runs"] = {}
    for p in RUN_FIELDS:
        if p.key in s["runs"]:
            values = np.asarray(s["runs"][p.key], dtype=np.int64)
            out["runs"][p.key] = pack_rows(values) if p.width else values.tolist()
    out["open_runs"] = [dict(r) for r in s["open_runs"]]
    out["barcode"] = [dict(b) for b in s["barcode"]]
    metrics = {name: m.state_dict() for name, m in s["metrics"].items()}
    if any(v is not None for v in metrics.values()):  # a state without metrics stays without them
        out["metrics"] = {name: v for name, v in metrics.items() if v is not None}
    for p in COUNTERS:
        out[p.name] = s[p.name]
    # The stored key order of format 2 (settings, tables, open runs, barcode, counters).
    return out


# -- reading ----------------------------------------------------------------------------------------------


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
    t = cls(
        spec,
        **{p.name: s[p.name] for p in SETTINGS if p.name not in ("strategies", "num_strategies", "columns")},
    )
    _fill(t, s)
    return t


def _fill(t: CoverageTracker, s: Mapping[str, Any]) -> None:
    """Fill fresh tracker ``t`` with checked state ``s`` (inputs and runs in their stored order)."""
    inp, runs = s["inputs"], s["runs"]
    t.keys = list(zip(inp["task"], inp["input_id"], strict=True))
    U = len(t.keys)
    t._code = {key: i for i, key in enumerate(t.keys)}
    t._code.update({x: i for i, (task, x) in enumerate(t.keys) if task == t.task})  # raw ids
    t._m = np.zeros(max(16, U), dtype=np.int64)
    t._m[:U] = inp["m"]
    t._order = (U, np.arange(U, dtype=np.int64))  # stored inputs are in sorted key order
    t.columns = list(s["columns"])
    t._col = {c: j for j, c in enumerate(t.columns)}
    t.runs = RunTable(len(t.columns), t.num_latents, budget=t.budget)
    t.assigner.ensure_inputs(U)
    R = len(runs["input"])
    t.assigner.add_slots(
        np.asarray(runs["stream"], dtype=np.int64), np.asarray(runs["input"], dtype=np.int64)
    )
    t.assigner.next_stream[:U] = np.maximum(t.assigner.next_stream[:U], inp["next_stream"])
    t.runs.grow(R)
    for p in t.runs.fields:
        if p.key in runs:
            getattr(t.runs, p.key)[:R] = runs[p.key]
    for r in s["open_runs"]:
        code = int(runs["input"][r["run"]])
        t.assigner.restore_open(code, r["env_index"], r["run"], r["count"], r["sample_index"], r["run_index"])
    t.bar.grow(U)
    for b in s["barcode"]:
        t.bar.put(b["input"], b["stream"], list(b["cells"]), [bool(x) for x in b["new"]], t.keys)
    for p in COUNTERS:
        setattr(t, p.name, s[p.name])
    for i, m in enumerate(t.metrics):
        loaded = s["metrics"].get(m.name)
        if loaded is None:  # an older state: the metric counts the samples recorded from now on
            m.grow(U, len(t.columns))
            m.partial = True
        t.metrics[i] = loaded if loaded is not None else m
    t._rebuild_sums()


def merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The checked-form state ``a`` with ``b``'s runs added, by the merge rules of `STATE`.

    Raises:
        ValueError: the settings differ, an input's M_x differs, or a run is in both.
    """
    agree = [p.name for p in SETTINGS if p.merge == "agree"]
    mine, theirs = (tuple(x[name] for name in agree) for x in (a, b))
    if mine != theirs:
        raise ValueError(
            "cannot merge trackers with different strategy sets, budget or latent codes: "
            f"{mine!r} vs {theirs!r}"
        )
    s: dict[str, Any] = {"format": STATE_FORMAT}
    for p in SETTINGS:
        s[p.name] = a[p.name]
    s["columns"] = list(a["columns"]) + [c for c in b["columns"] if c not in set(a["columns"])]
    col_of = {c: j for j, c in enumerate(s["columns"])}
    b_cols = np.array([col_of[c] for c in b["columns"]], dtype=np.int64)
    ka = list(zip(a["inputs"]["task"], a["inputs"]["input_id"], strict=True))
    kb = list(zip(b["inputs"]["task"], b["inputs"]["input_id"], strict=True))
    keys = sorted(set(ka) | set(kb))
    index = {k: i for i, k in enumerate(keys)}
    ia = np.array([index[k] for k in ka], dtype=np.int64)
    ib = np.array([index[k] for k in kb], dtype=np.int64)
    m = np.zeros(len(keys), dtype=np.int64)
    m[ib] = b["inputs"]["m"]
    mine_m = np.asarray(a["inputs"]["m"], dtype=np.int64)
    both = (m[ia] != 0) & (m[ia] != mine_m)
    if both.any():
        j = int(np.flatnonzero(both)[0])
        raise ValueError(f"cannot merge: input {ka[j][1]!r} has M_x {int(mine_m[j])} vs {int(m[ia[j]])}")
    m[ia] = mine_m
    nxt = np.zeros(len(keys), dtype=np.int64)
    nxt[ia] = a["inputs"]["next_stream"]  # the other's runs are closed: its next streams do not apply
    s["inputs"] = {"task": [k[0] for k in keys], "input_id": [k[1] for k in keys], "m": m, "next_stream": nxt}
    ra, rb = a["runs"], b["runs"]
    unit = np.concatenate([ia[ra["input"]], ib[rb["input"]]]).astype(np.int64)
    stream = np.concatenate([ra["stream"], rb["stream"]]).astype(np.int64)
    pair = unit * (_BIG + 1) + stream
    uniq, counts = np.unique(pair, return_counts=True)
    if (counts > 1).any():
        dup = uniq[counts > 1][:3]
        clash = [
            (keys[int(p // (_BIG + 1))][0], keys[int(p // (_BIG + 1))][1], int(p % (_BIG + 1))) for p in dup
        ]
        raise ValueError(f"cannot merge: both trackers hold run(s) {clash} (task, input_id, stream)")
    order = np.lexsort((stream, unit))
    s["runs"] = {"input": unit[order], "stream": stream[order]}
    C = len(s["columns"])
    for p in RUN_TABLE_FIELDS:
        if p.key not in ra:
            continue
        va, vb = np.asarray(ra[p.key], dtype=np.int64), np.asarray(rb[p.key], dtype=np.int64)
        if p.width == "columns":
            wa = np.full((va.shape[0], C), p.fill, dtype=np.int64)
            wa[:, : va.shape[1]] = va
            wb = np.full((vb.shape[0], C), p.fill, dtype=np.int64)
            wb[:, b_cols] = vb
            va, vb = wa, wb
        s["runs"][p.key] = np.concatenate([va, vb])[order]
    pos = np.empty(order.size, dtype=np.int64)
    pos[order] = np.arange(order.size)
    s["open_runs"] = sorted(
        ({**r, "run": int(pos[r["run"]])} for r in a["open_runs"]), key=lambda r: r["run"]
    )
    bars: dict[int, dict[str, Any]] = {}
    for rows, codes, cols in ((a["barcode"], ia, None), (b["barcode"], ib, b_cols)):
        for row in rows:
            code = int(codes[row["input"]])
            cells = [int(cols[c]) if cols is not None and c >= 0 else c for c in row["cells"]]
            if code not in bars or row["stream"] < bars[code]["stream"]:
                bars[code] = {**row, "input": code, "cells": cells}
    cut = s["barcode_cols"]
    s["barcode"] = [
        {**bars[c], "cells": bars[c]["cells"][:cut], "new": bars[c]["new"][:cut]}
        for c in sorted(bars)[: s["barcode_rows"]]
    ]
    for p in COUNTERS:
        s[p.name] = (a[p.name] or b[p.name]) if p.merge == "or" else a[p.name] + b[p.name]
    s["metrics"] = {}
    for cls in registered():
        ma, mb = (x["metrics"].get(cls.name) for x in (a, b))
        ma = ma if ma is not None else _partial(cls, len(ka), len(a["columns"]))
        mb = mb if mb is not None else _partial(cls, len(kb), len(b["columns"]))
        s["metrics"][cls.name] = ma.merged(mb, (ia, ib), b_cols, (len(keys), C))
    return s


def _partial(cls: type[InputMetric], n_inputs: int, n_columns: int) -> InputMetric:
    """An empty metric for a state that does not hold it (its counts are missing, not zero)."""
    m = cls()
    m.grow(n_inputs, n_columns)
    m.partial = True
    return m


# -- workers' streams -------------------------------------------------------------------------------------


def shift_streams(state: Any, offset: int) -> dict[str, Any]:
    """A copy of a state (JSON-safe) with every stream moved up by ``offset``."""
    s = check(state)
    offset = _int(offset, "offset", 0, _BIG)
    s = {**s, "runs": dict(s["runs"])}
    for p in STATE:
        if p.stream and p.where == "setting":
            s[p.name] = _int(s[p.name] + offset, p.name, 0, _BIG)
        elif p.stream:
            s["runs"][p.key] = s["runs"][p.key] + offset
            if s["runs"][p.key].size and s["runs"][p.key].max() >= _BIG:
                raise ValueError(f"shifting by {offset} moves streams past {_BIG}")
    s["barcode"] = [{**b, "stream": b["stream"] + offset} for b in s["barcode"]]
    return to_json(s)


def stream_span(state: Any) -> int:
    """1 + the highest stream number in a state (0 when it holds no run)."""
    streams = check(state)["runs"]["stream"]
    return int(streams.max()) + 1 if streams.size else 0

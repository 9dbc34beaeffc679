"""The tracker's state format (version 2: integer arrays) — write, check, read, merge, shift; reads v1.

Everything here follows ``tracker.STATE``: runs are a disjoint union keyed by (task, input, stream),
inputs a union (M_x must agree), the barcode keeps each input's lowest-stream row, counters add up.
Per-input sums are never stored: they are derived from the runs (``sums_from_runs``) on load, so a
state holds each run once.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi.coverage.sums import RunTable, sums_from_runs

if TYPE_CHECKING:
    from seffi.coverage.tracker import CoverageTracker

STATE_FORMAT = "seffi.coverage.tracker/2"
V1_FORMAT = "seffi.coverage.tracker/1"
MONITOR_V1_FORMAT = "seffi.callbacks.monitor/1"
_OPEN_FIELDS = ("run", "env_index", "count", "sample_index", "run_index")
_MAX = 2**53  # counts above this are corrupt (and would lose precision as JSON numbers)


def to_state(t: CoverageTracker) -> dict[str, Any]:
    """The JSON-safe version-2 state of tracker ``t`` (inputs and runs in sorted key order)."""
    S = t.assigner.n_slots
    order = t.input_order().tolist()
    new_code = np.empty(len(t.keys), dtype=np.int64)
    new_code[order] = np.arange(len(order))
    unit = new_code[t.assigner.slot_input]
    stream = t.assigner.slot_stream
    runs = np.lexsort((stream, unit)) if S else np.zeros(0, dtype=np.int64)
    run_pos = np.empty(S, dtype=np.int64)
    run_pos[runs] = np.arange(S)
    C = len(t.columns)
    state_runs: dict[str, Any] = {
        "input": unit[runs].tolist(),
        "stream": stream[runs].tolist(),
    }
    for name in RunTable.FIELDS:  # the per-run fields, declared once in RunTable
        values = getattr(t.runs, name)[runs]
        state_runs[name] = _pack_rows(values[:, :C]) if name in RunTable.MATRIX_FIELDS else values.tolist()
    if t.latent_runs is not None:
        t.latent_runs.grow(S)
        state_runs["latent_first_hit"] = _pack_rows(t.latent_runs.first_hit[runs])
    open_runs = sorted(
        (int(run_pos[slot]), env, count, si, ri) for _, env, slot, count, si, ri in t.assigner.open_runs()
    )
    bar = sorted(t.bar.data.items(), key=lambda kv: new_code[kv[0]])
    return {
        "format": STATE_FORMAT,
        "strategies": None if t.strategies is None else list(t.strategies),
        "num_strategies": t.num_strategies,
        "task": t.task,
        "budget": t.budget,
        "barcode_rows": t.barcode_rows,
        "barcode_cols": t.barcode_cols,
        "num_latents": t.num_latents,
        "stream_offset": t.stream_offset,
        "columns": list(t.columns),
        "inputs": {
            "task": [t.keys[c][0] for c in order],
            "input_id": [t.keys[c][1] for c in order],
            "m": t.m[order].tolist(),
            "next_stream": t.assigner.next_stream[order].tolist(),
        },
        "runs": state_runs,
        "open_runs": [dict(zip(_OPEN_FIELDS, r, strict=True)) for r in open_runs],
        "barcode": [
            {"input": int(new_code[c]), "stream": st, "cells": list(cells), "new": [int(b) for b in new]}
            for c, (st, cells, new) in bar
        ],
        "samples": t.samples,
        "valid": t.valid,
        "skipped": t.skipped,
        "has_latent": t.has_latent,
    }


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _pack_rows(matrix: np.ndarray) -> list[str] | list[list[int]]:
    """First-hit rows, compact: one character per cell ("-" = never, else a base-36 digit).

    Used when every index is below 36 (any budget K <= 36), else lists of ints: ~3x smaller states.
    """
    if matrix.size and matrix.max() >= len(_DIGITS):
        return matrix.tolist()
    table = np.array(["-", *_DIGITS])
    return ["".join(row) for row in table[matrix + 1].tolist()]


def _unpack_rows(value: Any, where: str) -> Any:
    """Inverse of :func:`_pack_rows` (lists of ints pass through; a bad character raises)."""
    if not isinstance(value, list) or not value or not isinstance(value[0], str):
        return value
    index = {c: i - 1 for i, c in enumerate(["-", *_DIGITS])}
    try:
        return [[index[c] for c in row] for row in value]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{where} holds a bad packed row") from exc


# -- checking ---------------------------------------------------------------------------------------------


def _ints(value: Any, where: str, shape: tuple[int, ...], lo: int = 0, hi: int = _MAX) -> np.ndarray:
    if shape and shape[0] == 0 and isinstance(value, list) and not value:
        return np.zeros(shape, dtype=np.int64)
    arr = np.asarray(value, dtype=object)
    if arr.shape != shape or not all(
        isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi for v in arr.ravel().tolist()
    ):
        raise ValueError(f"{where} must be ints in [{lo}, {hi}) of shape {shape}")
    return arr.astype(np.int64)


def check(state: Any) -> dict[str, Any]:
    """A validated version-2 state (converting version 1); ValueError names the first problem."""
    if isinstance(state, Mapping) and state.get("format") == V1_FORMAT:
        state = from_v1(state)
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"not a seffi CoverageTracker state (expected format {STATE_FORMAT!r})")
    try:
        state = {**state, "runs": dict(state["runs"])}  # packed rows are unpacked into a copy
        for name in ("barcode_rows", "barcode_cols", "num_latents", "stream_offset"):
            _ints([state[name]], name, (1,))
        if state["budget"] is not None:
            _ints([state["budget"]], "budget", (1,), 1)
        if not isinstance(state["task"], str) or not isinstance(state["has_latent"], bool):
            raise ValueError("task must be a str and has_latent a bool")
        declared = state["strategies"]
        ok = declared is None or (isinstance(declared, list) and all(isinstance(x, str) for x in declared))
        if not ok:
            raise ValueError("strategies must be a list of str or null")
        if state["num_strategies"] is not None:
            _ints([state["num_strategies"]], "num_strategies", (1,), 1)
        cols = state["columns"]
        if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols):
            raise ValueError("columns must be strategy ids")
        if len(set(cols)) != len(cols):
            raise ValueError("columns must be unique strategy ids")
        if state["strategies"] is not None and cols != list(state["strategies"]):
            raise ValueError("columns must be the declared strategies")
        inp = state["inputs"]
        U = len(inp["input_id"])
        if not all(isinstance(x, str) for x in (*inp["task"], *inp["input_id"])) or len(inp["task"]) != U:
            raise ValueError("input tasks and ids must be strings")
        keys = list(zip(inp["task"], inp["input_id"], strict=True))
        if keys != sorted(set(keys)):
            raise ValueError("inputs must be unique and sorted")
        m = _ints(inp["m"], "inputs.m", (U,), 1)
        _ints(inp["next_stream"], "inputs.next_stream", (U,))
        runs = state["runs"]
        R, C = len(runs["input"]), len(cols)
        unit = _ints(runs["input"], "runs.input", (R,), 0, max(U, 1))
        stream = _ints(runs["stream"], "runs.stream", (R,))
        if R and len(set(zip(unit.tolist(), stream.tolist(), strict=True))) != R:
            raise ValueError("runs must be unique per (input, stream)")
        budget = state["budget"]
        n = _ints(runs["n"], "runs.n", (R,), 1, (budget + 1) if budget else _MAX)
        nv = _ints(runs["n_valid"], "runs.n_valid", (R,))
        fv = _ints(runs["first_valid"], "runs.first_valid", (R,), -1)
        for name in ("first_hit", "first_valid_hit", "latent_first_hit"):
            if name in runs:
                runs[name] = _unpack_rows(runs[name], f"runs.{name}")
        fh = _ints(runs["first_hit"], "runs.first_hit", (R, C), -1).reshape(R, C)
        fvh = _ints(runs["first_valid_hit"], "runs.first_valid_hit", (R, C), -1).reshape(R, C)
        if (nv > n).any() or (fv >= n).any() or ((fv < 0) != (nv == 0)).any():
            raise ValueError("runs have inconsistent n / n_valid / first_valid")
        if (fh >= n[:, None]).any() or ((fvh >= 0) & ((fh < 0) | (fvh < fh) | (fvh >= n[:, None]))).any():
            raise ValueError("runs have first hits outside their samples")
        if R and ((fh >= 0).sum(axis=1) > m[unit]).any():
            raise ValueError("a run matched more distinct strategies than its input's M_x")
        Z = state["num_latents"]
        if "latent_first_hit" in runs:
            lat = _ints(runs["latent_first_hit"], "runs.latent_first_hit", (R, Z), -1).reshape(R, Z)
            if (lat >= n[:, None]).any():
                raise ValueError("runs have latent first hits outside their samples")
        for r in state["open_runs"]:
            _ints([r["run"], r["env_index"], r["count"]], "open run", (3,))
            _ints([r["sample_index"], r["run_index"]], "open run index", (2,), -1)
            if not 0 <= r["run"] < R or r["count"] != n[r["run"]]:
                raise ValueError("an open run does not match its run")
        for b in state["barcode"]:
            width = len(b["cells"])
            _ints([b["input"], b["stream"]], "barcode row", (2,))
            _ints(b["cells"], "barcode cells", (width,), -1, C)
            _ints(b["new"], "barcode new flags", (width,), 0, 2)
            if not b["input"] < U:
                raise ValueError("a barcode row names an unknown input")
        for name in ("samples", "valid", "skipped"):
            _ints([state[name]], name, (1,))
        if state["valid"] > state["samples"] or state["samples"] < int(n.sum()):
            raise ValueError("valid must not exceed samples, nor runs hold more samples than recorded")
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"corrupted CoverageTracker state: {type(exc).__name__}: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"corrupted CoverageTracker state: {exc}") from exc
    return dict(state)


# -- applying -------------------------------------------------------------------------------------------


def from_state(cls: type[CoverageTracker], state: Any) -> CoverageTracker:
    """A new tracker holding ``state`` (validated; its open runs stay open)."""
    s = check(state)
    spec = s["strategies"] if s["strategies"] is not None else s["num_strategies"]
    t = cls(
        spec,
        task=s["task"],
        budget=s["budget"],
        barcode_rows=s["barcode_rows"],
        barcode_cols=s["barcode_cols"],
        num_latents=s["num_latents"],
        stream_offset=s["stream_offset"],
    )
    _apply(t, s, keep_open=True)
    return t


def merge_into(t: CoverageTracker, state: Any, *, keep_open: bool) -> None:
    """Add ``state``'s runs to ``t`` (exact; ValueError and ``t`` unchanged on any conflict)."""
    s = check(state)
    mine = (t.strategies, t.num_strategies, t.budget, t.barcode_rows, t.barcode_cols, t.num_latents)
    theirs = (
        None if s["strategies"] is None else tuple(s["strategies"]),
        s["num_strategies"],
        s["budget"],
        s["barcode_rows"],
        s["barcode_cols"],
        s["num_latents"],
    )
    if mine != theirs:
        raise ValueError(
            "cannot merge trackers with different strategy sets, budget, barcode bounds or latent codes: "
            f"{mine!r} vs {theirs!r}"
        )
    keys = list(zip(s["inputs"]["task"], s["inputs"]["input_id"], strict=True))
    for key, m in zip(keys, s["inputs"]["m"], strict=True):
        code = t._code.get(key)
        if code is not None and int(t.m[code]) != m:
            raise ValueError(f"cannot merge: input {key[1]!r} has M_x {int(t.m[code])} vs {m}")
    runs = s["runs"]
    clash = [
        (keys[u][0], keys[u][1], st)
        for u, st in zip(runs["input"], runs["stream"], strict=True)
        if keys[u] in t._code and (t._code[keys[u]], st) in t._slot_of
    ]
    if clash:
        raise ValueError(f"cannot merge: both trackers hold run(s) {clash[:3]} (task, input_id, stream)")
    _apply(t, s, keep_open=keep_open)


def _apply(t: CoverageTracker, s: Mapping[str, Any], *, keep_open: bool) -> None:
    """Add a checked, compatible state to ``t`` (no conflicts left to find)."""
    keys = list(zip(s["inputs"]["task"], s["inputs"]["input_id"], strict=True))
    codes = [t._input_code(key, m) for key, m in zip(keys, s["inputs"]["m"], strict=True)]
    for key, code in zip(keys, codes, strict=True):
        if key[0] == t.task:
            t._code.setdefault(key[1], code)  # the record path looks raw ids up
    cols = np.array([t._column(c) for c in s["columns"]], dtype=np.int64)
    runs = s["runs"]
    R = len(runs["input"])
    slots = np.array(
        [t._slot(codes[u], st) for u, st in zip(runs["input"], runs["stream"], strict=True)], dtype=np.int64
    )
    t.runs.grow(t.assigner.n_slots)
    if R:
        for name in RunTable.FIELDS:
            values = np.asarray(runs[name], dtype=np.int64)
            if name in RunTable.MATRIX_FIELDS:
                getattr(t.runs, name)[slots[:, None], cols[None, :]] = values
            else:
                getattr(t.runs, name)[slots] = values
        if t.latent_runs is not None and "latent_first_hit" in runs:
            t.latent_runs.grow(t.assigner.n_slots)
            t.latent_runs.first_hit[slots] = np.asarray(runs["latent_first_hit"], dtype=np.int64)
            t.latent_runs.n[slots] = runs["n"]
    if keep_open:
        for code, nxt in zip(codes, s["inputs"]["next_stream"], strict=True):
            t.assigner.next_stream[code] = max(int(t.assigner.next_stream[code]), int(nxt))
        for r in s["open_runs"]:
            u = int(t.assigner.slot_input[slots[r["run"]]])
            slot = int(slots[r["run"]])
            t.assigner.restore_open(u, r["env_index"], slot, r["count"], r["sample_index"], r["run_index"])
    t.bar.grow(len(t.keys))
    for b in s["barcode"]:
        code = codes[b["input"]]
        cells = [int(cols[c]) if c >= 0 else -1 for c in b["cells"]]
        t.bar.put(code, b["stream"], cells, [bool(x) for x in b["new"]], t.keys)
    t.samples += s["samples"]
    t.valid += s["valid"]
    t.skipped += s["skipped"]
    t.has_latent |= bool(s["has_latent"])
    _rebuild_sums(t)


def _rebuild_sums(t: CoverageTracker) -> None:
    """Per-input sums derived from every run (exactly what folding the samples one by one gives)."""
    if t.sums is None:
        return
    S, U = t.assigner.n_slots, len(t.keys)
    unit = t.assigner.slot_input
    t.sums, _ = t.derived_sums(t.budget)  # type: ignore[arg-type]
    if t.latent_sums is not None and t.latent_runs is not None:
        t.latent_runs.grow(S)
        Z = np.full(U, t.num_latents)
        lat = t.latent_runs.first_hit[:S]
        t.latent_sums, _ = sums_from_runs(lat, t.runs.n[:S], unit, Z, t.budget)  # type: ignore[arg-type]


# -- workers' streams -------------------------------------------------------------------------------------


def shift_streams(state: Mapping[str, Any], offset: int) -> dict[str, Any]:
    """A copy of a state with every stream moved up by ``offset``."""
    s = copy.deepcopy(check(state))
    offset = int(offset)
    s["stream_offset"] += offset
    s["runs"]["stream"] = [st + offset for st in s["runs"]["stream"]]
    for b in s["barcode"]:
        b["stream"] += offset
    return s


def stream_span(state: Mapping[str, Any]) -> int:
    """1 + the highest stream number in a state (0 when it holds no run)."""
    return 1 + max(check(state)["runs"]["stream"], default=-1)


# -- version 1 --------------------------------------------------------------------------------------------


def from_v1(state: Mapping[str, Any]) -> dict[str, Any]:
    """A version-2 state from a version-1 one (runs as dicts of strategy -> index)."""
    try:
        declared = state["strategies"]
        runs = sorted(state["runs"], key=lambda d: (d["task"], str(d["input_id"]), d["stream"]))
        cols = list(declared) if declared is not None else sorted({s for d in runs for s in d["first_hit"]})
        index = {c: j for j, c in enumerate(cols)}
        keys = sorted({(d["task"], str(d["input_id"])) for d in runs})
        code = {k: i for i, k in enumerate(keys)}
        m = {}
        for d in runs:
            if m.setdefault((d["task"], str(d["input_id"])), d["m"]) != d["m"]:
                raise ValueError(f"input {d['input_id']!r} has inconsistent M_x across runs")
        order_key = (lambda s: (index[s], s)) if declared is not None else (lambda s: (0, s))

        def row(d: Mapping[str, int]) -> list[int]:
            out = [-1] * len(cols)
            for s_, i in d.items():
                out[index[s_]] = i
            return out

        barcode: dict[int, dict[str, Any]] = {}
        for d in runs:
            u = code[(d["task"], str(d["input_id"]))]
            if "barcode" not in d or (u in barcode and barcode[u]["stream"] <= d["stream"]):
                continue
            cells, new, seen = [], [], set()
            for sample in d["barcode"]:
                matched = sorted(sample, key=order_key)
                fresh = [s_ for s_ in matched if s_ not in seen]
                pick = fresh[0] if fresh else (matched[0] if matched else None)
                cells.append(index[pick] if pick is not None else -1)
                new.append(int(bool(fresh)))
                seen.update(matched)
            barcode[u] = {"input": u, "stream": d["stream"], "cells": cells, "new": new}
        return {
            "format": STATE_FORMAT,
            "strategies": declared,
            "num_strategies": state["num_strategies"],
            "task": state["task"],
            "budget": None,
            "barcode_rows": state["barcode_rows"],
            "barcode_cols": state["barcode_cols"],
            "num_latents": 0,
            "stream_offset": 0,
            "columns": cols,
            "inputs": {
                "task": [k[0] for k in keys],
                "input_id": [k[1] for k in keys],
                "m": [m[k] for k in keys],
                "next_stream": [0] * len(keys),
            },
            "runs": {
                "input": [code[(d["task"], str(d["input_id"]))] for d in runs],
                "stream": [d["stream"] for d in runs],
                "n": [d["n"] for d in runs],
                "n_valid": [d["n_valid"] for d in runs],
                "first_valid": [d["first_valid"] for d in runs],
                "first_hit": [row(d["first_hit"]) for d in runs],
                "first_valid_hit": [row(d["first_valid_hit"]) for d in runs],
            },
            "open_runs": [],
            "barcode": [barcode[u] for u in sorted(barcode)],
            "samples": sum(d["n"] for d in runs),
            "valid": sum(d["n_valid"] for d in runs),
            "skipped": 0,
            "has_latent": False,
        }
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"corrupted CoverageTracker state (version 1): {type(exc).__name__}: {exc}") from exc


def from_monitor_v1(state: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """(version-2 tracker state, episodes) of a version-1 ``CoverageMonitor`` state.

    Version 1 kept the latent-code diagnostic only as per-input sums, not per run, so it restarts
    empty; every curve, counter, open run and barcode row carries over.
    """
    try:
        s = from_v1(state["tracker"])
        s["budget"] = int(state["budget"])
        s["barcode_rows"], s["barcode_cols"] = 2**31, s["budget"]  # the monitor's: a row per input
        s["num_latents"] = int(state["num_latents"] or 0)
        s["stream_offset"] = int(state["stream_offset"])
        ids = s["inputs"]["input_id"]
        code = {x: u for u, x in enumerate(ids)}
        s["inputs"]["next_stream"] = [int(state["inputs"][x]["next_stream"]) for x in ids]
        run_of = {
            (u, st): r for r, (u, st) in enumerate(zip(s["runs"]["input"], s["runs"]["stream"], strict=True))
        }
        s["open_runs"] = sorted(
            (
                {
                    "run": run_of[(code[r["input_id"]], int(r["stream"]))],
                    "env_index": int(r["env_index"]),
                    "count": int(r["count"]),
                    "sample_index": int(r["sample_index"]),
                    "run_index": int(r["run_index"]),
                }
                for r in state["open_runs"]
            ),
            key=lambda r: r["run"],
        )
        if s["num_latents"]:
            s["runs"]["latent_first_hit"] = [[-1] * s["num_latents"] for _ in s["runs"]["input"]]
        s["barcode"] = []
        for x in ids:
            bar = state["inputs"][x].get("barcode")
            if bar is not None:
                cells = [int(c) for c in bar["cells"]]
                new, seen = [], set()
                for c in cells:  # v1 stored cells only: a cell is new when its strategy is
                    new.append(int(c >= 0 and c not in seen))
                    seen.add(c)
                row = {"input": code[x], "stream": int(bar["stream"]), "cells": cells, "new": new}
                s["barcode"].append(row)
        s["samples"], s["valid"] = int(state["samples"]), int(state["valid"])
        s["skipped"] = int(state["skipped_beyond_budget"])
        return s, int(state["episodes"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"corrupted CoverageMonitor state (version 1): {type(exc).__name__}: {exc}") from exc

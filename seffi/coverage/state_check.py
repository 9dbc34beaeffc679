"""Checking a stored tracker state against its declaration (`seffi.coverage.state.STATE`).

The settings are checked first and bound everything else; the sizes that allocate memory are capped
before anything is allocated; every problem is one ValueError line.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from seffi.coverage import state_v1
from seffi.coverage.input_metrics import InputMetric, registered
from seffi.coverage.state import (
    _BIG,
    _DIGITS,
    COUNTERS,
    INPUT_FIELDS,
    MAX_STRATEGIES,
    MAX_SUM_CELLS,
    OPEN_FIELDS,
    RUN_FIELDS,
    SETTINGS,
    STATE_FORMAT,
    Part,
    _hi,
    _int,
    present,
    width,
)

__all__ = ["check"]

_UNPACK = np.full(256, -2, dtype=np.int64)  # byte -> cell (-2: not a packed character)
_UNPACK[ord("-")] = -1
_UNPACK[[ord(c) for c in _DIGITS]] = np.arange(len(_DIGITS))


def _column(value: Any, where: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """An int array of ``shape`` in [lo, hi) from a list, a list of rows, packed rows or an array."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu":
            raise ValueError(f"{where} must hold ints")
        arr = value.astype(np.int64, copy=False)
    elif not isinstance(value, list):
        raise ValueError(f"{where} must be a list")
    elif len(shape) == 1:
        if not set(map(type, value)) <= {int}:
            raise ValueError(f"{where} must hold ints")
        arr = np.array(value, dtype=np.int64) if value else np.zeros(0, dtype=np.int64)
    else:
        arr = _matrix(value, where, shape)
    if arr.shape != shape:
        raise ValueError(f"{where} must have shape {shape}, got {arr.shape}")
    if arr.size and (arr.min() < lo or arr.max() >= hi):
        raise ValueError(f"{where} must hold ints in [{lo}, {hi})")
    return arr


def _matrix(rows: list[Any], where: str, shape: tuple[int, ...]) -> np.ndarray:
    """Rows as lists of ints or packed strings (all of one kind), checked against ``shape``."""
    R, C = shape
    if len(rows) != R:
        raise ValueError(f"{where} must have {R} rows, got {len(rows)}")
    if not rows:
        return np.zeros(shape, dtype=np.int64)
    kinds = set(map(type, rows))
    if not kinds <= {str, list} or len(kinds) != 1 or set(map(len, rows)) != {C}:
        raise ValueError(f"{where} must be {R} rows of {C} cells")
    if kinds == {str}:
        try:
            raw = np.frombuffer("".join(rows).encode("ascii"), dtype=np.uint8)
        except UnicodeEncodeError:
            raise ValueError(f"{where} holds a bad packed row") from None
        cells = _UNPACK[raw]
        if (cells < -1).any():
            raise ValueError(f"{where} holds a bad packed row")
        return cells.reshape(R, C)
    flat = [v for row in rows for v in row]
    if not set(map(type, flat)) <= {int}:
        raise ValueError(f"{where} must hold ints")
    return np.array(flat, dtype=np.int64).reshape(R, C)


# -- checking ---------------------------------------------------------------------------------------------


def check(state: Any) -> dict[str, Any]:
    """A validated state (format 2; format 1 is converted), every value bounded by its declaration.

    The settings are checked first and bound everything else (M_x <= num_strategies, first hits
    inside their runs, run lengths <= budget, ...), the counters must agree with the runs, and the
    sizes that allocate memory are capped (`MAX_BUDGET`, `MAX_LATENTS`,
    `MAX_STRATEGIES`, `MAX_SUM_CELLS`) before anything is allocated.

    Returns:
        The state with its table columns as int arrays (packed rows unpacked); `check`,
        `load` and `to_json` accept it.

    Raises:
        ValueError: one line, "corrupted CoverageTracker state: <the first problem>" (or "not a
            seffi CoverageTracker state" for another format).
    """
    if isinstance(state, Mapping) and state.get("format") == state_v1.V1_FORMAT:
        state = state_v1.from_v1(state)
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"not a seffi CoverageTracker state (expected format {STATE_FORMAT!r})")
    try:
        return _checked(state)
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
        raise ValueError(f"corrupted CoverageTracker state: {type(exc).__name__}: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"corrupted CoverageTracker state: {exc}") from exc


def _scalar(p: Part, value: Any, s: dict[str, Any]) -> Any:
    """A setting or counter checked against its declared kind (an int bounded by the parts in ``s``)."""
    if value is None and p.null:
        return None
    if p.kind == "ids":
        if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
            raise ValueError(f"{p.name} must be a list of str" + (" or null" if p.null else ""))
        return list(value)
    if p.kind in ("str", "bool"):
        if not isinstance(value, str if p.kind == "str" else bool):
            raise ValueError(f"{p.name} must be a {p.kind}")
        return value
    return _int(value, p.name, p.lo, _hi(p, s))


def _checked(state: Mapping[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = {"format": STATE_FORMAT}
    for p in SETTINGS:
        s[p.name] = _scalar(p, state[p.name], s)
    cols = s["columns"]
    if len(set(cols)) != len(cols) or len(cols) > MAX_STRATEGIES:
        raise ValueError(f"columns must be at most {MAX_STRATEGIES} unique strategy ids")
    if s["strategies"] is not None:
        if cols != s["strategies"]:
            raise ValueError("columns must be the declared strategies")
        if s["num_strategies"] != len(s["strategies"]):
            raise ValueError(
                f"num_strategies={s['num_strategies']} but {len(s['strategies'])} strategies are declared"
            )
    inp = state["inputs"]
    tasks, ids = inp["task"], inp["input_id"]
    if not isinstance(tasks, list) or not isinstance(ids, list) or len(tasks) != len(ids):
        raise ValueError("inputs.task and inputs.input_id must be lists of one length")
    if not set(map(type, tasks)) | set(map(type, ids)) <= {str}:
        raise ValueError("input tasks and ids must be strings")
    keys = list(zip(tasks, ids, strict=True))
    if any(a >= b for a, b in itertools.pairwise(keys)):
        raise ValueError("inputs must be unique and sorted")
    U = len(keys)
    s["inputs"] = {"task": list(tasks), "input_id": list(ids)}
    for p in INPUT_FIELDS:
        if p.merge != "key":
            s["inputs"][p.key] = _column(inp[p.key], p.name, (U,), p.lo, _hi(p, s))
    runs = state["runs"]
    R = len(runs["input"])
    s["runs"] = {}
    for p in RUN_FIELDS:
        if present(p, s):
            w = width(p, s)
            shape = (R,) if w is None else (R, w)
            s["runs"][p.key] = _column(runs[p.key], p.name, shape, p.lo, _hi(p, s))
        elif p.key in runs:
            raise ValueError(f"{p.name} is present but its declaration says it is not")
    for p in COUNTERS:
        s[p.name] = _scalar(p, state[p.name], s)
    s["open_runs"] = _open_runs(state["open_runs"], s)
    s["barcode"] = _barcode(state["barcode"], s)
    s["metrics"] = _metrics(state.get("metrics", {}), s)
    _invariants(s)
    return s


def _invariants(s: dict[str, Any]) -> None:
    """The rules tying parts together (each a ValueError naming it)."""
    r, m = s["runs"], s["inputs"]["m"]
    unit, n = r["input"], r["n"]
    R = unit.size
    if R and np.unique(unit * (_BIG + 1) + r["stream"]).size != R:
        raise ValueError("runs must be unique per (input, stream)")
    nv, fv, fh, fvh = r["n_valid"], r["first_valid"], r["first_hit"], r["first_valid_hit"]
    if (nv > n).any() or (fv >= n).any() or ((fv < 0) != (nv == 0)).any():
        raise ValueError("runs have inconsistent n / n_valid / first_valid")
    if (fh >= n[:, None]).any() or ((fvh >= 0) & ((fh < 0) | (fvh < fh) | (fvh >= n[:, None]))).any():
        raise ValueError("runs have first hits outside their samples")
    if R and ((fh >= 0).sum(axis=1) > m[unit]).any():
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
    if s["budget"] is not None:
        complete = np.unique(unit[n >= s["budget"]]).size
        if complete * s["budget"] > MAX_SUM_CELLS:
            raise ValueError(
                f"{complete} inputs with a complete run x budget {s['budget']} exceed the cap of "
                f"{MAX_SUM_CELLS} per-input sums"
            )


def _open_runs(value: Any, s: Mapping[str, Any]) -> list[dict[str, int]]:
    if not isinstance(value, list):
        raise ValueError("open_runs must be a list")
    r = s["runs"]
    out, seen = [], set()
    for row in value:
        got = {
            name: _int(
                row[name],
                f"open run {name}",
                -1 if name.endswith("index") and name != "env_index" else 0,
                _BIG,
            )
            for name in OPEN_FIELDS
        }
        # An open run counts every sample, its run only the first K (later ones are skipped).
        n = int(r["n"][got["run"]]) if got["run"] < r["n"].size else -1
        full = s["budget"] is not None and n == s["budget"]
        if n < 0 or got["count"] < n or (got["count"] > n and not full):
            raise ValueError("an open run does not match its run")
        pair = (int(r["input"][got["run"]]), got["env_index"])
        if pair in seen:
            raise ValueError("two open runs share an (input, env_index)")
        seen.add(pair)
        out.append(got)
    return out


def _barcode(value: Any, s: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ValueError("barcode must be a list")
    if len(value) > s["barcode_rows"]:
        raise ValueError(f"{len(value)} barcode rows but barcode_rows={s['barcode_rows']}")
    U, C = len(s["inputs"]["input_id"]), len(s["columns"])
    out, seen = [], set()
    for row in value:
        code = _int(row["input"], "barcode row input", 0, max(U, 1))
        stream = _int(row["stream"], "barcode row stream", 0, _BIG)
        cells, new = row["cells"], row["new"]
        if not isinstance(cells, list) or not isinstance(new, list) or len(cells) != len(new):
            raise ValueError("a barcode row needs cells and new flags of one length")
        if len(cells) > s["barcode_cols"] or code in seen:
            raise ValueError("barcode rows must be one per input, at most barcode_cols long")
        seen.add(code)
        got = _column(list(cells), "barcode cells", (len(cells),), -1, C)
        flags = _column(list(new), "barcode new flags", (len(new),), 0, 2)
        out.append({"input": code, "stream": stream, "cells": got.tolist(), "new": flags.tolist()})
    return out


def _metrics(value: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    """Per-input metric states (`seffi.coverage.input_metrics`), each checked against its declaration.

    A state without a registered metric's part (an older state) loads it empty, marked partial.
    """
    if not isinstance(value, Mapping):
        raise ValueError("metrics must be an object")
    U, C = len(s["inputs"]["input_id"]), len(s["columns"])
    out = {}
    for cls in registered():
        if cls.name in value:
            got = value[cls.name]
            if isinstance(got, InputMetric):  # a checked state (a merge's): taken as it is
                got.grow(U, C)
                out[cls.name] = got
                continue
            metric = cls()
            metric.load_state_dict(got, U, C)
            out[cls.name] = metric
    return out

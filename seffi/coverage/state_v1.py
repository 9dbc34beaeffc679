"""Older stored states converted to the current format at load: the one place they are known.

Format 1 (``seffi.coverage.tracker/1``) kept runs as dicts of strategy -> first-hit index; a format-1
monitor state (``seffi.callbacks.monitor/1``) kept latent codes only as per-input sums (they restart
empty) and barcode cells without their "new" flags. A format-2 state without ``runs.beyond`` knows
only its open runs' samples beyond the budget. `seffi.coverage.state.check` then checks the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MONITOR_STATE_FORMAT", "STATE_FORMAT", "upgrade", "upgrade_monitor"]

STATE_FORMAT = "seffi.coverage.tracker/2"
MONITOR_STATE_FORMAT = "seffi.callbacks.monitor/2"


def upgrade(state: Any) -> Any:
    """A current tracker state from an older one; any other value as it is."""
    if isinstance(state, Mapping) and state.get("format") == "seffi.coverage.tracker/1":
        state = _v1(state, "CoverageTracker", (KeyError, TypeError, AttributeError, ValueError))
    runs = state.get("runs") if isinstance(state, Mapping) else None
    if not isinstance(runs, Mapping) or state.get("format") != STATE_FORMAT or "beyond" in runs:
        return state
    if not isinstance(n := runs.get("n"), list):
        return state  # malformed: the check names it
    beyond = [0] * len(n)  # an open run counts every sample, its run only the first K
    for o in state["open_runs"] if isinstance(state.get("open_runs"), list) else ():
        r, count = (o.get("run"), o.get("count")) if isinstance(o, Mapping) else (None, None)
        if isinstance(r, int) and isinstance(count, int) and 0 <= r < len(n) and isinstance(n[r], int):
            beyond[r] = max(count - n[r], 0)
    return {**state, "runs": {**runs, "beyond": beyond}}


def upgrade_monitor(state: Any) -> Any:
    """A current monitor state from a format-1 one; any other value as it is."""
    if isinstance(state, Mapping) and state.get("format") == "seffi.callbacks.monitor/1":
        return _v1(state, "CoverageMonitor", (KeyError, TypeError, AttributeError))
    return state


def _v1(state: Mapping[str, Any], what: str, errors: tuple[type[Exception], ...]) -> dict[str, Any]:
    try:
        return _from_v1(state) if what == "CoverageTracker" else _monitor_v1(state)
    except errors as exc:
        raise ValueError(f"corrupted {what} state (version 1): {type(exc).__name__}: {exc}") from exc


def _from_v1(state: Mapping[str, Any]) -> dict[str, Any]:
    declared = state["strategies"]
    runs = sorted(state["runs"], key=lambda d: (d["task"], str(d["input_id"]), d["stream"]))
    cols = list(declared) if declared is not None else sorted({s for d in runs for s in d["first_hit"]})
    index = {c: j for j, c in enumerate(cols)}
    keys = sorted({(d["task"], str(d["input_id"])) for d in runs})
    code = {k: i for i, k in enumerate(keys)}
    unit = [code[(d["task"], str(d["input_id"]))] for d in runs]
    m: dict[int, int] = {}
    for u, d in zip(unit, runs, strict=True):
        if m.setdefault(u, d["m"]) != d["m"]:
            raise ValueError(f"input {d['input_id']!r} has inconsistent M_x across runs")
    barcode: dict[int, dict[str, Any]] = {}  # the lowest stream's row per input
    rank = (lambda s: (index[s], s)) if declared is not None else (lambda s: (0, s))
    for u, d in zip(unit, runs, strict=True):
        if "barcode" not in d or u in barcode:  # runs are sorted by stream: the first is the lowest
            continue
        cells, new, seen = [], [], set()
        for sample in d["barcode"]:  # a cell: the first new strategy matched, else the first matched
            matched = sorted(sample, key=rank)
            fresh = [s for s in matched if s not in seen]
            cells.append(index[(fresh or matched)[0]] if matched else -1)
            new.append(int(bool(fresh)))
            seen.update(matched)
        barcode[u] = {"input": u, "stream": d["stream"], "cells": cells, "new": new}
    column = {name: [d[name] for d in runs] for name in ("stream", "n", "n_valid", "first_valid")}
    hits = {h: [[d[h].get(c, -1) for c in cols] for d in runs] for h in ("first_hit", "first_valid_hit")}
    if stray := {s for d in runs for h in hits for s in d[h]} - index.keys():
        raise ValueError(f"strategies {sorted(stray)} are not among the columns")
    return {
        **{k: state[k] for k in ("strategies", "num_strategies", "task", "barcode_rows", "barcode_cols")},
        **{"format": STATE_FORMAT, "budget": None, "num_latents": 0, "stream_offset": 0, "columns": cols},
        "inputs": {"task": [k[0] for k in keys], "input_id": [k[1] for k in keys], "m": list(m.values())}
        | {"next_stream": [0] * len(keys)},
        "runs": {"input": unit, **column, **hits},
        "open_runs": [],
        "barcode": [barcode[u] for u in sorted(barcode)][: state["barcode_rows"]],
        **{"samples": sum(column["n"]), "valid": sum(column["n_valid"]), "skipped": 0, "has_latent": False},
    }


def _monitor_v1(state: Mapping[str, Any]) -> dict[str, Any]:
    s = _from_v1(state["tracker"])
    ids, inputs = s["inputs"]["input_id"], state["inputs"]
    s["budget"], s["num_latents"] = int(state["budget"]), int(state["num_latents"] or 0)
    s["barcode_rows"], s["barcode_cols"] = 2**31, s["budget"]  # the monitor's: a row per input
    s["stream_offset"], s["skipped"] = int(state["stream_offset"]), int(state["skipped_beyond_budget"])
    s["samples"], s["valid"] = int(state["samples"]), int(state["valid"])
    s["inputs"]["next_stream"] = [int(inputs[x]["next_stream"]) for x in ids]
    run_of = {
        (ids[u], st): r for r, (u, st) in enumerate(zip(s["runs"]["input"], s["runs"]["stream"], strict=True))
    }
    fields = ("env_index", "count", "sample_index", "run_index")
    opened = [
        {"run": run_of[(o["input_id"], int(o["stream"]))], **{f: int(o[f]) for f in fields}}
        for o in state["open_runs"]
    ]
    s["open_runs"] = sorted(opened, key=lambda o: o["run"])
    if s["num_latents"]:
        s["runs"]["latent_first_hit"] = [[-1] * s["num_latents"] for _ in s["runs"]["input"]]
    bars = [(u, inputs[x].get("barcode")) for u, x in enumerate(ids)]
    s["barcode"] = [_row(u, b["stream"], [int(c) for c in b["cells"]]) for u, b in bars if b is not None]
    return {"format": MONITOR_STATE_FORMAT, "episodes": state["episodes"], "tracker": s}


def _row(u: int, stream: Any, cells: list[int]) -> dict[str, Any]:
    """A barcode row from its cells: a cell is new when its strategy is first seen in the row."""
    new, seen = [], set()
    for c in cells:
        new.append(int(c >= 0 and c not in seen))
        seen.add(c)
    return {"input": u, "stream": int(stream), "cells": cells, "new": new}

"""Older stored states converted to the current format at load: the one place they are known.

Format 1 (``seffi.coverage.tracker/1``) kept runs as dicts of strategy -> first-hit index; a format-1
monitor state (``seffi.callbacks.monitor/1``) kept latent codes only as per-input sums (they restart
empty) and barcode cells without their "new" flags. A format-2 state without ``runs.beyond`` knows
only its open runs' samples beyond the budget. `seffi.coverage.state.check` then checks the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MONITOR_STATE_FORMAT", "STATE_FORMAT", "upgrade"]

STATE_FORMAT = "seffi.coverage.tracker/2"
MONITOR_STATE_FORMAT = "seffi.callbacks.monitor/2"


def upgrade(state: Any) -> Any:
    """A current tracker or monitor state from an older one; any other value as it is."""
    old = state.get("format") if isinstance(state, Mapping) else None
    if old in ("seffi.coverage.tracker/1", "seffi.callbacks.monitor/1"):
        what = "CoverageTracker" if "tracker" in old else "CoverageMonitor"
        try:
            state = _tracker(state) if what == "CoverageTracker" else _monitor(state)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"corrupted {what} state (version 1): {type(exc).__name__}: {exc}") from exc
        old = state["format"]
    runs = state.get("runs") if old == STATE_FORMAT else None
    if not isinstance(runs, Mapping) or "beyond" in runs or not isinstance(n := runs.get("n"), list):
        return state  # current, or malformed (the check names it)
    beyond = [0] * len(n)  # an open run counts every sample, its run only the first K
    for o in state["open_runs"] if isinstance(state.get("open_runs"), list) else ():
        r, count = (o.get("run"), o.get("count")) if isinstance(o, Mapping) else (None, None)
        if isinstance(r, int) and isinstance(count, int) and 0 <= r < len(n) and isinstance(n[r], int):
            beyond[r] = max(count - n[r], 0)
    return {**state, "runs": {**runs, "beyond": beyond}}


def _tracker(state: Mapping[str, Any]) -> dict[str, Any]:
    declared = state["strategies"]
    runs = sorted(state["runs"], key=lambda d: (d["task"], str(d["input_id"]), d["stream"]))
    cols = list(declared) if declared is not None else sorted({s for d in runs for s in d["first_hit"]})
    index = {c: j for j, c in enumerate(cols)}
    keys = sorted({(d["task"], str(d["input_id"])) for d in runs})
    code = {k: i for i, k in enumerate(keys)}
    unit = [code[(d["task"], str(d["input_id"]))] for d in runs]
    m: dict[int, int] = {}
    bars: dict[int, dict[str, Any]] = {}  # the lowest stream's row per input (runs are sorted)
    rank = (lambda s: (index[s], s)) if declared is not None else (lambda s: (0, s))
    for u, d in zip(unit, runs, strict=True):
        if m.setdefault(u, d["m"]) != d["m"]:
            raise ValueError(f"input {d['input_id']!r} has inconsistent M_x across runs")
        if "barcode" in d and u not in bars:
            cells, new, seen = [], [], set()
            for matched in map(lambda x: sorted(x, key=rank), d["barcode"]):
                fresh = [s for s in matched if s not in seen]  # the first new strategy, else the first
                cells.append(index[(fresh or matched)[0]] if matched else -1)
                new.append(int(bool(fresh)))
                seen.update(matched)
            bars[u] = {"input": u, "stream": d["stream"], "cells": cells, "new": new}
    hits = {h: [[d[h].get(c, -1) for c in cols] for d in runs] for h in ("first_hit", "first_valid_hit")}
    if stray := {s for d in runs for h in hits for s in d[h]} - index.keys():
        raise ValueError(f"strategies {sorted(stray)} are not among the columns")
    column = {name: [d[name] for d in runs] for name in ("stream", "n", "n_valid", "first_valid")}
    return {
        **{k: state[k] for k in ("strategies", "num_strategies", "task", "barcode_rows", "barcode_cols")},
        **{"format": STATE_FORMAT, "budget": None, "num_latents": 0, "stream_offset": 0, "columns": cols},
        "inputs": {"task": [k[0] for k in keys], "input_id": [k[1] for k in keys], "m": list(m.values())}
        | {"next_stream": [0] * len(keys)},
        "runs": {"input": unit, **column, **hits},
        "open_runs": [],
        "barcode": [bars[u] for u in sorted(bars)][: state["barcode_rows"]],
        **{"samples": sum(column["n"]), "valid": sum(column["n_valid"]), "skipped": 0, "has_latent": False},
    }


def _monitor(state: Mapping[str, Any]) -> dict[str, Any]:
    s, inputs = _tracker(state["tracker"]), state["inputs"]
    ids, K, Z = s["inputs"]["input_id"], int(state["budget"]), int(state["num_latents"] or 0)
    s |= {"budget": K, "num_latents": Z, "barcode_rows": 2**31, "barcode_cols": K}  # a row per input
    s |= {k: int(state[v]) for k, v in (("stream_offset",) * 2, ("skipped", "skipped_beyond_budget"))}
    s |= {k: int(state[k]) for k in ("samples", "valid")}
    s["inputs"]["next_stream"] = [int(inputs[x]["next_stream"]) for x in ids]
    run_of = {
        (ids[u], st): r for r, (u, st) in enumerate(zip(s["runs"]["input"], s["runs"]["stream"], strict=True))
    }
    opened = [
        {"run": run_of[(o["input_id"], int(o["stream"]))]}
        | {f: int(o[f]) for f in ("env_index", "count", "sample_index", "run_index")}
        for o in state["open_runs"]
    ]
    s["open_runs"] = sorted(opened, key=lambda o: o["run"])
    if Z:
        s["runs"]["latent_first_hit"] = [[-1] * Z for _ in s["runs"]["input"]]
    s["barcode"] = []
    for u, b in ((u, inputs[x].get("barcode")) for u, x in enumerate(ids)):
        if b is not None:  # a cell is new when its strategy is first seen in the row
            cells = [int(c) for c in b["cells"]]
            new = [int(c >= 0 and c not in cells[:i]) for i, c in enumerate(cells)]
            s["barcode"].append({"input": u, "stream": int(b["stream"]), "cells": cells, "new": new})
    return {"format": MONITOR_STATE_FORMAT, "episodes": state["episodes"], "tracker": s}

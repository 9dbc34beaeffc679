"""Older stored formats converted to the current ones at load: the one place they are known.

Format 1 (``seffi.coverage.tracker/1``) kept runs as dicts of strategy -> first-hit index; a format-1
monitor state (``seffi.callbacks.monitor/1``) kept the latent-code diagnostic only as per-input
sums (it restarts empty) and its barcode cells without their "new" flags. The converted states are
then checked like any other (`seffi.coverage.state.check`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MONITOR_STATE_FORMAT", "STATE_FORMAT", "upgrade", "upgrade_monitor"]

STATE_FORMAT = "seffi.coverage.tracker/2"
MONITOR_STATE_FORMAT = "seffi.callbacks.monitor/2"


def _new_flags(cells: list[int]) -> list[int]:
    """A cell is new when its strategy is first seen in the row."""
    seen: set[int] = set()
    out = []
    for c in cells:
        out.append(int(c >= 0 and c not in seen))
        seen.add(c)
    return out


def upgrade(state: Any) -> Any:
    """A format-2 tracker state from a format-1 one; any other value as it is."""
    if not isinstance(state, Mapping) or state.get("format") != "seffi.coverage.tracker/1":
        return state
    try:
        declared = state["strategies"]
        runs = sorted(state["runs"], key=lambda d: (d["task"], str(d["input_id"]), d["stream"]))
        cols = list(declared) if declared is not None else sorted({s for d in runs for s in d["first_hit"]})
        index = {c: j for j, c in enumerate(cols)}
        keys = sorted({(d["task"], str(d["input_id"])) for d in runs})
        code = {k: i for i, k in enumerate(keys)}
        m: dict[tuple[str, str], int] = {}
        for d in runs:
            if m.setdefault((d["task"], str(d["input_id"])), d["m"]) != d["m"]:
                raise ValueError(f"input {d['input_id']!r} has inconsistent M_x across runs")

        def row(hits: Mapping[str, int]) -> list[int]:
            out = [-1] * len(cols)
            for s, i in hits.items():
                out[index[s]] = i
            return out

        barcode: dict[int, dict[str, Any]] = {}  # the lowest stream's row per input
        rank = (lambda s: (index[s], s)) if declared is not None else (lambda s: (0, s))
        for d in runs:
            u = code[(d["task"], str(d["input_id"]))]
            if "barcode" not in d or (u in barcode and barcode[u]["stream"] <= d["stream"]):
                continue
            cells, new, seen = [], [], set()
            for sample in d["barcode"]:
                matched = sorted(sample, key=rank)
                fresh = [s for s in matched if s not in seen]
                pick = fresh[0] if fresh else (matched[0] if matched else None)
                cells.append(index[pick] if pick is not None else -1)
                new.append(int(bool(fresh)))
                seen.update(matched)
            barcode[u] = {"input": u, "stream": d["stream"], "cells": cells, "new": new}
        column = {name: [d[name] for d in runs] for name in ("stream", "n", "n_valid", "first_valid")}
        return {
            **{k: state[k] for k in ("strategies", "num_strategies", "task", "barcode_rows", "barcode_cols")},
            "format": STATE_FORMAT,
            "budget": None,
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
                **column,
                "first_hit": [row(d["first_hit"]) for d in runs],
                "first_valid_hit": [row(d["first_valid_hit"]) for d in runs],
            },
            "open_runs": [],
            "barcode": [barcode[u] for u in sorted(barcode)][: state["barcode_rows"]],
            "samples": sum(column["n"]),
            "valid": sum(column["n_valid"]),
            "skipped": 0,
            "has_latent": False,
        }
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"corrupted CoverageTracker state (version 1): {type(exc).__name__}: {exc}") from exc


def upgrade_monitor(state: Any) -> Any:
    """A format-2 monitor state from a format-1 one; any other value as it is."""
    if not isinstance(state, Mapping) or state.get("format") != "seffi.callbacks.monitor/1":
        return state
    try:
        s = upgrade(state["tracker"])
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
        fields = ("env_index", "count", "sample_index", "run_index")
        opened = [
            {"run": run_of[(code[r["input_id"]], int(r["stream"]))], **{f: int(r[f]) for f in fields}}
            for r in state["open_runs"]
        ]
        s["open_runs"] = sorted(opened, key=lambda r: r["run"])
        if s["num_latents"]:
            s["runs"]["latent_first_hit"] = [[-1] * s["num_latents"] for _ in s["runs"]["input"]]
        bars = [(code[x], state["inputs"][x].get("barcode")) for x in ids]
        s["barcode"] = [
            {
                "input": u,
                "stream": int(b["stream"]),
                "cells": [int(c) for c in b["cells"]],
                "new": _new_flags([int(c) for c in b["cells"]]),
            }
            for u, b in bars
            if b is not None
        ]
        s["samples"], s["valid"] = int(state["samples"]), int(state["valid"])
        s["skipped"] = int(state["skipped_beyond_budget"])
        return {"format": MONITOR_STATE_FORMAT, "episodes": state["episodes"], "tracker": s}
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"corrupted CoverageMonitor state (version 1): {type(exc).__name__}: {exc}") from exc

"""Format-1 states, converted to format 2: ``CoverageTracker`` states and ``CoverageMonitor`` states.

Format 1 kept runs as dicts of strategy -> first-hit index; a format-1 monitor state kept the
latent-code diagnostic only as per-input sums. `from_v1` and `from_monitor_v1` return
format-2 states (``seffi.coverage.state``) that `seffi.coverage.state_check.check` then bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seffi.coverage.state import STATE_FORMAT

__all__ = ["MONITOR_V1_FORMAT", "V1_FORMAT", "from_monitor_v1", "from_v1"]

V1_FORMAT = "seffi.coverage.tracker/1"
MONITOR_V1_FORMAT = "seffi.callbacks.monitor/1"


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
            # the barcode_rows smallest inputs, as format 1 kept them
            "barcode": [barcode[u] for u in sorted(barcode)][: state["barcode_rows"]],
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

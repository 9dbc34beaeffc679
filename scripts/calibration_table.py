"""The calibration table of docs/statistics.md, rendered from the committed benchmark output.

``benchmarks/calibration.py --out docs/results/calibration.json`` measures every row (the coverage
of each interval against a known truth on simulated datasets); `table` renders that file into the
page's ``calibration`` block, each row outside its target with its reason from the benchmark's
``REASONS``. Used by ``scripts/readme_numbers.py`` (producer ``calibration``)::

    python scripts/readme_numbers.py --check --only calibration
    python scripts/readme_numbers.py --write --only calibration             # render the committed file
    python scripts/readme_numbers.py --write --only calibration --refresh   # re-run the benchmark first

The refresh runs ``--datasets`` `DATASETS` under ``nice -n 5`` (about 6 CPU minutes).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from functools import cache
from typing import Any

from readme_numbers import RESULTS, ROOT, Context, Result, _run, num

RESULT = RESULTS / "calibration.json"
BENCHMARK = ROOT / "benchmarks" / "calibration.py"
#: Simulated datasets per case of the committed run (binomial SE of a 0.95 coverage: 0.0034).
DATASETS = 4000
#: The fewest datasets per case the page accepts.
MIN_DATASETS = 1000
BLOCKS = {"calibration"}


@cache
def benchmark() -> Any:
    """The benchmark module (for its `reason` of a row outside its target)."""
    spec = importlib.util.spec_from_file_location("seffi_calibration_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  (its dataclasses look their module up)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def status(row: dict[str, Any], notes: list[str]) -> str:
    """The status cell: ``ok``, ``outside [i]`` (reason i of ``notes``, added there), or empty.

    Empty: a figure without a target.
    """
    if row["ok"] is None:
        return ""
    if row["ok"]:
        return "ok"
    why = benchmark().reason(row["case"], row["quantity"])
    if why is None:
        return "**outside**, no reason given"
    if why not in notes:
        notes.append(why)
    return f"**outside** [{notes.index(why) + 1}]"


def problems(data: dict[str, Any]) -> list[str]:
    """What keeps a benchmark output off the page: too few datasets, a row outside without a reason."""
    out = [
        f"calibration: {c['case']} has {c['datasets']} datasets (at least {MIN_DATASETS})"
        for c in data["cases"]
        if c["datasets"] < MIN_DATASETS
    ]
    out += [
        f"calibration: {r['case']} | {r['quantity']} is outside its target {r['target']} without a reason"
        for r in data["rows"]
        if r["ok"] is False and benchmark().reason(r["case"], r["quantity"]) is None
    ]
    return out


def table(data: dict[str, Any]) -> str:
    """The page's block: how the file was made, one table row per benchmark row, the reasons."""
    run = data["run"]
    n_out = sum(r["ok"] is False for r in data["rows"])
    n_target = sum(r["ok"] is not None for r in data["rows"])
    lines = [
        f"`{run['command']}`: {run['seconds']} s ({run['cpu_seconds']} s CPU) at load average "
        f"{run['load_average']} on {run['cores']} cores, seffi {run['seffi_version']}; "
        f"{n_target - n_out} of {n_target} rows with a target meet it, {n_out} are outside it, each "
        "with its reason.",
        "",
        "| case | quantity | measured ± SE | target | |",
        "|---|---|---|---|---|",
    ]
    cases = {c["case"]: c for c in data["cases"]}
    shown: set[str] = set()
    notes: list[str] = []
    for r in data["rows"]:
        case = ""
        if r["case"] not in shown:
            shown.add(r["case"])
            c = cases[r["case"]]
            note = f"; {c['note']}" if c["note"] else ""
            case = f"{r['case']} ({c['datasets']:,} datasets{note})"
        value = num(r["value"]) + (f" ± {num(r['se'])}" if r["se"] is not None else "")
        target = r["target"].replace("<=", "≤").replace("-", "–") if r["band"] else r["target"]
        cells = [case, r["quantity"].replace("<=", "≤"), value, target, status(r, notes)]
        lines.append(("| " + " | ".join(cells) + " |").replace("|  |", "| |"))
    lines += ["", "Why a row is outside its target:", ""]
    lines += [f"{i}. {why[0].upper()}{why[1:]}." for i, why in enumerate(notes, 1)]
    return "\n".join(lines) + "\n"


def refresh() -> None:
    """Re-run the benchmark into `RESULT` (nice -n 5, one thread per library)."""
    print("readme_numbers: benchmark calibration ...", file=sys.stderr, flush=True)
    threads = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    os.environ.update(threads)
    cmd = [
        "nice",
        "-n",
        "5",
        sys.executable,
        str(BENCHMARK),
        "--datasets",
        str(DATASETS),
        "--out",
        str(RESULT),
    ]
    _run(cmd, ROOT, stderr=False)


def produce(ctx: Context) -> Result:
    """The ``calibration`` block from the committed benchmark output."""
    if ctx.refresh:
        refresh()
    if not RESULT.is_file():
        return Result(
            {}, problems=[f"calibration: {RESULT.relative_to(ROOT)} is missing (run --write --refresh)"]
        )
    data = json.loads(RESULT.read_text(encoding="utf-8"))
    return Result({"calibration": table(data)}, problems=problems(data))

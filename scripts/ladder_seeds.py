"""Rung 2 of the exploration ladder over model-training seeds, from an empty model cache.

``seffi ladder --no-rung3 --model-seed S`` trains the base LM and the latent mixture with seed S (the
training rows, the pool and the measurement seed stay fixed) and measures the routers on them. This
script runs it for several model seeds, each in its own process with one torch thread, then writes the
per-seed figures with their measurement CIs, the mean and sample sd over seeds, and which rung-2
conclusions hold on every seed::

    python scripts/ladder_seeds.py                                  # seeds 0,1,2, a fresh temp cache
    python scripts/ladder_seeds.py --cache-dir CACHE   # CACHE: an empty (or new) folder of your own
    python scripts/ladder_seeds.py --from-runs runs/ladder-seeds    # the table of finished runs, no training
    python scripts/ladder_seeds.py --check                          # docs page agrees with its JSON

Outputs: ``docs/ladder_seeds.json`` (every figure, the command, the library stack) and
``docs/ladder-seeds.md``, which is generated from that JSON alone; ``--check`` regenerates the page from
the JSON (and the JSON's summary from its per-seed rows) and exits 1 on any difference, so the drift
check covers the page without retraining.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS_JSON = ROOT / "docs" / "ladder_seeds.json"
DOCS_MD = ROOT / "docs" / "ladder-seeds.md"
MINUS = "\u2212"  # the docs' tables use a typographic minus
NMI_TARGET = 0.6
VALID_TARGET = 0.8


def _policy_measures(key: str, name: str) -> tuple[tuple[str, str, str], ...]:
    """A policy's two rows (`collect` writes both keys): its gain with a CI and its valid rate."""
    return (f"{key}_gain", f"{name} gain [95% CI]", "gain"), (f"{key}_valid", f"{name} valid rate", "value")


#: (key, row label, kind): kind "gain" carries a CI, "value" is a plain number, "seconds" a time.
MEASURES: tuple[tuple[str, str, str], ...] = (
    ("base_valid", "base LM valid rate (T = 1)", "value"),
    ("rows_valid", "training rows valid rate", "value"),
    ("nmi", "NMI(latent, strategy), z ~ prior", "value"),
    ("nmi_uniform", "NMI, every code equally likely", "value"),
    ("mixture_valid", "mixture valid rate (z ~ prior)", "value"),
    *_policy_measures("round_robin", "round-robin"),
    *_policy_measures("trained", "trained router"),
    *_policy_measures("untrained", "untrained router"),
    ("models_seconds", "SFT + EM wall time (s)", "seconds"),
    ("total_seconds", "ladder wall time (s)", "seconds"),
)
POLICIES = {
    "round_robin": "round-robin latents",
    "trained": "trained router",
    "untrained": "untrained router",
}


# -- reading one run ---------------------------------------------------------------------------------


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"ladder_seeds: cannot read {path}: {exc}") from None


def collect(run: Path) -> dict[str, Any]:
    """One ``seffi ladder`` run folder's rung-2 figures (report.json, ladder.json, timings.json).

    Args:
        run: The run folder.

    Returns:
        ``{"model_seed", "seed", measure keys..., "<policy>_gain": {"value", "lo", "hi"}, "models_cached"}``.
    """
    report, ladder, timings = (_read(run / name) for name in ("report.json", "ladder.json", "timings.json"))
    rung2 = [c for c in report["comparisons"] if c.get("rung") == 2]
    if len(rung2) != 1:
        raise SystemExit(f"ladder_seeds: {run / 'report.json'} holds {len(rung2)} rung-2 comparisons, not 1")
    by_label = {p["curves"]["label"]: p for p in rung2[0]["policies"]}
    out: dict[str, Any] = {
        "model_seed": report["config"].get("model_seed", 0),
        "seed": report["config"]["seed"],
        "base_valid": ladder["base_valid_rate"],
        "rows_valid": ladder["rows_valid_rate"],
        "nmi": ladder.get("nmi_joint"),
        "nmi_uniform": ladder.get("nmi"),
        "mixture_valid": ladder["mixture_valid_rate"],
        "cache_keys": ladder["cache_keys"],
        "models_cached": bool(timings.get("models_cached")),
        "models_seconds": timings["models_seconds"],
        "total_seconds": timings["total_seconds"],
    }
    for key, label in POLICIES.items():
        if label not in by_label:
            raise SystemExit(f"ladder_seeds: {run / 'report.json'} has no rung-2 policy {label!r}")
        pol = by_label[label]
        gain = pol.get("gain") or {}
        out[f"{key}_gain"] = {k: gain.get(k) for k in ("value", "lo", "hi")}
        out[f"{key}_valid"] = pol["curves"].get("valid_rate")
    return out


# -- summaries -----------------------------------------------------------------------------------------


def point(record: dict[str, Any], key: str) -> float | None:
    """The point value of ``key`` in one seed's record (a gain's value, or the number itself)."""
    v = record.get(key)
    return v.get("value") if isinstance(v, dict) else v


def mean_sd(values: list[float | None]) -> dict[str, float | None]:
    """Mean and sample sd (n - 1) of the finite values; sd is None below two values."""
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return {"mean": None, "sd": None, "min": None, "max": None, "n": 0}
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return {"mean": m, "sd": sd, "min": min(xs), "max": max(xs), "n": len(xs)}


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per measure: mean, sample sd, min, max over seeds; per gain also the mean CI half-width."""
    out: dict[str, Any] = {}
    for key, _, kind in MEASURES:
        s = mean_sd([point(r, key) for r in records])
        if kind == "gain":
            halves = [
                (r[key]["hi"] - r[key]["lo"]) / 2
                for r in records
                if r[key].get("lo") is not None and r[key].get("hi") is not None
            ]
            s["mean_ci_half_width"] = sum(halves) / len(halves) if halves else None
        out[key] = s
    return out


def conclusions(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rung-2 claims, each with the seeds it holds on: ``{"claim", "holds", "n"}``."""

    def gain(r: dict[str, Any], key: str) -> dict[str, Any]:
        return r[key]

    def above(g: dict[str, Any]) -> bool:
        return g.get("lo") is not None and g["lo"] > 0

    def contains0(g: dict[str, Any]) -> bool:
        return g.get("lo") is not None and g["lo"] <= 0 <= g["hi"]

    def ge(v: float | None, t: float) -> bool:
        return v is not None and v >= t

    checks = [
        ("the trained router's gain CI lies above 0", lambda r: above(gain(r, "trained_gain"))),
        ("the round-robin's gain CI lies above 0", lambda r: above(gain(r, "round_robin_gain"))),
        ("the untrained router's gain CI contains 0", lambda r: contains0(gain(r, "untrained_gain"))),
        (
            "the round-robin's gain exceeds the trained router's",
            lambda r: (
                point(r, "round_robin_gain") is not None
                and point(r, "trained_gain") is not None
                and point(r, "round_robin_gain") > point(r, "trained_gain")
            ),
        ),
        (f"NMI (z ~ prior) >= {NMI_TARGET:g}", lambda r: ge(r["nmi"], NMI_TARGET)),
        (
            f"the round-robin's valid rate >= {VALID_TARGET:g}",
            lambda r: ge(r["round_robin_valid"], VALID_TARGET),
        ),
        (f"the mixture's valid rate >= {VALID_TARGET:g}", lambda r: ge(r["mixture_valid"], VALID_TARGET)),
        (
            "the base LM's valid rate is within 0.1 of the training rows'",
            lambda r: abs(r["base_valid"] - r["rows_valid"]) <= 0.1,
        ),
    ]
    return [
        {"claim": claim, "holds": [r["model_seed"] for r in records if test(r)], "n": len(records)}
        for claim, test in checks
    ]


def build(records: list[dict[str, Any]], command: str, stack: dict[str, str]) -> dict[str, Any]:
    """The JSON the docs page is generated from."""
    records = sorted(records, key=lambda r: r["model_seed"])
    return {
        "command": command,
        "ladder_command": "seffi ladder --no-rung3 --model-seed S --wandb disabled --no-progress "
        "--cache-dir CACHE --out RUNS/seed-S",
        "stack": stack,
        "model_seeds": [r["model_seed"] for r in records],
        "records": records,
        "summary": summarise(records),
        "conclusions": conclusions(records),
    }


# -- the page --------------------------------------------------------------------------------------------


def num(x: float | None, digits: int = 3) -> str:
    """Fixed digits with a typographic minus; a dash for a missing value."""
    if x is None or not math.isfinite(x):
        return "—"
    text = f"{x:.{digits}f}"
    if float(text) == 0.0:
        text = text.lstrip("-")
    return text.replace("-", MINUS)


def cell(record: dict[str, Any], key: str, kind: str) -> str:
    """One seed's cell: a gain with its CI, a rate, or seconds."""
    v = record.get(key)
    if kind == "gain":
        if v.get("lo") is None or v.get("hi") is None:
            return num(v.get("value"))
        return f"{num(v['value'])} [{num(v['lo'])}, {num(v['hi'])}]"
    return num(v, 0) if kind == "seconds" else num(v)


def table(data: dict[str, Any]) -> str:
    """Markdown: one row per measure, one column per model seed, then mean ± sd and the mean CI half-width."""
    seeds = data["model_seeds"]
    head = ["measure", *(f"seed {s}" for s in seeds), "mean ± sd", "mean CI ±"]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for key, label, kind in MEASURES:
        s = data["summary"][key]
        digits = 0 if kind == "seconds" else 3
        spread = f"{num(s['mean'], digits)} ± {num(s['sd'], digits)}"
        half = num(s.get("mean_ci_half_width")) if kind == "gain" else ""
        cells = [label, *(cell(r, key, kind) for r in data["records"]), spread, half]
        lines.append(("| " + " | ".join(cells) + " |").replace("|  |", "| |"))
    return "\n".join(lines) + "\n"


def _seeds_text(holds: list[int], n: int) -> str:
    if len(holds) == n:
        return f"on all {n} model seeds"
    if not holds:
        return f"on none of the {n} model seeds"
    which = ", ".join(map(str, holds))
    return f"on {len(holds)} of {n} model seeds (seed{'s' if len(holds) > 1 else ''} {which})"


def conclusion_text(data: dict[str, Any]) -> str:
    """One paragraph: which rung-2 conclusions hold on every model seed, which do not."""
    s = data["summary"]
    parts = [f"{c['claim']} {_seeds_text(c['holds'], c['n'])}" for c in data["conclusions"]]
    every = [c["claim"] for c in data["conclusions"] if len(c["holds"]) == c["n"]]
    spread = (
        f"Over model seeds the trained router's gain has sd {num(s['trained_gain']['sd'])} against a mean "
        f"measurement CI half-width of {num(s['trained_gain']['mean_ci_half_width'])}; the round-robin's, "
        f"{num(s['round_robin_gain']['sd'])} against {num(s['round_robin_gain']['mean_ci_half_width'])}; "
        f"NMI (z ~ prior) ranges {num(s['nmi']['min'])}–{num(s['nmi']['max'])} and the round-robin's valid "
        f"rate {num(s['round_robin_valid']['min'])}–{num(s['round_robin_valid']['max'])}."
    )
    held = (
        "Held on every model seed: " + "; ".join(every) + "."
        if every
        else "No conclusion holds on every model seed."
    )
    text = "Per claim: " + "; ".join(parts) + f". {held} {spread}"
    return text[0].upper() + text[1:]


PAGE_HEAD = """# Rung 2 over model-training seeds

The exploration ladder's rung 2 trains its own models: a base LM by SFT on the task's training rows and
a latent mixture by hard EM without labels. `seffi ladder --model-seed S` sets the seed of that training
(the base LM's initialisation and shuffling, the mixture's code embeddings, row subset, shuffling and
revivals); the training rows, the pool of inputs, the iid samples, router training and the held-out
measurement draws stay fixed (`--seed 0`). Each figure below comes from models trained from an empty
cache, one process per seed, one torch thread, grid_routes with the ladder defaults (K = 8, 32 inputs).
The CI beside each gain is the measurement's (bootstrap over inputs and runs, 95 %); the spread over
seeds is the sample sd of the point values. `mean CI ±` is the mean half-width of those CIs: a spread
over seeds well above it means retraining moves the figure more than measuring it again does.

Two valid rates sit side by side: the *mixture valid rate* is the mixture's own ancestral sampling (z
from its prior p(z | x)) on the held-out inputs of `ladder.json`; the *round-robin valid rate* is the
share of valid samples the round-robin draws on the pool — it forces every code in turn, including codes
whose strategy the input blocks, so it is lower. The untrained router samples z from the prior, so its
valid rate is the mixture's on the pool.
"""


def render_md(data: dict[str, Any]) -> str:
    """The whole docs page, from the JSON alone."""
    stack = ", ".join(f"{k} {v}" for k, v in sorted(data["stack"].items()))
    return (
        PAGE_HEAD
        + "\nProduced by (from the repository root; writes this page and `docs/ladder_seeds.json`):\n\n"
        + f"```bash\n{data['command']}\n```\n\n"
        + f"which runs, per model seed S:\n\n```bash\n{data['ladder_command']}\n```\n\n"
        + f"Library stack (part of every model's cache key): {stack}.\n\n"
        + "## Figures per model seed\n\n"
        + table(data)
        + "\nWall times: one seed at a time on a shared 2-core machine; *SFT + EM* is the models' training, "
        + "*ladder* the whole `run_ladder` call (both rungs and the model measurements).\n\n"
        + "## What holds on every model seed\n\n"
        + conclusion_text(data)
        + "\n"
    )


def check(json_path: Path, md_path: Path) -> list[str]:
    """Problems: the JSON's summary or conclusions disagree with its records, or the page with the JSON."""
    data = _read(json_path)
    problems = []
    records = data["records"]
    if data["summary"] != json.loads(json.dumps(summarise(records))):
        problems.append(f"{json_path}: the summary does not follow from the per-seed records")
    if data["conclusions"] != conclusions(records):
        problems.append(f"{json_path}: the conclusions do not follow from the per-seed records")
    want = render_md(data)
    have = md_path.read_text(encoding="utf-8") if md_path.is_file() else ""
    if have != want:
        diff = difflib.unified_diff(
            have.splitlines(), want.splitlines(), str(md_path), "from JSON", lineterm=""
        )
        problems.append(f"{md_path} differs from {json_path.name}:\n" + "\n".join(diff))
    return problems


# -- running the seeds ------------------------------------------------------------------------------------


def cache_keys(model_seed: int, smoke: bool = False) -> dict[str, str]:
    """The cache folder names of one model seed's base LM and mixture (this library stack)."""
    from seffi.experiment.ladder import LadderConfig, smoke_config

    lm = (smoke_config if smoke else LadderConfig)(model_seed=model_seed).lm_config()
    return {"base": lm.base_key(), "mixture": lm.mixture_key()}


def ladder_argv(model_seed: int, cache: Path, out: Path, smoke: bool = False) -> list[str]:
    """The ``seffi ladder`` command of one model seed (``smoke``: the tiny ``--smoke`` models)."""
    return [
        "ladder",
        *(["--smoke"] if smoke else []),
        "--no-rung3",
        "--model-seed",
        str(model_seed),
        "--wandb",
        "disabled",
        "--no-progress",
        "--cache-dir",
        str(cache),
        "--out",
        str(out),
    ]


def run_seeds(seeds: list[int], cache: Path, runs: Path, smoke: bool = False) -> list[dict[str, Any]]:
    """Train and measure every model seed, one process each; refuse models already in ``cache``."""
    present = [
        f"{cache / key} (model seed {s})"
        for s in seeds
        for key in cache_keys(s, smoke).values()
        if (cache / key).exists()
    ]
    if present:
        raise SystemExit(
            "ladder_seeds: the cache already holds models of these seeds, so they would not be trained "
            "from an empty cache:\n  " + "\n  ".join(present) + "\nuse a fresh --cache-dir"
        )
    print(f"ladder_seeds: cache {cache}: none of the {2 * len(seeds)} models present", file=sys.stderr)
    runs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    records = []
    for s in seeds:
        out = runs / f"seed-{s}"
        argv = [sys.executable, "-m", "seffi.cli", *ladder_argv(s, cache, out, smoke)]
        print(f"ladder_seeds: model seed {s}: {shlex.join(argv[1:])}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        with open(runs / f"seed-{s}.log", "w", encoding="utf-8") as log:
            proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"ladder_seeds: model seed {s} failed (exit {proc.returncode}); see {log.name}")
        record = collect(out)
        if record["models_cached"]:
            raise SystemExit(f"ladder_seeds: model seed {s} loaded cached models instead of training them")
        print(f"ladder_seeds: model seed {s} done in {seconds:.0f} s", file=sys.stderr, flush=True)
        records.append(record)
    return records


def main(argv: list[str] | None = None) -> int:
    """Run the seeds (or read finished runs), write the JSON and the page; or ``--check`` them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated model seeds (default 0,1,2)")
    parser.add_argument(
        "--cache-dir", type=Path, help="model cache without these seeds' models (default: a new one)"
    )
    parser.add_argument("--runs", type=Path, help="folder of the run folders (default: runs/ladder-seeds)")
    parser.add_argument("--smoke", action="store_true", help="tiny --smoke models (checks the script)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--from-runs", type=Path, help="read finished run folders RUNS/seed-S, train nothing")
    mode.add_argument("--check", action="store_true", help="exit 1 when the page or the JSON drifted")
    parser.add_argument("--json", type=Path, default=DOCS_JSON, help="default docs/ladder_seeds.json")
    parser.add_argument("--md", type=Path, default=DOCS_MD, help="default docs/ladder-seeds.md")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.json, args.md)
        for p in problems:
            print(p)
        print("ladder_seeds: " + ("docs drifted" if problems else "docs agree with their JSON"))
        return 1 if problems else 0
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        parser.error("--seeds must be distinct non-negative integers")
    if args.from_runs is not None:
        records = [collect(args.from_runs / f"seed-{s}") for s in seeds]
        command = None
    else:
        cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="seffi-ladder-seeds-cache-"))
        runs = args.runs or Path("runs") / "ladder-seeds"
        records = run_seeds(seeds, cache.resolve(), runs.resolve(), args.smoke)
        command = "OMP_NUM_THREADS=1 python scripts/ladder_seeds.py " + shlex.join(
            ["--seeds", args.seeds]
            + (["--cache-dir", "CACHE"] if args.cache_dir else [])  # the page names no machine's folders
            + (["--runs", "RUNS"] if args.runs else [])
            + (["--smoke"] if args.smoke else [])
        )
    from seffi._cache import numerics_stack

    if command is None:  # a page rebuilt from runs keeps the command that produced them
        previous = _read(args.json) if args.json.is_file() else {}
        command = previous.get("command", "OMP_NUM_THREADS=1 python scripts/ladder_seeds.py")
    data = build(records, command, numerics_stack())
    args.json.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    args.md.write_text(render_md(data), encoding="utf-8")
    print(table(data))
    print(conclusion_text(data))
    print(f"ladder_seeds: wrote {args.json} and {args.md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

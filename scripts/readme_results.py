"""The pages' numbers that come from long runs: the exploration ladder and the benchmarks.

Used by ``scripts/readme_numbers.py`` (producers ``ladder`` and ``benchmarks``). Their results are
committed, so the check compares the pages with them and re-runs nothing:

- ``docs/results/ladder/`` (``report.json``, ``ladder.json``, ``rung3.json``, ``timings.json`` of
  ``seffi ladder``, and ``manifest.json``: the command and the figures' digests) -> every table,
  figure caption and finding of docs/ladder.md; ``docs/ladder_coverage.png`` is re-rendered from
  those files and compared pixel for pixel, ``docs/ladder_passk.png`` by digest;
- ``docs/results/benchmarks/<name>.txt`` (the printed output of each script in `BENCHMARKS`)
  -> one ``bench-<name>`` block each.

``python scripts/readme_numbers.py --write --only ladder,benchmarks --refresh`` re-runs them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from typing import Any

from readme_numbers import DOCS, RESULTS, ROOT, SEFFI, Context, Result, _run, _sha256, ci, fenced, num

#: (name, command) of each benchmark whose printed output a page quotes.
BENCHMARKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tasks", ("benchmarks/tasks.py",)),
    ("envs", ("benchmarks/envs.py",)),
    ("coverage", ("benchmarks/coverage.py",)),
    ("callback-overhead", ("benchmarks/callback_overhead.py",)),
    ("em-step", ("benchmarks/em_step.py",)),
    ("gain-calibration", ("benchmarks/gain_calibration.py",)),
    ("passk-calibration", ("benchmarks/passk_calibration.py",)),
    ("rung3-sanity", ("benchmarks/rung3_sanity.py", "--held-out")),
    ("scale", ("benchmarks/scale.py",)),
    ("scale-monitor", ("benchmarks/scale.py", "--monitor", "--episodes", "400000", "--inputs", "100,100000")),
    ("peers", ("benchmarks/peers.py",)),
    ("scale-strategies", ("benchmarks/scale.py", "--strategies", "32,1000,100000")),
    ("scale-from-samples", ("benchmarks/scale.py", "--from-samples")),
    ("many-strategies", ("benchmarks/many_strategies.py",)),
    ("score", ("benchmarks/score.py",)),
    ("bad-input", ("benchmarks/bad_input.py",)),
    ("pack-lint", ("benchmarks/pack_lint.py",)),
    ("smoke", ("benchmarks/smoke.py",)),
    ("window-lag", ("benchmarks/window_lag.py",)),
)
LADDER_FILES = ("report.json", "ladder.json", "rung3.json", "timings.json")
#: The blocks of docs/ladder.md.
LADDER_BLOCKS = ("ladder-run", "ladder-rung2", "ladder-gains", "ladder-coverage-figure", "ladder-rung3",
                 "ladder-passk-figure", "ladder-findings")


def _gain(policy: dict[str, Any], digits: int = 3) -> str:
    g = policy.get("gain") or {}
    return ci(g.get("value"), g.get("lo"), g.get("hi"), digits) or "—"


def _side(lo: float | None, hi: float | None) -> str:
    """Where a 95% interval lies relative to 0."""
    if lo is None or hi is None:
        return "has no interval"
    if lo > 0:
        return "lies above 0"
    if hi < 0:
        return "lies below 0"
    return "contains 0"


def _by_rung(report: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(c["rung"]): c for c in report["comparisons"]}


def run_block(data: dict[str, Any], manifest: dict[str, Any]) -> str:
    """The command, its settings and its wall time."""
    t, m = data["timings.json"], data["ladder.json"]
    report = data["report.json"]
    comp = report["comparisons"][0]
    cached = "with the models cached" if t.get("models_cached") else "from an empty model cache"
    parts = [f"models {t['models_seconds']:.0f} s"]
    parts += [f"rung {r} {t[f'rung{r}_seconds']:.0f} s" for r in (1, 2, 3) if f"rung{r}_seconds" in t]
    parts.append(f"model measurements {t['measure_seconds']:.0f} s")
    return (
        f"`{manifest['command']}`: task `{m['task']}`, K = {comp['budget']}, {comp['n_inputs']} pool inputs, "
        f"seed {report['seed']}; {t['total_seconds'] / 60:.1f} min {cached} "
        f"({', '.join(parts)}) on a shared 2-core CPU machine.\n"
    )


def rung2_block(m: dict[str, Any]) -> str:
    """The rung-2 model measurements (held-out inputs) against their targets."""
    rows = [
        ("base LM parameters", f"{m['base_n_params']:,}", ""),
        ("training rows valid rate", num(m["rows_valid_rate"]), ""),
        ("base LM valid rate (temperature 1)", num(m["base_valid_rate"]), "within 0.1 of the rows'"),
        ("strategy TV, base LM vs training law", num(m["tv_vs_law"]), "≤ 0.1"),
        (f"NMI(latent, strategy), L = {m['n_codes']}, z from the latent prior",
         num(m.get("nmi_joint")) or "—", "≥ 0.6"),
        ("NMI with every code equally likely", num(m.get("nmi")) or "—", ""),
        ("NMI ceiling (the rows' labels vs their match sets)", num(m.get("nmi_ceiling_rows")) or "—", ""),
        (f"NMI of a pure latent split at random over L = {m['n_codes']} codes",
         num(m.get("nmi_ceiling_split")) or "—", ""),
        ("mixture valid rate (z from the prior)", num(m["mixture_valid_rate"]), ""),
        ("SFT / EM seconds", f"{m['base_train_seconds']:.0f} / {m['mixture_train_seconds']:.0f}", ""),
    ]
    lines = [
        f"| {m['task']}: {m['n_inputs']} held-out inputs, {m['n_base_samples']} samples each "
        "| value | target |",
        "|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines) + "\n"


def gains_block(report: dict[str, Any]) -> str:
    """Rungs 1 and 2: each policy's gain vs iid, with the baselines it is measured against."""
    rungs = _by_rung(report)
    r1, r2 = rungs[1], rungs[2]
    iid2 = r2["iid"]
    head = (
        f"iid on rung 1 is exact (AUC {num(r1['iid']['auc'])}); on rung 2 it is estimated from base-LM "
        f"samples (AUC {ci(iid2['auc'], iid2.get('auc_lo'), iid2.get('auc_hi'))}); the oracle's AUC is "
        f"{num(r1['oracle']['auc'])} on rung 1 and {num(r2['oracle']['auc'])} on rung 2.\n\n"
    )
    lines = ["| policy | rung 1 gain [95% CI] | rung 2 gain [95% CI] |", "|---|---|---|"]
    second = {p["curves"]["label"]: p for p in r2["policies"]}
    for p in r1["policies"]:
        label = p["curves"]["label"]
        lines.append(f"| {label} | {_gain(p)} | {_gain(second[label]) if label in second else '—'} |")
    return head + "\n".join(lines) + "\n"


def coverage_caption(report: dict[str, Any]) -> str:
    """The caption of ladder_coverage.png: each panel's legend gains (two decimals, as drawn)."""
    panels = []
    for comp in report["comparisons"]:
        gains = "; ".join(f"{p['curves']['label']} {_gain(p, 2)}" for p in comp["policies"])
        panels.append(f"rung {comp['rung']}: {gains}")
    return (
        "*`ladder_coverage.png`: coverage C(k) per rung, left to right, against iid (grey dotted) and "
        "the oracle (black dashed). Legend gains: " + ". ".join(panels) + ".*\n"
    )


def rung3_block(report: dict[str, Any], r3: dict[str, Any]) -> str:
    """Rung 3: pool gain and valid rate, held-out valid@1, C(K) / C(n), gain vs base, crossover."""
    comp = _by_rung(report)[3]
    k, base = comp["budget"], r3["base"]
    n = base["n"]
    pool = {p["curves"]["label"]: p for p in comp["policies"]}
    lines = [
        f"| {report['comparisons'][0]['task']}, K = {k}, n = {n} | pool gain [95% CI] | pool valid rate "
        f"| held-out valid@1 | held-out C({k}) / C({n}) | held-out gain vs base [95% CI] | crossover k |",
        "|---|---|---|---|---|---|---|",
        f"| reference (base) | 0 | — | {num(base['valid_at_k'][0])} | {num(base['coverage'][k - 1])} / "
        f"{num(base['coverage'][-1])} | 0 | — |",
    ]
    for label, run in r3["runs"].items():
        ev, fin = run["eval"], run["final"]
        cross = f"{int(ev['crossover_k'])}" if ev.get("crossover_found") else f"none within {n}"
        held = ci(ev.get("gain_vs_base"), ev.get("gain_vs_base_lo"), ev.get("gain_vs_base_hi"))
        p = pool[label]
        lines.append(
            f"| {label} | {_gain(p)} | {num(p['curves']['valid_rate'])} | {num(fin['valid_at_k'][0])} | "
            f"{num(fin['coverage'][k - 1])} / {num(fin['coverage'][-1])} | {held} | {cross} |"
        )
    return "\n".join(lines) + "\n"


def passk_caption(r3: dict[str, Any]) -> str:
    """The caption of ladder_passk.png: what each legend entry says about its crossover."""
    n = r3["base"]["n"]
    tags = []
    for label, run in r3["runs"].items():
        ev = run["eval"]
        found = ev.get("crossover_found")
        tag = f"crossover k={int(ev['crossover_k'])}" if found else f"no crossover within n={n}"
        tags.append(f"{label} ({tag})")
    return (
        f"*`ladder_passk.png`: held-out valid@k (left) and C(k) (right) for k = 1..{n}, the reference "
        "model (dashed) against each GRPO run: " + "; ".join(tags) + ".*\n"
    )


def findings_block(report: dict[str, Any], r3: dict[str, Any]) -> str:
    """One sentence per finding, each read off the committed results."""
    rungs = _by_rung(report)
    out = []
    for r in (1, 2):
        for p in rungs[r]["policies"]:
            g = p.get("gain") or {}
            side = _side(g.get("lo"), g.get("hi"))
            out.append(f"rung {r}, {p['curves']['label']}: the gain's 95% interval {side}")
    base, n = r3["base"], r3["base"]["n"]
    for label, run in r3["runs"].items():
        ev, fin = run["eval"], run["final"]
        lo, hi = ev.get("gain_vs_base_lo"), ev.get("gain_vs_base_hi")
        out.append(
            f"rung 3, {label}: held-out valid@1 {num(base['valid_at_k'][0])} → {num(fin['valid_at_k'][0])}, "
            f"C({n}) {num(base['coverage'][-1])} → {num(fin['coverage'][-1])} (base → trained); the "
            f"held-out gain's interval {_side(lo, hi)}"
        )
    return "".join(f"- {s}.\n" for s in out)


def ladder_blocks(data: dict[str, Any], manifest: dict[str, Any]) -> dict[str, str]:
    """Every block of `LADDER_BLOCKS` from the committed results."""
    report, r3 = data["report.json"], data["rung3.json"]
    return {
        "ladder-run": run_block(data, manifest),
        "ladder-rung2": rung2_block(data["ladder.json"]),
        "ladder-gains": gains_block(report),
        "ladder-coverage-figure": coverage_caption(report),
        "ladder-rung3": rung3_block(report, r3),
        "ladder-passk-figure": passk_caption(r3),
        "ladder-findings": findings_block(report, r3),
    }


def refresh_ladder(ctx: Context) -> None:
    """Run ``seffi ladder`` (or take ``--ladder-dir``) and commit its results under docs/results/ladder/."""
    command = ["ladder", "--no-progress", "--wandb", "disabled"]
    src = ctx.ladder_dir
    if src is None:
        src = ctx.tmp / "ladder"
        _run([*SEFFI, *command, "--out", str(src)], ctx.tmp)
    dest = RESULTS / "ladder"
    dest.mkdir(parents=True, exist_ok=True)
    for name in LADDER_FILES:
        shutil.copyfile(src / name, dest / name)
    for name in ("ladder_coverage", "ladder_passk"):
        shutil.copyfile(src / f"{name}.png", DOCS / f"{name}.png")
    manifest = {
        "command": "seffi " + " ".join(command),
        "figures": {f"docs/{n}.png": _sha256(DOCS / f"{n}.png") for n in ("ladder_coverage", "ladder_passk")},
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


def produce_ladder(ctx: Context) -> Result:
    """docs/ladder.md's tables and sentences from the committed ladder results; its figures checked."""
    if ctx.refresh:
        refresh_ladder(ctx)
    src = RESULTS / "ladder"
    data = {n: json.loads((src / n).read_text(encoding="utf-8")) for n in LADDER_FILES}
    manifest = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    blocks = ladder_blocks(data, manifest)
    figures, problems = [], []
    try:
        from seffi.experiment.ladder_report import ladder_plots
        from seffi.report import load_report

        out = ctx.tmp / "ladder"
        out.mkdir(exist_ok=True)
        made = ladder_plots(out, load_report(src / "report.json"), data["ladder.json"])
        figures.append((DOCS / "ladder_coverage.png", made["ladder_coverage"]))
    except Exception as exc:  # a renamed plotting function is a problem to report, not a traceback
        problems.append(f"ladder: could not re-render ladder_coverage.png from {src}: {exc!r}")
    digests = [(ROOT / p, d) for p, d in manifest["figures"].items() if p.endswith("ladder_passk.png")]
    return Result(blocks, figures=figures, digests=digests, problems=problems)


def _columns(line: str) -> list[str]:
    """Cells of one row of a benchmark's fixed-width table (two or more spaces apart)."""
    return [c for c in re.split(r"\s{2,}", line.strip()) if c]


def cost_block(peers: str, scale: str, monitor: str) -> str:
    """The README's cost table from the committed outputs of peers.py and scale.py (and --monitor)."""
    rows = {c[0]: c for c in map(_columns, peers.splitlines()) if len(c) > 3}
    cells = {name: rows[name] for name in ("numpy floor", "RecordEpisodeStatistics", "SB3 Monitor x64",
                                           "seffi ingest only", "seffi default logging")}
    lines = ["| consumer (one recorded 64-env stream) | CPU µs per episode (median) | × the numpy floor |",
             "|---|---|---|"]
    lines += [f"| {name} | {c[2]} | {c[3]} |" for name, c in cells.items()]
    table = [ln.split("|")[1:-1] for ln in scale.splitlines() if ln.startswith("| 100,000")]
    mon = {ln.split("|")[1].strip(): ln.split("|")[2].strip() for ln in monitor.splitlines()
           if ln.startswith("| 100")}
    u = [c.strip() for c in table[0]]
    lines += ["", f"At 10^5 distinct inputs (10^6 episodes, K = 16) the tracker ingests at {u[1]} µs per "
              f"episode, a streaming log's `point()` takes {u[2]} ms and the final `curves()` {u[3]} s "
              f"({u[4]} MB); `CoverageMonitor` with default logging costs {mon['100,000']} µs per episode "
              f"at 10^5 inputs and {mon['100']} at 10^2."]
    return "\n".join(lines) + "\n"


def refresh_benchmarks(ctx: Context) -> None:
    """Run every benchmark of `BENCHMARKS` and commit its printed output."""
    dest = RESULTS / "benchmarks"
    dest.mkdir(parents=True, exist_ok=True)
    for name, cmd in BENCHMARKS:
        print(f"readme_numbers: benchmark {name} ...", file=sys.stderr, flush=True)
        seconds, load, out = _run([sys.executable, *cmd], ROOT, stderr=False)  # stdout: the measurements
        # the temporary run folders a benchmark's callbacks announce say nothing about its costs
        out = "\n".join(ln for ln in out.splitlines() if not ln.startswith("[seffi] run folder: /tmp"))
        out = out.replace(f"{ROOT}{os.sep}", "." + os.sep)  # "seffi from ./seffi": no machine's folders
        cores = os.cpu_count()
        head = f"$ python {' '.join(cmd)}\n# {seconds:.0f} s, load average {load:.1f} on {cores} cores\n"
        (dest / f"{name}.txt").write_text(head + out.rstrip() + "\n", encoding="utf-8")


def produce_benchmarks(ctx: Context) -> Result:
    """One ``bench-<name>`` block per committed benchmark output."""
    if ctx.refresh:
        refresh_benchmarks(ctx)
    blocks, problems = {}, []
    for name, _ in BENCHMARKS:
        path = RESULTS / "benchmarks" / f"{name}.txt"
        if not path.is_file():
            problems.append(f"benchmarks: {path.relative_to(ROOT)} is missing (run --write --refresh)")
            continue
        blocks[f"bench-{name}"] = fenced(path.read_text(encoding="utf-8"))
    if not problems:
        text = {n: (RESULTS / "benchmarks" / f"{n}.txt").read_text(encoding="utf-8")
                for n in ("peers", "scale", "scale-monitor")}
        blocks["bench-cost"] = cost_block(text["peers"], text["scale"], text["scale-monitor"])
    return Result(blocks, problems=problems)


BLOCKS = set(LADDER_BLOCKS) | {f"bench-{name}" for name, _ in BENCHMARKS} | {"bench-cost"}

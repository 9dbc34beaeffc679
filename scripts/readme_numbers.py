"""Keep the numbers and figures of README.md and docs/*.md in step with what produces them.

Every generated region of a page sits between ``<!-- readme-numbers:NAME -->`` and
``<!-- /readme-numbers:NAME -->`` markers (each name in exactly one page). A *producer* makes the
expected bodies of one or more blocks and the figures they describe, and may time its command::

    python scripts/readme_numbers.py --check                 # exit 1 and a diff when a page drifted
    python scripts/readme_numbers.py --write                 # rewrite the blocks, figures and times
    python scripts/readme_numbers.py --check --only lane,cli   # a subset
    python scripts/readme_numbers.py --write --only benchmarks --refresh   # re-run the long commands

Run it with every extra installed (``pip install -e '.[all]'``): the SB3 example and the CLI
reference of ``seffi bench`` need them. Producers that run in ``--check`` (a few minutes in all):

- ``seffi-run``: ``seffi run --no-progress`` (the default experiment, seed 0) -> README's summary table,
  the caption of ``docs/coverage.png`` (the legend's numbers) and the figure itself, pixel for pixel
  (report.json is the same on every x86-64 CPU, whatever BLAS kernel it gets), plus its wall time;
- ``caveat``: ``seffi run --tasks sort_swaps,coin_sum --budget 16 --seed 1`` and ``seffi tasks`` ->
  the feasibility warning quoted on the statistics page;
- ``lane``: ``seffi lane sample-efficiency --split public|holdout`` (in process) -> the lane table;
- ``sb3-eval``: ``python examples/sb3_ppo_router_eval.py`` (needs the sb3 extra) -> its gains, and its
  wall time;
- ``cli``: ``seffi <command> --help`` for every command -> docs/cli.md;
- ``citation``: CITATION.cff -> README's BibTeX;
- ``delegated``: the pages in `DELEGATED` that have a checker of their own (it is run).

Producers of long runs (``scripts/readme_results.py``) compare the pages with committed results and
re-run nothing unless ``--write --refresh`` is given:

- ``ladder``: ``docs/results/ladder/`` (the files of one ``seffi ladder`` run) -> docs/ladder.md's
  tables, captions and findings, and its two figures;
- ``benchmarks``: ``docs/results/benchmarks/<name>.txt`` (each benchmark's printed output) -> one
  ``bench-<name>`` block each on the performance, statistics and W&B pages;
- ``calibration`` (``scripts/calibration_table.py``): ``docs/results/calibration.json`` (the rows of
  ``benchmarks/calibration.py``) -> the calibration table of docs/statistics.md;
- ``exploration`` (``scripts/readme_exploration.py``): ``docs/results/exploration-bench/<setting>/``
  (the combined ``bench.json`` of each setting and its models' training times) -> the tables, findings
  and wall times of docs/exploration-bench.md, and its two figures, pixel for pixel.

Outside the blocks, a page states no result: a decimal with three or more places, or a signed one,
in its prose is reported (`readme_blocks.stray_numbers`), so every measured number has a producer.

Wall times depend on the machine and its load, so ``--check`` compares numbers and figures only. The
times live on the performance page, each with the load average when its command started:
``--write`` replaces a time (and its load average) when it is outside a factor `TIME_TOLERANCE` of
the one stated, and ``--check`` only checks that the page states one.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "scripts") not in sys.path:  # readme_blocks.py and readme_results.py sit next to this file
    sys.path.insert(0, str(ROOT / "scripts"))
if __name__ == "__main__":  # one module, whether run as a script or imported by readme_results
    sys.modules.setdefault("readme_numbers", sys.modules["__main__"])

from readme_blocks import DOCS, block_names, pages, read_block, replace_block, stray_numbers  # noqa: E402
from readme_blocks import README as README  # noqa: E402  (for the tests and other scripts)

RESULTS = DOCS / "results"
#: ``--write`` keeps a stated wall time within this factor of the measured one (shared 2-core machine).
TIME_TOLERANCE = 2.0
MINUS = "\u2212"  # the pages' tables use a typographic minus
#: Width of the generated CLI reference (no horizontal scrolling on the docs site).
HELP_COLUMNS = 88


# -- formatting (the pages' conventions) ---------------------------------------------------------------


def num(x: float | None, digits: int = 3) -> str:
    """A number as the tables print it: fixed digits, typographic minus; None is empty."""
    if x is None:
        return ""
    text = f"{x:.{digits}f}"
    if float(text) == 0.0:
        text = text.lstrip("-")  # no "-0.000"
    return text.replace("-", MINUS)


def ci(v: float | None, lo: float | None, hi: float | None, digits: int = 3) -> str:
    """``v [lo, hi]`` (or ``v`` without a band)."""
    if v is None:
        return ""
    if lo is None or hi is None:
        return num(v, digits)
    return f"{num(v, digits)} [{num(lo, digits)}, {num(hi, digits)}]"


def median(t: object | None, budget: int) -> str:
    """A T(0.8) median cell: the median, or "> K (censored)"."""
    if t is None:
        return ""
    m = getattr(t, "median", None)
    return f"> {budget} (censored)" if m is None else f"{m:g}"


def _row(cells: list[str]) -> str:
    """A markdown table row; an empty cell is written "| |"."""
    return ("| " + " | ".join(cells) + " |").replace("|  |", "| |")


def seffi_run_table(report: Any) -> str:
    """The table of the default ``seffi run`` (one row per policy, one iid / oracle row)."""
    comps = report.comparisons
    budget = comps[0].budget
    head = ["task", "policy", f"AUC@{budget} [95% CI]", "gain vs iid [95% CI]", "T(0.8) median"]
    lines = ["| " + " | ".join([*head, f"F({budget})", "valid rate"]) + " |", "|---|---|---|---|---|---|---|"]
    for comp in comps:
        for pol in comp.policies:
            c, g = pol.curves, pol.gain
            gain = "" if g is None else ci(g.value, g.lo, g.hi)
            full = c.full_coverage[-1] if c.full_coverage else None
            cells = [comp.task, c.label, ci(c.auc, c.auc_lo, c.auc_hi), gain]
            cells += [median(c.ttc(0.8), comp.budget), num(full), num(c.valid_rate)]
            lines.append(_row(cells))
        iid, oracle = comp.iid, comp.oracle
        cells = [comp.task, "iid / oracle", f"{num(iid.auc)} / {num(oracle.auc)}", ""]
        cells.append(f"{median(iid.ttc(0.8), comp.budget)} / {median(oracle.ttc(0.8), comp.budget)}")
        cells.append(f"{num(iid.full_coverage[-1])} / {num(oracle.full_coverage[-1])}")
        lines.append(_row([*cells, ""]))
    return "\n".join(lines) + "\n"


#: The caption sits above the README's definitions: it says what each of its lines is.
CAPTION_LABELS = {
    "learned": "the trained router",
    "iid-sampler": "the base model run through the env and measured like the router",
}


def coverage_caption(report: Any, task: str = "sort_swaps") -> str:
    """The caption of docs/coverage.png: the numbers its legend shows (AUC, gain with its 95% CI)."""
    comp = next(c for c in report.comparisons if c.task == task)
    parts = []
    for pol in comp.policies:
        g = pol.gain
        gain = "" if g is None or g.value is None else f", gain {ci(g.value, g.lo, g.hi, 2)}"
        what = CAPTION_LABELS.get(pol.curves.label)
        label = pol.curves.label + (f" ({what})" if what else "")
        parts.append(f"{label} AUC {num(pol.curves.auc)}{gain}")
    parts += [
        f"iid (exact, from the base model's law) AUC {num(comp.iid.auc)}",
        f"oracle (never repeats a strategy) AUC {num(comp.oracle.auc)}",
    ]
    return (
        f"*`{task}` in the default `seffi run` (K = {comp.budget}, {comp.n_inputs} inputs): the expected "
        "share of the strategies found by sample k, with 95% bands. Legend: " + "; ".join(parts) + ".*\n"
    )


def lane_table(reports: dict[str, Any]) -> str:
    """The lane table: one row per split of the standard pack on the reference learner."""
    from seffi.lanes.sample_efficiency import fmt_number as f

    lines = [
        "| split | concepts | mean corrections to first hit | mean corrections to saturation "
        "| saturation rate | replay determinism | recall control: first hit / saturation / rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for split, rep in reports.items():
        a, r = rep.aggregate, rep.recall_control.aggregate
        det = f"{f(a.replay_determinism)} ({a.n_identical_replays}/{a.n_snapshots} snapshots)"
        control = (
            f"{f(r.mean_corrections_to_first_hit)} / {f(r.mean_corrections_to_saturation)} / "
            f"{f(r.saturation_rate)}"
        )
        lines.append(
            f"| {split} | {a.n_evaluated} | {f(a.mean_corrections_to_first_hit)} | "
            f"{f(a.mean_corrections_to_saturation)} | {f(a.saturation_rate)} | {det} | {control} |"
        )
    return "\n".join(lines) + "\n"


def sb3_eval_text(report: Any) -> str:
    """The sentence on the SB3 evaluation example: first and final gain with their 95% CIs."""
    from seffi.report.plots import eval_series

    (comp,) = report.comparisons
    series = eval_series(comp)
    (first_step, first), (_, final) = series[0], series[-1]
    g0, g1 = first.gain, final.gain
    return (
        "With default arguments, `sb3_ppo_router_eval.py` (30k PPO timesteps, "
        f"{len(series)} evaluations)\nprints the evaluated gain vs iid with its 95% CI for "
        f"every evaluation:\n{ci(g0.value, g0.lo, g0.hi)} after {first_step // 1000}k steps, "
        f"{ci(g1.value, g1.lo, g1.hi)} at the end.\n"
    )


def within(measured: float, stated: float) -> bool:
    """True when ``measured`` is within a factor `TIME_TOLERANCE` of ``stated``."""
    return abs(math.log(max(measured, 1e-9) / max(stated, 1e-9))) <= math.log(TIME_TOLERANCE)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fenced(text: str, lang: str = "text") -> str:
    """``text`` in a code fence."""
    return f"```{lang}\n{text.rstrip()}\n```\n"


# -- producing the numbers ----------------------------------------------------------------------------


@dataclass
class Result:
    """What one producer made: expected block bodies, figures to compare, timed prose to check."""

    blocks: dict[str, str]
    #: (regex with two groups = the stated seconds and load average, measured seconds, load average)
    times: list[tuple[str, float, float]] = field(default_factory=list)
    #: (committed figure, freshly made one): equal pixel for pixel, or the check fails
    figures: list[tuple[Path, Path]] = field(default_factory=list)
    #: (committed file, expected sha256): a figure that must come from the committed run
    digests: list[tuple[Path, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class Context:
    """What a producer gets: a scratch folder, the pages' text, and whether to re-run long commands."""

    tmp: Path
    text: dict[Path, str]
    refresh: bool = False
    ladder_dir: Path | None = None
    #: setting -> a finished ``seffi bench exploration --combine`` folder (with ``--refresh``)
    exploration_dirs: dict[str, Path] = field(default_factory=dict)

    def all_text(self) -> str:
        return "\n".join(self.text.values())


def _env() -> dict[str, str]:
    return {**os.environ, "MPLBACKEND": "Agg", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}


def _run(cmd: list[str], cwd: Path, stderr: bool = True) -> tuple[float, float, str]:
    """(wall seconds, 1-minute load average at the start, stdout and, when ``stderr``, stderr) of ``cmd``.

    Exits with the command's stderr when it fails.
    """
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"readme_numbers: {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started, load, proc.stdout + (proc.stderr if stderr else "")


SEFFI = [sys.executable, "-c", "import sys; from seffi.cli import main; sys.exit(main())"]
#: The timed sentences of the performance page: group 1 the seconds, group 2 the load average.
SEFFI_RUN_TIME = r"The default `seffi run` [^*]*takes\s+\*\*([0-9.]+) s\*\*[^(]*\(load\s+average\s+([0-9.]+)"
SB3_TIME = r"`examples/sb3_ppo_router_eval.py`[^*]*\*\*([0-9.]+) s\*\*\s+\(load\s+average\s+([0-9.]+)"


def produce_seffi_run(ctx: Context) -> Result:
    """The default ``seffi run``: its table, the coverage figure and its caption, its wall time."""
    from seffi.report import load_report

    # Timed as the performance page states it; the numbers do not depend on W&B.
    seconds, load, _ = _run([*SEFFI, "run", "--no-progress", "--wandb", "disabled", "--out", "run"], ctx.tmp)
    report = load_report(ctx.tmp / "run")
    figure = ctx.tmp / "run" / "plots" / "SortSwapsRouter-v0_coverage.png"
    return Result(
        {"seffi-run": seffi_run_table(report), "coverage-figure": coverage_caption(report)},
        times=[(SEFFI_RUN_TIME, seconds, load)],
        figures=[(DOCS / "coverage.png", figure)],
    )


def produce_caveat(ctx: Context) -> Result:
    """The feasibility warning of a run with coin_sum, and coin_sum's feasible share from ``seffi tasks``."""
    argv = ["run", "--tasks", "sort_swaps,coin_sum", "--budget", "16", "--seed", "1"]
    _, _, out = _run([*SEFFI, *argv, "--no-progress", "--wandb", "disabled", "--out", "caveat"], ctx.tmp)
    lines = (ln.strip() for ln in out.splitlines())
    warning = next((ln for ln in lines if ln.startswith("warning (coin_sum)")), None)
    _, _, listing = _run([*SEFFI, "tasks", "coin_sum", "--json"], ctx.tmp)
    (info,) = json.loads(listing)
    problems = [] if warning else ["caveat: the coin_sum run printed no feasibility warning"]
    body = (
        f"`seffi tasks coin_sum`: {len(info['strategies'])} strategies are declared per input and "
        f"{num(info['mean_feasible'], 2)} are feasible on average ({info['min_feasible']} to "
        f"{info['max_feasible']}; {info['inputs']} distinct inputs in 200 seeded draws). "
        "`seffi " + " ".join(argv) + "` says so before its table:\n\n> " + (warning or "") + "\n"
    )
    return Result({"caveat": body}, problems=problems)


def produce_lane(ctx: Context) -> Result:
    """Both splits of the standard pack on the reference learner, with the recall control."""
    from seffi.lanes.learners import RecallLearner, VaultLearner
    from seffi.lanes.packs import standard_pack
    from seffi.lanes.sample_efficiency import run_lane

    pack = standard_pack()
    splits = ("public", "holdout")
    reports = {s: run_lane(pack.select(s), VaultLearner, control=RecallLearner) for s in splits}
    return Result({"lane": lane_table(reports)})


def produce_sb3_eval(ctx: Context) -> Result:
    """The SB3 evaluation example: first and final gain with CIs, and its wall time."""
    from seffi.report import load_report

    script = ROOT / "examples" / "sb3_ppo_router_eval.py"
    seconds, load, _ = _run([sys.executable, str(script), "--wandb", "disabled", "--out", "sb3"], ctx.tmp)
    body = sb3_eval_text(load_report(ctx.tmp / "sb3"))
    return Result({"sb3-eval": body}, times=[(SB3_TIME, seconds, load)])


_HELP = """
import contextlib, importlib, io, json, re, sys
module, _, func = sys.argv[1].partition(":")
main = getattr(importlib.import_module(module), func)
def run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(argv)
        except SystemExit:
            pass
    return out.getvalue()
found, todo = {}, [[]]
while todo:
    argv = todo.pop(0)
    text = found[" ".join(["seffi", *argv])] = run([*argv, "--help"])
    # argparse lists each subcommand as a row indented by 4 under the subcommand group's heading
    todo += [[*argv, n] for n in re.findall(r"^ {4}([a-z][\\w-]*)(?:  |$)", text, flags=re.MULTILINE)]
print(json.dumps(found))
"""


def command_helps(entry: str = "seffi.cli:main", columns: int = HELP_COLUMNS) -> dict[str, str]:
    """The ``--help`` of ``seffi`` and of every (sub)command, keyed ``"seffi bench exploration"``.

    Args:
        entry: The console script's ``module:function``.
        columns: The terminal width argparse wraps to.
    """
    env = {**_env(), "COLUMNS": str(columns), "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-c", _HELP, entry]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"readme_numbers: seffi --help failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def produce_cli(ctx: Context) -> Result:
    """docs/cli.md's reference: the ``--help`` of ``seffi`` and of every (sub)command, in order."""
    parts = [f"### `{command}`\n\n" + fenced(text) for command, text in command_helps().items()]
    return Result({"cli": "\n".join(parts)})


def produce_citation(ctx: Context) -> Result:
    """README's BibTeX entry from CITATION.cff (title, authors, version, year, license)."""
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    authors = " and ".join("{" + a["name"] + "}" for a in cff["authors"])
    entry = (
        "@software{seffi,\n"
        f"  title   = {{{cff['title']}}},\n"
        f"  author  = {{{authors}}},\n"
        f"  version = {{{cff['version']}}},\n"
        f"  year    = {{{str(cff['date-released'])[:4]}}},\n"
        f"  license = {{{cff['license']}}},\n"
        "}"
    )
    return Result({"citation": fenced(entry, "bibtex")})


# -- committed results: the ladder and the benchmarks (scripts/readme_results.py) -------------------


def produce_ladder(ctx: Context) -> Result:
    """docs/ladder.md's tables, captions and findings from the committed ``seffi ladder`` results."""
    import readme_results

    return readme_results.produce_ladder(ctx)


def produce_benchmarks(ctx: Context) -> Result:
    """One ``bench-<name>`` block per committed benchmark output."""
    import readme_results

    return readme_results.produce_benchmarks(ctx)


def produce_calibration(ctx: Context) -> Result:
    """docs/statistics.md's calibration table from the committed ``benchmarks/calibration.py`` output."""
    import calibration_table

    return calibration_table.produce(ctx)


def produce_exploration(ctx: Context) -> Result:
    """docs/exploration-bench.md's tables, findings, figures and wall times from the committed benches."""
    import readme_exploration

    return readme_exploration.produce(ctx)


#: Pages with a checker of their own: (page, the command that exits 1 when the page drifted).
DELEGATED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("docs/ladder-seeds.md", ("scripts/ladder_seeds.py", "--check")),
)


def produce_delegated(ctx: Context) -> Result:
    """Run each existing page's own checker (its blocks are not this script's to write)."""
    problems = []
    for page, cmd in DELEGATED:
        if (ROOT / page).is_file() and (ROOT / cmd[0]).is_file():
            proc = subprocess.run(
                [sys.executable, *cmd], cwd=ROOT, env=_env(), capture_output=True, text=True
            )
            if proc.returncode != 0:
                said = (proc.stdout + proc.stderr)[-2000:]
                problems.append(f"{page}: `python {' '.join(cmd)}` failed:\n{said}")
    return Result({}, problems=problems)


PRODUCERS: dict[str, Callable[[Context], Result]] = {
    "seffi-run": produce_seffi_run,
    "caveat": produce_caveat,
    "lane": produce_lane,
    "sb3-eval": produce_sb3_eval,
    "cli": produce_cli,
    "citation": produce_citation,
    "ladder": produce_ladder,
    "benchmarks": produce_benchmarks,
    "calibration": produce_calibration,
    "exploration": produce_exploration,
    "delegated": produce_delegated,
}


# -- comparing ---------------------------------------------------------------------------------------


def update_time(text: str, pattern: str, measured: float, load: float) -> str:
    """``text`` with the time of ``pattern`` and its load average replaced, when out of tolerance."""
    m = re.search(pattern, text)
    if m is None or within(measured, float(m.group(1))):
        return text
    return (
        text[: m.start(1)]
        + f"{measured:.1f}"
        + text[m.end(1) : m.start(2)]
        + f"{load:.1f}"
        + text[m.end(2) :]
    )


def same_image(a: Path, b: Path) -> str | None:
    """None when the two PNGs have the same pixels, else what differs."""
    import matplotlib.image as mpimg
    import numpy as np

    if not a.is_file():
        return f"{a.relative_to(ROOT)} is missing"
    x, y = mpimg.imread(a), mpimg.imread(b)
    if x.shape != y.shape:
        return f"{a.relative_to(ROOT)}: {x.shape[1]}x{x.shape[0]} px, regenerated {y.shape[1]}x{y.shape[0]}"
    differ = int(np.any(x != y, axis=-1).sum()) if x.ndim == 3 else int((x != y).sum())
    if differ == 0:
        return None
    return f"{a.relative_to(ROOT)}: {differ} pixels differ from the regenerated figure"


def apply(result: Result, text: dict[Path, str], write: bool) -> list[str]:
    """Compare one producer's result with the pages (updating ``text`` and figures when writing)."""
    problems = list(result.problems)
    for name, body in result.blocks.items():
        holders = [p for p, t in text.items() if name in block_names(t)]
        if len(holders) != 1:
            problems.append(f"block {name}: found in {len(holders)} pages ({', '.join(map(str, holders))})")
            continue
        (page,) = holders
        have = read_block(text[page], name)
        if have != body:
            rel = page.relative_to(ROOT)
            diff = difflib.unified_diff(
                have.splitlines(), body.splitlines(), str(rel), "measured", lineterm=""
            )
            problems.append(f"block {name} ({rel}) differs:\n" + "\n".join(diff))
            text[page] = replace_block(text[page], name, body)
    for pattern, measured, load in result.times:  # a time is no drift: a loaded machine is slower
        holders = [p for p, t in text.items() if re.search(pattern, t)]
        if not holders:
            problems.append(f"time not found on any page: /{pattern}/")
        elif write:
            for page in holders:
                text[page] = update_time(text[page], pattern, measured, load)
    for committed, fresh in result.figures:
        diff = same_image(committed, fresh)
        if diff:
            problems.append("figure " + diff)
            if write:
                shutil.copyfile(fresh, committed)
    for path, digest in result.digests:
        if not path.is_file() or _sha256(path) != digest:
            problems.append(f"figure {path.relative_to(ROOT)} is not the one of the committed results")
    return problems


def expected_blocks() -> set[str]:
    """The name of every block some producer writes."""
    import calibration_table
    import readme_exploration
    import readme_results

    names = {"seffi-run", "coverage-figure", "caveat", "lane", "sb3-eval", "cli", "citation"}
    return names | readme_results.BLOCKS | readme_exploration.BLOCKS | calibration_table.BLOCKS


def unproduced(text: dict[Path, str]) -> list[str]:
    """Blocks on the pages that no producer writes (a typo, or a producer left out)."""
    expected = expected_blocks()
    return [
        f"block {name} in {page.relative_to(ROOT)}: no producer writes it"
        for page, t in text.items()
        for name in block_names(t)
        if name not in expected
    ]


def delegated_pages() -> set[Path]:
    """The pages of `DELEGATED` (their own checker covers their numbers)."""
    return {ROOT / page for page, _ in DELEGATED}


def main(argv: list[str] | None = None) -> int:
    """Check or rewrite the pages; exit status 1 when ``--check`` finds drift."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 when a page's number or figure drifted")
    mode.add_argument("--write", action="store_true", help="rewrite the blocks, figures and stale wall times")
    parser.add_argument("--only", help=f"comma-separated producers (default all: {', '.join(PRODUCERS)})")
    parser.add_argument(
        "--refresh", action="store_true", help="with --write: re-run the ladder and the benchmarks"
    )
    parser.add_argument(
        "--ladder-dir", type=Path, help="with --refresh: take the ladder results from this run folder"
    )
    parser.add_argument(
        "--exploration-dir",
        action="append",
        default=[],
        metavar="SETTING=DIR",
        help="with --refresh: take a setting's exploration bench from this --combine folder",
    )
    args = parser.parse_args(argv)
    try:
        exploration_dirs = {s: Path(d) for s, d in (item.split("=", 1) for item in args.exploration_dir)}
    except ValueError:
        parser.error("--exploration-dir takes SETTING=DIR (e.g. default=runs/default)")
    names = args.only.split(",") if args.only else list(PRODUCERS)
    unknown = [n for n in names if n not in PRODUCERS]
    if unknown:
        parser.error(f"unknown producer(s): {', '.join(unknown)}")
    if args.refresh and not args.write:
        parser.error("--refresh re-runs long commands and rewrites results: use it with --write")
    original = {p: p.read_text(encoding="utf-8") for p in pages()}
    text = dict(original)
    problems = [] if args.only else unproduced(text) + stray_numbers(text, delegated_pages())
    with tempfile.TemporaryDirectory(prefix="seffi-readme-") as tmp:
        for name in names:
            print(f"readme_numbers: {name} ...", file=sys.stderr, flush=True)
            work = Path(tmp) / name
            work.mkdir()
            ctx = Context(
                work,
                text,
                refresh=args.refresh,
                ladder_dir=args.ladder_dir,
                exploration_dirs=exploration_dirs,
            )
            problems += apply(PRODUCERS[name](ctx), text, args.write)
    for p in problems:
        print(p)
    if args.write:
        for page, body in text.items():
            if body != original[page]:
                page.write_text(body, encoding="utf-8")
                print(f"readme_numbers: updated {page.relative_to(ROOT)}")
        return 0
    print("readme_numbers: " + ("pages drifted" if problems else "every number and figure agrees"))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

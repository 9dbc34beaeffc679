"""Keep README.md's numbers in sync with the commands that produce them.

Every generated block of the README sits between ``<!-- readme-numbers:NAME -->`` and
``<!-- /readme-numbers:NAME -->`` markers; wall times quoted in the prose are checked in place. This
script re-runs the commands the README shows and compares::

    python scripts/readme_numbers.py --check            # exit 1 and a diff when the README drifted
    python scripts/readme_numbers.py --write            # rewrite the blocks (and out-of-tolerance times)
    python scripts/readme_numbers.py --check --only lane,seffi-run   # a subset

Blocks (command -> what is compared, exactly):

- ``seffi-run``: ``seffi run --wandb disabled --no-progress`` (the default experiment, seed 0) -> the
  summary table, every digit;
- ``lane``: ``seffi lane sample-efficiency --split public|holdout`` (in process, no W&B) -> the lane
  table, one rounding (:func:`seffi.lanes.sample_efficiency.fmt_number`);
- ``sb3-eval``: ``python examples/sb3_ppo_router_eval.py`` (needs the sb3 extra) -> the first and final
  evaluated gain vs iid with their CIs, and its wall time.

Wall times (``seffi run``, the SB3 example) depend on the machine and its load: they are checked to
within a factor of :data:`TIME_TOLERANCE` of the README's figure, and ``--write`` replaces a time only
when it is outside that band. The exploration ladder (7.5 min from a clean cache) and the
``benchmarks/`` figures are not re-run here: run the scripts named in the README's Performance table.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: A measured wall time agrees with the README when within this factor of it (shared 2-core machine).
TIME_TOLERANCE = 2.0
MINUS = "\u2212"  # the README's tables use a typographic minus


def block_re(name: str) -> re.Pattern[str]:
    """The README region of block ``name`` (group 1: its body, without the markers)."""
    return re.compile(
        rf"<!-- readme-numbers:{re.escape(name)} -->\n(.*?)<!-- /readme-numbers:{re.escape(name)} -->\n",
        re.DOTALL,
    )


def read_block(text: str, name: str) -> str:
    """The body of block ``name`` in ``text``.

    Raises:
        KeyError: the markers are missing or appear more than once.
    """
    found = block_re(name).findall(text)
    if len(found) != 1:
        raise KeyError(f"README must hold exactly one readme-numbers:{name} block, found {len(found)}")
    return found[0]


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name``'s body replaced by ``body``."""
    read_block(text, name)
    start, end = f"<!-- readme-numbers:{name} -->\n", f"<!-- /readme-numbers:{name} -->\n"
    return block_re(name).sub(lambda _: start + body + end, text)


# -- formatting (the README's conventions) ------------------------------------------------------------


def num(x: float | None, digits: int = 3) -> str:
    """A number as the README's tables print it: fixed digits, typographic minus; None is empty."""
    if x is None:
        return ""
    text = f"{x:.{digits}f}"
    if float(text) == 0.0:
        text = text.lstrip("-")  # no "-0.000"
    return text.replace("-", MINUS)


def ci(v: float | None, lo: float | None, hi: float | None) -> str:
    """``v [lo, hi]`` (or ``v`` without a band)."""
    if v is None:
        return ""
    return num(v) if lo is None or hi is None else f"{num(v)} [{num(lo)}, {num(hi)}]"


def median(t: object | None, budget: int) -> str:
    """A T(0.8) median cell: the median, or "> K (censored)"."""
    if t is None:
        return ""
    m = getattr(t, "median", None)
    return f"> {budget} (censored)" if m is None else f"{m:g}"


def seffi_run_table(report: object) -> str:
    """The README's table of the default ``seffi run`` (one row per policy, one iid / oracle row)."""
    comps = report.comparisons  # type: ignore[attr-defined]
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


def _row(cells: list[str]) -> str:
    """A markdown table row; an empty cell is written "| |" as in the README."""
    return ("| " + " | ".join(cells) + " |").replace("|  |", "| |")


def lane_table(reports: dict[str, object]) -> str:
    """The README's lane table: one row per split of the standard pack on the reference learner."""
    from seffi.lanes.sample_efficiency import fmt_number as f

    lines = [
        "| split | concepts | mean corrections to first hit | mean corrections to saturation "
        "| saturation rate | replay determinism | recall control: first hit / saturation / rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for split, rep in reports.items():
        a = rep.aggregate  # type: ignore[attr-defined]
        r = rep.recall_control.aggregate  # type: ignore[attr-defined]
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


def sb3_eval_text(report: object, seconds: float, stated: float | None) -> str:
    """The README's sentence on the SB3 evaluation example (the time kept while within tolerance)."""
    from seffi.report.plots_compare import eval_series

    (comp,) = report.comparisons  # type: ignore[attr-defined]
    series = eval_series(comp)
    (first_step, first), (_, final) = series[0], series[-1]
    shown = stated if stated is not None and within(seconds, stated) else round(seconds)
    g0, g1 = first.gain, final.gain
    return (
        "With default arguments on this machine, `sb3_ppo_router_eval.py` (30k PPO timesteps, "
        f"~{shown:g} s,\n{len(series)} evaluations) prints the evaluated gain vs iid with its 95% CI for "
        f"every evaluation:\n{ci(g0.value, g0.lo, g0.hi)} after {first_step // 1000}k steps, "
        f"{ci(g1.value, g1.lo, g1.hi)} at the end.\n"
    )


def within(measured: float, stated: float) -> bool:
    """True when ``measured`` is within a factor :data:`TIME_TOLERANCE` of ``stated``."""
    return abs(math.log(max(measured, 1e-9) / max(stated, 1e-9))) <= math.log(TIME_TOLERANCE)


# -- producing the numbers ----------------------------------------------------------------------------


@dataclass
class Result:
    """What one block's command produced: the expected body, plus timed prose to check in place."""

    body: str
    #: (regex with one group = the stated seconds, measured seconds)
    times: list[tuple[str, float]]


def _run(cmd: list[str], cwd: Path) -> float:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"readme_numbers: {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started


SEFFI_RUN_TIME = r"default `seffi run` wall time \(goal < 60 s\) \| `time seffi run` \| \*\*([0-9.]+) s\*\*"
SB3_TIME = r"`sb3_ppo_router_eval.py` \(30k PPO timesteps, ~([0-9.]+) s"


def produce_seffi_run(tmp: Path, text: str) -> Result:
    """The default ``seffi run`` in ``tmp``: its table and wall time."""
    from seffi.report import load_report

    # Timed as the README states it (offline W&B included); the table does not depend on W&B.
    seconds = _run([sys.executable, "-m", "seffi.cli", "run", "--no-progress", "--out", "run"], tmp)
    return Result(seffi_run_table(load_report(tmp / "run")), [(SEFFI_RUN_TIME, seconds)])


def produce_lane(tmp: Path, text: str) -> Result:
    """Both splits of the standard pack on the reference learner, with the recall control."""
    from seffi.lanes.learners import RecallLearner, VaultLearner
    from seffi.lanes.packs import standard_pack
    from seffi.lanes.sample_efficiency import run_lane

    pack = standard_pack()
    splits = ("public", "holdout")
    reports = {s: run_lane(pack.select(s), VaultLearner, control=RecallLearner) for s in splits}
    del tmp, text  # in process: no folder, no prose to check
    return Result(lane_table(reports), [])


def produce_sb3_eval(tmp: Path, text: str) -> Result:
    """The SB3 evaluation example in ``tmp``: first and final gain with CIs, and its wall time."""
    from seffi.report import load_report

    script = ROOT / "examples" / "sb3_ppo_router_eval.py"
    seconds = _run([sys.executable, str(script), "--wandb", "disabled", "--out", "sb3"], tmp)
    m = re.search(SB3_TIME, text)
    stated = float(m.group(1)) if m else None
    return Result(sb3_eval_text(load_report(tmp / "sb3"), seconds, stated), [(SB3_TIME, seconds)])


PRODUCERS: dict[str, Callable[[Path, str], Result]] = {
    "seffi-run": produce_seffi_run,
    "lane": produce_lane,
    "sb3-eval": produce_sb3_eval,
}


def check_times(text: str, times: list[tuple[str, float]]) -> tuple[str, list[str]]:
    """(text with out-of-tolerance times replaced, one problem line per such time)."""
    problems = []
    for pattern, measured in times:
        m = re.search(pattern, text)
        if m is None:
            problems.append(f"time not found in README: /{pattern}/")
            continue
        stated = float(m.group(1))
        if not within(measured, stated):
            problems.append(
                f"wall time {stated:g} s in the README, measured {measured:.1f} s "
                f"(tolerance x{TIME_TOLERANCE:g})"
            )
            text = text[: m.start(1)] + f"{measured:.1f}" + text[m.end(1) :]
    return text, problems


def main(argv: list[str] | None = None) -> int:
    """Check or rewrite the README; exit status 1 when ``--check`` finds drift."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 when a README number drifted")
    mode.add_argument("--write", action="store_true", help="rewrite the README's blocks and stale times")
    parser.add_argument("--only", help=f"comma-separated blocks (default all: {', '.join(PRODUCERS)})")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(PRODUCERS)
    unknown = [n for n in names if n not in PRODUCERS]
    if unknown:
        parser.error(f"unknown block(s): {', '.join(unknown)}")
    original = README.read_text(encoding="utf-8")
    text, problems = original, []
    with tempfile.TemporaryDirectory(prefix="seffi-readme-") as tmp:
        for name in names:
            print(f"readme_numbers: {name} ...", file=sys.stderr, flush=True)
            work = Path(tmp) / name
            work.mkdir()
            result = PRODUCERS[name](work, text)
            have = read_block(text, name)
            if have != result.body:
                diff = difflib.unified_diff(
                    have.splitlines(), result.body.splitlines(), "README", "measured", lineterm=""
                )
                problems.append(f"block {name} differs:\n" + "\n".join(diff))
                text = replace_block(text, name, result.body)
            text, time_problems = check_times(text, result.times)
            problems += time_problems
    for p in problems:
        print(p)
    if args.write:
        if text != original:
            README.write_text(text, encoding="utf-8")
            print(f"readme_numbers: updated {README}")
        return 0
    print("readme_numbers: " + ("README numbers drifted" if problems else "README numbers agree"))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

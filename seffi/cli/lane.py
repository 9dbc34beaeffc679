"""``seffi lane ...``: run the corrections-to-competence lane, lint concept packs.

Exit codes of ``seffi lane sample-efficiency``: 0 = ran, gate passed; 1 = the replay-determinism gate
failed (report written; the first divergent snapshot is printed and stored in
``aggregate.first_divergence``); 2 = a user error (bad pack, unimportable learner, ``--out`` already
holding a seffi run without ``--overwrite``) or a concept that could not be measured (its error is
printed, the other concepts' results are written; when no concept produced a curve, report.json is
still written and says so).
``seffi lane lint FILE`` prints one line per problem and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from seffi._io import write_atomic
from seffi.errors import SeffiError
from seffi.lanes.learners import RecallLearner
from seffi.lanes.lint import lint_pack
from seffi.lanes.packs import SPLITS, load_pack
from seffi.lanes.sample_efficiency import (
    ConceptResult,
    LaneReport,
    LearnerFactory,
    describe_exception,
    fmt_number,
    run_lane,
)
from seffi.report.run_folder import prepare_run_folder

#: The reference learner used when ``--learner`` is not given.
DEFAULT_LEARNER = "seffi.lanes.learners:VaultLearner"
#: The recall control measured beside every learner: it repeats every correction it was taught.
RECALL_CONTROL = "seffi.lanes.learners:RecallLearner"
DEFAULT_OUT = "runs/lane-sample-efficiency"
#: W&B key prefix of this lane (inside the project's ``seffi/*`` step-metric scheme).
WANDB_PREFIX = "seffi/lane"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``sample-efficiency`` and ``lint`` sub-subcommands to ``seffi lane``."""
    sub = parser.add_subparsers(dest="lane_command", metavar="LANE", required=True)
    se = sub.add_parser(
        "sample-efficiency",
        help="corrections-to-competence curves per concept, with the replay-determinism gate",
        description="Teach each concept's curriculum one correction at a time to fresh learners, probe "
        "after each, and report curves, first-hit/saturation points and replay determinism.",
    )
    se.add_argument("--pack", type=Path, default=None, help="concept pack JSON (default: the standard pack)")
    se.add_argument("--split", choices=SPLITS, default="public", help="concepts to run (default public)")
    se.add_argument(
        "--learner",
        default=DEFAULT_LEARNER,
        help=f"learner factory as module:callable, importable from the current directory or the installed "
        f"packages (zero arguments; default {DEFAULT_LEARNER})",
    )
    se.add_argument(
        "--out",
        type=Path,
        default=Path(DEFAULT_OUT),
        help=f"output folder (default {DEFAULT_OUT}); refused when it already holds a seffi run",
    )
    se.add_argument(
        "--overwrite",
        action="store_true",
        help="when --out already holds a seffi run, remove that run's seffi files first",
    )
    se.add_argument(
        "--wandb",
        choices=("offline", "online", "disabled"),
        default="offline",
        help="W&B mode (default offline)",
    )
    se.add_argument("--wandb-project", default="seffi", help="W&B project (default seffi)")
    se.set_defaults(handler=run_sample_efficiency)
    lint = sub.add_parser("lint", help="check a concept pack's anti-overfitting discipline")
    lint.add_argument("file", type=Path, help="concept pack JSON")
    lint.set_defaults(handler=run_lint)


def load_factory(spec: str) -> LearnerFactory:
    """Resolve ``module:callable`` to a zero-argument learner factory.

    Raises:
        SeffiError: malformed spec, module not importable, attribute missing or not callable.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SeffiError(f"--learner must look like module:factory, got {spec!r}")
    # Like `python -m`: a package in the current directory is importable without PYTHONPATH=. (the
    # `seffi` console script puts only its own bin folder first on sys.path). It stays on the path so
    # the learner's own lazy imports resolve the same way.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # ImportError, or the module's own code failing (even sys.exit) at import
        raise SeffiError(f"cannot import learner module {module_name!r}: {describe_exception(exc)}") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SeffiError(f"learner module {module_name!r} has no attribute {attr!r}") from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a module-level __getattr__ is learner code too
            raise SeffiError(
                f"cannot look up {attr!r} in {module_name!r}: {describe_exception(exc)}"
            ) from None
    if not callable(obj):
        raise SeffiError(f"learner factory {spec!r} is not callable")
    return obj


_fmt = fmt_number


def _print_concept(r: ConceptResult) -> None:
    if r.error:
        print(f"  {r.id:<28} ERROR", flush=True)
        return
    curve = " ".join(str(p.cumulative_token_hit_count) for p in r.curve)
    print(
        f"  {r.id:<28} hits [{curve}]  first hit {_fmt(r.corrections_to_first_hit)}  saturation "
        f"{_fmt(r.corrections_to_saturation)}  score {_fmt(r.saturation_score)}  replay "
        f"{_fmt(r.replay_determinism)}",
        flush=True,
    )


def _log_wandb(report: LaneReport, args: argparse.Namespace, files: list[Path], png: Path) -> str | None:
    from seffi.report.wandb_run import SafeWandbRun

    SafeWandbRun.check_login(args.wandb)
    run = SafeWandbRun(
        args.wandb,
        project=args.wandb_project,
        # no dir: like every seffi run, under ./wandb (or $WANDB_DIR), not inside the report folder
        name=f"lane-{report.pack.get('name', 'pack')}-{report.pack.get('split', '')}",
        job_type="lane-sample-efficiency",
        config={"pack": report.pack, "learner": report.learner},
    )
    ok = [c for c in report.concepts if c.curve]
    n_max = max((len(c.curve) for c in ok), default=0)
    for k in range(n_max):  # one step per k: every concept's hit count at k corrections
        row: dict[str, Any] = {}
        for c in ok:
            if k < len(c.curve):
                row[f"{WANDB_PREFIX}/hits/{c.id}"] = c.curve[k].cumulative_token_hit_count
                row[f"{WANDB_PREFIX}/vault_hits/{c.id}"] = c.curve[k].vault_hits
        run.log(row, step=k)
    run.log_image(f"{WANDB_PREFIX}/curves", png, step=max(n_max - 1, 0))
    agg = report.aggregate
    summary: dict[str, Any] = {
        f"{WANDB_PREFIX}/{key}": value
        for key, value in agg.model_dump(exclude={"first_divergence"}).items()
        if value is not None
    }
    if agg.first_divergence is not None:
        fd = agg.first_divergence
        summary[f"{WANDB_PREFIX}/first_divergence"] = f"{fd.concept} k={fd.k} {fd.step}"
    for c in ok:
        for key in ("corrections_to_first_hit", "corrections_to_saturation", "saturation_score"):
            value = getattr(c, key)
            if value is not None:
                summary[f"{WANDB_PREFIX}/{c.id}/{key}"] = value
    rc = report.recall_control
    if rc is not None:
        for key in ("mean_corrections_to_first_hit", "mean_corrections_to_saturation", "saturation_rate"):
            value = getattr(rc.aggregate, key)
            if value is not None:
                summary[f"{WANDB_PREFIX}/recall_control/{key}"] = value
    run.update_summary(summary)
    run.log_artifact(f"lane-{report.pack.get('name', 'pack')}", "seffi-lane-report", files)
    hint = run.sync_hint
    run.finish()
    return hint


def run_sample_efficiency(args: argparse.Namespace) -> int:
    """Handler of ``seffi lane sample-efficiency``."""
    from seffi.report.wandb_run import SafeWandbRun

    SafeWandbRun.check_login(args.wandb)  # fail before the (possibly long) run, not after
    pack, load_errors = load_pack(args.pack)
    concepts = pack.select(args.split)
    factory = load_factory(args.learner)
    # Last of the checks, so that a refused or mistyped command never removes an earlier run.
    out = prepare_run_folder(args.out, overwrite=args.overwrite)
    print(
        f"seffi lane sample-efficiency: {len(concepts)} concepts ({args.split}) of pack {pack.name!r} "
        f"v{pack.version} on {args.learner}",
        flush=True,
    )
    report = run_lane(
        concepts,
        factory,
        pack={
            "name": pack.name,
            "version": pack.version,
            "split": args.split,
            "source": "standard" if args.pack is None else str(args.pack),
        },
        learner=args.learner,
        load_errors=load_errors,
        on_concept=_print_concept,
        control=RecallLearner,
        control_name=RECALL_CONTROL,
    )
    report_path = out / "report.json"
    write_atomic(report_path, report.model_dump_json(indent=2) + "\n")
    from seffi.lanes.plot import plot_curves

    png = plot_curves(report, out / "curves.png")
    hint = None
    if args.wandb != "disabled":
        hint = _log_wandb(report, args, [report_path, png], png)
    agg = report.aggregate
    print(
        f"aggregate: mean corrections to first hit {_fmt(agg.mean_corrections_to_first_hit)}, to saturation "
        f"{_fmt(agg.mean_corrections_to_saturation)}, saturation rate {_fmt(agg.saturation_rate)}, replay "
        f"determinism {_fmt(agg.replay_determinism)} ({agg.n_identical_replays}/{agg.n_snapshots} snapshots)"
    )
    rc = report.recall_control
    if rc is not None:
        ra = rc.aggregate
        print(
            f"recall control (repeats every correction): first hit {_fmt(ra.mean_corrections_to_first_hit)}, "
            f"to saturation {_fmt(ra.mean_corrections_to_saturation)}, saturation rate "
            f"{_fmt(ra.saturation_rate)} — what pure recall scores on this metric"
        )
    print(f"wrote {report_path} and {png}" + (f"; W&B offline run: {hint}" if hint else ""))
    for error in report.errors:
        print(f"seffi lane: error: {error}", file=sys.stderr)
    if not agg.gate_passed and agg.n_snapshots:  # no snapshot: nothing was gated, the errors say why
        fd = agg.first_divergence
        where = f"; first divergent snapshot: concept {fd.concept!r}, k={fd.k}, at {fd.step}" if fd else ""
        print(
            f"seffi lane: replay-determinism gate FAILED: {_fmt(agg.replay_determinism)} < "
            f"{agg.gate_threshold}{where}",
            file=sys.stderr,
        )
    if report.errors:
        return 2
    return 0 if agg.gate_passed else 1


def run_lint(args: argparse.Namespace) -> int:
    """Handler of ``seffi lane lint FILE``."""
    problems = lint_pack(args.file)
    for problem in problems:
        print(f"{args.file}: {problem}")
    if not problems:
        print(f"{args.file}: clean")
    return 1 if problems else 0

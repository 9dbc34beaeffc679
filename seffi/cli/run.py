"""``seffi run``, ``seffi report DIR`` and ``seffi compare DIR...``.

Each ``add_*_arguments(parser)`` adds a subcommand's options and sets its ``handler``; the top-level
``seffi`` command (`seffi.cli`) imports this module only when one of them runs. User errors raise
`SeffiError` (printed as one line, exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from seffi.cli import add_output_options
from seffi.errors import SeffiError


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``seffi run``; every one overrides the config file, which overrides the defaults."""
    parser.description = (
        "Train a learned exploration router with the coverage callback attached and compare it with iid "
        "sampling and the no-repeat oracle on router envs. Writes report.json, report.md and plots."
    )
    parser.add_argument("--config", metavar="FILE", help="JSON or YAML file of settings (see --print-config)")
    parser.add_argument(
        "--print-config", action="store_true", help="print the effective config as JSON and exit"
    )
    parser.add_argument("--tasks", help="comma-separated task names (see `seffi tasks`)")
    parser.add_argument(
        "--seed",
        type=int,
        help="root seed (same seed and library versions => identical report.json on any x86-64 CPU)",
    )
    parser.add_argument("--budget", type=int, help="K: samples per input for every policy")
    parser.add_argument("--n-inputs", dest="n_inputs", type=int, help="size of the input pool per task")
    parser.add_argument("--eval-runs", dest="eval_runs", type=int, help="runs per input when measuring")
    parser.add_argument("--n-latents", dest="n_latents", type=int, help="latent codes of the router env")
    parser.add_argument(
        "--prior-skew", dest="prior_skew", type=float, help="Zipf skew of the iid base model over latents"
    )
    parser.add_argument("--skew", type=float, help="Zipf skew of the task's own base sampler (0 = uniform)")
    parser.add_argument(
        "--rounds", dest="learner.rounds", metavar="N", type=int, help="training rounds of the router"
    )
    parser.add_argument(
        "--lr", dest="learner.lr", metavar="LR", type=float, help="learning rate of the router"
    )
    parser.add_argument("--bootstrap", type=int, help="bootstrap replicates per CI")
    parser.add_argument("--wandb-project", dest="wandb_project", help="W&B project (default seffi)")
    add_output_options(
        parser,
        wandb="W&B mode (default: the config file's, else WANDB_MODE, else offline)",
        overwrite="replace an earlier run in --out (its seffi files are removed first; other files stay)",
    )
    parser.set_defaults(handler=run_command)


_RUN_KEYS = (
    "tasks",
    "seed",
    "budget",
    "n_inputs",
    "eval_runs",
    "n_latents",
    "prior_skew",
    "skew",
    "learner.rounds",
    "learner.lr",
    "bootstrap",
    "wandb",
    "wandb_project",
    "out",
    "progress",
)


def run_command(args: argparse.Namespace) -> int:
    """Handler of ``seffi run``."""
    from seffi.experiment.config import build_config

    overrides: dict[str, Any] = {key: getattr(args, key, None) for key in _RUN_KEYS}
    config = build_config(args.config, overrides)
    if args.print_config:
        print(json.dumps(config.model_dump(mode="json"), indent=2))
        return 0
    from seffi.experiment.runner import run_experiment
    from seffi.report.sinks import LocalSinkWarning

    with warnings.catch_warnings():  # what did not fit at the end is the command's one error line
        warnings.simplefilter("ignore", LocalSinkWarning)
        run_experiment(config, overwrite=args.overwrite)
    return 0


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``seffi report DIR``."""
    parser.add_argument("dir", metavar="DIR", help="a run folder written by `seffi run`")
    add_format_option(parser, "of the plots (PNG at 300 dpi; PDF and SVG are vector)")
    parser.set_defaults(handler=report_command)


def add_format_option(parser: argparse.ArgumentParser, what: str) -> None:
    """The ``--format png|pdf|svg`` option of the figures a subcommand writes."""
    from seffi.report.plots import FORMATS

    parser.add_argument("--format", choices=FORMATS, default="png", help=f"file format {what}")


def report_command(args: argparse.Namespace) -> int:
    """Handler of ``seffi report``: re-render plots and report.md from DIR/report.json."""
    from seffi.report.files import load_report, write_report
    from seffi.report.plots import PRINT_DPI
    from seffi.report.run_folder import claim_run_folder, release_run_folder

    run_dir = Path(args.dir)
    report = load_report(run_dir)
    claim_run_folder(run_dir)  # a run still writing there is refused
    try:  # report_json=False: the only copy stays as it is.
        files = write_report(run_dir, report, report_json=False, format=args.format, dpi=PRINT_DPI)
    finally:
        release_run_folder(run_dir)
    for path in sorted(p for name, p in files.items() if name != "report.json"):
        print(path)
    return 0


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``seffi compare DIR...``."""
    parser.add_argument("dirs", metavar="DIR", nargs="+", help="run folders written by `seffi run`")
    parser.add_argument(
        "--out", help="folder for the figure and compare.md (default: a new runs/compare-<UTC timestamp>)"
    )
    add_format_option(parser, "of the figure compare.<format> (PNG at 300 dpi; PDF and SVG are vector)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier compare figure / compare.md in that folder",
    )
    parser.set_defaults(handler=compare_command)


def compare_command(args: argparse.Namespace) -> int:
    """Handler of ``seffi compare``: one figure and one table over several runs."""
    from seffi.experiment.compare import compare_runs

    if len({Path(d).resolve() for d in args.dirs}) != len(args.dirs):
        raise SeffiError("the same run folder is given twice")
    table, written = compare_runs(
        [Path(d) for d in args.dirs],
        Path(args.out) if args.out else None,
        overwrite=args.overwrite,
        format=args.format,
    )
    print(table)
    for path in written:
        print(path, file=sys.stderr)
    return 0

"""``seffi score POLICY_FILES... --base BASE_FILES...``: coverage of files of generations."""

from __future__ import annotations

import argparse
import sys

from seffi.cli import add_output_options
from seffi.errors import SeffiError
from seffi.report.run_folder import default_out_dir, prepare_run_folder
from seffi.score.api import score
from seffi.score.labels import load_entry_point, load_rubric

FIELDS = ("id", "text", "score", "step", "prompt")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``seffi score``."""
    parser.description = (
        "Score files of generations: coverage C(k), novelty, full coverage, time-to-coverage, AUC, valid@k "
        "and strategy entropy of the policy's completions, with the gain against the base model's own iid "
        "sampling (its files) and the oracle. Reads JSONL or Parquet: one row per sample, NoveltyBench, "
        "verl rollout dumps and lm-evaluation-harness samples, detected from the first row."
    )
    parser.add_argument("policy", metavar="POLICY_FILE", nargs="+", help="the policy's generation files")
    parser.add_argument(
        "--base", metavar="BASE_FILE", nargs="+", required=True, help="the base model's files"
    )
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--labels", metavar="FIELD", help="a field holding each sample's strategy id(s)")
    how.add_argument("--rubric", metavar="FILE", help="YAML {strategy: regex} with an optional valid: regex")
    how.add_argument("--labeler", metavar="MODULE:FUNCTION", help="a Python labeler or fn(x, text) -> ids")
    parser.add_argument("--strategies", help="comma-separated declared strategy ids (default: the labeler's)")
    parser.add_argument("--budget", type=int, help="K, samples per run (default: most common per prompt)")
    for name in FIELDS:
        parser.add_argument(f"--{name}-field", dest=f"{name}_field", metavar="NAME", help=f"the {name} field")
    parser.add_argument("--name", default="policy", help="the policy's name in the report")
    parser.add_argument("--n-boot", dest="n_boot", type=int, default=1000, help="bootstrap replicates per CI")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    parser.add_argument(
        "--no-plots", dest="plots", action="store_false", help="report.json and report.md only"
    )
    add_output_options(parser, what="score")
    parser.set_defaults(handler=score_command)


def score_command(args: argparse.Namespace) -> int:
    """Handler of ``seffi score``."""
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()] if args.strategies else None
    labeler = None
    if args.rubric:
        labeler = load_rubric(args.rubric)
    elif args.labeler:
        labeler = load_entry_point(args.labeler, strategies)
    if args.budget is not None and args.budget < 1:
        raise SeffiError(f"--budget must be a positive integer, got {args.budget}")
    out = prepare_run_folder(args.out, overwrite=args.overwrite) if args.out else default_out_dir("score")
    score(
        args.policy,
        args.base,
        labeler=labeler,
        label_field=args.labels,
        strategies=strategies,
        budget=args.budget,
        fields={name: getattr(args, f"{name}_field") for name in FIELDS},
        name=args.name,
        say=lambda line: print(line, file=sys.stderr),
        out_dir=out,
        wandb=args.wandb,
        n_boot=args.n_boot,
        seed=args.seed,
        plots=args.plots,
    )
    return 0

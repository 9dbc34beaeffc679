"""``seffi score POLICY_FILES... --base BASE_FILES...``: coverage of files of generations."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from seffi.cli import add_output_options
from seffi.errors import SeffiError
from seffi.report.run_folder import default_out_dir, prepare_run_folder
from seffi.report.wandb_run import SafeWandbRun, wandb_mode
from seffi.score.api import score
from seffi.score.judge import DEFAULT_TEMPLATE, JudgeLabeler
from seffi.score.labels import FieldLabels, load_entry_point, load_rubric

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
    parser.add_argument("--labels", metavar="FIELD", help="a field holding each sample's strategy id(s)")
    parser.add_argument(
        "--rubric", metavar="FILE", help="YAML {strategy: regex} with an optional valid: regex"
    )
    parser.add_argument("--labeler", metavar="MODULE:FUNCTION", help="a Python labeler or fn(x, text) -> ids")
    judge = parser.add_argument_group(
        "LLM judge",
        "label with an OpenAI-compatible chat endpoint; with another labeler, report their agreement",
    )
    judge.add_argument("--judge", metavar="URL", help="the endpoint's base, e.g. http://localhost:8000/v1")
    judge.add_argument("--judge-model", metavar="NAME", help="model name (default: the server's first)")
    judge.add_argument(
        "--judge-template", metavar="FILE", help="prompt with {strategies} {prompt} {completion}"
    )
    judge.add_argument("--judge-cache", metavar="FILE", help=f"answer cache (default {default_cache()})")
    judge.add_argument("--judge-concurrency", type=int, default=8, metavar="N", help="requests in flight")
    judge.add_argument("--judge-timeout", type=float, default=60.0, metavar="S", help="seconds per request")
    judge.add_argument("--max-calls", type=int, metavar="N", help="refuse, before any request, to make more")
    parser.add_argument("--strategies", help="comma-separated declared strategy ids (default: the labeler's)")
    parser.add_argument("--budget", type=int, help="K, samples per run (default: most common per prompt)")
    for name in FIELDS:
        parser.add_argument(f"--{name}-field", dest=f"{name}_field", metavar="NAME", help=f"the {name} field")
    parser.add_argument(
        "--ray", nargs="?", type=int, const=2, metavar="WORKERS",
        help="label and track shards of the prompts in Ray tasks (default 2), merged exactly",
    )  # fmt: skip
    parser.add_argument("--name", default="policy", help="the policy's name in the report")
    parser.add_argument(
        "--n-boot",
        dest="n_boot",
        type=int,
        default=1000,
        help="bootstrap replicates of the policy's intervals (the base's iid curves draw 200)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    parser.add_argument(
        "--no-plots", dest="plots", action="store_false", help="report.json and report.md only"
    )
    add_output_options(parser, what="score")
    parser.set_defaults(handler=score_command)


def default_cache() -> Path:
    """``$XDG_CACHE_HOME/seffi/judge.sqlite`` (``~/.cache`` without it): answers kept across runs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seffi" / "judge.sqlite"


def score_command(args: argparse.Namespace) -> int:
    """Handler of ``seffi score``."""
    given_ids = [s.strip() for s in args.strategies.split(",")] if args.strategies else []
    strategies = list(dict.fromkeys(s for s in given_ids if s)) or None  # each id counts once in M
    given = [f for f in ("labels", "rubric", "labeler") if getattr(args, f)]
    if len(given) > 1 or not (given or args.judge):
        raise SeffiError(
            "name one labeler: --labels FIELD, --rubric FILE, --labeler MODULE:FUNCTION or --judge URL"
        )
    SafeWandbRun.check_login(wandb_mode(args.wandb))  # online without a login: refused before any work
    labeler = None
    if args.rubric:
        labeler = load_rubric(args.rubric)
    elif args.labeler:
        labeler = load_entry_point(args.labeler, strategies)
    compare_with = None
    if args.judge:
        other = labeler or (FieldLabels(strategies) if args.labels and strategies else None)
        if args.labels and not strategies:
            raise SeffiError("--judge with --labels needs --strategies")
        declared = strategies or (other.strategies if other is not None else None)
        if not declared:
            raise SeffiError("--judge needs the declared strategies: --strategies a,b,c")
        template = _read(args.judge_template) if args.judge_template else DEFAULT_TEMPLATE
        labeler = JudgeLabeler(
            args.judge, declared, model=args.judge_model, template=template,
            cache=args.judge_cache or default_cache(), concurrency=args.judge_concurrency,
            timeout=args.judge_timeout,
        )  # fmt: skip
        compare_with = (given[0], other) if other is not None else None
    fields = {name: getattr(args, f"{name}_field") for name in FIELDS}
    if args.judge and args.labels:  # the field is read for the comparison; the judge labels
        fields["label"], args.labels = args.labels, None
    if args.ray is not None and args.ray < 1:
        raise SeffiError(f"--ray needs a positive number of workers, got {args.ray}")
    if args.budget is not None and args.budget < 1:
        raise SeffiError(f"--budget must be a positive integer, got {args.budget}")
    out = Path(args.out) if args.out else default_out_dir("score")
    # A folder that holds a run is refused before any file is read; --overwrite replaces that run
    # only once every file is read and checked.
    prepare = lambda: prepare_run_folder(out, overwrite=args.overwrite)  # noqa: E731
    if args.out and not args.overwrite:
        prepare()
    score(
        args.policy,
        args.base,
        labeler=labeler,
        label_field=args.labels,
        strategies=strategies,
        budget=args.budget,
        fields=fields,
        compare_with=compare_with,
        max_calls=args.max_calls,
        workers=args.ray,
        name=args.name,
        say=lambda line: print(line, file=sys.stderr),
        before_writing=prepare if args.out and args.overwrite else None,
        out_dir=out,
        wandb=args.wandb,
        n_boot=args.n_boot,
        seed=args.seed,
        plots=args.plots,
    )
    return 0


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SeffiError(f"{path}: cannot read the judge template ({exc})") from None

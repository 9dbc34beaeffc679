"""The ``seffi bench`` command line: ``seffi bench exploration`` (the work: `run_exploration_bench`)."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from seffi.cli import add_output_options
from seffi.errors import SeffiError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Subcommands of ``seffi bench``."""
    parser.description = "Benchmarks built from seffi's pieces."
    sub = parser.add_subparsers(dest="bench", metavar="BENCH")
    sub.required = True
    p = sub.add_parser(
        "exploration",
        help="RL exploration methods on one GRPO path: strategy coverage, surface diversity, two labelers",
        description=(
            "Every exploration method (validity, unlikeliness, pass@k, outcome UCB / batch, seffi's "
            "diversity, lr = 0, temperature 1.3, GRPO on the latent mixture with distinct or iid codes) "
            "trained from the same base LM with the same seed, prompts, steps and K, per model seed; "
            "writes bench.json, bench.md, bench.png and an offline W&B run."
        ),
    )
    add_exploration_arguments(p)


def _setting_help(settings: dict[str, dict[str, Any] | None]) -> str:
    """``--setting``'s help, each setting's grid sizes and walls read from its task config.

    Args:
        settings: `seffi.experiment.bench.SETTINGS` (``{}`` without the lm extra).

    Returns:
        One line naming every setting, e.g. ``default (3-4 cells a side, <= 3 walls)``.
    """
    if not settings:
        return "grid_routes setting (default or hard)"
    from seffi.tasks.grid_routes import GridRoutesConfig

    parts = []
    for name, overrides in settings.items():
        cfg = GridRoutesConfig(**(overrides or {}))
        parts.append(f"{name} ({cfg.min_size}-{cfg.max_size} cells a side, <= {cfg.max_walls} walls)")
    return "grid_routes setting: " + " or ".join(parts)


def add_exploration_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``seffi bench exploration``."""
    try:
        from seffi.experiment.bench import SETTINGS
        from seffi.experiment.bench_methods import METHOD_SLUGS
    except ImportError:  # no lm extra: the options still show; running the command names the extra
        SETTINGS, METHOD_SLUGS = {}, ()

    p.add_argument("--setting", choices=sorted(SETTINGS) or None, help=_setting_help(SETTINGS))
    p.add_argument(
        "--task-config",
        dest="task_config",
        help="JSON task config overriding the setting's (e.g. grid sizes)",
    )
    p.add_argument(
        "--seeds", type=int, nargs="+", help="model-training seeds (SFT + EM + GRPO); default 0 1 2"
    )
    p.add_argument("--seed", type=int, help="seed of the pool, held-out and classifier prompts (default 0)")
    p.add_argument(
        "--methods",
        nargs="+",
        choices=METHOD_SLUGS or None,
        metavar="METHOD",
        help=f"methods to run (default all): {', '.join(METHOD_SLUGS)}",
    )
    p.add_argument("--budget", type=int, help="K: completions per GRPO group and coverage budget (default 8)")
    p.add_argument("--n-inputs", dest="n_inputs", type=int, help="pool size: GRPO's training prompts (32)")
    p.add_argument("--steps", type=int, help="GRPO optimizer steps per method (default 60)")
    p.add_argument("--lr", type=float, help="GRPO learning rate (default 3e-4)")
    p.add_argument("--pool-runs", dest="pool_runs", type=int, help="fresh runs of K per pool prompt (16)")
    p.add_argument(
        "--eval-samples", dest="eval_samples", type=int, help="samples per held-out prompt, n (default 64)"
    )
    p.add_argument("--eval-inputs", dest="eval_inputs", type=int, help="held-out prompts (default 32)")
    p.add_argument("--lm", help="JSON of seffi.models.LMConfig fields of the rung-2 models (no seed)")
    p.add_argument("--cache-dir", dest="cache_dir", help="model cache (default $SEFFI_CACHE)")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument(
        "--retrain",
        dest="retrain",
        action="store_const",
        const=True,
        help="retrain the models even when the cache holds them",
    )
    cache.add_argument(
        "--no-retrain",
        dest="retrain",
        action="store_const",
        const=False,
        help="refuse a damaged model cache instead of retraining it",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny models, one seed, 2 steps per method: an end-to-end check (<= 90 s), not results",
    )
    p.add_argument(
        "--combine",
        nargs="+",
        metavar="DIR",
        help="combine benches of the same settings run on other seeds into one table in --out (no training)",
    )
    add_output_options(p, what="bench")
    p.set_defaults(handler=exploration_command)


def command_line(args: argparse.Namespace) -> str:
    """The ``seffi bench exploration`` command line giving ``args`` (recorded in bench.json / bench.md)."""
    parts = ["seffi", "bench", "exploration"]
    for action_dest, flag in (
        ("setting", "--setting"),
        ("task_config", "--task-config"),
        ("seeds", "--seeds"),
        ("seed", "--seed"),
        ("methods", "--methods"),
        ("budget", "--budget"),
        ("n_inputs", "--n-inputs"),
        ("steps", "--steps"),
        ("lr", "--lr"),
        ("pool_runs", "--pool-runs"),
        ("eval_samples", "--eval-samples"),
        ("eval_inputs", "--eval-inputs"),
        ("lm", "--lm"),
        ("cache_dir", "--cache-dir"),
        ("wandb", "--wandb"),
        ("out", "--out"),
        ("combine", "--combine"),
    ):
        value = getattr(args, action_dest, None)
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        parts += [flag, *(str(v) for v in values)]
    for dest, flag in (("smoke", "--smoke"), ("overwrite", "--overwrite")):
        if getattr(args, dest, False):
            parts.append(flag)
    if getattr(args, "retrain", None) is not None:
        parts.append("--retrain" if args.retrain else "--no-retrain")
    if getattr(args, "progress", None) is False:
        parts.append("--no-progress")
    return " ".join(shlex.quote(p) for p in parts)


def _json(text: str | None, flag: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SeffiError(f"{flag} is not valid JSON: {exc}") from None


def exploration_command(args: argparse.Namespace) -> int:
    """Handler of ``seffi bench exploration``."""
    from pydantic import ValidationError

    from seffi.models import require_lm

    require_lm()  # one line naming the lm extra instead of an ImportError from deep inside
    from seffi.experiment.bench import BenchConfig, run_exploration_bench, smoke_bench_config

    if args.combine:
        from pathlib import Path

        from seffi.experiment.bench import combine_benches

        combine_benches(
            [Path(d) for d in args.combine],
            out=Path(args.out) if args.out else None,
            overwrite=args.overwrite,
            wandb=args.wandb or "offline",
        )
        return 0
    fields: dict[str, Any] = {}
    for name in ("setting", "seed", "budget", "n_inputs", "cache_dir", "retrain", "wandb", "out"):
        value = getattr(args, name, None)
        if value is not None:
            fields[name] = value
    if args.seeds is not None:
        fields["seeds"] = tuple(args.seeds)
    if args.methods is not None:
        fields["methods"] = tuple(args.methods)
    if args.progress is False:
        fields["progress"] = False
    for name, flag in (("task_config", "--task-config"), ("lm", "--lm")):
        value = _json(getattr(args, name), flag)
        if value is not None:
            fields[name] = value
    grpo = {
        k: v
        for k, v in (
            ("steps", args.steps),
            ("lr", args.lr),
            ("pool_runs", args.pool_runs),
            ("eval_samples", args.eval_samples),
            ("eval_inputs", args.eval_inputs),
        )
        if v is not None
    }
    if grpo:
        fields["grpo"] = grpo
    try:
        config = smoke_bench_config(**fields) if args.smoke else BenchConfig(**fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise SeffiError(f"invalid bench settings: {problems}") from None
    command = command_line(args)
    run_exploration_bench(config, overwrite=args.overwrite, command=command)
    return 0

"""The ``seffi ladder`` command line: options and the handler (the work is `run_ladder`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from seffi.cli import add_output_options
from seffi.errors import SeffiError

# -- the command --------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``seffi ladder``."""
    from seffi.experiment.ladder import DEFAULT_TASK

    parser.description = (
        "The exploration ladder, rungs 1-3: the hand-written router env, learned generators (a base LM "
        "trained here and a latent mixture learned without labels) and GRPO on that base LM (validity vs "
        "diversity reward), on the same task, pool and budget."
    )
    parser.add_argument("--task", help=f"task name (default {DEFAULT_TASK})")
    parser.add_argument(
        "--seed", type=int, help="root seed: pool, iid samples, router training, held-out draws (default 0)"
    )
    parser.add_argument(
        "--model-seed",
        dest="model_seed",
        type=int,
        help="seed of model training: base LM init and shuffling, mixture codes and rows, rung 3's GRPO "
        "(default 0; each seed trains and caches its own models; the training data stay the same)",
    )
    parser.add_argument("--budget", type=int, help="K: samples per input")
    parser.add_argument("--n-inputs", dest="n_inputs", type=int, help="pool size (both rungs)")
    parser.add_argument("--eval-runs", dest="eval_runs", type=int, help="runs per input when measuring")
    parser.add_argument("--rounds", dest="rounds", type=int, help="router training rounds")
    parser.add_argument("--iid-samples", dest="iid_samples", type=int, help="base-LM samples per input (4K)")
    parser.add_argument("--lm", help="JSON of seffi.models.LMConfig fields for the rung-2 models")
    parser.add_argument("--cache-dir", dest="cache_dir", help="model cache (default $SEFFI_CACHE)")
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument(
        "--retrain",
        dest="retrain",
        action="store_const",
        const=True,
        help="retrain the rung-2 models even when the cache holds them",
    )
    cache.add_argument(
        "--no-retrain",
        dest="retrain",
        action="store_const",
        const=False,
        help="refuse a damaged model cache instead of retraining it (default: retrain it with a warning)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny models and pool: an end-to-end check (< 60 s)"
    )
    parser.add_argument("--grpo-steps", dest="grpo_steps", type=int, help="rung 3: GRPO steps per run")
    parser.add_argument("--no-rung3", dest="rung3", action="store_false", help="skip rung 3 (GRPO)")
    add_output_options(parser)
    parser.set_defaults(handler=ladder_command)


def ladder_command(args: argparse.Namespace) -> int:
    """Handler of ``seffi ladder``."""
    from pydantic import ValidationError

    from seffi.experiment.ladder import LadderConfig, run_ladder, smoke_config
    from seffi.experiment.ladder_report import SMOKE_NOTE

    fields: dict[str, Any] = {}
    for name in (
        "task",
        "seed",
        "model_seed",
        "budget",
        "n_inputs",
        "eval_runs",
        "iid_samples",
        "cache_dir",
        "retrain",
        "wandb",
        "out",
    ):
        value = getattr(args, name, None)
        if value is not None:
            fields[name] = value
    if args.progress is False:
        fields["progress"] = False
    if args.lm:
        try:
            fields["lm"] = json.loads(args.lm)
        except json.JSONDecodeError as exc:
            raise SeffiError(f"--lm is not valid JSON: {exc}") from None
    try:
        config = smoke_config(**fields) if args.smoke else LadderConfig(**fields)
        grpo = {k: v for k, v in (("steps", args.grpo_steps), ("enabled", args.rung3)) if v is not None}
        if grpo:
            config = config.model_copy(update={"grpo": config.grpo.model_copy(update=grpo)})
        if args.rounds is not None:
            config = config.model_copy(
                update={"learner": config.learner.model_copy(update={"rounds": args.rounds})}
            )
        LadderConfig.model_validate(config.model_dump())
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise SeffiError(f"invalid ladder settings: {problems}") from None
    run_ladder(config, overwrite=args.overwrite)
    if args.smoke:
        print(SMOKE_NOTE)
    return 0

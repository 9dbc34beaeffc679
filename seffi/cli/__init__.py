"""The ``seffi`` command line.

Each subcommand is one module of this package (``seffi.cli.run``, ``.ladder``, ``.bench``, ``.lane``,
``.tasks``) registered in ``COMMANDS``: a mapping from name to ``"module:function"``. The module is
imported only when that subcommand runs, so ``seffi --help`` stays fast and never imports a
training framework.

User errors (`SeffiError`, invalid configs) print one readable line to stderr
and exit with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from seffi import __version__
from seffi.errors import SeffiError, Terminated

#: name -> ("module:add_arguments_function", "one-line help"). ``add_arguments(parser)`` adds the
#: subcommand's options and sets ``parser.set_defaults(handler=callable(args) -> int)``.
COMMANDS: dict[str, tuple[str, str]] = {
    "tasks": ("seffi.cli.tasks:add_arguments", "list the tasks, their strategies and ambiguity rates"),
    "run": (
        "seffi.cli.run:add_run_arguments",
        "train and compare exploration policies (the main job)",
    ),
    "report": ("seffi.cli.run:add_report_arguments", "re-render plots and report.md of a saved run"),
    "compare": (
        "seffi.cli.run:add_compare_arguments",
        "overlay several runs' coverage curves and gains",
    ),
    "score": (
        "seffi.cli.score:add_arguments",
        "score files of generations (verl, vLLM, NoveltyBench, lm-eval dumps) against the base model's",
    ),
    "lane": ("seffi.cli.lane:add_arguments", "the corrections-to-competence lane"),
    "ladder": (
        "seffi.cli.ladder:add_arguments",
        "the exploration ladder: rungs 1-3, router env, learned generators, GRPO (needs the lm extra)",
    ),
    "bench": (
        "seffi.cli.bench:add_arguments",
        "benchmarks: `seffi bench exploration` compares RL exploration methods (needs the lm and trl extras)",
    ),
}


def add_output_options(
    parser: argparse.ArgumentParser,
    *,
    wandb: str = "W&B mode (default offline)",
    what: str = "run",
    overwrite: str | None = None,
) -> None:
    """The options of every measuring command: ``--wandb``, ``--out``, ``--overwrite``, ``--no-progress``."""
    parser.add_argument("--wandb", choices=["online", "offline", "disabled"], help=wandb)
    parser.add_argument("--out", help=f"{what} folder (default runs/<timestamp>)")
    parser.add_argument(
        "--overwrite", action="store_true", help=overwrite or f"replace an earlier {what} in --out"
    )
    parser.add_argument(
        "--no-progress", dest="progress", action="store_const", const=False, help="no live display"
    )


def _load(spec: str) -> Callable[[argparse.ArgumentParser], None]:
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only the subcommand named in ``argv`` gets its options loaded."""
    parser = argparse.ArgumentParser(
        prog="seffi", description="Measure the sample efficiency of learning systems."
    )
    parser.add_argument("--version", action="version", version=f"seffi {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((a for a in (argv or []) if not a.startswith("-")), None)
    for name, (spec, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:
            _load(spec)(sp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``seffi`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0 if not argv else 2
    previous_hook = sys.unraisablehook
    previous = _sigterm_raises()  # before any lock or W&B run exists: a SIGTERM finds the handler
    try:
        return int(handler(args) or 0)
    except SeffiError as exc:
        print(f"seffi {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, an unwritable folder: what was written before stays valid
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"seffi {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # what was measured is written by then, marked interrupted
        terminated = isinstance(exc, Terminated)
        print(f"seffi {args.command}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 143 if terminated else 130
    except Exception as exc:
        from pydantic import ValidationError

        if isinstance(exc, ValidationError):
            print(
                f"seffi {args.command}: invalid configuration: {format_validation_error(exc)}",
                file=sys.stderr,
            )
            return 2
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
            sys.unraisablehook = previous_hook
        from seffi.report.run_folder import release_run_folders

        release_run_folders()


def _sigterm_raises() -> Any:
    """Make SIGTERM raise `Terminated`, and a swallowed Ctrl-C or SIGTERM come again.

    Returns the previous SIGTERM handler (None off the main thread, where nothing changes).
    """
    if threading.current_thread() is not threading.main_thread():
        return None

    def terminate(signum: int, frame: Any) -> None:
        raise Terminated

    previous_hook = sys.unraisablehook

    def rearm(unraisable: Any) -> None:
        # A signal handler runs wherever the main thread is, which may be a weakref callback or a
        # __del__ during garbage collection; Python swallows an exception raised there. The signal is
        # sent again a moment later, so it lands in ordinary code and ends the run.
        if isinstance(unraisable.exc_value, KeyboardInterrupt):  # Ctrl-C's, or SIGTERM's `Terminated`
            again = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT
            threading.Timer(0.01, os.kill, (os.getpid(), again)).start()
        else:
            previous_hook(unraisable)

    sys.unraisablehook = rearm
    return signal.signal(signal.SIGTERM, terminate)


def format_validation_error(exc: Exception) -> str:
    """One line per pydantic error: ``field.path: message``."""
    errors = getattr(exc, "errors", lambda: [])()
    if not errors:
        return str(exc)
    parts = []
    for e in errors:
        msg = e["msg"].removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError
        where = ".".join(map(str, e["loc"]))
        # A model-level check (empty loc) names its own fields in the message.
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)

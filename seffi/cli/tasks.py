"""``seffi tasks``: list the tasks with their strategies and measured ambiguity rates.

Ambiguity is measured on a fixed seeded input pool (see `seffi.tasks.summary`), so the
numbers are reproducible: same ``--seed`` and ``--pool``, same table.
"""

from __future__ import annotations

import argparse
import json

from seffi.tasks.summary import collect


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``seffi tasks``; sets ``handler``."""
    parser.add_argument(
        "names", nargs="*", metavar="TASK", help="tasks to show (default: all registered tasks)"
    )
    parser.add_argument("--pool", type=int, default=200, help="seeded input draws per task (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the input pool (default 0)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the task table (or JSON with ``--json``)."""
    summaries = collect(args.names, args.pool, args.seed)
    if args.json:
        print(json.dumps([s.to_dict() for s in summaries], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"seffi tasks (ambiguity on {args.pool} seeded draws, seed {args.seed})")
    for col, justify in [
        ("task", "left"),
        ("strategies", "left"),
        ("inputs", "right"),
        ("feasible / input\nmean [min, max]", "right"),
        ("ambiguity (reference)", "right"),
        ("ambiguity (base)", "right"),
        ("base law: strategy /\ninvalid / off-strategy", "right"),
        ("trace tokens mean/max", "right"),
    ]:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in summaries:
        table.add_row(
            s.name,
            ", ".join(s.strategies),
            str(s.inputs),
            f"{s.mean_feasible:.2f} [{s.min_feasible}, {s.max_feasible}]",
            f"{s.reference_ambiguity:.3f}",
            f"{s.base_ambiguity:.3f}",
            f"{s.base_strategy_mass:.2f} / {s.base_invalid:.2f} / {s.base_off_strategy:.2f}",
            f"{s.mean_trace_tokens:.1f}/{s.max_trace_tokens}",
        )
    table.caption = (
        "feasible: strategies with a correct reference trace on an input — the oracle covers only those, "
        "so with fewer than M feasible its F(K) < 1; base law: mass of base samples that are a strategy's "
        "correct trace (task.base_distribution), incorrect traces and correct traces that follow no strategy "
        "(task.base_remainder)"
    )
    Console(width=160).print(table)
    return 0

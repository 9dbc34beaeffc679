"""Command-line flags from a dataclass, for the single-file examples (CleanRL style, no extra deps).

Every field ``name: type = default`` becomes ``--name VALUE`` (underscores may be written as dashes);
``bool`` fields become ``--name`` / ``--no-name`` switches. The field's comment in the example file is
its documentation; ``--help`` lists the fields with their defaults.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Args:
    ...     budget: int = 8
    ...     smoke: bool = False
    >>> parse_args(Args, ["--budget", "4", "--smoke"])
    Args(budget=4, smoke=True)
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar, get_type_hints

T = TypeVar("T")


def parse_args(cls: type[T], argv: Sequence[str] | None = None) -> T:
    """Parse ``argv`` (default ``sys.argv[1:]``) into an instance of the dataclass ``cls``.

    Raises:
        SystemExit: On ``--help`` or a bad flag (argparse prints one line of usage error, exit 2).
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    parser = argparse.ArgumentParser(description=(cls.__doc__ or "").strip().splitlines()[0] or None)
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind: Any = hints[f.name]
        flags = [f"--{f.name}"] + ([f"--{f.name.replace('_', '-')}"] if "_" in f.name else [])
        default = f.default
        if kind is bool:
            parser.add_argument(*flags, dest=f.name, action=argparse.BooleanOptionalAction, default=default)
        else:
            parser.add_argument(*flags, dest=f.name, type=kind, default=default, help=f"default: {default}")
    return cls(**vars(parser.parse_args(argv)))

"""Command-line flags from a dataclass, for the single-file examples (CleanRL style, no extra deps).

Every field ``name: type = default`` becomes ``--name VALUE`` (underscores may be written as dashes);
``bool`` fields become ``--name`` / ``--no-name`` switches. A field is documented by a trailing
``# comment`` on its line or by a string right below it (an attribute docstring); ``--help`` shows
that text with the field's default.

An example that needs an optional extra names it (``extra="sb3", modules=("stable_baselines3",)``):
without the extra, ``--help`` still works, preceded by one line saying what to install, and any other
invocation prints that line and exits with status 2 instead of a traceback.

Examples:
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
import ast
import dataclasses
import importlib.util
import inspect
import io
import sys
import textwrap
import tokenize
from collections.abc import Sequence
from typing import Any, TypeVar, get_type_hints

T = TypeVar("T")


def field_help(cls: type) -> dict[str, str]:
    """The documentation of each field of the dataclass ``cls``, read from its source.

    Looks, in order, at ``field(metadata={"help": ...})``, a string right below the field (an
    attribute docstring) and a ``# comment`` on the field's last line.

    Returns:
        ``{field name: help text}`` for the documented fields (empty when the source is unavailable,
        e.g. a class typed into an interactive session).
    """
    out: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        if "help" in f.metadata:
            out[f.name] = str(f.metadata["help"])
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return out
    comments: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError):
        pass
    tree = ast.parse(source)
    body = next((node.body for node in tree.body if isinstance(node, ast.ClassDef)), [])
    for i, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name in out:
            continue
        nxt = body[i + 1] if i + 1 < len(body) else None
        if (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            out[name] = " ".join(nxt.value.value.split())
        elif node.end_lineno in comments:
            out[name] = comments[node.end_lineno]
    return out


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The modules among ``modules`` that cannot be imported, found without importing any of them.

    A module set to ``None`` in ``sys.modules`` counts as missing (that is how ``import`` treats it).
    """
    missing = []
    for name in modules:
        if name in sys.modules:
            if sys.modules[name] is None:
                missing.append(name)
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package is missing or blocked
            found = False
        if not found:
            missing.append(name)
    return missing


def extra_note(extra: str, modules: Sequence[str]) -> str | None:
    """One line naming the extra to install when any of ``modules`` is missing, else ``None``."""
    missing = missing_modules(modules)
    if not missing:
        return None
    return (
        f"this example needs the '{extra}' extra (missing: {', '.join(missing)}): pip install -e '.[{extra}]'"
    )


def parse_args(
    cls: type[T],
    argv: Sequence[str] | None = None,
    *,
    extra: str | None = None,
    modules: Sequence[str] = (),
) -> T:
    """Parse ``argv`` (default ``sys.argv[1:]``) into an instance of the dataclass ``cls``.

    Args:
        cls: The dataclass of arguments; its field comments or docstrings become the ``--help`` text.
        argv: The arguments (default ``sys.argv[1:]``).
        extra: The seffi extra the example needs (e.g. ``"sb3"``), named when ``modules`` are missing.
        modules: Modules the extra provides, checked without importing them.

    Raises:
        SystemExit: On ``--help`` (status 0, after the missing-extra line if any), on a bad flag
            (argparse prints one line of usage error, status 2), or when the extra is missing
            (one line on stderr, status 2).
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    note = extra_note(extra or "?", modules) if modules else None
    doc = (cls.__doc__ or "").strip().splitlines()
    parser = argparse.ArgumentParser(description=(doc[0] if doc else None) or None)
    hints = get_type_hints(cls)
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        kind: Any = hints[f.name]
        flags = [f"--{f.name}"] + ([f"--{f.name.replace('_', '-')}"] if "_" in f.name else [])
        default = f.default
        # argparse %-formats help strings: a literal "%" in a comment must be doubled.
        text = helps[f.name].replace("%", "%%") if f.name in helps else None
        if kind is bool:
            # BooleanOptionalAction appends "(default: ...)" itself.
            parser.add_argument(
                *flags, dest=f.name, action=argparse.BooleanOptionalAction, default=default, help=text
            )
        else:
            text = f"{text} (default: {default})" if text else f"default: {default}"
            parser.add_argument(*flags, dest=f.name, type=kind, default=default, help=text)
    if note is not None:
        # Printed first, so that --help shows it too; argparse's own exit follows on --help.
        print(note, file=sys.stderr)
    parsed = parser.parse_args(argv)
    if note is not None:
        raise SystemExit(2)
    return cls(**vars(parsed))

"""Plain Python values from NumPy ones: the one converter for JSON files, W&B, env infos and reports."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

__all__ = ["brief", "clip", "finite", "json_default", "jsonable", "plain", "printable"]

#: Control characters (terminal escapes, line breaks that would end a table row or start a heading).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def brief(values: Any, most: int = 8, chars: int = 40) -> str:
    """A list for a message: at most ``most`` items of at most ``chars`` characters, then a count."""
    values = list(values)
    items = [clip(repr(v), chars) for v in values[:most]]
    more = len(values) - most
    return "[" + ", ".join(items) + (f", ... ({more} more)" if more > 0 else "") + "]"


def clip(text: str, chars: int = 60) -> str:
    """``text`` cut to ``chars`` characters for a message ("..." marks a cut)."""
    return text if len(text) <= chars else text[:chars] + "..."


def printable(value: object) -> str:
    """A name or note as one line of inert text: control characters (escapes, line breaks) a space."""
    return _CONTROL.sub(" ", str(value))


def plain(value: Any) -> Any:
    """A NumPy scalar as its Python value, an array as a nested list, a set as a sorted list; else as is."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else value.tolist()
    if isinstance(value, set | frozenset):
        return sorted(value)
    return value


def finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is None, NaN or infinite (undefined, censored)."""
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def jsonable(value: Any) -> Any:
    """Arrays to nested lists and non-finite floats to None, recursively (dict keys become str)."""
    if isinstance(value, np.ndarray):
        exact = value.dtype == bool or np.issubdtype(value.dtype, np.integer)
        return value.tolist() if exact else [jsonable(x) for x in value.tolist()]
    if isinstance(value, list | tuple):
        return [jsonable(x) for x in value]
    if isinstance(value, dict):
        return {str(k): jsonable(x) for k, x in value.items()}
    if isinstance(value, float | np.floating):
        return finite(value)
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    return value


def json_default(obj: Any) -> Any:
    """``json.dumps(default=...)``: NumPy values and sets as plain JSON; anything else raises TypeError."""
    converted = plain(obj)
    if converted is obj:
        raise TypeError(f"cannot write {type(obj).__name__} to JSON: {obj!r}")
    return converted

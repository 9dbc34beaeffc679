"""Chained trace hashes (DESIGN.md, "Trace hash recipe").

Each snapshot is a sequence of discrete steps (the taught corrections with their review outcomes, then
the probe and its response). Step k is hashed together with the previous digest,
``h_k = sha256(h_{k-1} || canonical(step_k))`` with ``h_{-1} = ""``, so two runs of the same snapshot
can be compared step by step and the first divergent step named, not just "the hashes differ".
Canonical JSON is `seffi._seeding.canonical_json` (sorted keys, compact, UTF-8, no NaN, refuses
unknown types); floats are turned into fixed-format strings first because their ``repr`` is not a
contract. Python's ``hash()`` is never used: it is salted per process.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seffi._seeding import canonical_json

#: Format used to turn a float into hashable text (17 significant digits round-trip a float64).
FLOAT_FORMAT = ".17g"


def canonicalize(obj: Any) -> Any:
    """Return ``obj`` with floats as fixed-format strings and tuples as lists; refuse other types.

    Raises:
        TypeError: for values that have no canonical form (objects, sets, NaN/inf floats, non-str keys).
    """
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise TypeError(f"cannot hash a non-finite float: {obj!r}")
        return format(obj, FLOAT_FORMAT)
    if isinstance(obj, Mapping):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError("cannot hash a mapping with non-string keys")
        return {k: canonicalize(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [canonicalize(v) for v in obj]
    raise TypeError(f"cannot hash object of type {type(obj).__name__}: {obj!r}")


def step_hash(previous: str, step: Any) -> str:
    """``sha256(previous || canonical(step))`` as a hex digest."""
    payload = previous + canonical_json(canonicalize(step))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chain(steps: Iterable[Any]) -> list[str]:
    """The chained digests ``[h_0, ..., h_{n-1}]`` of ``steps``; the last one is the trace hash."""
    digests: list[str] = []
    previous = ""
    for step in steps:
        previous = step_hash(previous, step)
        digests.append(previous)
    return digests


def first_divergence(a: Sequence[str], b: Sequence[str]) -> int | None:
    """Index of the first step whose chained digest differs, or ``None`` when the chains are identical.

    Because the chain is cumulative, every digest after the first difference differs as well; a
    length mismatch diverges at the first index the shorter chain lacks.
    """
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))

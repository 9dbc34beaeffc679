"""The one seeding contract: every draw flows from one seed through ``SeedSequence``.

Streams are spawned (never ``seed + i``); ids are hashed from content, not from the drawing order.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

SeedLike = int | np.random.SeedSequence | None


def as_seed_sequence(seed: SeedLike) -> np.random.SeedSequence:
    """Return ``seed`` as a ``SeedSequence`` (``None`` draws fresh OS entropy)."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if seed is not None and (not isinstance(seed, int | np.integer) or seed < 0):
        raise ValueError(f"seed must be a non-negative int, a SeedSequence or None, got {seed!r}")
    return np.random.SeedSequence(None if seed is None else int(seed))


def spawn(seed: SeedLike, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child sequences of ``seed``, the same for the same seed (never advanced)."""
    parent = as_seed_sequence(seed)
    if isinstance(seed, np.random.SeedSequence):  # derive from its entropy and key, not its counter
        parent = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key)
    return parent.spawn(n)


def rngs(seed: SeedLike, n: int) -> list[np.random.Generator]:
    """``n`` independent generators spawned from ``seed``."""
    return [np.random.default_rng(s) for s in spawn(seed, n)]


def canonical_json(obj: Any) -> str:
    """Canonical JSON used for hashing: sorted keys, compact, UTF-8, no NaN, no silent fallbacks."""

    def _refuse(o: Any) -> Any:
        raise TypeError(f"cannot hash object of type {type(o).__name__}: {o!r}")

    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_refuse
    )


def stable_id(*parts: Any, length: int = 12) -> str:
    """A short content hash of ``parts`` (sha256 over canonical JSON); stable across runs and machines."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()[:length]


def seed_from_text(*parts: Any) -> int:
    """A 64-bit seed derived from content, for per-input randomness that must not depend on order."""
    return int(stable_id(*parts, length=16), 16)


def seed_of(seed: int, *salt: int) -> int:
    """A 31-bit seed derived from ``seed`` and ``salt`` (``SeedSequence``, never ``seed + i``)."""
    return int(np.random.SeedSequence([seed, *salt]).generate_state(1)[0] & 0x7FFFFFFF)

from __future__ import annotations

import hashlib
import json

import pytest

from seffi.lanes.hashing import canonicalize, chain, first_divergence, step_hash


def _reference_digest(prev: str, step: object) -> str:
    text = json.dumps(step, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256((prev + text).encode("utf-8")).hexdigest()


def test_chain_matches_the_recipe_by_hand() -> None:
    steps = [{"b": 1, "a": "é"}, {"x": [True, None]}, {"probe": "q?"}]
    h0 = _reference_digest("", steps[0])
    h1 = _reference_digest(h0, steps[1])
    h2 = _reference_digest(h1, steps[2])
    assert chain(steps) == [h0, h1, h2]
    assert step_hash(h0, steps[1]) == h1
    assert h0 == hashlib.sha256('{"a":"é","b":1}'.encode()).hexdigest()


def test_first_divergence_names_the_first_differing_step() -> None:
    a = chain([{"i": 0}, {"i": 1}, {"i": 2}])
    b = chain([{"i": 0}, {"i": 99}, {"i": 2}])
    assert first_divergence(a, a) is None
    assert first_divergence(a, b) == 1
    assert b[2] != a[2]  # chaining propagates the difference
    assert first_divergence(a, a[:2]) == 2


def test_canonicalize_floats_fixed_format_and_refuses_unhashable() -> None:
    assert canonicalize({"x": 0.1, "t": (1, 2.5)}) == {"x": "0.10000000000000001", "t": [1, "2.5"]}
    for bad in (float("nan"), {1: "a"}, {"s": {1, 2}}, object()):
        with pytest.raises(TypeError):
            canonicalize(bad)

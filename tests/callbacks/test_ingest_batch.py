"""SB3 steps read as one batch (``EpisodeBuffer.add_steps``) equal step-by-step ingestion."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from seffi.callbacks.ingest import EpisodeBuffer, _proven_rows
from seffi.callbacks.rules import _ABSENT, _RULES, _Rejects, _screen
from seffi.errors import SeffiError

STRATS = ("a", "b", "c", "d")


def _steps(seed: int, n_steps: int = 60, n_envs: int = 4) -> list[tuple[list[dict[str, Any]], np.ndarray]]:
    """Random SB3 steps: some envs done, optional keys sometimes missing, numpy and Python ints mixed."""
    rng = np.random.default_rng(seed)
    sets = [(), ("a",), ("b",), ("a", "c"), ("d",), ("b", "c", "d")]
    steps = []
    for t in range(n_steps):
        dones = rng.random(n_envs) < 0.6
        infos: list[dict[str, Any]] = []
        for i in range(n_envs):
            info: dict[str, Any] = {"TimeLimit.truncated": False}
            if dones[i]:
                info.update(input_id=f"x{rng.integers(3)}", strategy_matches=sets[rng.integers(len(sets))])
                if rng.random() < 0.8:
                    info["valid"] = bool(rng.random() < 0.7)
                if rng.random() < 0.8:
                    k = int(rng.integers(1, 5))
                    info["sample_index"] = np.int64(k) if rng.random() < 0.3 else k
                    info["run_index"] = t // 8
                if rng.random() < 0.5:
                    info["z"] = int(rng.integers(4))
            infos.append(info)
        steps.append((infos, dones))
    return steps


def _drained(buf: EpisodeBuffer) -> dict[str, Any]:
    got = buf.drain()
    assert got is not None
    cols, hits = got
    out = {f.name: getattr(cols, f.name).tolist() for f in dataclasses.fields(cols)}
    return {**out, "hits": hits.tolist()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_steps_equal_step_by_step(seed: int) -> None:
    """A rollout read in one batch gives the same columns and match
    codes, in the same order, as the same steps fed one by one (new match sets appear mid-batch)."""
    steps = _steps(seed)
    one, batch = EpisodeBuffer(STRATS), EpisodeBuffer(STRATS)
    for infos, dones in steps:
        one.add_infos(infos, dones)
    n = batch.add_steps(steps[:5]) + batch.add_steps(steps[5:])  # the second batch has only known sets
    assert n == one.episodes == batch.episodes == sum(int(d.sum()) for _, d in steps) > 100
    assert _drained(batch) == _drained(one)


def test_batch_with_a_bad_episode_raises_as_step_by_step() -> None:
    """A batch holding a bad episode is replayed step by step: the same error, the episodes
    of the steps before it recorded, as if SB3 had fed the steps one by one."""
    steps = _steps(3, n_steps=12)
    steps[0][0][0].update(input_id="x0", strategy_matches=("a",))  # a known match set for the batch
    steps[0][1][0] = True
    one, batch = EpisodeBuffer(STRATS), EpisodeBuffer(STRATS)
    batch.add_steps(steps[:1])
    one.add_infos(*steps[0])
    bad_step = 7
    infos, dones = steps[bad_step]
    dones[2] = True
    infos[2] = {"input_id": "x1", "strategy_matches": ("a",), "sample_index": -3}
    errors = []
    for buf in (one, batch):
        with pytest.raises(SeffiError) as err:
            if buf is batch:
                batch.add_steps(steps[1:])
            else:
                for i, d in steps[1:]:
                    one.add_infos(i, d)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "'sample_index' must be an int >= 0" in errors[0]
    assert "sub-env index 2" in errors[0]
    before = sum(int(d.sum()) for _, d in steps[:bad_step])
    assert one.episodes == batch.episodes == before + int(dones.sum()) - 1  # the bad step's good ones too
    assert _drained(batch) == _drained(one)


def test_batch_precheck_never_accepts_what_the_one_check_rejects() -> None:
    """The per-column pre-check of a batch only ever proves rows fine (fuzzed against _screen)."""
    rng = np.random.default_rng(12)
    hostile: list[Any] = [-1, 2**63, True, None, "", 2.0, 2.5, math.nan, np.int32(-4), np.uint64(2**64 - 1),
                          np.float32(1.0), (1,), [1]]  # fmt: skip
    good = {
        "input_id": ["x", np.str_("y"), 7, np.int64(-2)],
        "valid": [True, False, np.bool_(False), _ABSENT],
        "int": [0, 1, 7, np.int64(3), np.uint8(2), 2**63 - 1, _ABSENT],
    }
    proven = 0
    for _ in range(3000):
        rows = []
        for e in range(int(rng.integers(1, 5))):
            kinds = ("input_id", "valid", "int", "int", "int")
            lists = [good[kind] if rng.random() < 0.85 else hostile for kind in kinds]
            values = [v[int(rng.integers(len(v)))] for v in lists]
            rows.append((values[0], (), values[1], e, values[2], values[3], values[4]))
        if not _proven_rows(rows):
            continue
        proven += 1
        rejects = _Rejects(list(range(len(rows))))
        cols = list(zip(*rows, strict=True))
        _screen({k: cols[p] for p, k in ((0, "input_id"), (2, "valid"), (4, "sample_index"),
                                        (5, "run_index"), (6, "z"))}, {}, rejects)  # fmt: skip
        assert rejects.mask is None, rows
        for row in rows:
            assert all(_RULES[k].ok(row[p]) for p, k in ((0, "input_id"), (2, "valid"), (4, "sample_index")))
    assert proven > 100  # the pre-check does accept the good rows

"""EpisodeBatch: columns of equal length, concat/take/empty by hand."""

from __future__ import annotations

import numpy as np
import pytest

from seffi.episodes import EpisodeBatch

S = ("a", "b")


def _batch(ids: list[str], hits: list[list[bool]], env: list[int]) -> EpisodeBatch:
    n = len(ids)
    minus = np.full(n, -1, dtype=np.int64)
    return EpisodeBatch(
        S, np.array(ids, dtype=object), np.array(hits, dtype=bool).reshape(n, 2), np.ones(n, dtype=bool),
        np.array(env, dtype=np.int64), np.arange(1, n + 1, dtype=np.int64), minus, minus,
    )  # fmt: skip


def test_concat_take_and_empty() -> None:
    one = _batch(["x", "y"], [[True, False], [False, False]], [0, 1])
    two = _batch(["z"], [[True, True]], [5])
    both = EpisodeBatch.concat([one, two])
    assert len(both) == 3
    assert both.input_id.tolist() == ["x", "y", "z"]
    assert both.hits.tolist() == [[True, False], [False, False], [True, True]]
    assert both.env_index.tolist() == [0, 1, 5] and both.sample_index.tolist() == [1, 2, 1]
    picked = both.take(np.array([False, True, True]))
    assert picked.input_id.tolist() == ["y", "z"] and picked.hits.tolist() == [[False, False], [True, True]]
    assert both.take(np.array([2, 0])).env_index.tolist() == [5, 0]
    empty = EpisodeBatch.empty(S)
    assert len(empty) == 0 and empty.hits.shape == (0, 2) and empty.valid.dtype == bool
    assert EpisodeBatch.concat([empty, two]).input_id.tolist() == ["z"]


def test_columns_must_agree() -> None:
    with pytest.raises(ValueError, match="hits shape"):
        _batch(["x", "y"], [[True, False], [False, False]], [0])
    good = _batch(["x"], [[True, False]], [0])
    with pytest.raises(ValueError, match="bool hits"):
        rest = (good.valid, good.env_index, good.sample_index, good.run_index, good.z)
        EpisodeBatch(S, good.input_id, good.hits.astype(int), *rest)
    with pytest.raises(ValueError, match="same strategies"):
        EpisodeBatch.concat([EpisodeBatch.empty(S), EpisodeBatch.empty(("a",))])

"""`EpisodeBatch`: finished episodes as columns, the one form every parser returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class EpisodeBatch:
    """N finished episodes over M declared strategies, as columns (what the tracker records).

    Attributes:
        strategies: The declared strategy ids, length M (the columns of ``hits``).
        input_id: object array, shape (N,): input ids, str (an int id becomes its decimal string).
        hits: bool array, shape (N, M): the declared strategies each episode matched.
        valid: bool array, shape (N,) (``True`` where the env does not report validity).
        env_index: int64 array, shape (N,): the sub-env (row) each episode ran in.
        sample_index: int64 array, shape (N,): the env's position k in its run, -1 where not reported.
        run_index: int64 array, shape (N,): the env's run counter for the input, -1 where not reported.
        z: int64 array, shape (N,): a router env's latent code, -1 where none.
    """

    strategies: tuple[str, ...]
    input_id: np.ndarray
    hits: np.ndarray
    valid: np.ndarray
    env_index: np.ndarray
    sample_index: np.ndarray
    run_index: np.ndarray
    z: np.ndarray

    def __post_init__(self) -> None:
        n, m = len(self.input_id), len(self.strategies)
        cols = (self.hits, self.valid, self.env_index, self.sample_index, self.run_index, self.z)
        if [c.shape for c in cols] != [(n, m), *[(n,)] * 5] or [c.dtype for c in cols] != _DTYPES:
            raise ValueError(f"EpisodeBatch needs bool hits shape ({n}, {m}), bool valid, int64 indices, z")

    def __len__(self) -> int:
        return len(self.input_id)

    @classmethod
    def empty(cls, strategies: Sequence[str]) -> EpisodeBatch:
        """No episodes."""
        return cls.of(strategies, [], np.zeros((0, len(strategies)), dtype=bool))

    @classmethod
    def of(cls, strategies: Sequence[str], input_id: Any, hits: Any, **columns: Any) -> EpisodeBatch:
        """A batch of checked columns, array-likes by name (absent: ``valid`` True, ``env_index`` 0, -1)."""
        ids = np.empty(len(input_id), dtype=object)
        ids[:] = list(input_id)
        if len({isinstance(x, str) for x in ids.tolist()}) > 1:
            raise ValueError('EpisodeBatch.of: input ids mix str and int (1 and "1" would be one input)')
        if unknown := set(columns) - set(_FILL):
            raise TypeError(f"EpisodeBatch.of got unknown columns {sorted(unknown)}")
        hits = np.asarray(hits, dtype=bool).reshape(ids.size, len(strategies))
        cols = (np.asarray(columns.get(k, np.full(ids.size, v))).astype(type(v)) for k, v in _FILL.items())
        return cls(tuple(strategies), ids, hits, *cols)

    @classmethod
    def concat(cls, batches: Sequence[EpisodeBatch]) -> EpisodeBatch:
        """One batch of ``batches`` (at least one, all over the same strategies) in order."""
        if len({b.strategies for b in batches}) != 1:
            raise ValueError("EpisodeBatch.concat needs batches over the same strategies")
        columns = (np.concatenate([getattr(b, k) for b in batches]) for k in _COLUMNS)
        return cls(batches[0].strategies, *columns)

    def take(self, index: Any) -> EpisodeBatch:
        """The episodes at ``index`` (int array, or bool mask of shape (N,))."""
        return dataclasses.replace(self, **{k: getattr(self, k)[index] for k in _COLUMNS})


_COLUMNS = ("input_id", "hits", "valid", "env_index", "sample_index", "run_index", "z")
_DTYPES = [np.dtype(bool)] * 2 + [np.dtype(np.int64)] * 4  # of hits, valid and the index columns
_FILL = dict(zip(_COLUMNS[2:], (True, *map(np.int64, (0, -1, -1, -1))), strict=True))  # "not reported"

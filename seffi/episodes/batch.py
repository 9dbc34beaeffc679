"""`EpisodeBatch`: finished episodes as columns, the one form every parser returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
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
        one = self.valid.shape == self.env_index.shape == self.sample_index.shape == self.run_index.shape
        ints = {self.env_index.dtype, self.sample_index.dtype, self.run_index.dtype, self.z.dtype}
        if not (one and self.z.shape == (n,) == self.valid.shape and self.hits.shape == (n, m)):
            raise ValueError(f"EpisodeBatch columns must hold {n} episodes and hits shape ({n}, {m})")
        if not (self.hits.dtype == self.valid.dtype == np.bool_ and ints == {np.dtype(np.int64)}):
            raise ValueError("EpisodeBatch needs bool hits and valid, int64 indices and z")

    def __len__(self) -> int:
        return len(self.input_id)

    @classmethod
    def empty(cls, strategies: Sequence[str]) -> EpisodeBatch:
        """No episodes."""
        i, hits = np.zeros(0, dtype=np.int64), np.zeros((0, len(strategies)), dtype=bool)
        return cls(tuple(strategies), np.zeros(0, dtype=object), hits, i > 0, i, i, i, i)

    @classmethod
    def of(
        cls,
        strategies: Sequence[str],
        input_id: Any,
        hits: Any,
        *,
        valid: Any = None,
        env_index: Any = None,
        sample_index: Any = None,
        run_index: Any = None,
        z: Any = None,
    ) -> EpisodeBatch:
        """A batch from array-likes, the columns not given filled as "not reported".

        ``valid`` defaults to True, ``env_index`` to 0 and the rest to -1. Values are not screened
        against the info contract (the parsers do that): this is for data already checked.

        Example:
            >>> b = EpisodeBatch.of(("a", "b"), ["x1", "x1"], [[True, False], [True, True]])
            >>> len(b), b.valid.tolist()
            (2, [True, True])
        """
        ids = np.empty(len(input_id), dtype=object)
        ids[:] = list(input_id)
        n = ids.size

        def column(values: Any, fill: int) -> np.ndarray:
            return np.full(n, fill, dtype=np.int64) if values is None else np.asarray(values, dtype=np.int64)

        hits = np.asarray(hits, dtype=bool).reshape(n, len(strategies))
        ok = np.ones(n, dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
        return cls(
            tuple(strategies),
            ids,
            hits,
            ok,
            column(env_index, 0),
            column(sample_index, -1),
            column(run_index, -1),
            column(z, -1),
        )

    @classmethod
    def concat(cls, batches: Sequence[EpisodeBatch]) -> EpisodeBatch:
        """One batch of ``batches`` (at least one, all over the same strategies) in order."""
        if len({b.strategies for b in batches}) != 1:
            raise ValueError("EpisodeBatch.concat needs batches over the same strategies")
        if len(batches) == 1:
            return batches[0]
        columns = (np.concatenate([getattr(b, k) for b in batches]) for k in _COLUMNS)
        return cls(batches[0].strategies, *columns)

    def take(self, index: Any) -> EpisodeBatch:
        """The episodes at ``index`` (int array, or bool mask of shape (N,))."""
        return dataclasses.replace(self, **{k: getattr(self, k)[index] for k in _COLUMNS})


_COLUMNS = ("input_id", "hits", "valid", "env_index", "sample_index", "run_index", "z")

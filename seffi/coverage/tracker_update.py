"""The update path of ``CoverageTracker``: samples given one by one or in batches by (input, stream).

`UpdatePath` is mixed into [`CoverageTracker`][seffi.coverage.CoverageTracker]; the monitor's
path (``record``) lives there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from seffi.coverage._common import _input_id, _int_array, _match_set
from seffi.coverage.assign import pair_keys
from seffi.coverage.sums import _segment_starts

__all__ = ["UpdatePath"]


class UpdatePath:
    """``update`` / ``update_many``: each (input, stream) is one run, its samples in order."""

    strategies: tuple[str, ...] | None
    columns: list[str]
    task: str
    assigner: Any
    runs: Any
    _code: dict[Any, int]
    _slots_of: Any

    def update(
        self,
        input_id: str | int,
        matches: Iterable[str],
        *,
        valid: bool = True,
        stream: int = 0,
        num_strategies: int | None = None,
    ) -> None:
        """Record one sample of ``input_id`` in ``stream`` (each (input, stream) is one run, in order).

        Args:
            input_id: the input.
            matches: strategy ids the sample's trace matches (empty for parse failures/off-strategy).
            valid: whether the sample is a correct solution.
            stream: the stream (e.g. vector-env index) the sample belongs to.
            num_strategies: M_x for this input (defaults to the declared count); fixed once set.
        """
        if not isinstance(valid, bool | np.bool_):
            raise ValueError(f"valid must be a bool, got {valid!r}")
        if isinstance(stream, bool) or not isinstance(stream, int | np.integer) or stream < 0:
            raise ValueError(f"stream must be a non-negative int, got {stream!r}")
        self.update_many(
            [input_id], [matches], valid=bool(valid), stream=int(stream), num_strategies=num_strategies
        )

    def update_many(
        self,
        input_ids: Sequence[str | int],
        matches: np.ndarray | Sequence[Iterable[str]],
        *,
        valid: bool | Sequence[bool] | np.ndarray = True,
        stream: int | Sequence[int] | np.ndarray = 0,
        num_strategies: int | None = None,
    ) -> None:
        """Record N samples at once: exactly ``update(input_ids[i], matches[i], ...)`` for i = 0..N-1.

        The whole batch is checked before anything is recorded: on ValueError the tracker is unchanged.

        Args:
            input_ids: the N inputs, in sample order.
            matches: bool array, shape (N, M), whose columns are the declared ``strategies``, or N
                iterables of strategy ids.
            valid: bool array, shape (N,), or one bool for every sample.
            stream: non-negative int array, shape (N,), or one stream for every sample.
            num_strategies: M_x for every input of the batch (as in `update`).
        """
        ids = [_input_id(x) for x in input_ids]
        n = len(ids)
        if isinstance(matches, np.ndarray) and matches.ndim == 2:
            if self.strategies is None:
                raise ValueError("a match matrix needs declared strategies (its columns)")
            if matches.dtype != np.bool_ or matches.shape != (n, len(self.strategies)):
                raise ValueError(
                    f"matches must be a bool array of shape ({n}, {len(self.strategies)}), "
                    f"got {matches.dtype} {matches.shape}"
                )
            mat, names = matches, list(self.strategies)
        else:
            sets = [_match_set(ms) for ms in matches]
            if len(sets) != n:
                raise ValueError(f"{n} input ids but {len(sets)} match sets")
            union = frozenset().union(*sets)
            if self.strategies is not None:
                unknown = sorted(union.difference(self.strategies))
                if unknown:
                    raise ValueError(f"unknown strategy ids {unknown}; declared: {list(self.strategies)}")
                names = list(self.strategies)
            else:
                names = sorted(union)
            index = {s: j for j, s in enumerate(names)}
            mat = np.zeros((n, len(names)), dtype=bool)
            for i, fs in enumerate(sets):
                mat[i, [index[s] for s in fs]] = True
        v = np.asarray(valid)
        if v.dtype != np.bool_ or v.ndim > 1 or (v.ndim == 1 and v.shape[0] != n):
            raise ValueError(f"valid must be a bool or a bool array of shape ({n},)")
        v = np.broadcast_to(v, (n,))
        st = _int_array(stream, n, "stream")
        if n == 0:
            return
        m_of = {x: self._resolve_m((self.task, x), num_strategies) for x in dict.fromkeys(ids)}
        # Check M_x before the first write: a refused batch must not leave runs behind.
        keys = list(zip(ids, st.tolist(), strict=True))
        seen: dict[tuple[str, int], set[str]] = {}
        # M_x can only be exceeded when it is below the column count: skip the per-sample check otherwise
        limit = len(set(self.columns).union(names))
        for (x, s), row in zip(keys, mat, strict=True) if min(m_of.values()) < limit else ():
            got = seen.get((x, s))
            if got is None:
                got = seen[(x, s)] = self._run_strategies(x, s)
            got.update(names[j] for j in np.flatnonzero(row))
            if len(got) > m_of[x]:
                raise ValueError(
                    f"input {x!r} has matched {len(got)} distinct strategies but its M_x is {m_of[x]}"
                )
        u = np.array([self._input_code((self.task, x), m_of[x]) for x in ids], dtype=np.int64)
        slots = self._slots_of(u, st)
        new = np.flatnonzero(slots < 0)
        if new.size:  # new runs get slots in order of first appearance; record() never reuses a stream
            _, first, inv = np.unique(pair_keys(u[new], st[new]), return_index=True, return_inverse=True)
            made = np.empty(first.size, dtype=np.int64)
            made[np.argsort(first)] = self.assigner.add_slots(st[new][np.sort(first)], u[new][np.sort(first)])
            slots[new] = made[inv.reshape(-1)]
        cols = np.array([self._column(s) for s in names], dtype=np.int64)
        hits = np.zeros((n, len(self.columns)), dtype=bool)
        hits[:, cols] = mat
        self._fold(u, slots, hits, v)

    def _run_strategies(self, x: str, stream: int) -> set[str]:
        code = self._code.get((self.task, x))
        slot = -1 if code is None else int(self._slots_of(np.array([code]), np.array([stream]))[0])
        if slot < 0:
            return set()
        return {self.columns[j] for j in np.flatnonzero(self.runs.first_hit[slot, : len(self.columns)] >= 0)}

    def _fold(self, u: np.ndarray, slots: np.ndarray, hits: np.ndarray, valid: np.ndarray) -> None:
        """Positions in their runs, then the run table, sums and barcode (``update``'s path)."""
        self.runs.grow(self.assigner.n_slots)
        order = np.argsort(slots, kind="stable")
        ss = slots[order]
        starts = np.flatnonzero(_segment_starts(ss))
        within = np.arange(ss.size) - np.repeat(starts, np.diff(np.append(starts, ss.size)))
        k = np.empty_like(slots)
        k[order] = self.runs.n[ss] + within + 1
        self._record_positions(u, slots, k, hits, valid, None)

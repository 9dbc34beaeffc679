"""Run assignment: which run (tracker stream) each finished episode belongs to, and its position k."""

from __future__ import annotations

import numpy as np

from seffi.coverage.sums import _segment_starts

__all__ = ["RunAssigner"]

_LUT_MAX = 1 << 16  # env indices below this are looked up in an array (larger ones: the dict)


class RunAssigner:
    """Which run (tracker stream) each episode end belongs to, and its position k in that run.

    A run is one input's consecutive samples in one env row. With ``run_index`` from the env (seffi
    envs report it) a run changes when the run index does; otherwise when ``sample_index`` does not
    increase; without either, after ``budget`` samples. Streams are numbered per input from
    ``stream_offset`` in order of appearance, so trackers of several workers merge without clashes.
    Batches where every episode has a ``run_index`` (or none has one and every one has a
    ``sample_index``) are assigned in numpy; anything else goes through the per-episode loop, with
    the same result. The open run of each (input, env row) lives in dense arrays, shape (U, E).

    Args:
        budget: K.
        stream_offset: First stream number.
    """

    def __init__(self, budget: int, stream_offset: int = 0) -> None:
        self.budget, self.stream_offset = int(budget), int(stream_offset)
        self.env_cols: dict[int, int] = {}  # env index -> column of the open-run arrays
        # env index -> column as an array (-1: none), rebuilt when env_cols grows: a batch's columns
        # in one gather instead of a unique + dict pass per log
        self._env_lut = np.full(0, -1, dtype=np.int64)
        self._lut_for = 0  # len(env_cols) the lookup table was built for
        # open run of (input code, env column): slot (-1 none), samples so far, last indices (-1 unknown)
        self.o_slot = np.full((0, 0), -1, dtype=np.int64)
        self.o_cnt = np.zeros((0, 0), dtype=np.int64)
        self.o_si = np.full((0, 0), -1, dtype=np.int64)
        self.o_ri = np.full((0, 0), -1, dtype=np.int64)
        self.next_stream = np.zeros(0, dtype=np.int64)  # per input: the next local stream number
        self._slot_stream = np.zeros(64, dtype=np.int64)
        self._slot_input = np.zeros(64, dtype=np.int64)
        self.n_slots = 0  # runs created so far

    @property
    def slot_stream(self) -> np.ndarray:
        """The tracker stream of each run slot: int array, shape (n_slots,)."""
        return self._slot_stream[: self.n_slots]

    @property
    def slot_input(self) -> np.ndarray:
        """The input code of each run slot: int array, shape (n_slots,)."""
        return self._slot_input[: self.n_slots]

    def restore_slot(self, u: int, stream: int) -> int:
        """A slot for an existing run of input ``u`` with tracker ``stream`` (when loading a state)."""
        self._grow(u + 1, 0)
        return int(self._add_slots(np.array([stream], dtype=np.int64), np.array([u], dtype=np.int64))[0])

    def _add_slots(self, streams: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        n = self.n_slots + streams.size
        if n > self._slot_stream.size:
            extra = np.zeros(max(n, 2 * self._slot_stream.size), dtype=np.int64)
            self._slot_stream, self._slot_input = (
                np.concatenate([self._slot_stream, extra]),
                np.concatenate([self._slot_input, extra]),
            )
        self._slot_stream[self.n_slots : n] = streams
        self._slot_input[self.n_slots : n] = inputs
        slots = np.arange(self.n_slots, n, dtype=np.int64)
        self.n_slots = n
        return slots

    def _grow(self, n_inputs: int, n_envs: int) -> None:
        U, E = self.o_slot.shape
        if n_inputs <= U and n_envs <= E:
            return
        U2, E2 = max(n_inputs, U, 2 * U if n_inputs > U else U), max(n_envs, E)
        for name, fill in (("o_slot", -1), ("o_cnt", 0), ("o_si", -1), ("o_ri", -1)):
            new = np.full((U2, E2), fill, dtype=np.int64)
            new[:U, :E] = getattr(self, name)
            setattr(self, name, new)
        self.next_stream = np.concatenate([self.next_stream, np.zeros(U2 - U, dtype=np.int64)])

    def env_columns(self, env: np.ndarray) -> np.ndarray:
        """Columns of env indices (new indices get new columns, in increasing env index)."""
        lut = self._env_lut
        if self._lut_for == len(self.env_cols) and env.size and 0 <= env.min() and env.max() < lut.size:
            cols = lut[env]
            if (cols >= 0).all():
                return cols
        uniq, inv = np.unique(env, return_inverse=True)
        cols = np.array([self.env_cols.setdefault(int(e), len(self.env_cols)) for e in uniq.tolist()])
        small = {e: c for e, c in self.env_cols.items() if 0 <= e < _LUT_MAX}
        self._env_lut = np.full(max(small, default=-1) + 1, -1, dtype=np.int64)
        self._env_lut[list(small)] = list(small.values())
        self._lut_for = len(self.env_cols)
        return cols[inv].astype(np.int64)

    def _new_slots(self, u: np.ndarray) -> np.ndarray:
        """Slots for new runs of inputs ``u`` (in that order), with their streams."""
        order = np.argsort(u, kind="stable")
        su = u[order]
        first = _segment_starts(su)
        within = np.arange(su.size) - np.flatnonzero(first)[np.cumsum(first) - 1]
        local = np.empty(u.size, dtype=np.int64)
        local[order] = self.next_stream[su] + within
        np.add.at(self.next_stream, u, 1)
        return self._add_slots(self.stream_offset + local, u)

    def assign(
        self, u: np.ndarray, env: np.ndarray, sample_index: np.ndarray, run_index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(slot, k) of every episode, in the order given (-1 = not reported, for the two indices).

        Args:
            u: int array, shape (N,): input codes.
            env: int array, shape (N,): env indices.
            sample_index: int array, shape (N,).
            run_index: int array, shape (N,).
        """
        n = u.shape[0]
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        e = self.env_columns(env)
        self._grow(int(u.max()) + 1, len(self.env_cols))
        if (run_index >= 0).all():
            got = self._vectorised(u, e, sample_index, run_index, self.o_ri, run_index, True)
        elif (run_index < 0).all() and (sample_index >= 0).all():
            got = self._vectorised(u, e, sample_index, run_index, self.o_si, sample_index, False)
        else:
            got = None
        return got if got is not None else self._loop(u, e, sample_index, run_index)

    def _loop(
        self, u: np.ndarray, e: np.ndarray, sample_index: np.ndarray, run_index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        n = u.shape[0]
        slots, ks = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        rows = zip(u.tolist(), e.tolist(), sample_index.tolist(), run_index.tolist(), strict=True)
        for i, (ui, ei, si, ri) in enumerate(rows):
            slot = int(self.o_slot[ui, ei])
            new = slot < 0
            if not new:
                last_si, last_ri = self.o_si[ui, ei], self.o_ri[ui, ei]
                if ri >= 0 and last_ri >= 0:
                    new = ri != last_ri
                elif si >= 0 and last_si >= 0:
                    new = si <= last_si
                else:
                    new = self.o_cnt[ui, ei] >= self.budget
            if new:
                slot = int(self._new_slots(np.array([ui]))[0])
                self.o_slot[ui, ei], self.o_cnt[ui, ei] = slot, 0
            self.o_cnt[ui, ei] += 1
            self.o_si[ui, ei], self.o_ri[ui, ei] = si, ri
            slots[i], ks[i] = slot, self.o_cnt[ui, ei]
        return slots, ks

    def _vectorised(
        self,
        u: np.ndarray,
        e: np.ndarray,
        sample_index: np.ndarray,
        run_index: np.ndarray,
        last: np.ndarray,
        key: np.ndarray,
        differs: bool,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        n = u.shape[0]
        pair = u * self.o_slot.shape[1] + e
        order = np.argsort(pair, kind="stable")
        ps, kk = pair[order], key[order]
        gfirst = _segment_starts(ps)
        gstarts = np.flatnonzero(gfirst)
        gp = ps[gstarts]
        # reshape(-1): views of the (contiguous) open-run arrays; ``.flat`` indexing costs more per call
        f_slot, f_cnt, f_si, f_ri = (a.reshape(-1) for a in (self.o_slot, self.o_cnt, self.o_si, self.o_ri))
        o_slot, o_cnt, o_key = f_slot[gp], f_cnt[gp], last.reshape(-1)[gp]
        has_open = o_slot >= 0
        if (has_open & (o_key < 0)).any():
            return None  # an open run without this index: the loop's fallback rules apply
        prev = np.empty_like(kk)
        prev[0], prev[1:] = -1, kk[:-1]
        prev[gstarts] = o_key
        new = kk != prev if differs else kk <= prev
        new[gstarts] |= ~has_open
        boundary = new | gfirst
        seg = np.cumsum(boundary) - 1
        seg_first = np.flatnonzero(boundary)
        cont = ~new[seg_first]  # only a group's first segment can continue an open run
        g_of_seg = np.cumsum(gfirst)[seg_first] - 1
        k = np.arange(n) - seg_first[seg] + 1 + np.where(cont, o_cnt[g_of_seg], 0)[seg]
        seg_slot = np.where(cont, o_slot[g_of_seg], -1)
        # New runs get slots and streams in the order they appear in the batch, as in the loop.
        fresh = np.flatnonzero(~cont)
        fresh = fresh[np.argsort(order[seg_first[fresh]], kind="stable")]
        seg_slot[fresh] = self._new_slots(u[order[seg_first[fresh]]])
        slot_sorted = seg_slot[seg]
        gends = np.empty_like(gstarts)
        gends[:-1], gends[-1] = gstarts[1:] - 1, n - 1
        last_orig = order[gends]
        f_slot[gp] = slot_sorted[gends]
        f_cnt[gp] = k[gends]
        f_si[gp] = sample_index[last_orig]
        f_ri[gp] = run_index[last_orig]
        slots, ks = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        slots[order], ks[order] = slot_sorted, k
        return slots, ks

    def open_runs(self) -> list[tuple[int, int, int, int, int, int]]:
        """(input code, env index, slot, samples so far, last sample_index, last run_index) of open runs."""
        env_of = {c: e for e, c in self.env_cols.items()}
        us, cs = np.nonzero(self.o_slot >= 0)
        return [
            (
                int(a),
                env_of[int(b)],
                int(self.o_slot[a, b]),
                int(self.o_cnt[a, b]),
                int(self.o_si[a, b]),
                int(self.o_ri[a, b]),
            )
            for a, b in zip(us.tolist(), cs.tolist(), strict=True)
        ]

    def restore_open(self, u: int, env: int, slot: int, count: int, si: int, ri: int) -> None:
        """Reopen a run (inverse of :meth:`open_runs`)."""
        col = self.env_cols.setdefault(int(env), len(self.env_cols))
        self._grow(u + 1, len(self.env_cols))
        self.o_slot[u, col], self.o_cnt[u, col], self.o_si[u, col], self.o_ri[u, col] = slot, count, si, ri

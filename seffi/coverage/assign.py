"""Run assignment: which run (tracker stream) each finished episode belongs to, and its position k.

Also the inputs' keys (`InputKeys`), held in numpy arrays: an input costs its id's bytes and a few ints.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from seffi.coverage.room import grow, zeros
from seffi.coverage.sums import _segment_starts, fit

__all__ = ["InputKeys", "KeyIndex", "RunAssigner", "pair_keys"]

_LUT_MAX = 1 << 16  # env indices below this are looked up in an array (larger ones: the dict)
_SHIFT = 32  # open-run key: input code << 32 | env column


def pair_keys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sortable keys of pairs of non-negative ints: 16 big-endian bytes, whose order is the pairs'."""
    pairs = np.stack([np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)], axis=1)
    return np.ascontiguousarray(pairs.astype(">i8")).view("V16").reshape(-1)


class KeyIndex:
    """Key -> row in sorted numpy arrays (int64 keys, or ``"V16"`` `pair_keys`): 12-20 bytes a key.

    New keys enter a small sorted array, merged into the large one once it holds an eighth of it.
    Rows are held in the narrowest integer type that holds them (int32 below 2^31).
    """

    def __init__(self, dtype: Any = np.int64) -> None:
        self.keys, self.rows = np.zeros(0, dtype=dtype), np.zeros(0, dtype=np.int32)
        self.new_keys, self.new_rows = np.zeros(0, dtype=dtype), np.zeros(0, dtype=np.int32)

    def __len__(self) -> int:
        return self.keys.size + self.new_keys.size

    @staticmethod
    def _find(keys: np.ndarray, rows: np.ndarray, want: np.ndarray) -> np.ndarray:
        if keys.size == 0:
            return np.full(want.size, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        return np.where(keys[pos] == want, rows[pos].astype(np.int64), -1)

    def get(self, want: np.ndarray) -> np.ndarray:
        """Rows of keys ``want`` (-1: absent): int64."""
        if self.keys.size == 0:  # every key still in the small array (fewer than 4096)
            return self._find(self.new_keys, self.new_rows, want)
        rows = self._find(self.keys, self.rows, want)
        miss = rows < 0
        if miss.any() and self.new_keys.size:
            rows[miss] = self._find(self.new_keys, self.new_rows, want[miss])
        return rows

    def add(self, keys: np.ndarray, rows: np.ndarray) -> None:
        """Add distinct keys absent so far, with their rows."""
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], rows[order]
        at = np.searchsorted(self.new_keys, keys)
        self.new_keys, self.new_rows = _inserted(self.new_keys, at, keys), _inserted(self.new_rows, at, rows)
        if self.new_keys.size > max(4096, self.keys.size // 8):
            at = np.searchsorted(self.keys, self.new_keys)
            self.keys = _inserted(self.keys, at, self.new_keys)
            self.rows = _inserted(self.rows, at, self.new_rows)
            self.new_keys, self.new_rows = self.new_keys[:0], self.new_rows[:0]


def _inserted(a: np.ndarray, at: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.insert(a, at, b)`` for ascending ``at``, in memory from `zeros`, in a type holding ``b`` too."""
    a = fit(a, b) if a.dtype.kind == "i" else a
    out = zeros(a.size + b.size, a.dtype)
    pos = at + np.arange(b.size)  # b's entries land after the ones inserted before them
    keep = np.ones(out.size, dtype=bool)
    keep[pos] = False
    out[pos], out[keep] = b, a
    return out


class InputKeys(Sequence[tuple[str, str]]):
    """The (task, input_id) key of every input code, in code order, and the code of each key.

    The ids' UTF-8 bytes are held one after another in one byte array (a code's id ends at
    ``ends[code]``); a key is found by its hash in a `KeyIndex` and checked against the id held, so
    equal hashes of different keys (kept in a small dict) never mix inputs.
    """

    def __init__(self) -> None:
        self._bytes = np.zeros(16, dtype=np.uint8)  # every id's UTF-8 bytes, in code order (then room)
        # input code -> end of its id in ``_bytes``, and -> index into ``tasks`` (types widened by `fit`)
        self.ends = np.zeros(0, dtype=np.int32)
        self.task = np.zeros(0, dtype=np.int8)
        self.tasks: list[str] = []
        self._task_of: dict[str, int] = {}
        self._index = KeyIndex()  # hash of the key -> the code of the first key with that hash
        self._clash: dict[tuple[str, str], int] = {}  # keys whose hash an earlier key has
        self.n = 0

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, code: int) -> tuple[str, str]: ...
    @overload
    def __getitem__(self, code: slice) -> list[tuple[str, str]]: ...
    def __getitem__(self, code: Any) -> Any:
        if isinstance(code, slice):
            return self.take(np.arange(self.n)[code])
        if not -self.n <= code < self.n:
            raise IndexError(f"input code {code} out of range ({self.n} inputs)")
        code %= self.n
        a, b = self.ends.item(code - 1) if code else 0, self.ends.item(code)
        return self.tasks[self.task.item(code)], self._bytes[a:b].tobytes().decode("utf-8", "surrogatepass")

    def _spans(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) in ``_bytes`` of the ids of ``codes``."""
        ends = self.ends[codes]
        starts = np.where(codes > 0, self.ends[np.maximum(codes - 1, 0)], 0)
        return starts, ends

    def ids(self, codes: np.ndarray) -> list[str]:
        """The input_ids of ``codes`` (int array), in that order."""
        codes = np.asarray(codes, dtype=np.int64)
        if codes.size == 0:
            return []
        starts, ends = self._spans(codes)
        a, b = int(starts.min()), int(ends.max())
        if b - a > 8 * int((ends - starts).sum()) + 4096:  # a few ids far apart: each on its own
            buf, a = self._bytes, 0
        else:  # one copy of the span: slicing bytes is cheap
            buf = self._bytes[a:b].tobytes()
        spans = zip((starts - a).tolist(), (ends - a).tolist(), strict=True)
        return [bytes(buf[s:e]).decode("utf-8", "surrogatepass") for s, e in spans]

    def task_names(self, codes: np.ndarray) -> list[str]:
        """The tasks of input ``codes`` (int array), in that order."""
        return [self.tasks[t] for t in self.task[codes].tolist()]

    def take(self, codes: np.ndarray) -> list[tuple[str, str]]:
        """The keys of input ``codes`` (int array), in that order."""
        return list(zip(self.task_names(codes), self.ids(codes), strict=True))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.take(np.arange(self.n)))

    def input_ids(self) -> np.ndarray:
        """The input_id of every code: object array, shape (U,)."""
        out = np.empty(self.n, dtype=object)
        out[:] = self.ids(np.arange(self.n))
        return out

    @staticmethod
    def _encode(ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(UTF-8 bytes of ``ids`` one after another, each id's byte length)."""
        text = "".join(ids)
        raw = text.encode("utf-8", "surrogatepass")
        if len(raw) == len(text):  # ASCII: a byte per character
            lens = np.fromiter(map(len, ids), np.int64, len(ids))
        else:
            lens = np.fromiter((len(x.encode("utf-8", "surrogatepass")) for x in ids), np.int64, len(ids))
        return np.frombuffer(raw, dtype=np.uint8), lens

    def _equal(self, codes: np.ndarray, ids: Sequence[str]) -> np.ndarray:
        """Whether the id held for each of ``codes`` is the matching one of ``ids``: bool (N,)."""
        raw, lens = self._encode(ids)
        starts, ends = self._spans(codes)
        same = ends - starts == lens
        if not same.all():  # ids of other lengths differ: compare the others alone
            k = np.flatnonzero(same)
            same[k] = self._equal(codes[k], [ids[i] for i in k.tolist()]) if k.size else same[k]
            return same
        at = np.cumsum(lens) - lens  # each id's start in ``raw``: byte j of it is held at start + j
        diff = self._bytes[np.repeat(starts - at, lens) + np.arange(raw.size)] != raw
        if diff.any():
            bad = np.concatenate([[0], np.cumsum(diff)])
            same = bad[at + lens] == bad[at]
        return same

    def codes(self, task: str, ids: Sequence[str]) -> np.ndarray:
        """Codes of the keys (``task``, id) of str ``ids`` (-1: not seen)."""
        t = self._task_of.get(task)
        if t is None or not len(ids):
            return np.full(len(ids), -1, dtype=np.int64)
        want = np.fromiter(map(hash, zip([task] * len(ids), ids, strict=True)), np.int64, len(ids))
        out = self._index.get(want)
        found = np.flatnonzero(out >= 0)
        held = ids if found.size == len(ids) else [ids[i] for i in found.tolist()]
        wrong = found[~self._equal(out[found], held) | (self.task[out[found]] != t)]
        if wrong.size:  # the hash of another key: only the clash dict can hold this one
            out[wrong] = [self._clash.get((task, ids[i]), -1) for i in wrong.tolist()]
        return out

    def add(self, keys: Sequence[tuple[str, str]]) -> None:
        """New distinct keys (none seen yet), coded from ``len(self)`` on in order."""
        n = self.n + len(keys)
        raw, lens = self._encode([k[1] for k in keys])
        used = int(self.ends[self.n - 1]) if self.n else 0
        grow(self, "_bytes", used + raw.size)
        self._bytes[used : used + raw.size] = raw
        grow(self, "ends", n)
        grow(self, "task", n)
        for task, _ in keys:
            if task not in self._task_of:
                self._task_of[task] = len(self.tasks)
                self.tasks.append(task)
        self.ends, self.task = fit(self.ends, used + raw.size), fit(self.task, len(self.tasks))
        self.ends[self.n : n] = used + np.cumsum(lens)
        self.task[self.n : n] = [self._task_of[k[0]] for k in keys]
        h = np.fromiter(map(hash, keys), np.int64, len(keys))
        codes = np.arange(self.n, n, dtype=np.int64)
        _, first = np.unique(h, return_index=True)
        taken = np.zeros(len(keys), dtype=bool)
        taken[first] = True
        taken &= self._index.get(h) < 0  # a hash held already, or twice in ``keys``: to the clash dict
        self._index.add(h[taken], codes[taken])
        self._clash.update((keys[i], int(codes[i])) for i in np.flatnonzero(~taken).tolist())
        self.n = n

    def get(self, key: tuple[str, str]) -> int | None:
        """The code of ``key``, or None."""
        code = int(self.codes(key[0], [key[1]])[0])
        return None if code < 0 else code

    def strata(self, codes: np.ndarray | None = None) -> np.ndarray:
        """The task of each of ``codes`` (None: every code) as its rank among the tasks present (by name)."""
        if len(self.tasks) <= 1:  # one task: zeros, allocated but not written (no memory until read)
            return np.zeros(self.n if codes is None else len(codes), dtype=np.int64)
        t = self.task[: self.n] if codes is None else self.task[codes]
        present = np.unique(t)
        rank = np.zeros(len(self.tasks), dtype=np.int64)
        rank[present[np.argsort(np.array([self.tasks[i] for i in present.tolist()], dtype=object))]] = (
            np.arange(present.size)
        )
        return rank[t]

    def order(self) -> np.ndarray:
        """Codes in sorted (task, input_id) order."""
        by_id = self._by_id()
        rank = np.argsort(np.argsort(np.array(self.tasks, dtype=object), kind="stable"))
        return by_id[np.argsort(rank[self.task[by_id]], kind="stable")].astype(np.int64)

    def _by_id(self) -> np.ndarray:
        """Codes sorted by input_id (equal ids in code order), in numpy over the bytes held.

        UTF-8 byte order is code point order, so ids sort as Python sorts them. Each round sorts the
        ids still tied by their next 8 bytes (0 past an id's end), then by how many of those 8 the
        id has (a prefix sorts first); only ties that have all 8 go on to the next round.
        """
        n = self.n
        idx = np.int32 if n < 2**31 else np.int64
        order = np.arange(n, dtype=idx)
        group = np.zeros(n, dtype=idx)  # per position of ``order``: the first position of its ties
        live, p = np.arange(n, dtype=idx), 0  # positions of ``order`` still tied with another
        while live.size:
            c = order[live]
            start, end = self._spans(c)
            start = start.astype(np.int64)
            key = np.zeros(live.size, dtype=np.uint64)
            for j in range(p, p + 8):
                inside = end - start > j
                key <<= np.uint64(8)
                key |= np.where(inside, self._bytes[np.where(inside, start + j, 0)], 0).astype(np.uint64)
            held = np.clip(end - start - p, 0, 8).astype(np.int8)  # bytes of this round the id has
            del start, end, inside
            g = group[live]
            sub = np.lexsort((held, key, g))
            c, key, held, g = c[sub], key[sub], held[sub], g[sub]
            order[live] = c
            first = np.ones(live.size, dtype=bool)
            first[1:] = (g[1:] != g[:-1]) | (key[1:] != key[:-1]) | (held[1:] != held[:-1])
            tie = np.cumsum(first) - 1
            group[live] = live[np.flatnonzero(first)][tie]
            live = live[(np.bincount(tie)[tie] > 1) & (held == 8)]
            p += 8
        return order


class RunAssigner:
    """Which run (tracker stream) each episode end belongs to, and its position k in that run.

    A run is one input's consecutive samples in one env row. A sample starts a new run when its
    (input, env row) has no open run; else when the ``run_index`` changes (both reported); else
    when the ``sample_index`` does not increase (both reported); else after ``budget`` samples.
    Streams are numbered per input from ``stream_offset``, so workers' trackers merge.
    """

    def __init__(self, budget: int, stream_offset: int = 0) -> None:
        self.budget, self.stream_offset = int(budget), int(stream_offset)
        self.env_cols: dict[int, int] = {}  # env index -> column (in order of first appearance)
        # env index -> column as an array (-1: none), rebuilt when env_cols grows: one gather a batch
        self._env_lut = np.full(0, -1, dtype=np.int64)
        self._lut_for = 0  # len(env_cols) the lookup table was built for
        self._row = KeyIndex()  # (input code << 32 | env column) -> open-run row, for every pair seen
        # Per row: open run slot (-1 none), samples so far, last sample's indices (-1 unknown), by `fit`
        self.o_slot = np.zeros(0, dtype=np.int32)
        self.o_cnt, self.o_si, self.o_ri = (np.zeros(0, dtype=np.int8) for _ in range(3))
        self.next_stream = np.zeros(0, dtype=np.int8)  # per input: the next local stream number (`fit`)
        self._slot_stream = np.zeros(64, dtype=np.int8)  # widened by `fit` as streams grow
        # int32: a tracker holds far fewer than 2^31 inputs (their ids alone would take > 100 GB)
        self._slot_input = np.zeros(64, dtype=np.int32)
        self.n_slots = 0  # runs created so far

    @property
    def slot_stream(self) -> np.ndarray:
        """The tracker stream of each run slot: int array, shape (n_slots,)."""
        return self._slot_stream[: self.n_slots]

    @property
    def slot_input(self) -> np.ndarray:
        """The input code of each run slot: int array, shape (n_slots,)."""
        return self._slot_input[: self.n_slots]

    def ensure_inputs(self, n_inputs: int) -> None:
        """Room for input codes below ``n_inputs`` (amortised growth)."""
        grow(self, "next_stream", n_inputs, 0, 16)

    def add_slots(self, streams: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        """Slots for runs with the given streams and input codes (in order); their streams are raised past."""
        streams = streams.astype(np.int64, copy=False)  # a tracker's own may be int8: offsets go past
        n = self.n_slots + streams.size
        grow(self, "_slot_stream", n)
        grow(self, "_slot_input", n)
        self._slot_stream = fit(self._slot_stream, streams)
        self.o_slot = fit(self.o_slot, n)
        self._slot_stream[self.n_slots : n] = streams
        self._slot_input[self.n_slots : n] = inputs
        if inputs.size:
            self.ensure_inputs(int(inputs.max()) + 1)
            self.raise_next(inputs, streams - self.stream_offset + 1)  # record() never reuses a stream
        slots = np.arange(self.n_slots, n, dtype=np.int64)
        self.n_slots = n
        return slots

    def raise_next(self, inputs: np.ndarray, next_streams: np.ndarray) -> None:
        """Raise the next local stream of ``inputs`` to at least ``next_streams``."""
        self.next_stream = fit(self.next_stream, next_streams)
        np.maximum.at(self.next_stream, inputs, next_streams)

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

    def _rows(self, keys: np.ndarray) -> np.ndarray:
        """Open-run rows of (input << 32 | env column) keys (distinct), new rows for new pairs."""
        rows = self._row.get(keys)
        new = np.flatnonzero(rows < 0)
        if new.size:
            have = len(self._row)
            fresh = np.arange(have, have + new.size, dtype=np.int64)
            self._row.add(keys[new], fresh)
            for name, fill in (("o_slot", -1), ("o_cnt", 0), ("o_si", -1), ("o_ri", -1)):
                grow(self, name, have + new.size, 0, 64)
                getattr(self, name)[fresh] = fill
            rows[new] = fresh
        return rows

    def _new_slots(self, u: np.ndarray) -> np.ndarray:
        """Slots for new runs of inputs ``u`` (in that order), with their streams."""
        order = np.argsort(u, kind="stable")
        su = u[order]
        first = _segment_starts(su)
        within = np.arange(su.size) - np.flatnonzero(first)[np.cumsum(first) - 1]
        local = np.empty(u.size, dtype=np.int64)
        local[order] = self.next_stream[su] + within
        return self.add_slots(self.stream_offset + local, u)

    def assign(
        self, u: np.ndarray, env: np.ndarray, sample_index: np.ndarray, run_index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(slot, k) of every episode (N,) of inputs ``u`` in env rows ``env``, in order; indices -1: none."""
        n = u.shape[0]
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self.ensure_inputs(int(u.max()) + 1)
        pair = (u << _SHIFT) | self.env_columns(env)
        order = np.argsort(pair, kind="stable")
        ps = pair[order]
        gfirst = _segment_starts(ps)
        gstarts = np.flatnonzero(gfirst)
        rows = self._rows(ps[gstarts])
        o_slot, o_cnt = self.o_slot[rows].astype(np.int64), self.o_cnt[rows].astype(np.int64)
        has_open = o_slot >= 0
        si, ri = sample_index[order], run_index[order]
        o_si, o_ri = self.o_si[rows].astype(np.int64), self.o_ri[rows].astype(np.int64)
        new = self._boundaries(si, ri, gfirst, gstarts, has_open, o_cnt, o_si, o_ri)
        boundary = new | gfirst
        seg = np.cumsum(boundary) - 1
        seg_first = np.flatnonzero(boundary)
        cont = ~new[seg_first]  # only a group's first segment can continue an open run
        g_of_seg = np.cumsum(gfirst)[seg_first] - 1
        k = np.arange(n) - seg_first[seg] + 1 + np.where(cont, o_cnt[g_of_seg], 0)[seg]
        seg_slot = np.where(cont, o_slot[g_of_seg], -1)
        fresh = np.flatnonzero(~cont)
        if fresh.size:  # new runs get slots and streams in the order they appear in the batch
            fresh = fresh[np.argsort(order[seg_first[fresh]], kind="stable")]
            seg_slot[fresh] = self._new_slots(u[order[seg_first[fresh]]])
        slot_sorted = seg_slot[seg]
        gends = np.empty_like(gstarts)
        gends[:-1], gends[-1] = gstarts[1:] - 1, n - 1
        last = order[gends]
        self._set_open(rows, slot_sorted[gends], k[gends], sample_index[last], run_index[last])
        slots, ks = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        slots[order], ks[order] = slot_sorted, k
        return slots, ks

    def _boundaries(
        self,
        si: np.ndarray,
        ri: np.ndarray,
        gfirst: np.ndarray,
        gstarts: np.ndarray,
        has_open: np.ndarray,
        o_cnt: np.ndarray,
        o_si: np.ndarray,
        o_ri: np.ndarray,
    ) -> np.ndarray:
        """Whether each sample (grouped by (input, env row), in order) starts a new run."""
        n, K = si.size, self.budget
        opens = np.zeros(n, dtype=bool)  # a group's first sample without an open run
        opens[gstarts[~has_open]] = True
        prev_ri = np.empty_like(ri)
        prev_ri[1:], prev_ri[gstarts] = ri[:-1], o_ri  # the open run's last sample (-1 when none)
        by_ri = (ri >= 0) & (prev_ri >= 0)
        if by_ri.all():  # every sample ruled by its run_index (a seffi env reports it)
            return (ri != prev_ri) | opens
        prev_si = np.empty_like(si)
        prev_si[1:], prev_si[gstarts] = si[:-1], o_si
        by_si = ~by_ri & (si >= 0) & (prev_si >= 0)
        new = np.where(by_ri, ri != prev_ri, by_si & (si <= prev_si)) | opens
        by_count = ~by_ri & ~by_si & ~opens
        if not by_count.any():
            return new
        group = np.cumsum(gfirst) - 1
        g_size = np.diff(np.r_[gstarts, n])
        mixed = np.bincount(group, weights=by_count, minlength=gstarts.size) < g_size - opens[gstarts]
        # Groups ruled by the count alone: a run ends after K samples, counting from the open run's.
        pure = by_count & ~mixed[group]
        if pure.any():
            j = np.arange(n) - gstarts[group]
            start = np.where(has_open, np.maximum(K - o_cnt, 0), 0)[group]
            new[pure] = ((j >= start) & ((j - start) % K == 0))[pure]
        for g in np.flatnonzero(
            mixed & np.bincount(group, weights=by_count, minlength=gstarts.size).astype(bool)
        ):
            a, b = gstarts[g], gstarts[g] + g_size[g]
            count = int(o_cnt[g]) if has_open[g] else 0
            for i in range(a, b):  # the rules interleave: sample by sample
                if by_count[i]:
                    new[i] = count >= K
                count = 1 if new[i] else count + 1
        return new

    def _set_open(self, rows: np.ndarray, *fields: np.ndarray) -> None:
        """Write rows of the open-run fields (slots, counts, last indices), each type widened to hold them."""
        for name, values in zip(("o_slot", "o_cnt", "o_si", "o_ri"), fields, strict=True):
            setattr(self, name, fit(getattr(self, name), values))
            getattr(self, name)[rows] = values

    def open_runs(self) -> tuple[np.ndarray, np.ndarray]:
        """Open runs: their rows of ``o_slot``, ``o_cnt``, ``o_si`` and ``o_ri``, and their env indices."""
        rows = np.concatenate([self._row.rows, self._row.new_rows])
        is_open = self.o_slot[rows] >= 0
        cols = np.concatenate([self._row.keys, self._row.new_keys])[is_open]
        cols &= (1 << _SHIFT) - 1
        env_of = np.zeros(len(self.env_cols), dtype=np.int64)  # env column -> env index
        env_of[list(self.env_cols.values())] = list(self.env_cols)
        return rows[is_open], env_of[cols]

    def restore_open(self, u: Any, env: Any, *fields: Any) -> None:
        """Reopen runs (inverse of `open_runs`): inputs, env indices, slots, counts, last indices."""
        u, env = np.atleast_1d(u), np.atleast_1d(env)
        if u.size:
            col = np.array([self.env_cols.setdefault(e, len(self.env_cols)) for e in env.tolist()], np.int64)
            self.ensure_inputs(int(u.max()) + 1)
            r = self._rows((u << _SHIFT) | col)
            self._set_open(r, *(np.broadcast_to(np.asarray(f, dtype=np.int64), r.shape) for f in fields))

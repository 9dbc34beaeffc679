"""``BarcodeRows``: the strategy barcode — per input, which strategy each of its first samples added.

A row is an input's lowest-stream run, kept for the ``rows`` smallest (task, input_id) keys (so
neither update nor merge order matters); a cell is the first strategy (declared order) the sample
adds to its run's coverage, else its first matched strategy, else -1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from seffi.coverage.room import grow
from seffi.coverage.sums import _segment_starts

#: Barcode rows a monitor keeps by default: the 64 smallest (task, input_id) keys.
BARCODE_ROWS = 64
_NONE = np.iinfo(np.int64).max  # no row yet: any stream qualifies


class BarcodeRows:
    """Barcode rows by input code: ``rows`` inputs (the smallest keys; 0: none), ``cols`` samples each."""

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols = int(rows), int(cols)
        # code -> [stream, cells (int array, cols), new (bool array, cols), length]
        self.data: dict[int, list[Any]] = {}
        # Per input code: 0 no row yet, 1 a row (its stream in ``data``), -1 never (beyond ``rows``).
        self.state = np.zeros(16, dtype=np.int8)
        self._held: tuple[np.ndarray, np.ndarray] | None = None  # (codes, streams) of the rows, sorted
        self._worst: int | None = None  # the largest key among the rows (cached while full)
        self._keys: dict[int, Any] = {}  # the key of each row's input, read once

    def _key(self, code: int, keys: Sequence[Any]) -> Any:
        key = self._keys.get(code)
        if key is None:
            key = self._keys[code] = keys[code]
        return key

    def grow(self, n_inputs: int) -> None:
        """Room for ``n_inputs`` input codes."""
        grow(self, "state", n_inputs)

    def _stream(self, u: np.ndarray) -> np.ndarray:
        """The row's stream of each input code of ``u`` (_NONE: none yet; -1: never)."""
        state = self.state[u]
        out = np.where(state == 0, _NONE, -1)
        held = np.flatnonzero(state > 0)
        if held.size:
            if self._held is None:  # rebuilt after a row came or went
                codes = np.sort(np.fromiter(self.data, np.int64, len(self.data)))
                self._held = codes, np.array([self.data[c][0] for c in codes.tolist()], dtype=np.int64)
            codes, streams = self._held
            out[held] = streams[np.searchsorted(codes, u[held])]
        return out

    def rows_held(self) -> Iterator[tuple[int, int, list[int], list[bool]]]:
        """(code, stream, cells, new flags) of every row (the cells recorded so far)."""
        for code, (stream, cells, new, length) in self.data.items():
            yield code, int(stream), cells[:length].tolist(), new[:length].tolist()

    def admit(self, code: int, keys: Sequence[Any]) -> bool:
        """Whether input ``code`` may hold a row (evicting the largest key when full; for good)."""
        if code in self.data or len(self.data) < self.rows:
            return True
        if not self.data:  # rows == 0: no barcode at all
            return False
        if self._worst is None:
            self._worst = max(self.data, key=lambda c: self._key(c, keys))
        worst = self._worst
        if keys[code] > self._key(worst, keys):
            self.state[code] = -1
            return False
        del self.data[worst]
        self._keys.pop(worst, None)
        self.state[worst] = -1
        self._held = None
        self._worst = None
        return True

    def _claim(self, code: int, stream: int, keys: Sequence[Any]) -> bool:
        """Start input ``code``'s row at ``stream`` if that is its lowest stream and it may hold a row."""
        row = self.data.get(code)
        if (row is not None and stream >= row[0]) or not self.admit(code, keys):
            return False
        self.data[code] = [stream, np.full(self.cols, -1, dtype=np.int64), np.zeros(self.cols, dtype=bool), 0]
        self.state[code] = 1
        self._worst = self._held = None
        return True

    def put(self, code: int, stream: int, cells: list[int], new: list[bool], keys: Sequence[Any]) -> None:
        """Keep a whole row (from a merged or loaded state) if its stream is the input's lowest."""
        self.grow(code + 1)
        if self._claim(code, stream, keys):
            got = self.data[code]
            w = min(len(cells), self.cols)
            got[1][:w], got[2][:w], got[3] = cells[:w], new[:w], w

    def add(
        self,
        u: np.ndarray,
        slot: np.ndarray,
        k: np.ndarray,
        hits: np.ndarray,
        streams: np.ndarray,
        covered: Callable[[np.ndarray], np.ndarray],
        keys: Sequence[Any],
        col_order: np.ndarray,
    ) -> None:
        """Set the cells of a batch's samples that fall in a barcode row (before they are folded).

        Per sample (N,): input code ``u``, run ``slot``, 1-based position ``k``, matched columns
        ``hits`` (N, C) and run ``streams``; ``covered(slots)``: the columns (len(slots), C) each run
        covered before the batch; ``col_order``: columns in the rule's order.
        """
        if self.rows == 0 or u.size == 0:
            return
        self.grow(int(u.max()) + 1)
        row_stream = self._stream(u)
        start = (k == 1) & (streams < row_stream)  # a run that may (re)start an input's row
        if start.any():
            i = np.flatnonzero(start)
            i = i[np.lexsort((streams[i], u[i]))]
            first = i[_segment_starts(u[i])]  # each input's lowest such stream
            if len(self.data) >= self.rows:  # full: only a key below the largest held can get a row
                if self._worst is None:
                    self._worst = max(self.data, key=lambda c: self._key(c, keys))
                top = self._key(self._worst, keys)
                cand = u[first]
                held = np.fromiter((c in self.data for c in cand.tolist()), bool, cand.size)
                ok = held.copy()
                # the keys of the others at once: one read of the ids held (an InputKeys), not one each
                new = cand[~held]
                take = getattr(keys, "take", lambda codes: [keys[c] for c in codes.tolist()])
                ok[~held] = np.fromiter((k < top for k in take(new)), bool, new.size)
                self.state[u[first[~ok]]] = -1  # for good, as admit would
                first = first[ok]
            for code, stream in zip(u[first].tolist(), streams[first].tolist(), strict=True):
                self._claim(code, stream, keys)
            row_stream = self._stream(u)  # rows may have (re)started
        live = np.flatnonzero((streams == row_stream) & (k <= self.cols))
        if live.size == 0:
            return
        live = live[np.lexsort((k[live], slot[live]))]
        H = hits[live]
        # Covered before each sample: before the batch, or by its run's earlier samples in it.
        seg = _segment_starts(slot[live])
        run_count = np.cumsum(H, axis=0, dtype=np.int64)
        first = np.maximum.accumulate(np.where(seg, np.arange(seg.size), 0))  # each sample's run start
        before = np.where((first > 0)[:, None], run_count[np.maximum(first - 1, 0)], 0)
        seen = covered(slot[live]) | (run_count - H - before > 0)
        # The first matched column, or -1 (a free-form tracker before its first strategy has no columns).
        fresh = np.column_stack([(H & ~seen)[:, col_order], np.ones(len(H), bool)])
        matched = np.column_stack([H[:, col_order], np.ones(len(H), bool)])
        cols = np.append(col_order, -1)
        is_new = fresh[:, :-1].any(axis=1)
        cell = np.where(is_new, cols[fresh.argmax(axis=1)], cols[matched.argmax(axis=1)])
        codes = u[live]
        pos = k[live] - 1
        order = np.argsort(codes, kind="stable")
        bounds = np.flatnonzero(_segment_starts(codes[order]))
        for a, b in zip(bounds.tolist(), [*bounds[1:].tolist(), order.size], strict=True):
            idx = order[a:b]
            row = self.data[int(codes[idx[0]])]
            row[1][pos[idx]], row[2][pos[idx]] = cell[idx], is_new[idx]
            row[3] = max(row[3], int(pos[idx].max()) + 1)

    def to_dict(
        self, keys: Sequence[tuple[str, str]], columns: Sequence[str], names: list[str], K: int | None
    ) -> dict[str, Any]:
        """The rows as JSON-safe data (see ``CoverageTracker.barcode``)."""
        cols = self.cols if K is None else min(K, self.cols)
        index = {s: j for j, s in enumerate(names)}
        out: dict[str, Any] = {"rows": [], "input_ids": [], "strategies": names}
        out.update(first_strategy=[], new=[], lengths=[])
        for code in sorted(self.data, key=keys.__getitem__):
            stream, cells, new, length = self.data[code]
            task, x = keys[code]
            row = [index[columns[c]] if c >= 0 else -1 for c in cells[: min(length, cols)].tolist()]
            out["rows"].append(f"{task}/{x}/{stream}" if task else f"{x}/{stream}")
            out["input_ids"].append(x)
            out["first_strategy"].append(row + [-1] * (cols - len(row)))
            out["new"].append(new[: min(length, cols)].tolist() + [False] * (cols - len(row)))
            out["lengths"].append(int(length))
        return out

"""``BarcodeRows``: the strategy barcode — per input, which strategy each of its first samples added.

The rule (one, everywhere): a row is an input's lowest-stream run, kept for the ``rows`` smallest
(task, input_id) keys, so the choice depends on neither update nor merge order; a cell is the first
strategy (declared order; alphabetical when free-form) the sample adds to its run's coverage, else
its first matched strategy, else -1 (no match). Memory: rows x cols cells.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["BarcodeRows"]

_NONE = np.iinfo(np.int64).max  # no row yet: any stream qualifies


class BarcodeRows:
    """Barcode rows keyed by input code (see the module docstring for the rule).

    Args:
        rows: Inputs with a row (the smallest keys); 0 keeps none.
        cols: Samples kept per row.
    """

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols = int(rows), int(cols)
        self.data: dict[int, tuple[int, list[int], list[bool]]] = {}  # code -> (stream, cells, new)
        # The row's stream per input code (_NONE: none yet; -1: never, beyond ``rows``), so the
        # samples that can be cells are found in numpy and the Python loop never sees the rest.
        self.stream = np.full(16, _NONE, dtype=np.int64)

    def grow(self, n_inputs: int) -> None:
        """Room for ``n_inputs`` input codes."""
        if n_inputs > self.stream.size:
            extra = np.full(max(n_inputs, 2 * self.stream.size) - self.stream.size, _NONE, dtype=np.int64)
            self.stream = np.r_[self.stream, extra]

    def admit(self, code: int, keys: Sequence[Any]) -> bool:
        """Whether input ``code`` may hold a row (evicting the largest key when full; for good)."""
        if code in self.data or len(self.data) < self.rows:
            return True
        if not self.data:  # rows == 0: no barcode at all
            return False
        worst = max(self.data, key=keys.__getitem__)
        if keys[code] > keys[worst]:
            self.stream[code] = -1
            return False
        del self.data[worst]
        self.stream[worst] = -1
        return True

    def put(self, code: int, stream: int, cells: list[int], new: list[bool], keys: Sequence[Any]) -> None:
        """Keep a whole row (from a merged or loaded state) if its stream is the input's lowest."""
        row = self.data.get(code)
        if (row is None or stream < row[0]) and self.admit(code, keys):
            self.data[code] = (stream, cells, new)
            self.stream[code] = stream

    def add(
        self,
        u: np.ndarray,
        slot: np.ndarray,
        k: np.ndarray,
        hits: np.ndarray,
        streams: np.ndarray,
        covered: Callable[[int], set[int]],
        keys: Sequence[Any],
        col_order: list[int],
    ) -> None:
        """Append the cells of a batch's samples that fall in a barcode row (before they are folded).

        Args:
            u: int array, shape (N,): input codes.
            slot: int array, shape (N,): run slots.
            k: int array, shape (N,): positions in the runs (1-based).
            hits: bool array, shape (N, C): matched columns.
            streams: int array, shape (N,): the runs' streams.
            covered: ``covered(slot)``: the columns the run covered before this batch.
            keys: (task, input_id) per input code.
            col_order: columns in the rule's order.
        """
        if self.rows == 0:
            return
        cand = np.flatnonzero(streams <= self.stream[u])
        seen: dict[int, set[int]] = {}
        for i in cand[np.lexsort((k[cand], slot[cand]))].tolist():
            code, stream, sl = int(u[i]), int(streams[i]), int(slot[i])
            row = self.data.get(code)
            if row is None or stream < row[0]:
                if k[i] != 1 or not self.admit(code, keys):
                    continue
                row = self.data[code] = (stream, [], [])
                self.stream[code] = stream
            if stream != row[0] or len(row[1]) >= self.cols:
                continue
            got = seen.get(sl)
            if got is None:
                got = seen[sl] = covered(sl)
            matched = [j for j in col_order if hits[i, j]]
            new = [j for j in matched if j not in got]
            got.update(matched)
            row[1].append(new[0] if new else (matched[0] if matched else -1))
            row[2].append(bool(new))

    def to_dict(
        self, keys: Sequence[tuple[str, str]], columns: Sequence[str], names: list[str], K: int | None
    ) -> dict[str, Any]:
        """The rows as JSON-safe data (see ``CoverageTracker.barcode``)."""
        cols = self.cols if K is None else min(K, self.cols)
        index = {s: j for j, s in enumerate(names)}
        out: dict[str, Any] = {"rows": [], "input_ids": [], "strategies": names}
        out.update(first_strategy=[], new=[], lengths=[])
        for code in sorted(self.data, key=keys.__getitem__):
            stream, cells, new = self.data[code]
            task, x = keys[code]
            row = [index[columns[c]] if c >= 0 else -1 for c in cells[:cols]]
            out["rows"].append(f"{task}/{x}/{stream}" if task else f"{x}/{stream}")
            out["input_ids"].append(x)
            out["first_strategy"].append(row + [-1] * (cols - len(row)))
            out["new"].append(list(new[:cols]) + [False] * (cols - len(row)))
            out["lengths"].append(len(cells))
        return out

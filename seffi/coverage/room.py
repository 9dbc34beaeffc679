"""Memory for the arrays a tracker grows with its stream (per input, per run).

A large array gets its own private anonymous memory map: its pages are zero and take no memory
until written, so the spare rows of a grown array cost nothing, and a dropped array goes back to the
system at once instead of leaving a hole in the allocator's heap (which keeps it). Rows grow by
`GROWTH`, so the spare room stays within a quarter of what is held.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

__all__ = ["GROWTH", "grow", "zeros"]

#: Growth factor of the arrays' rows.
GROWTH = 1.25
#: Arrays of at least this many bytes get their own map (smaller ones: numpy's allocator).
MAP_BYTES = 1 << 20
_FLAGS = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)


def zeros(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zeroed array; a large one in its own map, its pages taking memory only once written."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes < MAP_BYTES or not hasattr(mmap, "MAP_PRIVATE"):  # no private maps (Windows): the heap
        return np.zeros(shape, dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=_FLAGS), dtype=dtype).reshape(shape)


def grow(obj: Any, name: str, rows: int, fill: Any = 0, least: int = 0) -> None:
    """Give array ``obj.<name>`` room for ``rows`` rows (x `GROWTH`, at least ``least``), new rows ``fill``.

    With ``fill`` 0 the new rows are not written (zero pages): not resident until used.
    """
    a = getattr(obj, name)
    have = a.shape[0]
    if rows <= have:
        return
    out = zeros((max(rows, int(GROWTH * have) + 1, least), *a.shape[1:]), a.dtype)
    out[:have] = a
    if fill != 0:
        out[have:] = fill
    setattr(obj, name, out)

"""Memory for the arrays a tracker grows (per input, per run): a large one in its own anonymous map.

Its pages take no memory until written (spare rows are free), go back to the system when dropped, and
grow in place (``mremap``: never held twice) unless a view of it is held elsewhere.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

__all__ = ["GROWTH", "grow", "zeros"]

GROWTH = 1.25  # growth factor of the arrays' rows
MAP_BYTES = 1 << 20  # arrays of at least this many bytes get their own map
_FLAGS = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)


def zeros(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zeroed array; a large one in its own map, its pages taking memory only once written."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes < MAP_BYTES or not hasattr(mmap, "MAP_PRIVATE"):  # no private maps (Windows): the heap
        return np.zeros(shape, dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=_FLAGS), dtype=dtype).reshape(shape)


def _map_of(a: np.ndarray) -> mmap.mmap | None:
    """The map `zeros` made for ``a`` when ``a`` is the whole of it, else None."""
    base: Any = a
    while isinstance(base, np.ndarray):
        base = base.base
    base = base.obj if isinstance(base, memoryview) else base
    whole = isinstance(base, mmap.mmap) and a.flags.c_contiguous and a.nbytes == len(base)
    return base if whole else None


def grow(obj: Any, name: str, rows: int, fill: Any = 0, least: int = 0) -> None:
    """Give array ``obj.<name>`` room for ``rows`` rows (x `GROWTH`, at least ``least``), new rows ``fill``.

    With ``fill`` 0 the new rows are not written: not resident until used.
    """
    a = getattr(obj, name)
    have, dtype = a.shape[0], a.dtype
    if rows <= have:
        return
    shape = (max(rows, int(GROWTH * have) + 1, least), *a.shape[1:])
    mm, out = _map_of(a), None
    if mm is not None:  # in place: only when no other array shares the map
        setattr(obj, name, None)
        del a
        try:
            mm.resize(int(np.prod(shape)) * dtype.itemsize)
            out = np.frombuffer(mm, dtype=dtype).reshape(shape)
        except (BufferError, OSError, SystemError, TypeError, ValueError):  # a view held elsewhere; no mremap
            a = np.frombuffer(mm, dtype=dtype).reshape((have, *shape[1:]))
    if out is None:
        out = zeros(shape, dtype)
        out[:have] = a
    if fill != 0:
        out[have:] = fill
    setattr(obj, name, out)

"""Arrays that grow in place: rows kept, new rows filled, large arrays in private zeroed maps."""

from __future__ import annotations

import numpy as np

from seffi.coverage.room import MAP_BYTES, grow, zeros


def test_room_grows_keeping_rows_and_filling_new_ones() -> None:
    """`grow` keeps every row, fills the new ones, and large arrays are private zeroed memory."""

    class Holder:
        small = np.arange(10, dtype=np.int16)
        big = zeros((MAP_BYTES // 8 + 1,), np.int64)

    h = Holder()
    h.big[::1000] = np.arange(h.big[::1000].size)
    before = h.big.copy()
    grow(h, "big", h.big.size + 1, -1)
    assert h.big.size >= before.size + 1 and h.big.dtype == np.int64
    np.testing.assert_array_equal(h.big[: before.size], before)
    assert (h.big[before.size :] == -1).all()
    held = h.big[:10]  # a view held elsewhere: the array is copied, not moved, and the view stays valid
    before = h.big.copy()
    grow(h, "big", 2 * h.big.size)
    np.testing.assert_array_equal(h.big[: before.size], before)
    np.testing.assert_array_equal(held, before[:10])
    del held
    grow(h, "big", 2 * h.big.size)  # no view left: grown in place, rows kept, new rows zero
    np.testing.assert_array_equal(h.big[: before.size], before)
    assert not h.big[before.size :].any()
    grow(h, "small", 40)
    assert h.small.size >= 40 and h.small.dtype == np.int16
    np.testing.assert_array_equal(h.small[:10], np.arange(10))
    assert not h.small[10:].any()
    grow(h, "small", 5)  # room enough: unchanged
    assert h.small.size >= 40
    wide = zeros((MAP_BYTES, 3), np.uint8)
    assert wide.shape == (MAP_BYTES, 3) and not wide.any() and wide.flags.writeable

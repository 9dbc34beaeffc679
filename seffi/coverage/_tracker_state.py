"""Former home of the tracker's state format; the names callers import live on here.

The state is declared in :mod:`seffi.coverage.state` (format 2) and format 1 is read by
:mod:`seffi.coverage.state_v1`; import from those.
"""

from __future__ import annotations

from seffi.coverage.state import STATE_FORMAT
from seffi.coverage.state_io import check, shift_streams, stream_span
from seffi.coverage.state_v1 import MONITOR_V1_FORMAT, V1_FORMAT, from_monitor_v1, from_v1

__all__ = [
    "MONITOR_V1_FORMAT",
    "STATE_FORMAT",
    "V1_FORMAT",
    "check",
    "from_monitor_v1",
    "from_v1",
    "shift_streams",
    "stream_span",
]

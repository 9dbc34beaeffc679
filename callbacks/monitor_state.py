"""A monitor's checkpoint: the tracker's state plus the episode counter (format 2; reads format 1).

Everything recorded belongs to the tracker, so a monitor state is ``{"format", "episodes",
"tracker"}``; merging, resuming and moving workers into their own streams are the tracker's
operations. Every error here is one `SeffiError` line, and nothing is changed
before a state has been checked completely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from seffi.coverage import state_v1
from seffi.coverage.barcode import BARCODE_ROWS
from seffi.coverage.state import check
from seffi.coverage.tracker import CoverageTracker
from seffi.errors import SeffiError
from seffi.report.safe_load import load_json_file

__all__ = [
    "MONITOR_STATE_FORMAT",
    "loaded",
    "merged",
    "pack",
    "read_checkpoint",
    "shift_streams",
    "stream_span",
    "union",
]

#: The tracker state a run folder holds (a checkpoint's, or a finished run's).
TRACKER_STATE_JSON = "tracker_state.json"
#: Largest tracker_state.json read back (about 10 bytes per episode: room for 10^8 episodes).
MAX_STATE_BYTES = 2**30

#: Format tag of ``CoverageMonitor.state_dict`` (version 1 states still load).
MONITOR_STATE_FORMAT = state_v1.MONITOR_STATE_FORMAT


def pack(tracker: CoverageTracker, episodes: int) -> dict[str, Any]:
    """The JSON-safe monitor state."""
    return {"format": MONITOR_STATE_FORMAT, "episodes": episodes, "tracker": tracker.state_dict()}


def unpack(state: Any, like: CoverageTracker) -> tuple[dict[str, Any], int]:
    """(checked tracker state, episodes) of a monitor state (any format) that fits tracker ``like``."""
    try:
        state = state_v1.upgrade_monitor(state)
        if not isinstance(state, Mapping) or state.get("format") != MONITOR_STATE_FORMAT:
            raise ValueError(f"not a CoverageMonitor state (expected format {MONITOR_STATE_FORMAT!r})")
        checked, episodes = check(state["tracker"]), state["episodes"]
        mine = (like.budget, list(like.strategies or ()), like.task)
        if (checked["budget"], checked["strategies"], checked["task"]) != mine:
            raise ValueError("the state's budget, strategies or task do not mix with this monitor's")
        if isinstance(episodes, bool) or not isinstance(episodes, int) or not 0 <= episodes < 2**53:
            raise ValueError("episodes must be a non-negative int")
    except (ValueError, KeyError, TypeError) as exc:
        raise SeffiError(f"corrupted CoverageMonitor state: {exc}") from exc
    return checked, episodes


def read_checkpoint(folder: Path) -> dict[str, Any]:
    """The monitor state of a run folder's tracker_state.json: its runs, episodes = samples + skipped.

    Raises:
        SeffiError: The folder holds no tracker_state.json, or it is not valid JSON.
    """
    path = Path(folder) / TRACKER_STATE_JSON
    if not path.is_file():
        raise SeffiError(f"resume_from={folder}: no {TRACKER_STATE_JSON} there (no checkpoint was written)")
    tracker = load_json_file(path, what="tracker state", max_bytes=MAX_STATE_BYTES, max_depth=16)
    if not isinstance(tracker, Mapping):
        raise SeffiError(f"corrupted CoverageMonitor state: {path} does not hold a JSON object")
    counts = [tracker.get("samples"), tracker.get("skipped")]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        raise SeffiError(f"corrupted CoverageMonitor state: {path} has no sample counts")
    # Every episode a monitor folds is either a sample or one beyond its run's budget.
    return {"format": MONITOR_STATE_FORMAT, "episodes": counts[0] + counts[1], "tracker": dict(tracker)}


def loaded(state: Any, like: CoverageTracker) -> tuple[CoverageTracker, int]:
    """(tracker, episodes) of a monitor state, its open runs still open (resume)."""
    checked, episodes = unpack(state, like)
    try:
        return CoverageTracker.from_state_dict(checked, barcode_rows=BARCODE_ROWS), episodes
    except Exception as exc:  # not expected after the check; the caller is untouched either way
        raise SeffiError(f"corrupted CoverageMonitor state: {type(exc).__name__}: {exc}") from exc


def merged(tracker: CoverageTracker, state: Any) -> int:
    """Merge a monitor state's runs into ``tracker`` (exact, atomic); returns its episode count."""
    checked, episodes = unpack(state, tracker)
    try:
        tracker.merge(CoverageTracker.from_state_dict(checked, barcode_rows=BARCODE_ROWS))
    except Exception as exc:  # the tracker merges atomically: nothing changed
        text = str(exc).replace("both trackers", "both monitors")
        raise SeffiError(f"{text}; give workers distinct stream_offset values or use load_states") from exc
    return episodes


def union(states: Sequence[Any], fresh: CoverageTracker) -> tuple[CoverageTracker, int]:
    """The exact union of workers' states, each moved to its own block of streams, merged into ``fresh``."""
    parts = [unpack(s, fresh) for s in states]
    offset = 0
    try:
        for tracker_state, _ in parts:
            fresh.merge(CoverageTracker.from_state_dict(CoverageTracker.shift_streams(tracker_state, offset)))
            offset += CoverageTracker.stream_span(tracker_state)
    except Exception as exc:  # merged into a scratch tracker: the caller is unchanged
        raise SeffiError(f"cannot merge CoverageMonitor states: {exc}") from exc
    return fresh, sum(e for _, e in parts)


def shift_streams(state: Mapping[str, Any], offset: int) -> dict[str, Any]:
    """A copy of a monitor state with every stream moved up by ``offset``."""
    return {**state, "tracker": CoverageTracker.shift_streams(state["tracker"], offset)}


def stream_span(state: Mapping[str, Any]) -> int:
    """1 + the highest stream number in a monitor state (0 when it holds no run)."""
    return CoverageTracker.stream_span(state["tracker"])

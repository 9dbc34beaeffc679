"""When a monitor logs (``LogSchedule``) and the window's tracker of recent runs (``RecentRuns``)."""

from __future__ import annotations

import warnings
from collections import deque

import numpy as np

from seffi.callbacks.config import LogUnit
from seffi.coverage.tracker import CompleteRuns, CoverageTracker

__all__ = ["LogSchedule", "RecentRuns"]


class LogSchedule:
    """Every ``every`` episodes (or steps) a log; every ``curves_every``-th log (the first too) a snapshot.

    Steps must increase (W&B drops a step that goes back): a step not above the last logged one is
    refused, with one warning per schedule.

    Args:
        every: Episodes (or steps) between logs.
        unit: What ``every`` counts: "episodes" or "steps".
        curves_every: Every this many logs is a curve snapshot.
    """

    def __init__(self, every: int, unit: LogUnit, curves_every: int) -> None:
        self.every, self.unit, self.curves_every = int(every), unit, int(curves_every)
        self.n_logs = 0
        self.last_step: int | None = None
        self._episodes_at, self._step_at, self._warned = 0, None, False

    def due(self, step: int, episodes: int) -> bool:
        """Whether a log is due at ``step`` after ``episodes`` episodes. O(1)."""
        if episodes == 0:
            return False
        if self.unit == "episodes":
            return episodes - self._episodes_at >= self.every
        return self._step_at is None or step - self._step_at >= self.every

    def start(self, step: int, episodes: int) -> bool:
        """A log is attempted at ``step``: restart the count; False when the step does not increase."""
        self._episodes_at, self._step_at = episodes, step
        if self.last_step is None or step > self.last_step:
            return True
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"coverage log at step {step} skipped: steps must increase (last logged {self.last_step}); "
                "the data stays in the tracker and the final report",
                RuntimeWarning,
                stacklevel=3,
            )
        return False

    @property
    def snapshot(self) -> bool:
        """Whether the next log is a curve snapshot."""
        return self.n_logs % self.curves_every == 0

    def done(self, step: int) -> None:
        """A log was written at ``step``."""
        self.last_step = step
        self.n_logs += 1


class RecentRuns:
    """The window's tracker: the complete runs of the last ``window`` episodes, as `CompleteRuns`.

    The monitor folds buffered episodes into its tracker in batches (at every log, and every
    ``flush_every`` episodes); the runs a batch completes (``tracker.done``) enter the window dated
    by the batch's first episode, and leave it, their sums subtracted, once that batch starts more
    than ``window`` episodes back (the latest batch that completed runs always stays). With logs
    every ``log_every`` episodes and ``window`` a multiple of it, the window holds exactly the runs
    completed in the last ``window`` episodes.

    Args:
        window: Episodes the window reaches back.
        tracker: The tracker whose runs completing from now on the window follows.
        since: The episode count the next batch starts at.
        loaded: ``tracker`` holds runs older than any window (a loaded state).
    """

    def __init__(self, window: int, tracker: CoverageTracker, *, since: int = 0, loaded: bool = False):
        self.window = int(window)
        self.runs = CompleteRuns(tracker.budget)  # type: ignore[arg-type]
        self.batches: deque[tuple[int, np.ndarray]] = deque()  # (batch start, slots it completed)
        self.mark = tracker.n_done  # runs complete already stay out
        self.start = int(since)
        #: Some complete runs of the tracker are outside the window.
        self.dropped = bool(loaded)

    def folded(self, tracker: CoverageTracker, end: int) -> None:
        """A batch ending at episode count ``end`` went into ``tracker``: its completed runs enter."""
        slots, self.mark = tracker.done[self.mark :].copy(), tracker.n_done
        if slots.size:
            self.batches.append((self.start, slots))
            self.runs.add(tracker.runs, slots, tracker.assigner.slot_input[slots], tracker.m)
        self.start = int(end)

    def at(self, episodes: int, tracker: CoverageTracker) -> tuple[CompleteRuns | None, int]:
        """(the window's runs at episode count ``episodes``, the episode it starts at).

        The runs are None while the window holds every complete run of ``tracker`` (nothing left
        yet): the cumulative numbers are then the window's.
        """
        while len(self.batches) > 1 and self.batches[0][0] < episodes - self.window:
            _, slots = self.batches.popleft()
            self.runs.add(tracker.runs, slots, tracker.assigner.slot_input[slots], tracker.m, -1)
            self.dropped = True
        start = self.batches[0][0] if self.batches else min(self.start, int(episodes))
        return (self.runs if self.dropped else None), start

    def slots(self) -> np.ndarray:
        """Slots of the runs in the window."""
        return np.concatenate([s for _, s in self.batches]) if self.batches else np.zeros(0, dtype=np.int64)

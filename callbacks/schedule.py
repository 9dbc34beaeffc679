"""When a monitor logs (``LogSchedule``) and which runs a streaming log covers (``RecentRuns``)."""

from __future__ import annotations

import warnings
from collections import deque
from typing import Any

import numpy as np

from seffi.callbacks.config import LogUnit

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
    """Which complete runs fall in a streaming log's window: those completed in the last ``window`` episodes.

    The monitor folds buffered episodes into its tracker in batches (at every log, and every
    ``flush_every`` episodes); a batch covers the episodes ``(start, end]`` ingested since the
    previous fold, and every run that reached K in it completed within them. A log at episode
    count ``E`` uses the runs of the batches that lie entirely in the last ``window`` episodes
    (``start >= E - window``), and always those of the latest batch that completed any run. With
    logs every ``log_every`` episodes and ``window`` a multiple of it, that is exactly the runs
    completed in the last ``window`` episodes. Cost per fold: the runs still open; per log: the runs
    in the window.

    Args:
        window: Episodes the window reaches back.
    """

    def __init__(self, window: int) -> None:
        self.window = int(window)
        self.reset()

    def reset(self, tracker: Any = None, *, since: int = 0) -> None:
        """Start over: no run in the window; ``tracker``'s runs so far (if given) stay out of it.

        Args:
            tracker: A tracker whose existing runs are older than any window (a loaded state).
            since: The episode count the next batch starts at.
        """
        self.batches: deque[tuple[int, np.ndarray]] = deque()  # (batch start, slots completed in it)
        self.dropped = tracker is not None  # some complete runs are outside the window
        self.start = int(since)  # where the next batch starts
        if tracker is None:
            self._open, self._seen = np.zeros(0, dtype=np.int64), 0
        else:
            S = tracker.assigner.n_slots
            self._open = np.flatnonzero(tracker.runs.n[:S] < tracker.budget).astype(np.int64)
            self._seen = S

    def folded(self, tracker: Any, end: int) -> None:
        """A batch ending at episode count ``end`` went into ``tracker``: date the runs it completed."""
        S = tracker.assigner.n_slots
        cand = np.concatenate([self._open, np.arange(self._seen, S, dtype=np.int64)])
        self._seen = S
        done = tracker.runs.n[cand] >= tracker.budget
        if done.any():
            self.batches.append((self.start, cand[done]))
        self._open = cand[~done]
        self.start = int(end)

    def slots(self, episodes: int) -> tuple[np.ndarray | None, int]:
        """(slots of the runs in the window at episode count ``episodes``, the episode it starts at).

        The slots are ``None`` when the window holds every complete run of the tracker (nothing
        dropped yet): then the cumulative numbers are the window's.
        """
        while len(self.batches) > 1 and self.batches[0][0] < episodes - self.window:
            self.batches.popleft()
            self.dropped = True
        start = self.batches[0][0] if self.batches else min(self.start, int(episodes))
        if not self.dropped:
            return None, start
        if not self.batches:
            return np.zeros(0, dtype=np.int64), start
        return np.concatenate([s for _, s in self.batches]), start

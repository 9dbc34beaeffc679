"""When a monitor logs (``LogSchedule``) and which runs a streaming log covers (``RecentRuns``)."""

from __future__ import annotations

import warnings
from collections import deque
from typing import Any

import numpy as np

from seffi.callbacks.config import LogUnit
from seffi.coverage.sums import GroupTotals, InputSums, add_runs
from seffi.coverage.sums_curves import point_from_totals

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


class WindowBatch:
    """The runs one fold completed: their slots and, per input, the sums of those runs.

    Args:
        tracker: The tracker the runs are in.
        parts: ``tracker.completed`` entries of one fold: (slots, input codes, their InputSums).
    """

    def __init__(self, tracker: Any, parts: list[tuple[np.ndarray, np.ndarray, InputSums]]) -> None:
        self.slots = np.concatenate([p[0] for p in parts])
        codes = np.concatenate([p[1] for p in parts])
        self.part = InputSums(tracker.budget, squares=False)
        self.part.inc = np.concatenate([p[2].inc.astype(np.int64) for p in parts])
        self.part.n_runs = np.concatenate([p[2].n_runs for p in parts])
        if len(parts) > 1:  # one input may complete runs in several parts of a fold
            codes, row = np.unique(codes, return_inverse=True)
            merged = InputSums(tracker.budget, squares=False)
            merged.grow(codes.size)
            np.add.at(merged.inc, row, self.part.inc)
            np.add.at(merged.n_runs, row, self.part.n_runs)
            merged.inc, merged.n_runs = merged.inc[: codes.size], merged.n_runs[: codes.size]
            self.part = merged
        self.codes, self.m = codes, tracker.m[codes]
        self.samples = int(tracker.runs.n[self.slots].sum())
        self.valid = int(tracker.runs.n_valid[self.slots].sum())


class WindowSums:
    """The sums of the runs in a streaming window, kept as batches enter and leave.

    The tracker's kind of streamed sums (`InputSums` and `GroupTotals`, updated by
    `seffi.coverage.sums.add_runs`), a row per input code: integer sums, so a window's point
    estimates equal those recomputed from its runs (``tracker.point(slots=...)``) whatever the order
    batches came and went in; a log costs O(groups x K) and a batch O(its inputs x K).

    Args:
        budget: K.
    """

    def __init__(self, budget: int) -> None:
        self.budget = int(budget)
        self.sums = InputSums(self.budget, dtype=np.int8, squares=False)
        self.totals = GroupTotals(self.budget)
        self.runs = self.samples = self.valid = 0

    def apply(self, batch: WindowBatch, sign: int) -> None:
        """Add (``sign`` = 1) or remove (-1) a batch's runs."""
        if batch.codes.size == 0:
            return
        self.sums.grow(int(batch.codes[-1]) + 1)
        add_runs(self.sums, self.totals, batch.codes, batch.part, batch.m, sign)
        self.runs += sign * int(batch.slots.size)
        self.samples += sign * batch.samples
        self.valid += sign * batch.valid

    def point(self) -> dict[str, Any]:
        """Point estimates over the window's runs (``tracker.point(slots=...)``, O(groups x K))."""
        return point_from_totals(self.totals)

    def input_codes(self) -> np.ndarray:
        """Codes of the inputs with a run in the window, ascending."""
        return np.flatnonzero(self.sums.n_runs > 0)


class RecentRuns:
    """Which complete runs fall in a streaming log's window: those completed in the last ``window`` episodes.

    A log at episode count ``E`` uses the runs completed in the fold batches that lie entirely in the
    last ``window`` episodes (those starting at ``E - window`` or later), and always those of the latest
    batch that completed any run. With logs every ``log_every`` episodes and ``window`` a multiple of
    it, that is exactly the runs completed in the last ``window`` episodes.

    Args:
        window: Episodes the window reaches back.
    """

    def __init__(self, window: int) -> None:
        # The monitor folds buffered episodes into its tracker in batches (at every log, and every
        # flush_every episodes); a batch covers the episodes (start, end] ingested since the previous
        # fold, and every run that reached K in it completed within them (tracker.completed reports
        # them). The window's sums (WindowSums) change as batches enter and leave: a log costs
        # O(groups x K).
        self.window = int(window)
        self.batches: deque[tuple[int, WindowBatch]] = deque()
        self.sums: WindowSums | None = None
        self.dropped, self.start = False, 0

    def reset(self, tracker: Any, *, since: int = 0, loaded: bool = False) -> None:
        """Start over on ``tracker``: no run in the window; runs it holds already stay out of it.

        Args:
            tracker: The tracker whose completed runs the window follows (from now on).
            since: The episode count the next batch starts at.
            loaded: ``tracker`` holds runs older than any window (a loaded state).
        """
        self.batches = deque()  # (batch start, the runs completed in it)
        self.sums = WindowSums(tracker.budget)
        self.dropped = bool(loaded)  # some complete runs are outside the window
        self.start = int(since)  # where the next batch starts
        tracker.completed = []

    def folded(self, tracker: Any, end: int) -> None:
        """A batch ending at episode count ``end`` went into ``tracker``: date the runs it completed."""
        parts, tracker.completed = tracker.completed or [], []
        if parts:
            batch = WindowBatch(tracker, parts)
            self.batches.append((self.start, batch))
            self.sums.apply(batch, 1)  # type: ignore[union-attr]
        self.start = int(end)

    def _drop_old(self, episodes: int) -> None:
        while len(self.batches) > 1 and self.batches[0][0] < episodes - self.window:
            _, batch = self.batches.popleft()
            self.sums.apply(batch, -1)  # type: ignore[union-attr]
            self.dropped = True

    def slots(self, episodes: int) -> tuple[np.ndarray | None, int]:
        """(slots of the runs in the window at episode count ``episodes``, the episode it starts at).

        The slots are ``None`` when the window holds every complete run of the tracker (nothing
        dropped yet): then the cumulative numbers are the window's.
        """
        self._drop_old(episodes)
        start = self.batches[0][0] if self.batches else min(self.start, int(episodes))
        if not self.dropped:
            return None, start
        if not self.batches:
            return np.zeros(0, dtype=np.int64), start
        return np.concatenate([b.slots for _, b in self.batches]), start

"""When a monitor logs (``LogSchedule``) and the window's tracker of recent runs (``RecentRuns``)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from seffi.callbacks.config import LogUnit
from seffi.coverage.tracker import CompleteRuns, CoverageTracker

__all__ = ["LogSchedule", "RecentRuns"]


class LogSchedule:
    """Every ``every`` episodes (or steps) a log; every ``curves_every``-th log (the first too) a snapshot.

    A snapshot over U inputs costs O(U x K): the next waits until K x U more episodes came, so its
    cost per episode stays flat in inputs. Steps must increase (W&B drops a step that goes back): a
    step not above the last logged one is refused, with one warning per schedule.
    """

    def __init__(self, every: int, unit: LogUnit, curves_every: int, budget: int = 1) -> None:
        self.every, self.unit, self.curves_every = int(every), unit, int(curves_every)
        self.budget = int(budget)
        self.n_logs = 0
        self.last_step: int | None = None
        self._episodes_at, self._step_at, self._warned = 0, None, False
        self._snapshot_after = 0  # episodes before which no snapshot comes

    def resume(self, n_logs: int, last_step: int | None, episodes: int) -> None:
        """Go on from a checkpoint written at the log of ``last_step``, the ``n_logs``-th, at ``episodes``."""
        self.n_logs, self.last_step, self._step_at = n_logs, last_step, last_step
        self._episodes_at = episodes if n_logs else 0

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
        """Whether the log just started is a curve snapshot."""
        return self.n_logs % self.curves_every == 0 and self._episodes_at >= self._snapshot_after

    def done(self, step: int, *, snapshot_inputs: int | None = None) -> None:
        """A log was written at ``step``; a snapshot's ``snapshot_inputs`` space the next one."""
        self.last_step = step
        self.n_logs += 1
        if snapshot_inputs is not None:
            self._snapshot_after = self._episodes_at + self.budget * int(snapshot_inputs)


class RecentRuns:
    """The window's tracker: the complete runs whose every sample came in the last ``window`` episodes.

    A run is dated by the first episode of the folded batch that opened it (at most one batch
    early). A completed run enters the window if its date is at most ``window`` episodes before the
    end of the batch that completed it, and leaves it, its sums subtracted, once older. It follows
    the runs of ``tracker`` opened from episode count ``since`` on; ``loaded``: ``tracker`` holds
    older runs (a loaded state).
    """

    def __init__(self, window: int, tracker: CoverageTracker, *, since: int = 0, loaded: bool = False):
        self.window = int(window)
        self.runs = CompleteRuns(tracker.budget, reuse_rows=True)  # type: ignore[arg-type]
        #: Date -> the window's runs of that date, as added: (slots, input codes, their sums or None).
        self.held: dict[int, list[tuple[np.ndarray, Any, Any]]] = {}
        self.mark = tracker.n_done  # runs complete already stay out
        #: (tracker.n_done, episode count) at the end of each batch folded since the window was last read.
        self._ends: list[tuple[int, int]] = []
        # Slot ranges and their dates: the runs opened from slot ``_first[i]`` on are dated
        # ``_date[i]`` (the last range: the next batch's); a slot below ``_first[0]`` is older
        # than the window (opened before it, or in a range dropped as too old).
        self._first = np.array([tracker.assigner.n_slots], dtype=np.int64)
        self._date = np.array([int(since)], dtype=np.int64)
        self.since = int(since)
        #: Some complete runs of the tracker are outside the window.
        self.dropped = bool(loaded)

    def folded(self, tracker: CoverageTracker, end: int) -> None:
        """A batch ending at episode count ``end`` went into ``tracker``: the runs it opened are dated.

        The runs it completed enter at the next read (`at`), judged by this ``end``: a fold stays O(1).
        """
        opened = tracker.assigner.n_slots
        if opened > self._first[-1]:  # this batch opened runs: the next batch's get its own date
            self._first = np.append(self._first, opened)
            self._date = np.append(self._date, int(end))
        else:  # no run of the last range exists yet: its date moves on, no dated run changes
            self._date[-1] = int(end)
        if tracker.n_done > (self._ends[-1][0] if self._ends else self.mark):
            self._ends.append((tracker.n_done, int(end)))

    def _enter(self, tracker: CoverageTracker) -> None:
        """The runs completed in the batches folded since the last read enter, if recent at their end."""
        if not self._ends:
            return
        done, ends = np.array(self._ends, dtype=np.int64).T
        slots, self._ends = tracker.done[self.mark : done[-1]].copy(), []
        end = np.repeat(ends, np.diff(done, prepend=self.mark))  # each run's batch end
        self.mark = int(done[-1])
        # A run's range keeps its date once the run exists: dating now is dating at its batch.
        at = np.searchsorted(self._first, slots, side="right") - 1
        date = np.where(at >= 0, self._date[np.maximum(at, 0)], np.iinfo(np.int64).min)
        recent = date >= end - self.window
        self.dropped |= not recent.all()
        slots, date = slots[recent], date[recent]
        u = tracker.assigner.slot_input
        self.runs.add(tracker.runs, slots, u[slots], tracker.m, known=tracker.complete.last)
        days = np.unique(date).tolist()
        for d in days:  # runs of one date (the usual case) leave with the sums they came with
            last = self.runs.last if len(days) == 1 else (slots[date == d], None, None)
            self.held.setdefault(d, []).append(last)  # type: ignore[arg-type]

    def at(self, episodes: int, tracker: CoverageTracker) -> tuple[CompleteRuns | None, int, int | None]:
        """(the window's runs at ``episodes``, episodes it reaches back, age of its oldest run).

        The runs are None while the window holds every complete run (the cumulative numbers are
        then the window's); the age is None for an empty window.
        """
        self._enter(tracker)
        cutoff = int(episodes) - self.window
        for d in [d for d in self.held if d < cutoff]:
            for held in self.held.pop(d):  # integer sums: removed in any order
                u = tracker.assigner.slot_input[held[0]]
                self.runs.add(tracker.runs, held[0], u, tracker.m, -1, known=held)
            self.dropped = True
        # Ranges dated before the cutoff are older than any later window (the last is the next batch's).
        old = min(int(np.searchsorted(self._date, cutoff)), self._date.size - 1)
        self._first, self._date = self._first[old:], self._date[old:]
        age = int(episodes) - min(self.held) if self.held else None
        return (self.runs if self.dropped else None), min(self.window, int(episodes) - self.since), age

    def slots(self) -> np.ndarray:
        """Slots of the runs in the window as of its last read (`at`)."""
        parts = [s for held in self.held.values() for s, _, _ in held]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

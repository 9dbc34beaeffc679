"""``LogSchedule``: when a monitor logs, which logs are curve snapshots, and that steps increase."""

from __future__ import annotations

import warnings

from seffi.callbacks.config import LogUnit

__all__ = ["LogSchedule"]


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

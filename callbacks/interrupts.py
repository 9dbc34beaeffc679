"""Ctrl-C and SIGTERM during training: stop at the next step, write what was measured, then stop as asked.

A trainer's callback cannot catch an exception raised inside the trainer's loop, so a plain Ctrl-C
loses every measurement the callback holds. :class:`StopOnSignal` turns the first SIGINT or SIGTERM
into a request the adapter passes on at its next hook (SB3: ``_on_step`` returns False; TRL:
``control.should_training_stop``); the trainer then ends its loop normally and calls the adapter's
end-of-training hook, which writes the report (marked interrupted) and calls :meth:`StopOnSignal.reraise`
to deliver the signal as the program expects: ``KeyboardInterrupt`` for SIGINT, the previous SIGTERM
handler (by default: the process ends) for SIGTERM. A second signal while stopping acts at once, as
it would without seffi. Handlers are installed only from the main thread.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["StopOnSignal"]


class StopOnSignal:
    """The first SIGINT/SIGTERM of a training run as a stop request (see the module docstring).

    Example:
        >>> stop = StopOnSignal()
        >>> stop.install(); stop.requested  # doctest: +SKIP
        False
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """Whether a signal asked training to stop."""
        return self.received is not None

    def install(self) -> bool:
        """Take over SIGINT and SIGTERM until :meth:`restore`; False (nothing done) off the main thread."""
        if threading.current_thread() is not threading.main_thread() or self._previous:
            return False
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return True

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signum
        self.restore()  # a second signal acts at once
        print(
            f"[seffi] {signal.Signals(signum).name}: stopping at the next step and writing the report "
            "(send it again to stop at once)",
            flush=True,
        )

    def restore(self) -> None:
        """Give SIGINT and SIGTERM back to their previous handlers."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def reraise(self) -> None:
        """Restore the handlers, then deliver a received signal as the program expects."""
        self.restore()
        sig, self.received = self.received, None
        if sig == signal.SIGINT:
            raise KeyboardInterrupt
        if sig is not None:
            signal.raise_signal(sig)

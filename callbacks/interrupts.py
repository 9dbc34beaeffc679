"""Ctrl-C and SIGTERM during training: stop at the next step, write what was measured, then stop as asked.

`StopOnSignal` turns the first SIGINT/SIGTERM into a stop request the adapter passes on at its next
hook; the report is written (marked interrupted), then `StopOnSignal.reraise` delivers the signal. A
second signal acts at once; after the trainer's loop frame is gone, signals go to the previous handler.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["StopOnSignal"]


class StopOnSignal:
    """The first SIGINT/SIGTERM of a training run as a stop request (see the module docstring)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._loop: tuple[int, Any] | None = None  # (id, code) of the trainer's loop frame

    @property
    def requested(self) -> bool:
        """Whether a signal asked training to stop."""
        return self.received is not None

    def install(self, loop: Iterable[str] = ()) -> bool:
        """Take over SIGINT and SIGTERM until `restore` (False off the main thread).

        ``loop``: names of the trainer's loop function; the nearest calling frame of that name is it.
        """
        if threading.current_thread() is not threading.main_thread() or self._previous:
            return False
        names, frame = set(loop), sys._getframe(1)
        while names and frame is not None and frame.f_code.co_name not in names:
            frame = frame.f_back
        self._loop = (id(frame), frame.f_code) if names and frame is not None else None
        here = sys._getframe()
        for sig in self.SIGNALS:
            previous = signal.signal(sig, self._handle)
            owner = getattr(previous, "__self__", None)
            while isinstance(owner, StopOnSignal) and owner is not self and not owner._running(here):
                previous = owner._previous.get(sig, signal.SIG_DFL)  # a dead trainer's handler: skip it
                owner = getattr(previous, "__self__", None)
            self._previous[sig] = previous
        return True

    def _running(self, frame: Any) -> bool:  # is the trainer's loop frame on the interrupted stack?
        if self._loop is None:
            return True
        while frame is not None:
            if id(frame) == self._loop[0] and frame.f_code is self._loop[1]:
                return True
            frame = frame.f_back
        return False

    def _handle(self, signum: int, frame: Any) -> None:
        if not self._running(frame):  # the trainer died without its end hook: act as if never installed
            previous = self._previous.get(signum, signal.SIG_DFL)
            self.restore()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:
                os.kill(os.getpid(), signum)
            return
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

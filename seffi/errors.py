"""Exceptions with a message for a person: the CLI prints them as one line (others are bugs)."""

from __future__ import annotations


class SeffiError(ValueError):
    """A user error: bad input, bad config, an unusable path. The message says what to fix."""


class RunFolderExists(SeffiError):
    """The run folder already holds a seffi run; the message names it and says "pass --overwrite"."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so the same code writes what was measured; the CLI exits 143 for it."""

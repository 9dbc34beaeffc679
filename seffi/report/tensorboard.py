"""A TensorBoard sink: every logged ``seffi/*`` scalar as a TensorBoard scalar at its step.

For plain loops and the Gymnasium wrapper (the SB3 callback records through SB3's own logger). Events
are written by ``tensorboardX``; a writer that fails warns once and drops what follows.

Examples:
    >>> sink = TensorBoardSink("runs/tb")  # doctest: +SKIP
    >>> sink.log({"seffi/auc": 0.61, "seffi/gain_vs_iid": 0.2}, step=1024)  # doctest: +SKIP
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from seffi.errors import SeffiError

__all__ = ["TensorBoardSink", "tag"]

_NOT_IN_TAGS = re.compile(r"[^\w./-]")


def tag(key: str) -> str:
    """The TensorBoard tag of a seffi key: characters other than letters, digits and ``_ . / -`` become ``_``.

    Examples:
        >>> tag("seffi/coverage/k=4")
        'seffi/coverage/k_4'
    """
    return _NOT_IN_TAGS.sub("_", key)


class TensorBoardSink:
    """Writes each scalar of every `log` call as a TensorBoard scalar.

    Args:
        log_dir: The folder of the event files (TensorBoard's ``--logdir`` or a subfolder of it).

    Raises:
        SeffiError: ``tensorboardX`` is not installed (``pip install 'seffi[tensorboard]'``).
    """

    def __init__(self, log_dir: str | Path) -> None:
        try:
            from tensorboardX import SummaryWriter
        except ImportError as exc:
            raise SeffiError(
                "the TensorBoard sink needs tensorboardX: pip install 'seffi[tensorboard]'"
            ) from exc
        self.log_dir = Path(log_dir)
        self._writer: Any = SummaryWriter(logdir=str(self.log_dir))

    def _failed(self, exc: Exception) -> None:
        warnings.warn(
            f"TensorBoard logging stopped ({exc}); training and the local report go on", stacklevel=3
        )
        self._writer = None

    def log(self, data: Mapping[str, Any], step: int) -> None:
        """Every finite number of ``data`` at ``step`` (strings and NaN are left out)."""
        if self._writer is None:
            return
        try:
            for key, value in data.items():
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                    self._writer.add_scalar(tag(key), float(value), int(step))
            self._writer.flush()
        except Exception as exc:  # a full disk or a vanished folder must not stop training
            self._failed(exc)

    def log_snapshot(self, comparison: Any, step: int, scope: str | None = None) -> None:
        """Curves are the local report's and W&B's: TensorBoard gets the scalars."""

    def finish(self, report: Any = None, tracker_state: Mapping[str, Any] | None = None) -> None:
        """Flush and close the event file."""
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception as exc:
                self._failed(exc)
            self._writer = None

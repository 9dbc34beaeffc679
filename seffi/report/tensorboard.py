"""A TensorBoard sink (``tensorboardX``): every logged ``seffi/*`` scalar at its step; failures warn once."""

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
    """The TensorBoard tag of a seffi key: ``seffi/coverage/k=4`` -> ``seffi/coverage/k_4``."""
    return _NOT_IN_TAGS.sub("_", key)


class TensorBoardSink:
    """Writes each scalar of every `log` call as a TensorBoard scalar into ``log_dir``.

    Raises:
        SeffiError: ``tensorboardX`` is not installed (``pip install 'seffi[tensorboard]'``).
    """

    takes_tracker = True  # and ignores it

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
        """Every finite number of ``data`` at ``step``."""
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
        """Curves go to the local report and W&B only."""

    def finish(self, report: Any = None, tracker_state: Mapping[str, Any] | None = None) -> None:
        """Flush and close the event file."""
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception as exc:
                self._failed(exc)
            self._writer = None

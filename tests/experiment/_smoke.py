"""An isolated folder for a command-line smoke run: its own model cache, offline W&B and working folder."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def isolated_run(root: Path, **env: str) -> Iterator[None]:
    """Run the block in ``root`` with ``$SEFFI_CACHE`` = ``root/cache`` and offline W&B writing to ``root``.

    Args:
        root: The run's folder (the working folder inside the block).
        **env: Further environment variables for the block (``OMP_NUM_THREADS="1"``).
    """
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("SEFFI_CACHE", str(root / "cache"))
        mp.setenv("WANDB_DIR", str(root))
        mp.setenv("WANDB_MODE", "offline")
        for name, value in env.items():
            mp.setenv(name, value)
        mp.chdir(root)
        yield
    finally:
        mp.undo()

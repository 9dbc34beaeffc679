"""Shared test helpers."""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import subprocess
from types import ModuleType

import pytest

#: CI sets this so that a missing extra fails the run instead of silently skipping its tests.
REQUIRE_EXTRAS = os.environ.get("SEFFI_REQUIRE_EXTRAS", "") not in ("", "0", "false")
#: The test modules that need an extra (they call `require`); conftest marks their tests ``integration``.
NEEDS_EXTRA: set[str] = set()


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` (provided by ``seffi[extra]``) or skip — or fail when CI requires extras.

    Called at module level by the integration test files, so the skip must be module-level too
    (without ``allow_module_level`` pytest turns it into a collection error).
    """
    caller = inspect.currentframe().f_back  # type: ignore[union-attr]
    NEEDS_EXTRA.add(caller.f_globals.get("__name__", "") if caller else "")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"needs the '{extra}' extra (pip install -e '.[{extra}]'): {exc}"
        if REQUIRE_EXTRAS:
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)


def wandb_leet(run_dir: str | os.PathLike[str], *args: str) -> str:
    """The output of ``wandb leet inspect run_dir *args``: a W&B run read back by W&B's own CLI."""
    exe = shutil.which("wandb")
    assert exe, "the wandb CLI is installed with the wandb package"
    done = subprocess.run(
        [exe, "leet", "inspect", os.fspath(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout

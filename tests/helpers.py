"""Shared test helpers."""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import subprocess
from types import ModuleType
from typing import Any

import pytest

#: CI sets this so that a missing extra fails the run instead of silently skipping its tests.
REQUIRE_EXTRAS = os.environ.get("SEFFI_REQUIRE_EXTRAS", "") not in ("", "0", "false")
#: The test modules that need an extra (they call `require` at import); conftest marks their tests
#: ``integration``. A test that calls it inside its body carries the marker itself.
NEEDS_EXTRA: set[str] = set()


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` (provided by ``seffi[extra]``) or skip — or fail when CI requires extras.

    Called at module level by the integration test files, so the skip must be module-level too
    (without ``allow_module_level`` pytest turns it into a collection error).
    """
    caller = inspect.currentframe().f_back  # type: ignore[union-attr]
    if caller is not None and caller.f_code.co_name == "<module>":  # at import: the whole module
        NEEDS_EXTRA.add(caller.f_globals.get("__name__", ""))
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


def rows_batch(strategies: Any, rows: Any) -> Any:
    """An `EpisodeBatch` of plain rows: a row's ``env_index`` (default 0) is its sub-env, and a key
    whose value is None is left out (not reported)."""
    from seffi.episodes import parse_rows

    rows = list(rows)
    env = [r.get("env_index", 0) for r in rows]
    clean = [{k: v for k, v in r.items() if v is not None and k != "env_index"} for r in rows]
    return parse_rows(clean, strategies, env_index=env)

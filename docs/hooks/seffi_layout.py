"""MkDocs hook: let mkdocstrings read ``seffi.envs`` and ``seffi.callbacks`` from their source.

The repository keeps those two subpackages at the top level (``envs/``, ``callbacks/``) and maps them
into ``seffi`` through ``[tool.setuptools] package-dir``. Griffe, which reads sources without
importing them (so the SB3/RLlib/TRL adapters document without their extras), does not follow that
mapping, so this hook lays out the installed package shape as symlinks in a temporary folder and puts
it first on the python handler's search path.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

_ROOT = Path(__file__).resolve().parents[2]
_MAPPED = {"envs": "envs", "callbacks": "callbacks"}  # seffi.<name> -> repository folder
_tmp: Path | None = None


# Before mkdocstrings' own on_config, which creates the python handler with its search paths.
@event_priority(100)
def on_config(config: Any) -> Any:
    """Build the symlinked ``seffi`` tree and prepend it to mkdocstrings' python ``paths``."""
    global _tmp
    _tmp = Path(tempfile.mkdtemp(prefix="seffi-docs-"))
    pkg = _tmp / "seffi"
    pkg.mkdir()
    for entry in (_ROOT / "seffi").iterdir():
        if entry.name not in _MAPPED and entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name, folder in _MAPPED.items():
        (pkg / name).symlink_to(_ROOT / folder)
    python = config["plugins"]["mkdocstrings"].config["handlers"].setdefault("python", {})
    python["paths"] = [str(_tmp), *python.get("paths", [])]
    return config


def on_shutdown() -> None:
    """Remove the temporary tree."""
    if _tmp is not None:
        shutil.rmtree(_tmp, ignore_errors=True)

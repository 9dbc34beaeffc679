"""seffi's on-disk cache: its root folder and the library stack a cached numeric result depends on."""

from __future__ import annotations

import os
import platform
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path


def default_cache_dir() -> Path:
    """``$SEFFI_CACHE`` if set, else ``~/.cache/seffi/models``."""
    env = os.environ.get("SEFFI_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "seffi" / "models"


#: Distributions whose installed version is part of every model's cache key (see `numerics_stack`).
NUMERICS_PACKAGES = ("torch", "transformers", "tokenizers", "numpy")


@lru_cache(maxsize=1)
def _installed_versions() -> tuple[tuple[str, str], ...]:
    # Package metadata, not ``import torch``: a key costs milliseconds, and this module stays torch-free.
    out = []
    for name in NUMERICS_PACKAGES:
        try:
            out.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append((name, "absent"))
    return tuple(out)


def numerics_stack() -> dict[str, str]:
    """The parts of this machine's software stack that change the numbers training computes.

    Every cached model's key hashes this dict, so another stack trains its own model; what is in it
    and why is listed in docs/ladder.md ("The cache key"). Read without importing torch.

    Returns:
        ``{component: version}``; a package that is not installed reads ``"absent"``.
    """
    stack = dict(_installed_versions())
    stack["python"] = f"{sys.version_info.major}.{sys.version_info.minor}"
    stack["machine"] = platform.machine().lower()
    stack["torch_threads"] = os.environ.get("SEFFI_TORCH_THREADS", "1").strip()
    return stack

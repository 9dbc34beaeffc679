"""Small language models trained here: a base LM per task and a latent mixture of generators (rung 2).

The exploration ladder's second rung (``DESIGN.md``, "The exploration ladder"): a tiny decoder-only
transformer is trained by supervised fine-tuning on a task's training rows (drawn with the task's
skewed base law), and a mixture of generators over ``L`` latent codes — one code token in front of the
trace — is learned from the same rows by hard EM, without reading a strategy label.

``seffi/<Name>LatentLM-v0`` (`seffi.models.latent_env`) is the Gymnasium env on these models;
`seffi.envs` registers it by a string entry point, so the adapters never import this package.

This package needs the ``lm`` extra (torch, transformers, tokenizers, safetensors). Importing
``seffi.models`` itself is cheap; the submodules import torch. `require_lm` raises one readable
`SeffiError` naming the extra when it is missing.

Examples:
    >>> from seffi.models import LMConfig, train_ladder_models       # doctest: +SKIP
    >>> models = train_ladder_models(LMConfig(task="edit_script"))    # doctest: +SKIP
    >>> models.mixture.sample(inputs, codes, rng)                     # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

from seffi.errors import SeffiError

#: The extra that provides this package's dependencies.
LM_EXTRA = "lm"

_EXPORTS = {
    "LMConfig": "seffi.models.config",
    "MixtureConfig": "seffi.models.config",
    "TaskLM": "seffi.models.lm",
    "LadderModels": "seffi.models.cache",
    "train_ladder_models": "seffi.models.cache",
    "load_ladder_models": "seffi.models.cache",
    "default_cache_dir": "seffi._cache",
}


class MissingExtraError(SeffiError):
    """An optional dependency group is not installed."""


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """The names among ``modules`` that do not import, in order."""
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


def require_lm() -> None:
    """Raise a one-line `MissingExtraError` unless torch and transformers import."""
    missing = missing_modules(("torch", "transformers", "tokenizers", "safetensors"))
    if missing:
        raise MissingExtraError(
            f"learned generators need the '{LM_EXTRA}' extra ({', '.join(missing)} missing): "
            f"pip install 'seffi[{LM_EXTRA}]' (on a CPU-only machine, PyTorch's CPU build first)"
        )


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        if name not in ("LMConfig", "MixtureConfig", "default_cache_dir"):
            require_lm()
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'seffi.models' has no attribute {name!r}")


__all__ = ["LM_EXTRA", "MissingExtraError", "require_lm", *_EXPORTS]

"""A tiny base LM + mixture shared by the model, env and ladder tests (trained once per session, cached)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

#: edit_script with 100 training inputs x 2 rows, a 1-layer d=32 GPT-2 and 2 short EM rounds: ~3 s of CPU.
TINY: dict[str, Any] = {
    "task": "edit_script",
    "n_train_inputs": 100,
    "rows_per_input": 2,
    "d_model": 32,
    "n_layer": 1,
    "n_head": 2,
    "epochs": 2,
    "batch_size": 32,
    "lr": 3e-3,
    "mixture": {"rounds": 2, "epochs_per_round": 0.5, "final_epochs": 0.5, "lr": 3e-3},
}


def tiny_cfg(**overrides: Any) -> Any:
    from seffi.models.config import LMConfig

    return LMConfig(**{**TINY, **overrides})


def tiny_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's model cache: the first test module trains the tiny models, later ones load them."""
    return tmp_path_factory.getbasetemp() / "seffi-models"


def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny base LM and mixture (trained once per session, then loaded from the cache)."""
    from seffi.models.cache import train_ladder_models

    return train_ladder_models(tiny_cfg(), tiny_cache(tmp_path_factory))

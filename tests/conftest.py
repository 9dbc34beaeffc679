"""Test session settings: W&B never touches the network or the user's home from tests."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("WANDB_DISABLE_GIT", "true")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of a module that needs an extra (``tests.helpers.require``) carry the ``integration`` marker."""
    from tests.helpers import NEEDS_EXTRA

    for item in items:
        if getattr(item.module, "__name__", None) in NEEDS_EXTRA:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _isolated_wandb_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path_factory.mktemp("wandb")
    monkeypatch.setenv("WANDB_DIR", str(root))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(root / "cache"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(root / "config"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(root / "data"))

"""``--learner pkg:factory`` finds a package in the current directory without setting PYTHONPATH."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from seffi.cli.lane import load_factory


def test_learner_package_in_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The console script's sys.path lacks the cwd; the lane adds it."""
    pkg = tmp_path / "mylearnerpkg_cwd"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    code = "from seffi.lanes import VaultLearner\n\n\ndef make():\n    return VaultLearner()\n"
    (pkg / "learners.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    # As under the `seffi` console script: neither "" nor the working directory is on sys.path.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "mylearnerpkg_cwd", raising=False)
    factory = load_factory("mylearnerpkg_cwd.learners:make")
    assert type(factory()).__name__ == "VaultLearner"
    assert sys.path[0] == str(tmp_path)

"""Every examples/*.py runs with --smoke as a subprocess (what a user would type)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

#: Example file prefix -> (module, extra) the example needs; others need only the core install.
NEEDS = {"sb3_": ("stable_baselines3", "sb3"), "rllib_": ("ray.rllib", "rllib"), "trl_": ("trl", "trl")}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_smoke(path: Path, tmp_path: Path) -> None:
    for prefix, (module, extra) in NEEDS.items():
        if path.name.startswith(prefix):
            require(module, extra)
    env = {**os.environ, "WANDB_MODE": "offline", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, str(path), "--smoke"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{path.name} --smoke failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"

"""The TRL example under two real processes (accelerate, gloo on CPU).

``accelerate launch --multi_gpu --num_processes 2`` with ``ACCELERATE_USE_CPU=1`` starts two torchrun
workers on CPU (gloo). (``accelerate launch --cpu --num_processes 2`` starts *one* process in
accelerate 1.x: its CPU path launches several only through MPI.) Each GRPO group of 8 completions is
split 4 + 4 over the ranks. Every rank records its completions independently (a zero-weight reward
function); the merged tracker on rank 0 must equal a tracker built by hand from those records, and
both ranks must log the same seffi keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import require

# ruff: noqa: E402
require("trl", "trl")
require("accelerate", "trl")
require("torch", "lm")

from seffi.coverage import CoverageTracker

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_coverage.py"
#: A small grid_routes base LM that writes some valid traces (~8 %) after ~15 s of CPU training.
LM = {
    "task": "grid_routes",
    "n_train_inputs": 280,
    "rows_per_input": 4,
    "d_model": 32,
    "n_layer": 1,
    "n_head": 2,
    "epochs": 6,
    "batch_size": 32,
    "lr": 3e-3,
}


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    from seffi.models.config import LMConfig
    from seffi.models.grpo import base_lm_folder

    root = tmp_path_factory.mktemp("two")
    model = base_lm_folder(LMConfig(**LM), root / "cache")
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "WANDB_MODE": "offline", "MPLBACKEND": "Agg"}
    env["SEFFI_CACHE"] = str(root / "cache")
    # This interpreter's launcher: an `accelerate` on PATH may belong to another Python.
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(EXAMPLE),
        "--smoke",
        "--model-dir",
        str(model),
        "--per-device-batch",
        "4",
        "--record-dir",
        str(root / "rec"),
        "--out-dir",
        str(root / "out"),
    ]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-3000:]
    return root, seconds


def _records(root: Path) -> tuple[dict, dict]:
    r0 = json.loads((root / "rec" / "rank0.json").read_text())
    r1 = json.loads((root / "rec" / "rank1.json").read_text())
    return r0, r1


def test_merged_tracker_equals_the_independent_record(two_process_run: tuple[Path, float]) -> None:
    """Rank 0's tracker == one built from both ranks' own records (groups straddle)."""
    from seffi.tasks import get_task

    root, seconds = two_process_run
    r0, r1 = _records(root)
    assert (r0["world"], r1["world"]) == (2, 2)
    per_rank = 4
    steps = 3  # --smoke
    assert len(r0["completions"]) == len(r1["completions"]) == steps * per_rank
    task = get_task("grid_routes")
    inputs = {x.id: x for x in task.make_inputs(4 + 4, seed=0)}  # the example's draw (--smoke)
    ref = CoverageTracker(strategies=task.strategies(), task=task.name)
    runs: dict[str, int] = {}
    matched = 0
    for step in range(steps):
        batch = r0["completions"][step * per_rank : (step + 1) * per_rank]
        batch += r1["completions"][step * per_rank : (step + 1) * per_rank]
        assert len({pid for pid, _ in batch}) == 1  # one group of 8, split 4 + 4 over the ranks
        pid = batch[0][0]
        run = runs[pid] = runs.get(pid, -1) + 1
        for _, text in batch:
            res = task.validate_y_text(inputs[pid], text)
            matched += bool(res.strategy_matches)
            ref.update(pid, res.strategy_matches, valid=res.valid, stream=run)
    merged = CoverageTracker.from_state_dict(r0["tracker"])
    assert merged.n_samples == ref.n_samples == 8 * steps and len(merged) == len(ref)
    a, b = merged.curves(8, n_boot=0), ref.curves(8, n_boot=0)
    for name in ("coverage", "novelty", "expected_new", "full_coverage", "valid_coverage", "runs_at_k"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=0, err_msg=name)

    def strip(st):  # every run's state without its stream number
        runs_, ids = st["runs"], st["inputs"]["input_id"]
        fields = ("n", "n_valid", "first_valid", "first_hit", "first_valid_hit")
        return sorted(
            json.dumps([ids[u], *(runs_[f][r] for f in fields)]) for r, u in enumerate(runs_["input"])
        )

    assert strip(merged.state_dict()) == strip(ref.state_dict())
    print(f"two-process run: {seconds:.1f} s wall, {matched} of {8 * steps} completions matched a strategy")


def test_every_rank_logs_the_same_seffi_keys(two_process_run: tuple[Path, float]) -> None:
    """No rank logs a seffi key another rank never logs (coverage and evaluation)."""
    root, _ = two_process_run
    r0, r1 = _records(root)
    assert r0["log_keys"] == r1["log_keys"]
    keys = set().union(*map(set, r0["log_keys"]))
    assert {"seffi/auc", "seffi/coverage/k=8", "seffi/eval/valid@1", "seffi/eval/crossover_k"} <= keys
    assert (root / "out" / "report.json").is_file() and not (root / "out-2").exists()  # rank 0 writes once

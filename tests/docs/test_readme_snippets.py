"""The README's "attach it to your loop" snippets run as written, on a user's env and a user's model.

The SB3 snippet imports ``MyEnv`` from ``my_project``: here that module is the shared researcher's env
(``tests.integration.user_env``, written without seffi imports) with K = 8 samples per input. The TRL
snippet hands GRPOTrainer ``"path/to/model"``: here a tiny randomly initialised causal LM and its
tokenizer saved to a folder, as a user's checkpoint would be. Only the training length (and, for TRL,
the CPU settings) is cut down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_docs import python_blocks
from tests.helpers import require

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MY_PROJECT = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.integration.user_env import PlannerEnvWithLaws


class MyEnv(PlannerEnvWithLaws):
    def __init__(self):
        super().__init__(budget=8)
"""


def block(containing: str) -> str:
    """The README python block that contains ``containing``."""
    (found,) = [b.code for b in python_blocks(README) if containing in b.code]
    return found


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), str(ROOT), env.get("PYTHONPATH", "")])
    code = "import torch; torch.set_num_threads(1)\n" + code
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_readme_snippets_are_short() -> None:
    """Each "attach it to your loop" snippet is at most 15 lines."""
    for marker in ("CoverageCallback(", "GRPOCoverage("):
        assert len(block(marker).splitlines()) <= 15, marker


def test_readme_sb3_snippet_trains_on_a_user_env_and_prints_a_gain(tmp_path: Path) -> None:
    require("stable_baselines3", "sb3")
    code = block("CoverageCallback(")
    assert "from my_project import MyEnv" in code and "10_000" in code
    (tmp_path / "my_project.py").write_text(MY_PROJECT, encoding="utf-8")
    proc = run(code.replace("10_000", "2048"), tmp_path)  # one PPO rollout (n_steps 2048)
    assert proc.returncode == 0, proc.stderr[-4000:]
    gain = float(proc.stdout.strip().splitlines()[-1])
    report = json.loads((tmp_path / "runs" / "ppo" / "report.json").read_text(encoding="utf-8"))
    (comparison,) = report["comparisons"]
    assert comparison["task"] == "my_task" and comparison["budget"] == 8
    assert -1.0 < gain < 2.0  # the latest streaming log's gain, printed by the snippet
    assert comparison["policies"][0]["gain"]["value"] is not None  # exact baselines from MyEnv's laws


def test_readme_info_example_is_what_a_monitor_accepts(tmp_path: Path) -> None:
    """The README's final-info dict counts as one sample of input maze-3 that found bfs."""
    from seffi.callbacks import CoverageMonitor

    namespace: dict[str, object] = {}
    exec(block('info = {"input_id"'), namespace)
    monitor = CoverageMonitor(1, ("astar", "bfs", "dfs", "greedy"), wandb="disabled", out_dir=tmp_path)
    monitor.update_infos(namespace["info"], True)
    assert monitor.curves().coverage.tolist() == [0.25]


def test_readme_trl_snippet_trains_a_user_model_folder(tmp_path: Path) -> None:
    require("trl", "trl")
    from seffi.tasks import get_task
    from tests.callbacks.tiny_lm import tiny_causal_lm

    model, tokenizer = tiny_causal_lm(get_task("sort_swaps"))
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    code = block("GRPOCoverage(")
    config = 'GRPOConfig(output_dir="out", num_generations=8)'
    assert code.count('"path/to/model"') == 1 and config in code
    fast = (
        'GRPOConfig(output_dir="out", num_generations=8, max_steps=1, max_completion_length=8, '
        'use_cpu=True, report_to="none", save_strategy="no", disable_tqdm=True, **cpu_training())'
    )
    code = code.replace('"path/to/model"', repr(str(tmp_path / "model"))).replace(config, fast)
    code = "from seffi.models.grpo import cpu_training\n" + code + "\nprint(sorted(cov.metrics()))\n"
    proc = run(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "seffi/auc" in proc.stdout
    report = json.loads((tmp_path / "runs" / "grpo" / "report.json").read_text(encoding="utf-8"))
    (comparison,) = report["comparisons"]
    assert comparison["budget"] == 8 and comparison["oracle"] is not None

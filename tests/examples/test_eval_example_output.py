"""examples/sb3_ppo_router_eval.py prints every evaluation's gain with its CI.

The README quotes these CIs, so a command must show them.
``gain_lines`` reads the run's report.json, so it is tested here on a written report, no SB3 needed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from seffi.report import Gain, PolicyResult, Report, write_report
from tests.report import _fixtures as fx

ROOT = Path(__file__).resolve().parents[2]


def _example():
    path = ROOT / "examples" / "sb3_ppo_router_eval.py"
    spec = importlib.util.spec_from_file_location("sb3_eval_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sb3_eval_example"] = module  # its Args dataclass looks the module up there
    spec.loader.exec_module(module)
    return module


def test_gain_lines_print_every_evaluation_with_its_ci(tmp_path: Path) -> None:
    """First and final evaluation with CIs, in step order, none dropped."""
    gains = [(4000, 0.193, -0.042, 0.405), (8000, 0.324, 0.1, 0.5), (None, 0.566, 0.379, 0.741)]
    pols = []
    for step, v, lo, hi in gains:
        label = "eval" if step is None else f"eval@{step}"
        curves = fx.curve_set(label, "policy", fx.POLICY)
        pols.append(PolicyResult(curves=curves, gain=Gain(value=v, lo=lo, hi=hi)))
    comp = fx.comparison().model_copy(update={"policies": [pols[-1], *pols[:-1]]})
    write_report(tmp_path, Report(comparisons=[comp]), plots=False)
    lines = _example().gain_lines(str(tmp_path))
    assert lines[1:] == [
        "  step   4000: 0.193 [-0.042, 0.405]",
        "  step   8000: 0.324 [0.100, 0.500]",
        "  final: 0.566 [0.379, 0.741]",
    ]


def test_a_second_run_into_a_taken_folder_prints_the_gains_of_its_own_folder(tmp_path: Path) -> None:
    """The callback moves a run whose --out holds an earlier run to OUT-2; the example reads OUT-2."""
    import os
    import subprocess

    from tests.helpers import require

    require("stable_baselines3", "sb3")
    from seffi.report import load_report

    path = ROOT / "examples" / "sb3_ppo_router_eval.py"
    env = {**os.environ, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg"}
    printed = []
    for seed in (0, 1):
        args = ["--smoke", "--seed", str(seed), "--out", "runs/eval", "--wandb", "disabled"]
        proc = subprocess.run(
            [sys.executable, str(path), *args],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        printed.append([line for line in proc.stdout.splitlines() if line.startswith("  final: ")])
    finals = []
    for folder in ("runs/eval", "runs/eval-2"):
        policies = load_report(tmp_path / folder).comparisons[0].policies
        g = next(p.gain for p in policies if p.curves.label == "eval")
        finals.append(f"  final: {g.value:.3f} [{g.lo:.3f}, {g.hi:.3f}]")
    assert finals[0] != finals[1]  # two seeds, two results: the check below can tell them apart
    assert printed == [[finals[0]], [finals[1]]]

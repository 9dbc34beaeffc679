"""Independent references for the callback tests: a hand-fed tracker and report readers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from seffi.coverage import CoverageTracker
from seffi.tasks import get_task
from seffi.tasks.base import Task

CURVE_FIELDS = ("coverage", "novelty", "full_coverage", "valid_coverage")


def hanoi_inputs(n: int) -> tuple[Task, list[Any]]:
    """Three-disk Hanoi and its first ``n`` inputs (seed 0)."""
    task = get_task("hanoi", max_disks=3)
    return task, task.make_inputs(n, seed=0)


def hand_tracker(
    finals: list[tuple[int, dict[str, Any]]], strategies: tuple[str, ...], budget: int
) -> CoverageTracker:
    """Tracker fed straight from recorded final infos: one run per (env index, input, run_index)."""
    t = CoverageTracker(strategies=strategies)
    streams: dict[tuple[str, int, int], int] = {}
    for env_index, info in finals:
        if info["sample_index"] > budget:
            continue
        key = (info["input_id"], env_index, info["run_index"])
        stream = streams.setdefault(key, sum(k[0] == info["input_id"] for k in streams))
        t.update(info["input_id"], info["strategy_matches"], valid=bool(info["valid"]), stream=stream)
    return t


def assert_curves_match(curveset: dict[str, Any], reference: Any) -> None:
    """A report.json policy curve set equals the reference tracker's curves (point estimates)."""
    ref = reference.to_dict() if hasattr(reference, "to_dict") else reference
    for name in CURVE_FIELDS:
        got = curveset.get(name)
        want = ref.get(name)
        if want is None:
            continue
        want = np.asarray(want, dtype=float)
        got = np.asarray([np.nan if v is None else v for v in got], dtype=float)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=name)
    assert curveset["auc"] == reference.auc


def tiny_ppo(venv: Any, *, n_steps: int, width: int, policy: str = "MlpPolicy") -> Any:
    """SB3 PPO small enough for a test: one hidden layer of ``width``, one epoch per rollout, seed 0, CPU."""
    from stable_baselines3 import PPO

    net = {"net_arch": [width]}
    return PPO(
        policy, venv, n_steps=n_steps, batch_size=64, n_epochs=1, seed=0, device="cpu", policy_kwargs=net
    )


def load_report(out_dir: Path) -> dict[str, Any]:
    return json.loads((Path(out_dir) / "report.json").read_text())


def assert_plots_nonempty(out_dir: Path) -> list[Path]:
    import matplotlib.image

    pngs = sorted(Path(out_dir).rglob("*.png"))
    assert pngs, f"no plots in {out_dir}"
    for p in pngs:
        img = matplotlib.image.imread(p)
        assert img.shape[0] > 50 and img.shape[1] > 50
        # Not a blank canvas: some pixels differ from the background.
        assert np.ptp(img[..., :3]) > 0.1, p
    return pngs

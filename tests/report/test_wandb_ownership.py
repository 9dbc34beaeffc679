"""Who owns a W&B run: each monitor its own, unless the user started one or passed one in.

Two monitors in one process (two tasks of a user's loop, interleaved) must write two offline runs,
each holding only its own task's history and summary, and each closing line must name its own
run. A run the user started before the monitors is logged into and left open for the user. Runs
are read back with W&B's own CLI (``wandb leet inspect``), never through seffi's objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from seffi.callbacks import CoverageMonitor
from tests.helpers import wandb_leet

#: Task A: K = 2 over strategies a, b. Runs (per input, in sample order) and C(k) counted by hand:
#: x0 finds a then b (C = 1/2, 1; AUC 3/4), x1 finds a twice (C = 1/2, 1/2): C = (1/2, 3/4), AUC = 5/8.
TASK_A = {"budget": 2, "strategies": ("a", "b"), "runs": [("x0", [("a",), ("b",)]), ("x1", [("a",), ("a",)])]}
AUC_A = (0.5 + 0.75) / 2
#: AUC logged after each sample: none before x0's run completes, x0 alone until x1's completes.
LOGGED_A = [(2, 0.75), (3, 0.75), (4, AUC_A)]
#: Task B: K = 4 over x, y, z. One run on p: x, nothing, y, x: C = (1/3, 1/3, 2/3, 2/3), AUC = 1/2.
TASK_B = {"budget": 4, "strategies": ("x", "y", "z"), "runs": [("p", [("x",), (), ("y",), ("x",)])]}
AUC_B = (1 / 3 + 1 / 3 + 2 / 3 + 2 / 3) / 4
LOGGED_B = [(4, AUC_B)]


def _infos(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The final infos a user's env emits for a task's runs, one per sample."""
    return [
        {"input_id": input_id, "strategy_matches": matches, "valid": bool(matches), "sample_index": i + 1}
        for input_id, samples in task["runs"]
        for i, matches in enumerate(samples)
    ]


def _monitor(task: dict[str, Any], out: Path, **kwargs: Any) -> CoverageMonitor:
    return CoverageMonitor(
        task["budget"], task["strategies"], out_dir=out, wandb="offline", plots=False, n_boot=0, **kwargs
    )


def _read(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(history rows, summary) of one offline run, as W&B's CLI reads them."""
    records = [json.loads(x) for x in wandb_leet(run_dir, "--json").splitlines() if x.strip()]
    history = [r["history"]["item"] for r in records if r.get("type") == "history"]
    return history, json.loads(wandb_leet(run_dir, "--summary", "--json"))["summary"]


def _synced(lines: Sequence[str]) -> Path:
    """The run folder a monitor's closing line tells the user to sync."""
    (hit,) = [m for line in lines if (m := re.search(r"upload it with: wandb sync (\S+)$", line))]
    return Path(hit.group(1))


def test_two_monitors_in_one_process_each_write_their_own_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    a, b = _monitor(TASK_A, tmp_path / "a"), _monitor(TASK_B, tmp_path / "b")
    infos_a, infos_b = _infos(TASK_A), _infos(TASK_B)
    # The user's loop steps both tasks in turn and logs each after every sample.
    for step in range(1, 5):
        a.update_infos(infos_a[step - 1])
        a.log(step)
        b.update_infos(infos_b[step - 1])
        b.log(step)
    capsys.readouterr()
    a.close()
    dir_a = _synced(capsys.readouterr().out.splitlines())
    b.close()
    dir_b = _synced(capsys.readouterr().out.splitlines())

    assert dir_a != dir_b
    runs = sorted(p.name for p in (tmp_path / "wandb").glob("offline-run-*"))
    assert runs == sorted([dir_a.name, dir_b.name])
    for run_dir, task, auc, logged, other_k in (
        (dir_a, TASK_A, AUC_A, LOGGED_A, 4),
        (dir_b, TASK_B, AUC_B, LOGGED_B, 2),
    ):
        history, summary = _read(tmp_path / run_dir)
        k = task["budget"]
        assert summary["seffi/auc"] == pytest.approx(auc, rel=1e-12)
        assert summary["seffi/episodes"] == 4
        assert f"seffi/full_coverage/k={k}" in summary
        assert f"seffi/full_coverage/k={other_k}" not in summary
        # This task's logs only, at its own steps, with its own K's keys.
        points = [(row["seffi/step"], row["seffi/auc"]) for row in history if "seffi/auc" in row]
        assert [step for step, _ in points] == [step for step, _ in logged]
        assert [value for _, value in points] == pytest.approx([value for _, value in logged], rel=1e-12)
        keys = {key for row in history for key in row}
        assert f"seffi/full_coverage/k={k}" in keys
        assert f"seffi/full_coverage/k={other_k}" not in keys


def test_a_run_the_user_started_is_reused_and_left_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import wandb

    monkeypatch.chdir(tmp_path)
    user = wandb.init(project="mine", dir=str(tmp_path), mode="offline", settings=wandb.Settings(silent=True))
    try:
        monitor = _monitor(TASK_A, tmp_path / "a")
        assert monitor.sinks.wandb.run.run is user
        for info in _infos(TASK_A):
            monitor.update_infos(info)
        monitor.close()
        user.log({"user/loss": 0.25})  # still open: seffi did not finish the user's run
        assert wandb.run is user
    finally:
        user.finish()
    capsys.readouterr()
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    history, summary = _read(run_dir)
    assert summary["seffi/auc"] == pytest.approx(AUC_A, rel=1e-12)
    assert summary["user/loss"] == 0.25
    assert any("user/loss" in row for row in history)


def test_two_monitors_in_the_run_the_user_started_are_warned_unless_scoped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Monitors log into the user's run (theirs to own); a second one under the same keys while the
    first runs gets one warning that their numbers mix; one with its own scope, or one started after
    the others closed, none."""
    import warnings

    import wandb

    monkeypatch.chdir(tmp_path)
    user = wandb.init(project="mine", dir=str(tmp_path), mode="offline", settings=wandb.Settings(silent=True))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            monitors = [_monitor(TASK_A, tmp_path / name) for name in ("a", "b")]
            monitors.append(_monitor(TASK_B, tmp_path / "c", scope="other"))
        mixing = [str(w.message) for w in caught if "two seffi monitors" in str(w.message)]
        assert len(mixing) == 1 and "(seffi/...)" in mixing[0] and "MonitorConfig(scope=...)" in mixing[0]
        assert all(m.sinks.wandb.run.run is user for m in monitors)
        for m in monitors:
            m.close()
        with warnings.catch_warnings(record=True) as caught:  # a monitor after those ended: no mixing
            warnings.simplefilter("always")
            _monitor(TASK_A, tmp_path / "d").close()
        assert not [w for w in caught if "two seffi monitors" in str(w.message)]
    finally:
        user.finish()

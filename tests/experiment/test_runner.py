"""``seffi run`` end to end on a tiny config, its determinism, ``seffi report`` and ``seffi compare``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from seffi.cli import main
from seffi.experiment.config import RunConfig
from seffi.experiment.runner import Rollout, run_times
from seffi.experiment.summary import summary_rows
from seffi.report.files import load_report

TINY = [
    "--tasks",
    "sort_swaps,graph_traversal",
    "--n-inputs",
    "4",
    "--budget",
    "4",
    "--eval-runs",
    "2",
    "--rounds",
    "3",
    "--bootstrap",
    "20",
    "--wandb",
    "disabled",
    "--no-progress",
]


def _run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """Three tiny runs: seed 0 twice (determinism) and seed 1."""
    root = tmp_path_factory.mktemp("runs")
    outs = {}
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        outs[name] = root / name
        assert main(["run", *TINY, "--seed", seed, "--out", str(outs[name])]) == 0
    return outs


def test_run_writes_the_run_folder_and_prints_the_summary(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = _run(capsys, "run", *TINY, "--tasks", "edit_script", "--out", str(out))
    assert code == 0, err
    for name in ("report.json", "report.md", "tracker_state.json", "routers.json", "metrics.jsonl"):
        assert (out / name).is_file(), name
    pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert "EditScriptRouter-v0_coverage.png" in pngs and len(pngs) >= 5
    for needle in (
        "learned",
        "iid-sampler",
        "oracle",
        "AUC@K",
        "gain vs iid",
        "T(0.8)",
        "F(K)",
        "valid",
    ):
        assert needle in stdout, needle
    report = load_report(out)
    (comp,) = report.comparisons
    assert (comp.task, comp.budget, comp.n_inputs, comp.env_id) == (
        "edit_script",
        4,
        4,
        "seffi/EditScriptRouter-v0",
    )
    labels = [p.curves.label for p in comp.policies]
    assert labels == ["learned", "iid-sampler"]
    assert comp.iid.method == "exact" and comp.oracle is not None
    # The streaming monitor logged the training stream under its task scope.
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("seffi/edit_script/train/auc" in r for r in records)
    steps = [r["seffi/step"] for r in records]
    assert steps == sorted(steps) and steps[-1] == 3 * 4 * 4 * 4  # rounds x rows x budget episodes
    state = json.loads((out / "tracker_state.json").read_text())
    assert set(state["edit_script"]) == {"train", "learned", "iid-sampler"}


def test_same_seed_gives_a_byte_identical_report(tiny_runs):
    a, b, c = (tiny_runs[k] / "report.json" for k in "abc")
    assert a.read_bytes() == b.read_bytes()
    assert (tiny_runs["a"] / "tracker_state.json").read_bytes() == (
        tiny_runs["b"] / "tracker_state.json"
    ).read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert str(tiny_runs["a"]) not in a.read_text()  # no absolute paths (nor timestamps) inside


def test_same_seed_in_another_process_with_another_hash_seed(tiny_runs, tmp_path):
    # Python's str hash differs between processes; nothing in the report may depend on it.
    out = tmp_path / "again"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    cmd = [sys.executable, "-m", "seffi.cli", "run", *TINY, "--seed", "0", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "report.json").read_bytes() == (tiny_runs["a"] / "report.json").read_bytes()


def test_summary_values_come_from_the_report(tiny_runs):
    report = load_report(tiny_runs["a"])
    rows = summary_rows(report)
    assert len(rows) == 2 * 4  # two tasks x (learned, iid sampler, iid, oracle)
    for comp in report.comparisons:
        learned = comp.policies[0]
        row = next(r for r in rows if r[:2] == [comp.task, "learned"])
        assert row[2].startswith(f"{learned.curves.auc:.3f} [{learned.curves.auc_lo:.3f}")
        if learned.gain.value is not None:
            assert row[3].startswith(f"{learned.gain.value:.3f}")
            # The gain is the AUC ratio of the report's own curves.
            g = (learned.curves.auc - comp.iid.auc) / (comp.oracle.auc - comp.iid.auc)
            assert learned.gain.value == pytest.approx(g)
        assert row[5] == f"{learned.curves.full_coverage[-1]:.3f}"


def test_report_rerenders_from_report_json(tiny_runs, capsys):
    d = tiny_runs["b"]
    before = (d / "report.json").read_bytes()
    (d / "report.md").unlink()
    for p in (d / "plots").glob("*.png"):
        p.unlink()
    code, out, err = _run(capsys, "report", str(d))
    assert code == 0, err
    assert (d / "report.md").is_file() and "report.md" in out
    assert len(list((d / "plots").glob("*.png"))) >= 5
    assert (d / "report.json").read_bytes() == before


def test_compare_two_real_runs(tiny_runs, tmp_path, capsys):
    code, out, err = _run(capsys, "compare", str(tiny_runs["a"]), str(tiny_runs["c"]), "--out", str(tmp_path))
    assert code == 0, err
    rows = [ln for ln in out.splitlines() if ln.startswith("| sort_swaps")]
    assert len(rows) == 2 * 2  # two runs x two policies
    assert (tmp_path / "compare.png").stat().st_size > 1000


def test_per_run_times_match_the_tracker_survival(tiny_runs):
    # Independent reference: the tracker's censored fraction at K is the share of runs that never got there.
    report = load_report(tiny_runs["a"])
    for comp in report.comparisons:
        for pol in comp.policies:
            for t in pol.curves.time_to_coverage:
                share = sum(v is None for v in t.values) / len(t.values)
                assert share == pytest.approx(t.fraction_censored)
                assert len(t.values) == 4 * 2  # inputs x eval runs


def test_run_times_by_hand():
    run = Rollout(
        tracker=None,
        input_ids=["x", "y"],
        latents=np.zeros((2, 3), dtype=int),
        matches=[[("a",), ("a",), ("b", "c")], [(), ("a", "b"), ("c", "d")]],
        valid=np.ones((2, 3), dtype=bool),
    )
    assert run_times(run, 4, [0.5, 0.75, 1.0]) == {0.5: [3, 2], 0.75: [3, 3], 1.0: [None, 3]}


def test_default_config_is_the_documented_experiment():
    cfg = RunConfig()
    assert cfg.tasks == ("sort_swaps", "edit_script", "graph_traversal")
    assert (cfg.budget, cfg.n_inputs, cfg.wandb, cfg.out) == (8, 16, "offline", None)


def test_unknown_task_is_one_line(capsys, tmp_path):
    code, _, err = _run(capsys, "run", "--tasks", "sort_swap", "--out", str(tmp_path / "r"))
    assert code == 2 and "unknown task(s) sort_swap" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_default_out_is_a_timestamped_runs_folder(monkeypatch, tmp_path):
    from seffi.experiment.runner import default_out

    monkeypatch.chdir(tmp_path)
    out = default_out()
    assert out.parent == Path("runs") and len(out.name) == len("20260101-000000")


def test_wandb_offline_by_default_prints_the_sync_hint(tmp_path, capsys):
    argv = [a for a in TINY if a not in ("--wandb", "disabled")]
    code, stdout, err = _run(capsys, "run", *argv, "--tasks", "graph_traversal", "--out", str(tmp_path / "r"))
    assert code == 0, err
    hint = next(line for line in stdout.splitlines() if "wandb sync" in line)
    run_dir = Path(hint.split("wandb sync ", 1)[1].strip())
    assert run_dir.name.startswith("offline-run-") and run_dir.is_dir()
    # Under <dir>/wandb, <dir> = cwd or WANDB_DIR (which wandb reads once per process, so not checked).
    assert run_dir.parent.name == "wandb"
    assert any(run_dir.glob("*.wandb"))  # the offline log that `wandb sync` uploads


def test_a_failing_wandb_never_stops_the_run(tmp_path, capsys, monkeypatch):
    import wandb

    def broken_init(*args, **kwargs):
        raise RuntimeError("quota exceeded")

    monkeypatch.setattr(wandb, "init", broken_init)
    argv = [a for a in TINY if a not in ("--wandb", "disabled")]
    with pytest.warns(RuntimeWarning, match="quota exceeded"):
        code, stdout, err = _run(capsys, "run", *argv, "--tasks", "sort_swaps", "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert "W&B logging failed" in stdout and "wandb sync" not in stdout
    assert load_report(tmp_path / "r").comparisons[0].task == "sort_swaps"


def test_a_task_registered_at_runtime_runs_end_to_end(tmp_path, monkeypatch):
    import gymnasium as gym

    from seffi.experiment.runner import run_experiment
    from seffi.tasks import base as registry
    from seffi.tasks.sort_swaps import SortSwaps

    class MySort(SortSwaps):
        name = "my_sort"

    monkeypatch.setitem(registry._REGISTRY, "my_sort", MySort)  # removed again after the test
    try:
        config = RunConfig(
            tasks="my_sort",
            n_inputs=3,
            budget=3,
            eval_runs=1,
            learner={"rounds": 3},
            bootstrap=10,
            wandb="disabled",
            progress=False,
            out=tmp_path / "r",
        )
        result = run_experiment(config)
        assert [c.env_id for c in result.report.comparisons] == ["seffi/MySortRouter-v0"]
    finally:
        for eid in ("seffi/MySort-v0", "seffi/MySortRouter-v0"):
            gym.registry.pop(eid, None)


def test_each_task_has_its_own_wandb_step_axis_and_curve_tables(tmp_path, capsys, monkeypatch):
    """Per-task step axes, curve tables for every task, a relative sync hint.

    ``seffi/step`` counts training episodes over all tasks; each task's keys carry
    ``seffi/<task>/train/step`` = that task's training episodes so far and are plotted
    against it. Each task gets its own curve table and image. Every key names a task as the report
    does (``sort_swaps``), never by its env id.
    """
    wandb_dir = tmp_path / "wb"
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.chdir(tmp_path)
    argv = [a for a in TINY if a not in ("--wandb", "disabled")]
    code, stdout, err = _run(capsys, "run", *argv, "--out", "r")
    assert code == 0, err
    episodes = 3 * 4 * 4 * 4  # rounds x rows x budget, per task
    records = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    for i, slug in enumerate(("sort_swaps", "graph_traversal")):
        rows = [r for r in records if f"seffi/{slug}/train/auc" in r]
        assert rows and [r[f"seffi/{slug}/train/step"] for r in rows][-1] == episodes
        assert rows[-1]["seffi/step"] == (i + 1) * episodes  # the run-wide axis keeps counting
    hint = next(line for line in stdout.splitlines() if "wandb sync" in line)
    rel = hint.split("wandb sync ", 1)[1].strip()
    assert rel.startswith("wb/wandb/offline-run-") and (tmp_path / rel).is_dir()
    done = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", str(tmp_path / rel), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    defined = [r["metric"] for r in lines if r["type"] == "metric"]
    metrics = {m.get("name"): m.get("step_metric") for m in defined}
    history = [r["history"]["item"] for r in lines if r["type"] == "history"]
    summary = {k for r in lines if r["type"] == "summary" for k in r["summary"].get("update", {})}
    logged = {k for h in history for k in h} | {m for m in metrics if m} | summary
    assert [k for k in logged if "Router" in k] == []
    assert {"seffi/sort_swaps/learned/gain_vs_iid", "seffi/graph_traversal/curves/coverage_table"} <= summary
    assert "seffi/plots/sort_swaps/coverage.path" in logged
    for slug in ("sort_swaps", "graph_traversal"):
        axis = f"seffi/{slug}/train/step"
        assert metrics[f"seffi/{slug}/train/auc"] == axis
        assert metrics[f"seffi/{slug}/train/curves/coverage_plot"] == axis
        curves = f"seffi/{slug}/train/curves/coverage"
        # The line-series chart reads its table from run.summary: no table row in history.
        assert not any(k.startswith(f"{curves}_table") for h in history for k in h)
        images = [h for h in history if any(k.startswith(f"{curves}_plot") for k in h)]
        # the first log's snapshot and the chart of the end of training, both at the task's last step
        assert len(images) == 2 and all(h[axis] == episodes for h in images)

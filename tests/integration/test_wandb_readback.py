"""What a researcher reads in W&B: offline runs of ``seffi run`` and of a monitor, read back from disk.

Each run is read back the way W&B itself stores it (``wandb leet inspect --json`` for the records,
``--summary --json`` for the summary, the table files under the run's ``files/``), never through
seffi's own objects, and compared with report.json or with counts made by hand from what the env
emitted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from seffi.callbacks import CoverageMonitor
from seffi.cli import main
from tests.helpers import wandb_leet
from tests.integration.user_env import PlannerEnvWithLaws, hand_coverage, hand_iid_coverage, read_log

# W&B comes with seffi itself (no extra to require); this runs with the integration matrix.
pytestmark = pytest.mark.integration

K = 4
TINY = [
    "--tasks", "sort_swaps,graph_traversal", "--n-inputs", "4", "--budget", str(K), "--eval-runs", "2",
    "--rounds", "6", "--bootstrap", "20", "--wandb", "offline", "--no-progress",
]  # fmt: skip
#: Fields of a logged image (W&B and ``wandb leet`` show them as media, not as metrics).
IMAGE_FIELDS = {"height", "width", "size"}


def _read_run(root: Path) -> dict[str, Any]:
    """The one offline run under ``root/wandb``: its records, history rows, summary and chart keys."""
    (run_dir,) = sorted((root / "wandb").glob("offline-run-*"))
    records = [json.loads(line) for line in wandb_leet(run_dir, "--json").splitlines() if line.strip()]
    charts = [
        key.removeprefix("_wandb.visualize.")
        for r in records
        if r.get("type") == "config"
        for key in r["config"].get("update", {})
        if key.startswith("_wandb.visualize.")
    ]
    return {
        "dir": run_dir,
        "history": [r["history"]["item"] for r in records if r.get("type") == "history"],
        "summary": json.loads(wandb_leet(run_dir, "--summary", "--json"))["summary"],
        "charts": charts,
    }


def _chart_lines(run: Mapping[str, Any], key: str) -> dict[str, list[float]]:
    """The lines (label -> C(k), k = 1..K) of the line-series chart ``key``, from its table file."""
    meta = run["summary"][f"{key}_table"]
    assert meta["_type"] == "table-file"
    table = json.loads((run["dir"] / "files" / meta["path"]).read_text())
    col = {name: i for i, name in enumerate(table["columns"])}
    lines: dict[str, dict[float, float]] = {}
    for row in table["data"]:
        lines.setdefault(row[col["lineKey"]], {})[row[col["step"]]] = row[col["lineVal"]]
    return {label: [pts[k] for k in sorted(pts)] for label, pts in lines.items()}


def _assert_only_scalars_are_charted(history: list[Mapping[str, Any]]) -> None:
    """Every number in a history row is a seffi scalar or an image's field; no table is in history."""
    for row in history:
        for key, value in row.items():
            assert value != "table-file", key
            if key.startswith("_") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            media, _, field = key.rpartition(".")
            kind = row.get(f"{media}._type")
            assert kind is None or (kind == "image-file" and field in IMAGE_FIELDS), key
            assert kind is not None or key.startswith("seffi/"), key


@pytest.fixture(scope="module")
def seffi_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("seffi-run")
    config = root / "run.yaml"
    config.write_text("log_every: 2\n")  # a training log every 2 rounds (of 16 rows x K episodes)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_DIR", str(root))
        mp.setenv("WANDB_MODE", "offline")
        assert main(["run", *TINY, "--config", str(config), "--out", str(root / "out")]) == 0
    report = json.loads((root / "out" / "report.json").read_text())
    metrics = [json.loads(x) for x in (root / "out" / "metrics.jsonl").read_text().splitlines()]
    return {"run": _read_run(root), "report": report, "metrics": metrics}


def _slug(comparison: Mapping[str, Any]) -> str:
    """The key scope of a comparison: its task's name, as the report writes it."""
    return comparison["task"]


def test_seffi_run_draws_one_final_chart_per_task_with_every_policy_iid_and_oracle(
    seffi_run: dict[str, Any],
) -> None:
    run, report = seffi_run["run"], seffi_run["report"]
    for comp in report["comparisons"]:
        key = f"seffi/{_slug(comp)}/curves/coverage"
        assert key in run["charts"]
        lines = _chart_lines(run, key)
        want = {p["curves"]["label"]: p["curves"]["coverage"] for p in comp["policies"]}
        want |= {"iid": comp["iid"]["coverage"], "oracle": comp["oracle"]["coverage"]}
        assert set(lines) == {"learned", "iid-sampler", "iid", "oracle"} == set(want)
        for label, values in want.items():
            np.testing.assert_allclose(lines[label], values, rtol=1e-12, err_msg=label)


def test_seffi_run_summary_holds_the_baseline_aucs_behind_every_gain(seffi_run: dict[str, Any]) -> None:
    summary, report = seffi_run["run"]["summary"], seffi_run["report"]
    for comp in report["comparisons"]:
        iid, oracle = comp["iid"]["auc"], comp["oracle"]["auc"]
        for pol in comp["policies"]:
            scope = f"seffi/{_slug(comp)}/{pol['curves']['label']}"
            assert summary[f"{scope}/auc_iid"] == pytest.approx(iid, rel=1e-12)
            assert summary[f"{scope}/auc_oracle"] == pytest.approx(oracle, rel=1e-12)
            assert summary[f"{scope}/gain_denominator"] == pytest.approx(oracle - iid, rel=1e-12)
            # The gain is the share of that room the policy takes (same inputs: the env's pool).
            room = (pol["curves"]["auc"] - iid) / (oracle - iid)
            assert summary[f"{scope}/gain_vs_iid"] == pytest.approx(room, rel=1e-9)


def test_seffi_run_history_charts_scalars_only(seffi_run: dict[str, Any]) -> None:
    history = seffi_run["run"]["history"]
    _assert_only_scalars_are_charted(history)
    assert any(k.endswith("coverage_plot._type") for row in history for k in row)  # images stay


def test_seffi_run_training_stream_logs_its_recent_window_and_its_chart_ends_there(
    seffi_run: dict[str, Any],
) -> None:
    run, metrics = seffi_run["run"], seffi_run["metrics"]
    for comp in seffi_run["report"]["comparisons"]:
        scope = f"seffi/{_slug(comp)}/train"
        rows = [r for r in metrics if f"{scope}/auc" in r]
        # Logs after rounds 2, 4 and 6; each covers the runs of its last 2 rounds (16 rows x 2).
        assert [r[f"{scope}/episodes"] for r in rows] == [128, 256, 384]
        assert [r[f"{scope}/window/episodes"] for r in rows] == [128, 128, 128]
        assert [r[f"{scope}/window/runs"] for r in rows] == [32, 32, 32]
        lines = _chart_lines(run, f"{scope}/curves/coverage")
        assert set(lines) == {"learned (training stream)", "iid", "oracle"}
        train = lines["learned (training stream)"]
        for k in (1, 2, 4):
            assert train[k - 1] == pytest.approx(rows[-1][f"{scope}/coverage/k={k}"], rel=1e-12)


def _hand_oracle(budget: int, refs: Mapping[str, frozenset[str]]) -> list[float]:
    """Oracle C(k) by enumeration: each step emits the reference trace of a uniformly chosen uncovered
    strategy (exact fractions over every path)."""
    m = len(refs)
    out = []
    for k in range(1, budget + 1):
        total = Fraction(0)

        def walk(covered: frozenset[str], steps: int, p: Fraction) -> None:
            nonlocal total
            left = [s for s in sorted(refs) if s not in covered]
            if steps == 0 or not left:
                total += p * len(covered)
                return
            for s in left:
                walk(covered | refs[s], steps - 1, p / len(left))

        walk(frozenset(), k, Fraction(1))
        out.append(float(total / m))
    return out


def test_monitor_finalize_draws_its_chart_and_summary_from_a_user_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    log = tmp_path / "env.jsonl"
    env = PlannerEnvWithLaws(budget=K, log_path=str(log))
    out = tmp_path / "out"
    monitor = CoverageMonitor.for_env(env, K, out_dir=out, wandb="offline", plots=False, log_every=24)
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(240):  # 60 runs of K = 4 samples over 3 inputs
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        assert terminated or truncated
        monitor.update_infos(info, True)
        monitor.maybe_log(monitor.episodes)
        env.reset()
    monitor.finalize()
    run = _read_run(tmp_path)
    assert run["charts"] and set(run["charts"]) == {"seffi/curves/coverage"}
    lines = _chart_lines(run, "seffi/curves/coverage")
    policy, n_runs = hand_coverage(read_log(log), K)
    assert n_runs == 60
    iid = hand_iid_coverage(K)
    oracle = _hand_oracle(K, env.reference_match_sets("maze-a"))
    np.testing.assert_allclose(lines["policy"], policy, rtol=1e-12)
    np.testing.assert_allclose(lines["iid"], iid, rtol=1e-12)
    np.testing.assert_allclose(lines["oracle"], oracle, rtol=1e-9)
    summary = run["summary"]
    assert summary["seffi/auc_iid"] == pytest.approx(iid.mean(), rel=1e-12)
    assert summary["seffi/auc_oracle"] == pytest.approx(np.mean(oracle), rel=1e-9)
    assert summary["seffi/gain_denominator"] == pytest.approx(np.mean(oracle) - iid.mean(), rel=1e-9)
    gain = (policy.mean() - iid.mean()) / (np.mean(oracle) - iid.mean())
    assert summary["seffi/gain_vs_iid"] == pytest.approx(gain, rel=1e-9)
    _assert_only_scalars_are_charted(run["history"])

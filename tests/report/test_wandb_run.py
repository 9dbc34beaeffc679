"""SafeWandbRun without a real W&B backend: a fake run records exactly what reached it."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from seffi.errors import SeffiError
from seffi.report import SafeWandbRun, WandbSinkWarning


class FakeSummary(dict):
    pass


class FakeRun:
    def __init__(self, fail_on: str | None = None) -> None:
        self.logged: list[dict[str, Any]] = []
        self.defined: list[tuple[str, str | None]] = []
        self.summary = FakeSummary()
        self.fail_on = fail_on
        self.finished = False
        self.config_updates: list[tuple[Any, Any]] = []

    def define_metric(self, name: str, step_metric: str | None = None) -> None:
        self.defined.append((name, step_metric))

    def _config_callback(self, key: Any = None, val: Any = None, data: Any = None) -> None:
        # wandb.Run's hook for nested config keys (where line-series charts are declared)
        self.config_updates.append((key, val))

    def log(self, data: dict[str, Any]) -> None:
        if self.fail_on and self.fail_on in data:
            raise ValueError("bad data")
        self.logged.append(dict(data))

    def finish(self) -> None:
        self.finished = True


def test_steps_must_not_decrease() -> None:
    run = FakeRun()
    safe = SafeWandbRun(run=run)
    assert safe.enabled and not safe.owns_run
    with pytest.warns(WandbSinkWarning, match="steps must not decrease") as rec:
        assert safe.log({"seffi/a": 1.0}, 5)
        assert safe.log({"seffi/a": 2.0}, 5)  # equal steps are fine
        assert not safe.log({"seffi/a": 3.0}, 4)
        assert not safe.log({"seffi/a": 4.0}, 1)
        assert safe.log({"seffi/a": 5.0}, 9)
    assert len(rec) == 1
    assert [(d["seffi/step"], d["seffi/a"]) for d in run.logged] == [(5, 1.0), (5, 2.0), (9, 5.0)]
    assert run.defined == [("seffi/step", None), ("seffi/*", "seffi/step")]
    safe.finish()
    assert not run.finished  # a reused run belongs to its owner


def test_failure_disables_with_one_warning() -> None:
    run = FakeRun(fail_on="seffi/bad")
    safe = SafeWandbRun(run=run)
    with pytest.warns(WandbSinkWarning, match="bad data") as rec:
        safe.log({"seffi/ok": 1}, 1)
        safe.log({"seffi/bad": 1}, 2)
        safe.log({"seffi/ok": 2}, 3)
        safe.update_summary({"seffi/auc": 1.0})
        safe.log_artifact("x", "y", [])
    assert len(rec) == 1 and not safe.enabled
    assert [d.get("seffi/ok") for d in run.logged] == [1]
    assert run.summary == {}


def test_line_series_goes_to_the_summary_and_the_chart_config_never_to_history() -> None:
    import numpy as np

    run = FakeRun()
    safe = SafeWandbRun(run=run)
    ok = safe.log_line_series("seffi/curves/c", [1, 2], {"a": [0.1, 0.2], "b": [0.1, None]}, "t", "k", 3)
    assert ok and run.logged == []  # no history row: its table's ncols/nrows would be charted
    ((key, spec),) = run.config_updates
    assert key == ("_wandb", "visualize", "seffi/curves/c")
    assert spec["panel_config"]["panelDefId"] == "wandb/lineseries/v0"
    table = run.summary["seffi/curves/c_table"]
    assert sorted(map(tuple, table.data)) == [(1.0, "a", 0.1), (2.0, "a", 0.2)]  # "b" has a None: skipped
    # A later call replaces the chart's table; a step older than the last one is dropped.
    assert safe.log_line_series("seffi/curves/c", [1, 2], {"z": [0.3, 0.4]}, "t", "k", 5)
    assert [row[1] for row in run.summary["seffi/curves/c_table"].data] == ["z", "z"]
    with pytest.warns(WandbSinkWarning, match="steps must not decrease"):
        assert not safe.log_line_series("seffi/curves/c", [1, 2], {"old": [0.3, 0.4]}, "t", "k", 4)
    assert [row[1] for row in run.summary["seffi/curves/c_table"].data] == ["z", "z"]
    safe.update_summary({"seffi/auc": np.float64(0.5)})
    assert run.summary["seffi/auc"] == 0.5 and type(run.summary["seffi/auc"]) is float


class _RunWithoutChartHook(FakeRun):
    """A stand-in run without wandb.Run's config hook: charts go through ``log``."""

    _config_callback = None  # type: ignore[assignment]


def test_line_series_without_the_config_hook_is_logged_at_its_step() -> None:
    run = _RunWithoutChartHook()
    safe = SafeWandbRun(run=run)
    assert safe.log_line_series("seffi/curves/c", [1, 2], {"a": [0.1, 0.2]}, "t", "k", 3)
    assert "seffi/curves/c" in run.logged[-1] and run.logged[-1]["seffi/step"] == 3


def test_disabled_mode_touches_nothing() -> None:
    run = FakeRun()
    safe = SafeWandbRun(mode="disabled", run=run)
    assert not safe.enabled and not safe.log({"a": 1}, 1) and run.logged == []
    assert safe.run_dir is None and safe.sync_hint is None
    with pytest.raises(SeffiError, match="W&B mode"):
        SafeWandbRun(mode="cloud")  # type: ignore[arg-type]


def test_online_without_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import wandb

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(wandb, "run", None)
    with pytest.raises(SeffiError, match="wandb login"):
        SafeWandbRun.check_login("online")
    SafeWandbRun.check_login("offline")  # no login needed
    called = []
    monkeypatch.setattr(wandb, "init", lambda *a, **k: called.append(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        safe = SafeWandbRun(mode="online")
    assert not safe.enabled and called == []  # never reaches wandb.init (which could prompt)
    assert sum(issubclass(w.category, WandbSinkWarning) for w in caught) == 1


_QUIET_SCRIPT = """
import json, sys
from seffi.report import SafeWandbRun
run = SafeWandbRun(mode="offline", dir=sys.argv[1], name="quiet")
assert run.enabled, "offline init failed"
run.log({"seffi/auc": 0.25}, 1)
run.update_summary({"seffi/gain_vs_iid": 0.5})
run.finish()
print(json.dumps({"run_dir": str(run.run_dir), "hint": run.sync_hint}))
"""


def test_offline_run_is_silent_and_readable(tmp_path: Path) -> None:
    # A fresh interpreter without the test session's WANDB_SILENT: W&B would print its banner, the
    # history panel and a "wandb sync" footer; SafeWandbRun must keep all of that off the console
    # (seffi prints its own sync hint) while still writing a complete offline run.
    import json
    import os
    import subprocess
    import sys

    from tests.helpers import wandb_leet

    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SILENT", "WANDB_QUIET")}
    env["WANDB_MODE"] = "offline"
    done = subprocess.run(
        [sys.executable, "-c", _QUIET_SCRIPT, str(tmp_path / "wb")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    assert "wandb" not in done.stderr.lower(), done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.stdout.count("wandb sync") == 1 and out["hint"] == f"wandb sync {out['run_dir']}"
    summary = json.loads(wandb_leet(out["run_dir"], "--summary", "--json"))
    assert summary["state"] == "finished"
    assert summary["summary"]["seffi/gain_vs_iid"] == 0.5 and summary["summary"]["seffi/auc"] == 0.25


def test_online_init_is_bounded_and_its_failure_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wandb.init gets init_timeout <= 20 s (W&B's default is 90 s); one-line warning."""
    import wandb

    from seffi.report.wandb_run import INIT_TIMEOUT_S

    seen: list[Any] = []

    def slow_init(**kwargs: Any) -> Any:
        seen.append(kwargs["settings"])
        raise TimeoutError("Timed out while retrying\nConsider increasing the init_timeout setting:\n  ...")

    monkeypatch.setattr(wandb, "init", slow_init)
    monkeypatch.setattr(wandb, "run", None)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.delenv("WANDB_INIT_TIMEOUT", raising=False)
    with pytest.warns(WandbSinkWarning) as rec:
        safe = SafeWandbRun(mode="online", dir=tmp_path)
    assert not safe.enabled and len(rec) == 1
    assert "\n" not in str(rec[0].message) and "Timed out while retrying)" in str(rec[0].message)
    assert seen[0].init_timeout == INIT_TIMEOUT_S <= 20
    assert seen[0].quiet is True
    # The user's own WANDB_INIT_TIMEOUT wins (W&B reads it itself).
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "5")
    with pytest.warns(WandbSinkWarning):
        SafeWandbRun(mode="online", dir=tmp_path, quiet=False)
    assert "init_timeout" not in seen[1].model_fields_set


class _Settings:
    def __init__(self, sync_dir: Path) -> None:
        self.sync_dir, self.mode = str(sync_dir), "offline"


@pytest.fixture
def offline_run_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRun:
    """A run saved offline in ``./wandb/offline-run-1-abc``, the current directory being ``tmp_path``."""
    run = FakeRun()
    run.settings = _Settings(tmp_path / "wandb" / "offline-run-1-abc")  # type: ignore[attr-defined]
    monkeypatch.chdir(tmp_path)
    return run


def test_sync_hint_is_relative_under_the_current_directory(
    offline_run_in_cwd: FakeRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync hint is relative: ``wandb sync wandb/offline-run-...`` from where the user is."""
    run = offline_run_in_cwd
    assert SafeWandbRun(run=run).sync_hint == "wandb sync wandb/offline-run-1-abc"
    # Outside the current directory the absolute path stays, quoted for the shell when needed.
    elsewhere = tmp_path / "my runs" / "wandb" / "offline-run-2-def"
    run.settings = _Settings(elsewhere)  # type: ignore[attr-defined]
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    assert SafeWandbRun(run=run).sync_hint == f"wandb sync '{elsewhere}'"


def test_a_step_axis_defines_its_keys_by_name_and_fills_its_step() -> None:
    """Per-task step axes: keys under ``seffi/<scope>/`` plot against its own step.

    W&B matches overlapping globs in no fixed order, so each key is defined by its exact name; a row
    without the axis value (a curve snapshot) gets the axis' last value.
    """
    run = FakeRun()
    safe = SafeWandbRun(run=run)
    safe.define_step_metric()
    assert safe.add_step_axis("T-v0/train") == "seffi/T-v0/train/step"
    safe.log({"seffi/T-v0/train/auc": 0.5, "seffi/T-v0/train/step": 7.0}, 107)
    safe.log({"seffi/T-v0/train/curves/coverage": "table"}, 107)
    safe.log({"seffi/plots/x": "image"}, 200)
    assert run.defined == [
        ("seffi/step", None),
        ("seffi/*", "seffi/step"),
        ("seffi/T-v0/train/step", None),
        ("seffi/T-v0/train/auc", "seffi/T-v0/train/step"),
        ("seffi/T-v0/train/curves/coverage", "seffi/T-v0/train/step"),
    ]
    assert run.logged[1] == {
        "seffi/T-v0/train/curves/coverage": "table",
        "seffi/T-v0/train/step": 7.0,
        "seffi/step": 107,
    }
    assert run.logged[2] == {"seffi/plots/x": "image", "seffi/step": 200}  # the run-wide axis


def test_closing_lines_name_the_folder_and_the_sync_command(
    offline_run_in_cwd: FakeRun, tmp_path: Path
) -> None:
    """The one message seffi run and every adapter print at the end."""
    from seffi.report.sinks import closing_lines

    assert closing_lines(tmp_path / "runs" / "r", SafeWandbRun(run=offline_run_in_cwd), seconds=1.25) == [
        "run folder: runs/r  (report.json, report.md, plots; 1.2 s)",
        "W&B offline run saved; upload it with: wandb sync wandb/offline-run-1-abc",
    ]
    assert closing_lines("runs/r", SafeWandbRun(mode="disabled"), prefix="[seffi] ") == [
        "[seffi] run folder: runs/r  (report.json, report.md, plots)"
    ]
    broken = SafeWandbRun(run=FakeRun(fail_on="seffi/x"))
    with pytest.warns(WandbSinkWarning):
        broken.log({"seffi/x": 1}, 1)
    assert closing_lines(None, broken) == [
        "W&B logging failed (see the warning above); the run folder has everything"
    ]

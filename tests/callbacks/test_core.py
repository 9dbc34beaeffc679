from __future__ import annotations


def test_a_monitor_with_its_own_sinks_says_where_its_report_went(tmp_path, capsys, monkeypatch) -> None:
    """``close()`` prints the folder and the sync command once (as ``seffi run``).

    Sinks passed in belong to an adapter or ``seffi run``, which prints the message itself.
    """
    from seffi.callbacks.core import CoverageMonitor
    from seffi.report.sinks import LocalSink

    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.chdir(tmp_path)
    monitor = CoverageMonitor(2, ("a", "b"), out_dir="out", wandb="offline", plots=False, n_boot=0)
    monitor.update_infos({"input_id": "x", "strategy_matches": ("a",), "sample_index": 1}, True)
    monitor.close()
    monitor.close()  # idempotent: nothing printed twice
    run_dir = monitor.sinks.wandb.run.run_dir.relative_to(tmp_path)
    assert str(run_dir).startswith("wb/wandb/offline-run-")
    assert capsys.readouterr().out.splitlines() == [
        "[seffi] run folder: out  (report.json, report.md)",
        f"[seffi] W&B offline run saved; upload it with: wandb sync {run_dir}",
    ]
    passed = CoverageMonitor(2, ("a", "b"), sinks=LocalSink(tmp_path / "own"), n_boot=0)
    passed.update_infos({"input_id": "x", "strategy_matches": ("b",), "sample_index": 1}, True)
    passed.close()
    assert capsys.readouterr().out == ""


def test_snapshots_use_snapshot_n_boot_and_the_final_report_n_boot(tmp_path, monkeypatch) -> None:
    """Snapshots draw ``snapshot_n_boot`` bootstrap replicates; the final report draws ``n_boot``."""
    from seffi.callbacks.core import CoverageMonitor
    from seffi.coverage.tracker import CoverageTracker
    from seffi.report.sinks import LocalSink

    drawn: list[int] = []
    curves = CoverageTracker.curves

    def spy(self, *args, **kwargs):
        drawn.append(kwargs["n_boot"])
        return curves(self, *args, **kwargs)

    monkeypatch.setattr(CoverageTracker, "curves", spy)
    monitor = CoverageMonitor(
        2, ("a", "b"), sinks=LocalSink(tmp_path / "run", plots=False), n_boot=40, snapshot_n_boot=7,
        log_every=2, log_curves_every=1,
    )  # fmt: skip
    for i in range(8):
        end = {"input_id": f"x{i // 2 % 3}", "strategy_matches": ("ab"[i % 2],), "sample_index": 1 + i % 2}
        monitor.update_infos(dict(end, run_index=i // 2), True)
        monitor.maybe_log(i + 1)
    assert drawn and set(drawn) == {7}
    drawn.clear()
    monitor.close()
    assert drawn == [40]
    assert CoverageMonitor(2, ("a",), sinks=LocalSink(tmp_path / "b"), n_boot=5).snapshot_n_boot == 5

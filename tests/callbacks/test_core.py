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


def test_a_user_sink_gets_the_tracker_state_as_json_safe_data(tmp_path) -> None:
    """A sink of the user's own (alone, or beside seffi's in a MultiSink) gets ``state_dict()`` data.

    seffi's own sinks write the tracker as they read it; any other sink gets what `state_dict` gives.
    """
    import json

    from seffi.callbacks.core import CoverageMonitor
    from seffi.report.sinks import LocalSink, MultiSink

    class UserSink:
        def __init__(self) -> None:
            self.got: list[str] = []

        def log(self, data, step) -> None: ...

        def log_snapshot(self, comparison, step, scope=None) -> None: ...

        def checkpoint(self, report, tracker_state) -> None:
            self.got.append(json.dumps(tracker_state, sort_keys=True))

        def finish(self, report=None, tracker_state=None) -> None:
            self.got.append(json.dumps(tracker_state, sort_keys=True))

    alone, beside = UserSink(), UserSink()
    local = LocalSink(tmp_path / "run", plots=False)
    for sinks in (alone, MultiSink([local, beside])):
        monitor = CoverageMonitor(2, ("a", "b"), sinks=sinks, log_every=4, n_boot=5, checkpoint_every=4)
        ids, hits = ["x", "x", "y", "y"], [("a",), ("b",), ("a",), ("a",)]
        for i, (x, h) in enumerate(zip(ids, hits, strict=True)):
            monitor.update_infos({"input_id": x, "strategy_matches": h, "sample_index": i % 2 + 1}, True)
        monitor.maybe_log(4)
        monitor.close()
        want = json.dumps(monitor.tracker.state_dict(), sort_keys=True)
        assert sinks is alone or json.loads((tmp_path / "run" / "tracker_state.json").read_text())
        assert (alone if sinks is alone else beside).got == [want, want]  # the checkpoint, then finish
    assert json.loads((tmp_path / "run" / "tracker_state.json").read_text()) == json.loads(want)


def test_a_with_block_writes_the_report_and_marks_one_cut_short_by_an_error(tmp_path) -> None:
    """Leaving a ``with CoverageMonitor(...)`` block writes the report; an error inside it (like
    Ctrl-C) marks the report interrupted, so a crashed run never reads as a finished one."""
    import json

    import pytest

    from seffi.callbacks.core import CoverageMonitor

    info = {"input_id": "x", "strategy_matches": ("a",)}
    with CoverageMonitor(1, ("a", "b"), out_dir=tmp_path / "done", wandb="disabled", plots=False) as m:
        m.update_infos(info, True)
    with pytest.raises(ValueError, match="the user's loop fails"):
        with CoverageMonitor(1, ("a", "b"), out_dir=tmp_path / "cut", wandb="disabled", plots=False) as m:
            m.update_infos(info, True)
            raise ValueError("the user's loop fails")
    meta = {d: json.loads((tmp_path / d / "report.json").read_text())["meta"] for d in ("done", "cut")}
    assert not meta["done"].get("interrupted") and meta["cut"]["interrupted"] is True


def test_metrics_after_a_close_without_a_step_are_the_reports(tmp_path) -> None:
    """``close()`` with no step logs nothing more, yet ``metrics()`` then holds the final numbers, as
    report.json and the W&B summary do: 5 runs of K = 2 in one env row, the last log after 4 runs."""
    import json

    from seffi.callbacks.core import CoverageMonitor

    m = CoverageMonitor(2, ("a", "b"), out_dir=tmp_path / "run", wandb="disabled", plots=False, log_every=8)
    for i, s in enumerate("aaabbaabbb", 1):  # runs aa ab ba ab bb: C(1) = 1/2, C(2) = 4/5
        m.update_infos({"input_id": "x", "strategy_matches": (s,)}, True)
        m.maybe_log(i)
    assert m.metrics()["seffi/episodes"] == 8
    m.close()
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    auc = report["comparisons"][0]["policies"][0]["curves"]["auc"]
    assert auc == (0.5 + 0.8) / 2 and m.metrics()["seffi/auc"] == auc and m.metrics()["seffi/episodes"] == 10

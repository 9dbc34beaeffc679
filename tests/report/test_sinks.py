"""Sinks end to end: one shared offline W&B run (init is slow), read back with `wandb leet inspect`."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from seffi._io import read_jsonl
from seffi.report import WandbSinkWarning, default_sinks, keys, load_report
from seffi.report.sinks import LocalSink, MultiSink, WandbSink
from tests.helpers import wandb_leet
from tests.report import _fixtures as fx

STEPS = [10, 20, 15, 30]  # 15 is out of order: it must reach the local sink but never W&B


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sinks")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            mp.setenv(var, str(root / var.lower()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sink = default_sinks(root / "out", wandb="offline", dir=root / "wb", log_curves_every=2, name="t")
            assert isinstance(sink, MultiSink) and sink.wandb is not None and sink.wandb.enabled
            report = fx.report()
            comp = report.comparisons[0]
            for i, step in enumerate(STEPS):
                data = keys.scalars_from_curves(comp.policies[0].curves, gain=comp.policies[0].gain)
                data[keys.auc_key()] = 0.1 * (i + 1)  # distinguishable per step
                sink.log(data, step)
                sink.log_snapshot(comp, step)
            sink.finish(report, tracker_state={"inputs": {"a": [1, 2]}, "K": fx.K})
    ours = [w for w in caught if issubclass(w.category, WandbSinkWarning)]
    return {"sink": sink, "report": report, "warnings": ours, "run_dir": sink.wandb.run.run_dir, "root": root}


def test_offline_run_summary_viawandb_leet(offline_run: dict[str, Any]) -> None:
    run_dir = offline_run["run_dir"]
    assert run_dir.name.startswith("offline-run-") and list(run_dir.glob("*.wandb"))
    assert offline_run["sink"].wandb.run.sync_hint == f"wandb sync {run_dir}"
    summary = json.loads(wandb_leet(run_dir, "--summary", "--json"))
    assert summary["state"] == "finished"
    s = summary["summary"]
    pol = offline_run["report"].comparisons[0].policies[0]
    assert s["seffi/gain_vs_iid"] == pytest.approx(pol.gain.value)
    assert s["seffi/gain_vs_iid_lo"] == pytest.approx(pol.gain.lo)
    # the final summary (report numbers) overrides the last logged auc (0.4)
    assert s["seffi/auc"] == pytest.approx(pol.curves.auc)
    assert s["seffi/coverage/k=16"] == pytest.approx(fx.POLICY[-1])
    assert s["seffi/step"] == 30


def test_out_of_order_step_never_reaches_wandb(offline_run: dict[str, Any]) -> None:
    records = [json.loads(line) for line in wandb_leet(offline_run["run_dir"], "--json").splitlines() if line]
    history = [r["history"]["item"] for r in records if r.get("type") == "history"]
    steps = [h["seffi/step"] for h in history]
    assert 15 not in steps
    assert steps == sorted(steps) and set(steps) == {10, 20, 30}
    scalar_rows = [h for h in history if "seffi/auc" in h]
    assert [h["seffi/auc"] for h in scalar_rows] == pytest.approx([0.1, 0.2, 0.4])
    # snapshots: calls 0 and 2 (steps 10 and 15) pass log_curves_every=2, but 15 is out of order
    images = [h for h in history if any(k.startswith("seffi/curves/coverage_plot.") for k in h)]
    assert [h["seffi/step"] for h in images] == [10]
    charts = [
        k for r in records if r.get("type") == "config" for k in r["config"]["update"] if "visualize" in k
    ]
    assert charts == ["_wandb.visualize.seffi/curves/coverage"]  # the step-10 snapshot only
    assert any(r.get("type") == "artifact" for r in records)
    order = [w for w in offline_run["warnings"] if "steps must not decrease" in str(w.message)]
    assert len(order) == 1  # one warning, later drops are silent


def test_tables_never_enter_the_history_so_nothing_but_scalars_is_charted(
    offline_run: dict[str, Any],
) -> None:
    run_dir = offline_run["run_dir"]
    records = [json.loads(line) for line in wandb_leet(run_dir, "--json").splitlines() if line]
    history = [r["history"]["item"] for r in records if r.get("type") == "history"]
    # Every number of a history row is a seffi scalar or a field of an image (``wandb leet`` draws
    # images as media, and charts every other number, as W&B's workspace does).
    image_fields = {"height", "width", "size"}
    for row in history:
        for key, value in row.items():
            if key.startswith("_") or not isinstance(value, (int, float)):
                continue
            media, _, field = key.rpartition(".")
            kind = row.get(f"{media}._type")
            assert kind is None or (kind == "image-file" and field in image_fields), key
    assert not any(v == "table-file" for row in history for v in row.values())
    # The chart's table is the summary's: the step-10 snapshot, one line per curve set, C(k) exact.
    summary = json.loads(wandb_leet(run_dir, "--summary", "--json"))["summary"]
    meta = summary["seffi/curves/coverage_table"]
    assert meta["_type"] == "table-file"
    table = json.loads((run_dir / "files" / meta["path"]).read_text())
    col = {name: i for i, name in enumerate(table["columns"])}
    lines: dict[str, list[float]] = {}
    for row in table["data"]:
        lines.setdefault(row[col["lineKey"]], []).append(row[col["lineVal"]])
    assert set(lines) == {"learned", "iid", "oracle"}
    np.testing.assert_allclose(lines["iid"], fx.IID, rtol=1e-12)
    np.testing.assert_allclose(lines["oracle"], fx.ORACLE, rtol=1e-12)
    np.testing.assert_allclose(lines["learned"], fx.POLICY, rtol=1e-12)


def test_final_curves_chart_every_policy_whatever_log_curves_every() -> None:
    from seffi.report import ForwardingSink, SafeWandbRun
    from tests.report.test_wandb_run import FakeRun

    run = FakeRun()
    wandb = WandbSink(SafeWandbRun(run=run), log_curves_every=10)
    shared = MultiSink([wandb])
    comp = fx.comparison("sort", None, 3)
    shared.log({"seffi/auc": 0.5}, 40)
    ForwardingSink(shared).log_final_curves(comp, None, "Sort-v0")
    ((key, _),) = run.config_updates
    assert key == ("_wandb", "visualize", "seffi/Sort-v0/curves/coverage")
    labels = [row[1] for row in run.summary["seffi/Sort-v0/curves/coverage_table"].data]
    assert sorted(set(labels)) == ["iid", "learned", "learned1", "learned2", "oracle"]
    assert len(run.logged) == 1  # the image is drawn at the sink's next call
    wandb.log_final_curves(comp, 41, "Sort-v0", image=False)
    images = [(row["seffi/step"], k) for row in run.logged for k in row if k.endswith("coverage_plot")]
    assert images == [(40, "seffi/Sort-v0/curves/coverage_plot")]  # at the last logged step
    assert len(run.config_updates) == 2 and len(run.logged) == 2  # the chart again, no second image


def test_local_sink_keeps_everything(offline_run: dict[str, Any]) -> None:
    local = offline_run["sink"].local
    records = read_jsonl(local.metrics_path)
    assert [r["seffi/step"] for r in records] == STEPS
    assert [r["seffi/auc"] for r in records] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert len(local.snapshots_path.read_text().splitlines()) == len(STEPS)
    assert json.loads((local.out_dir / "tracker_state.json").read_text()) == {
        "K": 16,
        "inputs": {"a": [1, 2]},
    }
    assert load_report(local.out_dir) == offline_run["report"]
    assert (local.out_dir / "plots" / "HanoiRouter-v0_coverage.png").stat().st_size > 10_000


def test_wandb_init_failure_keeps_local_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import wandb

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("quota exceeded")

    monkeypatch.setattr(wandb, "init", boom)
    monkeypatch.setattr(wandb, "run", None)
    with pytest.warns(WandbSinkWarning, match="quota exceeded") as rec:
        sink = default_sinks(tmp_path, wandb="offline")
        assert sink.wandb is not None and not sink.wandb.enabled
        for step in (1, 2, 3):
            sink.log({keys.auc_key(): step / 10}, step)
            sink.log_snapshot(fx.comparison(), step)
        sink.finish(fx.report(), tracker_state={"x": 1})
    assert len([w for w in rec if issubclass(w.category, WandbSinkWarning)]) == 1
    assert [r[keys.auc_key()] for r in read_jsonl(sink.local.metrics_path)] == [0.1, 0.2, 0.3]
    assert load_report(tmp_path) == fx.report()
    assert (tmp_path / "report.md").is_file() and (tmp_path / "tracker_state.json").is_file()
    assert sink.wandb.run.sync_hint is None


def test_disabled_and_bad_arguments(tmp_path: Path) -> None:
    sink = default_sinks(tmp_path / "d", wandb="disabled")
    assert sink.wandb is None and isinstance(sink.local, LocalSink)
    with pytest.raises(ValueError, match="log_curves_every"):
        WandbSink(mode="disabled", log_curves_every=0)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="cannot write to the output folder"):
        LocalSink(blocker / "sub")


def test_every_scope_gets_its_first_curve_snapshot() -> None:
    """Curve tables for every task: the snapshot counter is per scope.

    One counter for every scope would, with ``log_curves_every=10``, give only the first task's
    training stream a ``coverage`` table and ``coverage_plot`` image.
    """
    from seffi.report import SafeWandbRun
    from tests.report.test_wandb_run import FakeRun

    run = FakeRun()
    sink = WandbSink(SafeWandbRun(run=run), log_curves_every=10)
    comp = fx.report().comparisons[0]
    for step, scope in enumerate(("A-v0/train", "A-v0/train", "B-v0/train", "B-v0/train")):
        sink.log_snapshot(comp, step, scope)
    tables = [key[2] for key, _ in run.config_updates]
    images = [k for row in run.logged for k in row if k.endswith("/curves/coverage_plot")]
    assert tables == ["seffi/A-v0/train/curves/coverage", "seffi/B-v0/train/curves/coverage"]
    assert images == ["seffi/A-v0/train/curves/coverage_plot", "seffi/B-v0/train/curves/coverage_plot"]


def test_null_and_forwarding_sinks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One NullSink and one ForwardingSink in seffi.report (used by the
    RLlib and TRL adapters and the runner); W&B mode resolution is one function."""
    from seffi.report import ForwardingSink, NullSink, Sink, wandb_mode
    from seffi.report.wandb_run import wandb_mode_from_env

    null = NullSink()
    assert isinstance(null, Sink)
    # A monitor finds no checkpoint or render-ahead here, so a replica never builds a report to drop.
    assert not hasattr(null, "checkpoint") and not hasattr(null, "render_ahead")
    null.log({"seffi/auc": 1.0}, 1)
    null.finish(fx.report())
    shared = MultiSink([LocalSink(tmp_path, plots=False)])
    fwd = ForwardingSink(shared, scope="Hanoi/train", start=10)
    fwd.log({"seffi/auc": 0.5}, 14)
    fwd.log_snapshot(fx.comparison(), 14, "Hanoi/train")
    fwd.finish(fx.report())  # the run's owner finishes the shared sinks, not a forwarder
    assert not (tmp_path / "report.json").exists()
    assert read_jsonl(shared.local.metrics_path) == [
        {"seffi/step": 14, "seffi/auc": 0.5, "seffi/Hanoi/train/step": 4.0}
    ]
    assert len((tmp_path / "snapshots.jsonl").read_text().splitlines()) == 1
    cases = (("", "offline"), ("dryrun", "offline"), ("run", "online"), ("DISABLED", "disabled"))
    for env, expected in cases:
        monkeypatch.setenv("WANDB_MODE", env)
        assert wandb_mode() == expected and wandb_mode("online") == "online"
    monkeypatch.setenv("WANDB_MODE", "bogus")
    assert wandb_mode_from_env() is None and wandb_mode() == "offline"


def test_local_sink_keeps_its_files_open_and_every_record_readable(tmp_path: Path) -> None:
    """One handle per file, flushed per record, closed at finish, reopened after."""
    sink = LocalSink(tmp_path / "run", plots=False)
    sink.log({"seffi/auc": 0.5}, 1)
    first = sink._handles[sink.metrics_path]
    sink.log({"seffi/auc": 0.625}, 2)
    assert sink._handles[sink.metrics_path] is first  # not reopened per log
    # Readable by another reader before finish: each record is flushed.
    lines = sink.metrics_path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["seffi/auc"] for x in lines] == [0.5, 0.625]
    sink.finish()
    assert first.closed and not sink._handles
    sink.log({"seffi/auc": 0.75}, 3)  # a late log appends, it never truncates
    sink.close()
    assert [r[keys.STEP_KEY] for r in read_jsonl(sink.metrics_path)] == [1, 2, 3]


def test_local_sink_resuming_a_killed_runs_folder_drops_its_partial_last_line(tmp_path: Path) -> None:
    """A line cut by a kill is dropped before the next one is appended: every line reads back whole."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "metrics.jsonl").write_text('{"seffi/auc": 0.5, "seffi/step": 1}\n{"seffi/auc": 0.6, "sef')
    sink = LocalSink(folder, plots=False)
    sink.log({"seffi/auc": 0.75}, 3)
    sink.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a partial or damaged line would warn or raise
        records = read_jsonl(folder / "metrics.jsonl")
    assert records == [{"seffi/auc": 0.5, keys.STEP_KEY: 1}, {"seffi/auc": 0.75, keys.STEP_KEY: 3}]


def test_scalars_keys_cached_per_scope_and_budgets() -> None:
    """Keys built once still follow the scope and the budgets given."""
    curves = {"k": [1, 2, 3], "coverage": [0.25, 0.5, float("nan")], "auc": 0.375}
    plain = keys.scalars_from_curves(curves)
    scoped = keys.scalars_from_curves(curves, scope="t/p")
    assert plain[keys.coverage_key(2)] == 0.5 and keys.coverage_key(3) not in plain  # NaN left out
    assert scoped[keys.coverage_key(2, "t/p")] == 0.5 and keys.coverage_key(2) not in scoped
    short = keys.scalars_from_curves({"k": [1, 2], "coverage": [0.25, 0.5]})
    assert short[keys.coverage_key(2)] == 0.5 and keys.coverage_key(1) in short
    gapped = keys.scalars_from_curves({"k": [1, 2, 4], "coverage": [0.1, 0.2, 0.4]})
    assert gapped[keys.coverage_key(4)] == 0.4


def test_final_wandb_image_and_report_coverage_plot_are_drawn_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seffi.report import SafeWandbRun, plots
    from seffi.report import plots as P
    from tests.report.test_wandb_run import FakeRun

    titles: list[str] = []  # every figure rendered to PNG, by its title
    save = plots.save_figure

    def counting(fig: Any, path: Any, **kwargs: Any) -> Path:
        titles.append(fig.get_suptitle())
        return save(fig, path, **kwargs)

    monkeypatch.setattr(plots, "save_figure", counting)
    monkeypatch.setattr(P, "_last_coverage", None)

    class Run(FakeRun):
        def log_artifact(self, artifact: Any) -> None:
            self.artifact = artifact

    run = Run()
    sinks = MultiSink([LocalSink(tmp_path), WandbSink(SafeWandbRun(run=run), log_curves_every=10)])
    report = fx.report()
    sinks.log({"seffi/auc": 0.5}, 40)
    sinks.log_final_curves(report.comparisons[0], None, None)  # as a monitor's finalize, then finish
    sinks.finish(report)
    assert sum(": strategy coverage (" in t for t in titles) == 1
    assert len(titles) == len(list((tmp_path / "plots").glob("*.png"))) == 7
    images = [k for row in run.logged for k in row if k.endswith("coverage_plot")]
    assert images == ["seffi/curves/coverage_plot"]
    png = tmp_path / "plots" / f"{report.slugs()[0]}_coverage.png"
    reference = P.save_figure(P.plot_coverage(report.comparisons[0]), tmp_path / "reference.png")
    assert png.read_bytes() == reference.read_bytes()


def test_wandb_sink_passes_run_settings_to_the_run_it_starts(tmp_path) -> None:
    """``WandbSink(project=..., name=..., tags=..., dir=...)`` starts its offline run with them."""
    sink = WandbSink(mode="offline", project="my-project", name="trial-7", tags=["a"], dir=tmp_path)
    try:
        assert sink.run.enabled and sink.run.owns_run
        assert (sink.run.run.project, sink.run.run.name, tuple(sink.run.run.tags)) == (
            "my-project",
            "trial-7",
            ("a",),
        )
    finally:
        sink.finish()


def test_a_tracker_given_as_tracker_state_is_written_as_its_state_dict(tmp_path: Path) -> None:
    """The local file and the W&B artifact of a tracker hold its ``state_dict`` as JSON, which loads back."""
    from seffi.coverage import CoverageTracker
    from seffi.report import SafeWandbRun
    from tests.report.test_wandb_run import FakeRun

    t = CoverageTracker(["a", "b"], budget=3)
    for i, hits in enumerate([["a"], [], ["b", "a"], ["b"], []]):
        t.update(f"x{i % 2}", hits, valid=i % 3 == 0)
    wandb = WandbSink(SafeWandbRun(run=FakeRun()), log_images=False)
    got: dict[str, str] = {}  # each artifact file's text, read when it is logged
    wandb.run.log_artifact = lambda name, kind, paths: got.update(
        {Path(p).name: Path(p).read_text() for p in paths}
    )
    MultiSink([LocalSink(tmp_path, plots=False), wandb]).finish(None, t)
    want = json.dumps(t.state_dict(), sort_keys=True, separators=(",", ":")) + "\n"
    assert (tmp_path / "tracker_state.json").read_text() == got["tracker_state.json"] == want
    assert CoverageTracker.from_state_dict(json.loads(want)).state_dict() == t.state_dict()


def test_multisink_builds_state_dict_once_for_all_sinks_that_want_data() -> None:
    """Sinks without ``takes_tracker`` share one ``state_dict()``; seffi's own sinks get the tracker."""
    from seffi.report.sinks import MultiSink, NullSink

    class Tracker:
        calls = 0

        def state_dict(self) -> dict:
            Tracker.calls += 1
            return {"n": Tracker.calls}

    class UserSink:
        def __init__(self) -> None:
            self.got: list = []

        def checkpoint(self, report, tracker_state) -> None:
            self.got.append(tracker_state)

        def finish(self, report=None, tracker_state=None) -> None:
            self.got.append(tracker_state)

    class OwnSink(UserSink):
        takes_tracker = True

    tracker, a, b, own = Tracker(), UserSink(), UserSink(), OwnSink()
    sinks = MultiSink([a, NullSink(), own, b])
    sinks.checkpoint(None, tracker)
    sinks.finish(None, tracker)
    assert a.got == b.got == [{"n": 1}, {"n": 2}] and own.got == [tracker, tracker]
    sinks.finish(None, None)
    assert a.got[-1] is None and own.got[-1] is None and Tracker.calls == 2

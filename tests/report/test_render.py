"""Plots drawn by a child process (`PlotRenderer`) are the files the process itself draws, byte for byte;
a report that changed after it was handed over, a child that died and a failing plot all still end in a
complete run folder (or one error line) with report.json written first."""

from __future__ import annotations

from pathlib import Path

import pytest

from seffi.errors import SeffiError
from seffi.report import files as R
from seffi.report.files import PlotRenderer, dumps_report, load_report
from seffi.report.plots import render_report_plots
from seffi.report.schema import Report
from seffi.report.sinks import LocalSink
from tests.report import _fixtures as fx


def _pngs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "plots").glob("*.png"))}


def _in_process(report: Report, folder: Path) -> dict[str, bytes]:
    render_report_plots(report, folder)
    return _pngs(folder)


def _other_report() -> Report:
    """The fixture's report with other numbers (a changed coverage curve): other plots."""
    report = fx.report()
    comp = report.comparisons[0]
    policy = comp.policies[0]
    curves = policy.curves.model_copy(update={"coverage": [c * 0.5 for c in policy.curves.coverage]})
    policies = [policy.model_copy(update={"curves": curves})]
    return report.model_copy(update={"comparisons": [comp.model_copy(update={"policies": policies})]})


@pytest.fixture
def no_parent_drawing(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the plots drawn in this process through the renderer (0 when the child drew them)."""
    calls: list[int] = []

    def counting(*args: object, **kwargs: object) -> dict[str, Path]:
        calls.append(1)
        return render_report_plots(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(R, "render_report_plots", counting)
    return calls


def test_child_draws_the_same_files_as_this_process(tmp_path: Path, no_parent_drawing: list[int]) -> None:
    report = fx.report()
    sink = LocalSink(tmp_path / "run")
    sink.render_ahead(report)
    sink.finish(report, {"samples": 1})
    assert no_parent_drawing == []  # the child drew them
    drawn = _pngs(tmp_path / "run")
    assert len(drawn) == 7
    assert drawn == _in_process(report, tmp_path / "reference")
    assert (tmp_path / "run" / "report.json").read_text() == dumps_report(report)
    assert load_report(tmp_path / "run") == report
    for name in drawn:  # report.md shows every plot
        assert f"plots/{name}" in (tmp_path / "run" / "report.md").read_text()


def test_child_files_reach_a_run_folder_on_another_file_system(
    tmp_path: Path, no_parent_drawing: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rename across file systems fails (EXDEV): the child's files are copied instead."""
    report = fx.report()
    sink = LocalSink(tmp_path / "run")
    sink.render_ahead(report)

    rename = R.os.replace

    def cross_device(src: str, dst: str) -> None:
        if "seffi-plots-" in str(src):  # a file of the child's private folder
            raise OSError(18, "Invalid cross-device link")
        rename(src, dst)

    monkeypatch.setattr(R.os, "replace", cross_device)
    sink.finish(report, {"samples": 1})
    assert no_parent_drawing == []  # the child drew them
    assert _pngs(tmp_path / "run") == _in_process(report, tmp_path / "reference")


def test_a_report_that_changed_after_render_ahead_is_drawn_anew(
    tmp_path: Path, no_parent_drawing: list[int]
) -> None:
    early, final = fx.report(), _other_report()
    sink = LocalSink(tmp_path / "run")
    sink.render_ahead(early)
    sink.finish(final)
    assert no_parent_drawing == [1]
    expected = _in_process(final, tmp_path / "final")
    assert _pngs(tmp_path / "run") == expected != _in_process(early, tmp_path / "early")
    assert load_report(tmp_path / "run") == final


def test_an_idle_child_draws_the_report_finish_gives_it(tmp_path: Path, no_parent_drawing: list[int]) -> None:
    report = fx.report()
    sink = LocalSink(tmp_path / "run")
    sink.start_renderer()  # as the SB3 callback does when training starts
    sink.finish(report)
    assert no_parent_drawing == []
    assert _pngs(tmp_path / "run") == _in_process(report, tmp_path / "reference")


def test_a_child_that_died_leaves_the_plots_to_this_process(
    tmp_path: Path, no_parent_drawing: list[int]
) -> None:
    report = fx.report()
    renderer = PlotRenderer()
    renderer.submit(dumps_report(report))
    assert renderer._proc is not None
    renderer._proc.kill()
    files = renderer.plots(report, dumps_report(report), tmp_path / "run")
    assert no_parent_drawing == [1]
    assert {p.name for p in files.values()} == set(_pngs(tmp_path / "run"))
    assert _pngs(tmp_path / "run") == _in_process(report, tmp_path / "reference")


def test_no_child_process_at_all_draws_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_parent_drawing: list[int]
) -> None:
    monkeypatch.setattr(R.sys, "executable", str(tmp_path / "no-python-here"))
    report = fx.report()
    sink = LocalSink(tmp_path / "run")
    sink.render_ahead(report)
    sink.finish(report)
    assert no_parent_drawing == [1]
    assert _pngs(tmp_path / "run") == _in_process(report, tmp_path / "reference")


def test_a_failing_plot_never_loses_report_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(*args: object, **kwargs: object) -> dict[str, Path]:
        raise OSError(28, "No space left on device")

    report = fx.report()
    sink = LocalSink(tmp_path / "run")
    sink.render_ahead(_other_report())  # the child's plots are not this report's: drawn here, and fail
    monkeypatch.setattr(R, "render_report_plots", full_disk)
    with pytest.raises(SeffiError, match=r"cannot write the plots .*No space left on device"):
        sink.finish(report, {"samples": 1})
    assert load_report(tmp_path / "run") == report
    assert (tmp_path / "run" / "tracker_state.json").is_file()


def test_close_stops_an_unused_child_and_removes_its_folder() -> None:
    renderer = PlotRenderer()
    proc, folder = renderer._proc, Path(renderer._folder)
    assert proc is not None and folder.is_dir()
    renderer.close()
    assert proc.returncode is not None and not folder.exists()
    renderer.close()  # idempotent


def test_a_child_whose_parent_ends_without_a_report_removes_its_folder() -> None:
    renderer = PlotRenderer()
    proc, folder = renderer._proc, Path(renderer._folder)
    assert proc is not None and proc.stdin is not None
    proc.stdin.close()  # what a killed parent leaves: end of input, no report
    assert proc.wait(timeout=60) == 0
    assert not folder.exists()
    renderer.close()

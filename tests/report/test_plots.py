from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seffi.report import Report, write_report
from seffi.report import plots as P
from tests.report import _fixtures as fx


def _pixel_std(path: Path) -> float:
    from matplotlib.image import imread

    return float(np.asarray(imread(path))[..., :3].std())


def test_blank_detector_detects_blank(tmp_path: Path) -> None:
    # The non-blank check used below must be able to fail: an empty figure has ~0 variance.
    fig, _ = P._figure()
    fig.axes[0].set_axis_off()
    assert _pixel_std(P.save_figure(fig, tmp_path / "blank.png")) < 1e-6


def test_write_report_renders_every_plot(tmp_path: Path) -> None:
    files = write_report(tmp_path, fx.report())
    names = {n.split("/", 1)[1] for n in files if "/" in n}
    assert names == {"coverage", "novelty", "time_to_coverage", "valid_vs_raw", "barcode_learned", "latent"}
    for name, path in files.items():
        assert path.is_file() and path.stat().st_size > 0, name
        if path.suffix == ".png":
            assert path.stat().st_size > 10_000, name
            assert _pixel_std(path) > 0.05, name
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    for path in files.values():
        if path.suffix == ".png":
            assert f"]({path.relative_to(tmp_path).as_posix()})" in md


def test_optional_panels_only_when_data_exists(tmp_path: Path) -> None:
    comp = fx.comparison()
    bare = comp.model_copy(
        update={"policies": [p.model_copy(update={"latent": None, "barcode": None}) for p in comp.policies]}
    )
    assert P.plot_latent(bare) is None
    files = P.render_report_plots(Report(comparisons=[bare]), tmp_path)
    assert not any("latent" in n or "barcode" in n for n in files)


def test_plot_compare_and_null_values(tmp_path: Path) -> None:
    a = fx.report()
    b = Report(comparisons=[fx.comparison("hanoi", None, 2), fx.comparison("sort", None)])
    path = P.save_figure(P.plot_compare({"run-a": a, "run-b": b}), tmp_path / "compare.png")
    assert _pixel_std(path) > 0.05
    with pytest.raises(ValueError, match="no comparisons"):
        P.plot_compare({"empty": Report()})
    # per-k nulls (undefined values) draw as gaps instead of failing
    comp = fx.comparison()
    pol = comp.policies[0]
    holes = pol.curves.model_copy(update={"coverage": [None, *pol.curves.coverage[1:]]})
    comp = comp.model_copy(update={"policies": [pol.model_copy(update={"curves": holes})]})
    assert _pixel_std(P.save_figure(P.plot_coverage(comp), tmp_path / "holes.png")) > 0.05

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seffi.report import Report, write_report
from seffi.report import plots as P
from tests.report import _fixtures as fx

LONG_ENV = "seffi/AVeryLongTaskNameForTestingTitleWrappingRouterWithExtraWords-v12"


def _pixel_std(path: Path) -> float:
    from matplotlib.image import imread

    return float(np.asarray(imread(path))[..., :3].std())


def _drawn(fig):
    fig.canvas.draw()  # runs the layout engine, as savefig does
    return fig.canvas.get_renderer()


def _ticks_out_of_view(fig) -> set[int]:
    """Tick labels matplotlib keeps but does not draw (their tick lies outside the axis' view)."""
    out: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks():
                if not lo - 1e-9 <= tick.get_loc() <= hi + 1e-9:
                    out |= {id(tick.label1), id(tick.label2)}
    return out


def test_blank_detector_detects_blank(tmp_path: Path) -> None:
    # The non-blank check used below must be able to fail: an empty figure has ~0 variance.
    fig = P._figure()
    fig.subplots()
    fig.axes[0].set_axis_off()
    assert _pixel_std(P.save_figure(fig, tmp_path / "blank.png")) < 1e-6


def test_write_report_renders_every_plot(tmp_path: Path) -> None:
    files = write_report(tmp_path, fx.report())
    names = {n.split("/", 1)[1] for n in files if "/" in n}
    assert names == {
        "coverage",
        "coverage_by_rarity",
        "novelty",
        "time_to_coverage",
        "valid_vs_raw",
        "barcode",
        "latent",
    }
    for name, path in files.items():
        assert path.is_file() and path.stat().st_size > 0, name
        if path.suffix == ".png":
            assert path.stat().st_size > 10_000, name
            assert _pixel_std(path) > 0.05, name
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    for path in files.values():
        if path.suffix == ".png":
            assert f"]({path.relative_to(tmp_path).as_posix()})" in md
    assert "Common vs rare strategies" in md and "sum to its AUC − AUC_iid" in md


def _savefig_png(fig) -> bytes:
    """The PNG of matplotlib's own ``savefig`` (its layout pass inside), with save_figure's settings."""
    import io

    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"text.hinting": "no_hinting"}):
        fig.savefig(
            buf, format="png", dpi=P.DPI, metadata={"Software": None}, pil_kwargs={"compress_level": 1}
        )
    return buf.getvalue()


@pytest.mark.parametrize(
    "draw",
    [
        P.plot_coverage,
        P.plot_coverage_by_rarity,
        P.plot_novelty,
        P.plot_time_to_coverage,
        P.plot_valid_vs_raw,
        P.plot_barcodes,
        P.plot_latent,
    ],
)
def test_save_figure_writes_the_bytes_of_savefig_with_its_layout_pass(tmp_path: Path, draw) -> None:
    # save_figure runs the layout itself and skips savefig's disabled pre-draw: the pixels
    # (and so the PNG bytes) must be those of a plain savefig, which lays the figure out on its own.
    comp = fx.comparison()
    reference = _savefig_png(draw(comp))
    fig = draw(comp)
    assert fig.get_layout_engine() is not None
    written = P.save_figure(fig, tmp_path / "plot.png").read_bytes()
    assert written == reference
    assert _pixel_std(tmp_path / "plot.png") > 0.05


def test_optional_panels_only_when_data_exists(tmp_path: Path) -> None:
    comp = fx.comparison()
    bare = comp.model_copy(
        update={"policies": [p.model_copy(update={"latent": None, "barcode": None}) for p in comp.policies]}
    )
    assert P.plot_latent(bare) is None and P.plot_barcodes(bare) is None
    no_rarity = bare.model_copy(
        update={
            "iid": bare.iid.model_copy(update={"coverage_by_rarity": None, "rarity_bins": None}),
            "oracle": bare.oracle.model_copy(update={"coverage_by_rarity": None, "rarity_bins": None}),
            "policies": [
                p.model_copy(update={"curves": p.curves.model_copy(update={"coverage_by_rarity": None})})
                for p in bare.policies
            ],
        }
    )
    assert P.plot_coverage_by_rarity(no_rarity) is None
    files = P.render_report_plots(Report(comparisons=[no_rarity]), tmp_path)
    assert not any("latent" in n or "barcode" in n or "rarity" in n for n in files)


def test_plot_compare_and_null_values(tmp_path: Path) -> None:
    a = fx.report()
    b = Report(comparisons=[fx.comparison("hanoi", None, 2), fx.comparison("sort", None)])
    path = P.save_figure(P.plot_compare({"run-a": a, "run-b": b}), tmp_path / "compare.png")
    assert _pixel_std(path) > 0.05
    with pytest.raises(ValueError, match="no comparisons"):
        P.plot_compare({"empty": Report(comparisons=[])})
    # per-k nulls (undefined values) draw as gaps instead of failing
    comp = fx.comparison()
    pol = comp.policies[0]
    holes = pol.curves.model_copy(update={"coverage": [None, *pol.curves.coverage[1:]]})
    comp = comp.model_copy(update={"policies": [pol.model_copy(update={"curves": holes})]})
    assert _pixel_std(P.save_figure(P.plot_coverage(comp), tmp_path / "holes.png")) > 0.05


# -- layout: long titles stay inside the figure, legends stay off the data ---------------------------------


LONG_TASK = "a_very_long_task_name_for_testing_title_wrapping_with_extra_words_v12"


@pytest.mark.parametrize(
    "make",
    [
        P.plot_coverage,
        P.plot_coverage_by_rarity,
        P.plot_novelty,
        P.plot_time_to_coverage,
        P.plot_valid_vs_raw,
        P.plot_barcodes,
        P.plot_latent,
    ],
)
def test_no_text_is_cut_off_with_a_long_task_name(make) -> None:
    from matplotlib.text import Text

    comp = fx.comparison(task=LONG_TASK, env_id=LONG_ENV, n_policies=3)
    fig = make(comp)
    renderer = _drawn(fig)
    box = fig.bbox
    hidden = _ticks_out_of_view(fig)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in hidden]
    assert any(LONG_TASK in t.get_text().replace("\n", "") for t in texts)  # the task is shown, whole
    for t in texts:
        ext = t.get_window_extent(renderer)
        inside = (
            ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1 and ext.y1 <= box.y1 + 1
        )
        assert inside, f"text {t.get_text()!r} at {ext.bounds} leaves the figure {box.bounds}"


@pytest.mark.parametrize(
    "make", [P.plot_coverage, P.plot_valid_vs_raw, P.plot_novelty, P.plot_time_to_coverage]
)
def test_legends_sit_outside_the_axes(make) -> None:
    comp = fx.comparison(n_policies=4)  # 6 samplers: a crowded legend
    fig = make(comp)
    renderer = _drawn(fig)
    assert fig.legends, "one figure legend"
    assert not any(ax.get_legend() for ax in fig.axes)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"learned", "learned3", "oracle"} <= {s.split(":")[0].split(" (")[0] for s in labels}
    leg = fig.legends[0].get_window_extent(renderer)
    for ax in fig.axes:
        assert not leg.overlaps(ax.get_window_extent(renderer)), "the legend covers an axes"


def test_coverage_legend_carries_auc_and_gain() -> None:
    comp = fx.comparison()
    fig = P.plot_coverage(comp)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    g = comp.policies[0].gain
    assert f"learned: AUC {fx.POLICY.mean():.3f}, gain {g.value:.2f} [{g.lo:.2f}, {g.hi:.2f}]" in labels
    assert f"iid (exact): AUC {fx.IID.mean():.3f}" in labels


def test_valid_vs_raw_draws_both_curves_per_sampler() -> None:
    comp = fx.comparison()
    ax = P.plot_valid_vs_raw(comp).axes[0]
    lines = {(ln.get_linestyle(), ln.get_color()): ln.get_ydata() for ln in ax.get_lines()}
    pol = comp.policies[0].curves
    assert np.allclose(lines[("-", "tab:blue")], pol.coverage)
    assert np.allclose(lines[(":", "tab:blue")], pol.valid_coverage)


# -- common vs rare ------------------------------------------------------------------------------------------


def _axes(fig, gid: str):
    (ax,) = [a for a in fig.axes if a.get_gid() == gid]
    return ax


def _base(label: str) -> str:
    return label.split(" (")[0]


def test_rarity_plot_shows_per_bin_coverage_and_gain_split() -> None:
    comp = fx.comparison()
    fig = P.plot_coverage_by_rarity(comp)
    facets = [_axes(fig, f"rarity:facet:{b}") for b in range(4)]
    # The oracle reaches full coverage at K, so each bin is shown as a share of its own strategies:
    # bin sizes 2, 1, 1, 1 of M = 5 (hand count of the rank-quantile split of the fixture law).
    share = np.array([2, 1, 1, 1]) / fx.M
    lines = {
        _base(ln.get_label()): np.stack([np.asarray(f.get_lines()[i].get_ydata()) for f in facets])
        for i, ln in enumerate(facets[0].get_lines())
    }
    assert set(lines) == {"learned", "iid", "oracle"}
    for label, rows in [("learned", fx.POLICY_RARITY), ("iid", fx.IID_RARITY), ("oracle", fx.ORACLE_RARITY)]:
        assert np.allclose(lines[label], rows / share[:, None]), label
    assert np.allclose(lines["oracle"][:, -1], 1.0)  # every bin complete at K
    # The rarest bin: the iid finds a 3% strategy within K=16 with probability 1 - 0.97**16.
    assert lines["iid"][3, -1] == pytest.approx(1 - 0.97**16)

    bars = _axes(fig, "rarity:delta")
    heights = {_base(c.get_label()): np.array([r.get_height() for r in c]) for c in bars.containers}
    expected = 0.6 * (fx.ORACLE_RARITY - fx.IID_RARITY).mean(axis=1)
    assert np.allclose(heights["learned"], expected)
    # The split is exact: one sampler's bars add up to its AUC minus the iid AUC.
    assert heights["learned"].sum() == pytest.approx(fx.POLICY.mean() - fx.IID.mean())
    assert heights["oracle"].sum() == pytest.approx(fx.ORACLE.mean() - fx.IID.mean())
    # ... and the fixture's learned policy gains most among the rare strategies, as drawn.
    assert heights["learned"][3] > heights["learned"][0] > 0


def test_rarity_plot_drops_empty_bins_and_falls_back_to_contributions() -> None:
    # M = 3 strategies in 4 quantile bins: the rank split leaves the last bin empty.
    k = list(range(1, 5))
    rows = {"iid": [[0.2, 0.25, 0.3, 0.33], [0.05, 0.1, 0.15, 0.2], [0.01, 0.03, 0.05, 0.07], [0, 0, 0, 0]]}
    oracle_rows = [[1 / 3, 1 / 3, 1 / 3, 1 / 3], [0, 1 / 3, 1 / 3, 1 / 3], [0, 0, 1 / 3, 1 / 3], [0, 0, 0, 0]]
    comp = fx.comparison()

    def cs(label: str, role: str, r: list[list[float]]):
        cov = np.sum(r, axis=0)
        return comp.iid.model_copy(
            update={
                "label": label,
                "role": role,
                "k": k,
                "coverage": cov.tolist(),
                "coverage_lo": None,
                "coverage_hi": None,
                "coverage_by_rarity": r,
                "rarity_bins": fx.RARITY_LABELS,
            }
        )

    small = comp.model_copy(
        update={
            "budget": 4,
            "policies": [],
            "iid": cs("iid", "iid", rows["iid"]),
            "oracle": cs("oracle", "oracle", oracle_rows),
        }
    )
    data = P.rarity_panels(small)
    assert data["normalized"] and data["bins"] == fx.RARITY_LABELS[:3] and data["dropped"] == ["q4 (rarest)"]
    assert np.allclose(data["curves"]["iid"], np.array(rows["iid"][:3]) * 3)
    fig = P.plot_coverage_by_rarity(small)
    assert any("empty bins not shown: q4 (rarest)" in t.get_text() for t in fig.texts)
    # An oracle short of full coverage at K gives no bin sizes: contributions are drawn as stored.
    partial = small.model_copy(
        update={"oracle": cs("oracle", "oracle", [[*r[:3], 0.2] for r in oracle_rows])}
    )
    data = P.rarity_panels(partial)
    assert not data["normalized"] and data["dropped"] == [] and len(data["bins"]) == 4
    assert np.allclose(data["curves"]["iid"], rows["iid"])


def test_barcodes_share_rows_and_colours() -> None:
    comp = fx.comparison(n_policies=2)
    second = comp.policies[1].model_copy(update={"barcode": comp.policies[0].barcode})
    comp = comp.model_copy(update={"policies": [comp.policies[0], second]})
    fig = P.plot_barcodes(comp)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 2 and [ax.get_title() for ax in panels] == ["learned", "learned1"]
    bar = comp.policies[0].barcode
    img = np.asarray(panels[0].images[0].get_array()) / 255.0  # RGB bytes
    assert img.shape[:2] == (len(bar.matrix), fx.K)
    # Same strategy -> same colour in every cell; no-match cells are white.
    flat = np.array(bar.matrix)
    for v in range(-1, fx.M):
        colours = img[flat == v].reshape(-1, img.shape[-1])
        if len(colours):
            assert np.allclose(colours, colours[0])
            assert np.allclose(colours[0][:3], 1.0) == (v == -1)
    # First-appearance dots: one per new strategy per row.
    dots = panels[0].collections[0].get_offsets()
    assert len(dots) == sum(len({v for v in row if v >= 0}) for row in bar.matrix)


def test_time_to_coverage_merges_thresholds_only_when_they_coincide() -> None:
    # M = 5: 80% coverage needs 4 strategies, 100% needs 5 -> two survival panels + the box panel.
    fig = P.plot_time_to_coverage(fx.comparison())
    assert [ax.get_title() for ax in fig.axes][:2] == ["survival of $T_{0.8}$", "survival of $T_{1}$"]
    # M = 4: ceil(0.8 * 4) = 4 = M, so T(0.8) and T(1) are the same stopping time: one panel, which
    # says why on its title's second line.
    fig = P.plot_time_to_coverage(fx.comparison().model_copy(update={"num_strategies": 4}))
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title() == "survival of $T_{0.8} = T_{1}$\n(M = 4: 80% coverage needs all 4)"
    box_labels = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert box_labels == ["learned", "iid", "oracle"]
    assert fig.axes[1].get_title() == "$T_{0.8} = T_{1}$ per run"
    # Two thresholds: each box names its sampler and threshold on one line.
    labels = [t.get_text() for t in P.plot_time_to_coverage(fx.comparison()).axes[2].get_xticklabels()]
    assert labels[:2] == ["learned $T_{0.8}$", "learned $T_{1}$"]


def _censored_fixture(values: list[int | None]):
    """The fixture comparison whose every sampler has the per-run T(0.8) = T(1) ``values`` (M = 4)."""
    comp = fx.comparison().model_copy(update={"num_strategies": 4})

    def with_values(c):
        ttc = [t.model_copy(update={"values": values}) for t in c.time_to_coverage]
        return c.model_copy(update={"time_to_coverage": ttc})

    return comp.model_copy(
        update={
            "iid": with_values(comp.iid),
            "oracle": with_values(comp.oracle),
            "policies": [p.model_copy(update={"curves": with_values(p.curves)}) for p in comp.policies],
        }
    )


def test_censored_runs_sit_in_a_band_labelled_beyond_k_and_a_censored_median_is_marked() -> None:
    # 3 of 5 runs never reach full coverage within K = 16: the median run is censored.
    fig = P.plot_time_to_coverage(_censored_fixture([4, 9, None, None, None]))
    box_ax = fig.axes[-1]
    (band,) = [p for p in box_ax.patches if p.get_gid() == "censored"]
    y0, y1 = band.get_y(), band.get_y() + band.get_height()
    assert (y0, y1) == (fx.K + 0.5, fx.K + 1.5)
    ticks = dict(zip(box_ax.get_yticks(), (t.get_text() for t in box_ax.get_yticklabels()), strict=True))
    assert ticks[fx.K + 1] == f"$>{fx.K}$" and str(fx.K) not in ticks.values()  # 16 would touch "> 16"
    marks = [ln for ln in box_ax.lines if ln.get_gid() == "censored-median"]
    assert len(marks) == 3  # learned, iid, oracle: each median is K + 1
    assert all(list(ln.get_ydata()) == [fx.K + 1] for ln in marks)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert f"median censored (> K = {fx.K})" in legend
    # 2 of 5 censored: the median run reached T = 9 and nothing is marked or explained as censored.
    fig = P.plot_time_to_coverage(_censored_fixture([4, 9, 12, None, None]))
    assert not [ln for ln in fig.axes[-1].lines if ln.get_gid() == "censored-median"]
    assert not any("censored" in t.get_text() for t in fig.legends[0].get_texts())


def test_save_coverage_draws_an_equal_comparison_once_and_a_changed_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[str] = []
    plot_coverage = P.plot_coverage

    def counting(comparison):
        drawn.append(comparison.policies[0].curves.label)
        return plot_coverage(comparison)

    monkeypatch.setattr(P, "plot_coverage", counting)
    monkeypatch.setattr(P, "_last_coverage", None)
    comp = fx.comparison()
    reference = P.save_figure(plot_coverage(comp), tmp_path / "reference.png").read_bytes()
    first = P.save_coverage(comp, tmp_path / "a" / "first.png").read_bytes()
    again = P.save_coverage(comp.model_copy(deep=True), tmp_path / "b" / "again.png").read_bytes()
    assert drawn == ["learned"] and first == again == reference
    policy = comp.policies[0]
    renamed = policy.model_copy(update={"curves": policy.curves.model_copy(update={"label": "renamed"})})
    changed = comp.model_copy(update={"policies": [renamed]})
    other = P.save_coverage(changed, tmp_path / "other.png").read_bytes()
    assert drawn == ["learned", "renamed"] and other != reference
    assert P.save_figure(plot_coverage(changed), tmp_path / "other_ref.png").read_bytes() == other


# -- vector formats ---------------------------------------------------------------------------------------


EVERY_FIGURE = {
    "coverage": lambda c: P.plot_coverage(c),
    "valid_coverage": lambda c: P.plot_coverage(c, valid=True),
    "coverage_by_rarity": P.plot_coverage_by_rarity,
    "novelty": P.plot_novelty,
    "time_to_coverage": P.plot_time_to_coverage,
    "valid_vs_raw": P.plot_valid_vs_raw,
    "barcodes": P.plot_barcodes,
    "latent": P.plot_latent,
    "gain_vs_step": lambda c: P.plot_gain_vs_step(fx.eval_series_comparison()),
    "compare": lambda c: P.plot_compare(
        {"a": Report(comparisons=[c]), "b": Report(comparisons=[c, fx.comparison("sort")])}
    ),
}


def _check_pdf(data: bytes) -> None:
    assert data.startswith(b"%PDF-1.") and data.rstrip().endswith(b"%%EOF")
    assert b"/Type /Page" in data
    # Fonts embedded as TrueType (Type 42), never Type 3: journals' PDF checks refuse Type 3.
    assert b"/Subtype /TrueType" in data or b"/Subtype /Type0" in data
    assert b"/Subtype /Type3" not in data


def _check_svg(data: bytes, fig) -> None:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(data)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    # The figure's size in points (72 per inch), the text drawn as glyph paths.
    assert float(root.get("width").removesuffix("pt")) == pytest.approx(fig.get_figwidth() * 72, abs=0.5)
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 20


@pytest.mark.parametrize("fmt", ["pdf", "svg"])
@pytest.mark.parametrize("name", list(EVERY_FIGURE))
def test_every_figure_renders_to_pdf_and_svg(tmp_path: Path, name: str, fmt: str) -> None:
    fig = EVERY_FIGURE[name](fx.comparison(n_policies=2))
    path = P.save_figure(fig, tmp_path / f"{name}.{fmt}", dpi=P.PRINT_DPI)
    data = path.read_bytes()
    assert len(data) > 5_000
    _check_pdf(data) if fmt == "pdf" else _check_svg(data, fig)
    # Equal figures give equal files (no dates, fixed SVG ids).
    fig = EVERY_FIGURE[name](fx.comparison(n_policies=2))
    again = P.save_figure(fig, tmp_path / f"again.{fmt}", dpi=P.PRINT_DPI)
    assert again.read_bytes() == data


def test_print_dpi_png_has_three_times_the_pixels_per_side(tmp_path: Path) -> None:
    from PIL import Image

    screen = P.save_figure(P.plot_coverage(fx.comparison()), tmp_path / "screen.png")
    paper = P.save_figure(P.plot_coverage(fx.comparison()), tmp_path / "paper.png", dpi=P.PRINT_DPI)
    with Image.open(screen) as a, Image.open(paper) as b:
        assert b.size == (3 * a.size[0], 3 * a.size[1]) == (2100, 1500)  # a 7 x 5 in figure
        assert b.info["dpi"] == pytest.approx((300, 300), abs=0.01)


@pytest.mark.parametrize("fmt", ["pdf", "svg"])
def test_write_report_in_a_vector_format(tmp_path: Path, fmt: str) -> None:
    files = write_report(tmp_path, fx.report(), format=fmt)
    plots = {n: p for n, p in files.items() if "/" in n}
    assert len(plots) == 7 and all(p.suffix == f".{fmt}" for p in plots.values())
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    for path in plots.values():
        assert f"]({path.relative_to(tmp_path).as_posix()})" in md
    assert not list((tmp_path / "plots").glob("*.png"))


def test_unknown_figure_format_is_one_error_before_anything_is_written(tmp_path: Path) -> None:
    from seffi.errors import SeffiError

    with pytest.raises(SeffiError, match="unknown figure format 'jpg'; choose one of png, pdf, svg"):
        write_report(tmp_path / "run", fx.report(), format="jpg")
    assert not (tmp_path / "run").exists()
    with pytest.raises(SeffiError, match=r"use a \.png, \.pdf or \.svg file"):
        P.save_figure(P.plot_novelty(fx.comparison()), tmp_path / "novelty.eps")


@pytest.mark.parametrize("name", list(EVERY_FIGURE))
def test_no_text_overlaps_other_text(name: str) -> None:
    """Titles, labels, ticks, notes and legends never overlap, with 3 policies (5 samplers)."""
    import itertools
    import math

    from matplotlib.text import Text

    fig = EVERY_FIGURE[name](fx.comparison(n_policies=3))
    renderer = _drawn(fig)
    hidden = _ticks_out_of_view(fig)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in hidden]
    upright = [t for t in texts if t.get_rotation() in (0.0, 90.0)]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in upright]
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            assert not box_a.overlaps(box_b), f"{a!r} overlaps {b!r}"
    # Slanted tick labels are parallel strips: apart when their spacing across the slant exceeds a line.
    for ax in fig.axes:
        slanted = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_rotation() not in (0.0, 90.0)]
        if len(slanted) < 2:
            continue
        xs = sorted(t.get_window_extent(renderer).x1 for t in slanted)  # right-anchored: x1 is the tick
        line = slanted[0].get_fontsize() * fig.dpi / 72.0
        gap = min(b - a for a, b in itertools.pairwise(xs))
        across = gap * math.sin(math.radians(slanted[0].get_rotation()))
        assert across >= line, f"slanted ticks {across:.1f} px apart across, a line is {line:.1f} px"

"""Figures fit for a paper: readable rows, colours by role, one title line, legible text."""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text

from seffi.report import Barcode, Gain, PolicyResult, Report
from seffi.report import plots as P
from seffi.report.plots import STYLE, k_ticks
from tests.report import _fixtures as fx

HEX_ID = re.compile(r"[0-9a-f]{8,}")


def _hash_barcode(n_rows: int, seed: int = 0) -> Barcode:
    rng = np.random.default_rng(seed)
    return Barcode(
        strategies=["recursive", "iterative", "gray", "bfs", "dfs"],
        input_ids=[f"{rng.integers(16**12):012x}" for _ in range(n_rows)],
        matrix=[rng.choice(np.arange(-1, fx.M), 8, p=[0.1, *(0.9 * fx.P)]).tolist() for _ in range(n_rows)],
    )


def _with_runs(n_rows: int, n_runs: int):
    """The fixture comparison, its policy's barcode replaced by ``n_rows`` hash-id rows of ``n_runs`` runs."""
    comp = fx.comparison()
    pol = comp.policies[0]
    curves = pol.curves.model_copy(update={"n_runs": n_runs, "n_inputs": n_rows})
    pol = pol.model_copy(update={"barcode": _hash_barcode(n_rows), "curves": curves})
    return comp.model_copy(update={"policies": [pol], "n_inputs": n_rows})


def _panel(fig):
    (ax,) = [a for a in fig.axes if a.images]
    return ax


def test_barcode_rows_are_numbered_when_input_ids_are_hashes() -> None:
    fig = P.plot_barcodes(_with_runs(16, 64))
    ax = _panel(fig)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [str(i) for i in range(1, 17)]
    assert not any(HEX_ID.search(t) for t in labels)
    assert ax.get_ylabel().startswith("input #") and "first run" in ax.get_ylabel()


def test_barcode_keeps_short_readable_input_ids() -> None:
    ax = _panel(P.plot_barcodes(fx.comparison()))  # ids in000 .. in007
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"in{i:03d}" for i in range(8)]


def test_barcode_title_says_how_many_runs_are_shown() -> None:
    fig = P.plot_barcodes(_with_runs(16, 64))
    assert "16 of 64 runs shown" in fig._suptitle.get_text()
    # Every run drawn: nothing to say.
    fig = P.plot_barcodes(_with_runs(16, 16))
    assert "shown" not in fig._suptitle.get_text()


def test_barcode_draws_every_row_a_monitor_keeps() -> None:
    """64 rows (the monitor's default) are all drawn, with about 16 row labels, in a taller figure."""
    fig = P.plot_barcodes(_with_runs(64, 256))
    ax = _panel(fig)
    assert np.asarray(ax.images[0].get_array()).shape[0] == 64
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "1" and labels[-1] == "64" and 12 <= len(labels) <= 20
    assert fig.get_figheight() >= 10
    assert "64 of 256 runs shown" in fig._suptitle.get_text()


def _cell_colours(ax, bar: Barcode) -> dict[str, tuple[float, ...]]:
    img = np.asarray(ax.images[0].get_array())
    flat = np.array(bar.matrix)
    out = {}
    for j, name in enumerate(bar.strategies):
        cells = img[flat == j]
        if len(cells):
            out[name] = tuple(np.round(cells[0][:3], 6))
    return out


def test_strategy_colours_are_not_policy_colours_and_agree_across_barcode_plots() -> None:
    comp = fx.comparison(n_policies=2)
    bar = comp.policies[0].barcode
    several = _cell_colours(_panel(P.plot_barcodes(comp)), bar)
    one = comp.model_copy(update={"policies": comp.policies[:1]})
    alone = _cell_colours(_panel(P.plot_barcodes(one)), bar)
    assert several == alone and len(several) == fx.M  # one strategy -> colour mapping in both plots
    assert len(set(several.values())) == fx.M
    cov = P.plot_coverage(comp)
    line_colours = [to_rgb(ln.get_color()) for ln in cov.axes[0].lines]
    policy_colours = [to_rgb(c) for c in STYLE["policy_colors"]] + line_colours
    for name, rgb in several.items():
        gap = min(np.linalg.norm(np.subtract(rgb, c)) for c in policy_colours)
        assert gap > 0.2, f"strategy {name} is drawn in a policy colour"


def _with_sanity() -> object:
    comp = fx.comparison(n_policies=1)
    learned = comp.policies[0]
    cov = fx.IID + 0.01
    sanity = PolicyResult(
        curves=fx.curve_set("iid-sampler", "policy", cov, rarity=fx.IID_RARITY),
        gain=Gain(value=0.02, lo=-0.1, hi=0.14),
        latent=learned.latent.model_copy(update={"label": "iid-sampler"}),
    )
    return comp.model_copy(update={"policies": [sanity, learned]})  # sanity listed first


def _is_grey(colour) -> bool:
    r, g, b = to_rgb(colour)
    return max(r, g, b) - min(r, g, b) < 1e-6


def _line(ax, prefix: str) -> Line2D:
    (line,) = [ln for ln in ax.lines if ln.get_label().startswith(prefix)]
    return line


def test_sanity_policy_is_a_muted_baseline_and_baselines_are_grey_and_black() -> None:
    comp = _with_sanity()
    ax = P.plot_coverage(comp).axes[0]
    sanity, learned = _line(ax, "iid-sampler (sanity check)"), _line(ax, "learned")
    iid, oracle = _line(ax, "iid (exact)"), _line(ax, "oracle")
    assert _is_grey(sanity.get_color()) and sanity.get_linestyle() == "-."
    assert to_rgb(learned.get_color()) == to_rgb("tab:blue")  # the first real policy keeps blue
    assert _is_grey(iid.get_color()) and iid.get_linestyle() == ":"
    assert to_rgb(oracle.get_color()) == (0.0, 0.0, 0.0) and oracle.get_linestyle() == "--"
    band_colours = [tuple(c.get_facecolor()[0][:3]) for c in ax.collections]
    assert to_rgb(sanity.get_color()) not in band_colours  # no band for the sanity check
    # The same style in every plot that draws the policy.
    for fig in (P.plot_novelty(comp), P.plot_time_to_coverage(comp), P.plot_latent(comp)):
        line = _line(fig.axes[0], "iid-sampler")
        assert to_rgb(line.get_color()) == to_rgb(sanity.get_color()), fig._suptitle.get_text()
        assert to_rgb(_line(fig.axes[0], "learned").get_color()) == to_rgb("tab:blue")


def _rarity_fig():
    return P.plot_coverage_by_rarity(fx.comparison())


def test_rarity_plot_has_a_facet_per_bin_with_several_k_ticks_and_a_bar_tick_per_bin() -> None:
    fig = _rarity_fig()
    facets = [a for a in fig.axes if (a.get_gid() or "").startswith("rarity:facet:")]
    assert [a.get_title() for a in facets] == fx.RARITY_LABELS
    for ax in facets:
        ticks = list(ax.get_xticks())
        assert ticks == [1, 4, 8, 12, 16]  # K = 16: 1 and multiples of 4, inside 1..K
    (bars,) = [a for a in fig.axes if a.get_gid() == "rarity:delta"]
    assert [t.get_text() for t in bars.get_xticklabels()] == fx.RARITY_LABELS


def test_rarity_legends_match_their_artists() -> None:
    """The bars' legend shows patches, the facets' legend lines."""
    fig = _rarity_fig()
    (bars,) = [a for a in fig.axes if a.get_gid() == "rarity:delta"]
    (bar_legend,) = bars.figure.legends
    assert bar_legend.legend_handles and all(isinstance(h, Patch) for h in bar_legend.legend_handles)
    assert [t.get_text() for t in bar_legend.get_texts()] == ["learned", "oracle (exact)"]
    (facet,) = [a for a in fig.axes if a.get_gid() == "rarity:facet:0"]
    (line_legend,) = facet.figure.legends
    assert all(isinstance(h, Line2D) for h in line_legend.legend_handles)
    assert facet.figure is not bars.figure


def test_k_ticks_every_k_then_round_steps() -> None:
    assert k_ticks(8, 8, 5) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert k_ticks(16, 8, 5) == [1, 4, 8, 12, 16]
    assert k_ticks(12, 8, 5) == [1, 4, 8, 12]
    assert k_ticks(64, 16, 8) == [1, 10, 20, 30, 40, 50, 60]
    assert k_ticks(4096, 16, 8) == [1, *range(500, 4001, 500)]


MAKERS = {
    "coverage": P.plot_coverage,
    "rarity": P.plot_coverage_by_rarity,
    "novelty": P.plot_novelty,
    "time_to_coverage": P.plot_time_to_coverage,
    "valid_vs_raw": P.plot_valid_vs_raw,
    "barcodes": P.plot_barcodes,
    "latent": P.plot_latent,
    "compare": lambda c: P.plot_compare({"run-a": Report(comparisons=[c]), "run-b": Report(comparisons=[c])}),
    "gain_vs_step": lambda c: P.plot_gain_vs_step(fx.eval_series_comparison()),
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_figures_have_one_title_line_without_the_env_id(name: str) -> None:
    comp = fx.comparison(env_id="seffi/HanoiRouter-v0")
    fig = MAKERS[name](comp)
    texts = [t.get_text() for t in fig.findobj(Text)]
    assert not any("HanoiRouter" in t for t in texts)
    assert fig._suptitle is not None and "\n" not in fig._suptitle.get_text()


@pytest.mark.parametrize("name", list(MAKERS))
def test_text_is_legible_at_the_natural_size(name: str) -> None:
    """No text under 8 pt (about 11 px at 100 dpi); titles, ticks and legends at the style's sizes."""
    fig = MAKERS[name](fx.comparison(n_policies=2))
    fig.canvas.draw()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert min(sizes) >= 8.0
    assert fig._suptitle.get_fontsize() == STYLE["font"]["title"]
    for leg in fig.findobj(Legend):
        assert all(t.get_fontsize() >= STYLE["font"]["legend"] for t in leg.get_texts())
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
        assert all(t.get_fontsize() >= STYLE["font"]["note"] - 1 for t in ticks)

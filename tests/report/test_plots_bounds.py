"""The barcode's legend names the strategies drawn (capped), not every declared one."""

from __future__ import annotations

import numpy as np
import pytest

from seffi.report import plots as P
from seffi.report import schema
from tests.report import _fixtures as fx


def _with_barcode(n_declared: int, cells: np.ndarray) -> schema.Comparison:
    """The fixture comparison, its first policy's barcode over ``n_declared`` strategies with ``cells``."""
    comp = fx.comparison()
    bar = schema.Barcode(
        strategies=[f"s{j}" for j in range(n_declared)],
        input_ids=[f"x{i}" for i in range(len(cells))],
        matrix=cells.tolist(),
    )
    first = comp.policies[0].model_copy(update={"barcode": bar})
    return comp.model_copy(update={"policies": [first, *comp.policies[1:]], "num_strategies": n_declared})


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_a_barcode_over_many_declared_strategies_names_the_ones_drawn() -> None:
    # 2,000 declared, 3 drawn (with no-match cells): the legend names those 3, in declared order.
    cells = np.array([[1500, -1, 7, 7], [7, 42, -1, 1500]])
    fig = P.plot_barcodes(_with_barcode(2000, cells))
    assert _legend(fig) == ["s7", "s42", "s1500", "no match", "first appearance"]
    img = np.asarray(next(ax for ax in fig.axes if ax.images).images[0].get_array()) / 255.0  # RGB bytes
    colors = P.strategy_colors([f"s{j}" for j in range(2000)])
    assert np.allclose(img[0, 0, :3], colors["s1500"]) and np.allclose(img[1, 1, :3], colors["s42"])
    assert np.allclose(img[0, 1, :3], 1.0)  # no match: white


def test_a_barcode_with_more_drawn_strategies_than_the_cap_counts_the_rest() -> None:
    drawn = 3 * P.LEGEND_STRATEGIES  # every cell its own strategy, in reverse declared order
    cells = np.arange(drawn)[::-1].reshape(-1, 4) * 10
    fig = P.plot_barcodes(_with_barcode(10 * drawn, cells))
    names = [f"s{10 * j}" for j in range(P.LEGEND_STRATEGIES)]
    more = f"+ {drawn - P.LEGEND_STRATEGIES} more strategies"
    assert _legend(fig) == [*names, more, "no match", "first appearance"]


def test_a_report_of_many_comparisons_draws_the_first_and_says_so(tmp_path, monkeypatch) -> None:
    from seffi.report import write_report

    monkeypatch.setattr(P, "PLOTTED_COMPARISONS", 2)
    report = schema.Report(seed=7, comparisons=[fx.comparison(task=f"t{i}", env_id=None) for i in range(3)])
    with pytest.warns(UserWarning, match="the report holds 3 comparisons: plots are drawn for the first 2"):
        files = write_report(tmp_path, report)
    slugs = report.slugs()
    drawn = {name.partition("/")[0] for name in files if "/" in name}
    assert drawn == set(slugs[:2])
    assert sorted(p.name.partition("_")[0] for p in (tmp_path / "plots").iterdir()) == sorted(
        slug for slug in slugs[:2] for name in files if name.startswith(f"{slug}/")
    )
    md = (tmp_path / "report.md").read_text()
    assert "_Plots are drawn for 2 of the 3 comparisons._" in md
    assert all(f"## {t}" in md for t in ("t0", "t1", "t2"))  # every table stays

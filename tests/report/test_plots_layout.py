"""Every figure's text stays on the canvas, off other text and off the axes, at every size drawn."""

from __future__ import annotations

import itertools

import pytest

from seffi.report import Report, schema
from seffi.report import plots as P
from tests.report import _fixtures as fx

LONG = "a_task_with_a_long_name_that_wraps_the_title_of_every_figure_it_is_drawn_in"


def _many_rows(n_rows: int) -> schema.Comparison:
    """The fixture comparison with 3 policies, each a barcode of ``n_rows`` hash-named inputs."""
    comp = fx.comparison(n_policies=3)
    bar = schema.Barcode(
        strategies=["recursive", "iterative", "gray", "bfs", "dfs"],
        input_ids=[f"{i:016x}" for i in range(n_rows)],
        matrix=[[(i + j) % 6 - 1 for j in range(16)] for i in range(n_rows)],
    )
    pols = [p.model_copy(update={"barcode": bar}) for p in comp.policies]
    return comp.model_copy(update={"policies": pols})


def _runs(n_runs: int, n_tasks: int) -> dict[str, Report]:
    tasks = [f"{LONG[: 12 + 9 * t]}" for t in range(n_tasks)]
    return {
        f"run-{r}": Report(comparisons=[fx.comparison(task=t, env_id=None, n_policies=2) for t in tasks])
        for r in range(n_runs)
    }


CASES = {
    "coverage, 6 policies, long task": lambda: P.plot_coverage(fx.comparison(task=LONG, n_policies=6)),
    "novelty, 1 policy": lambda: P.plot_novelty(fx.comparison(n_policies=1)),
    "time to coverage, 4 policies, long task": lambda: P.plot_time_to_coverage(
        fx.comparison(task=LONG, n_policies=4)
    ),
    "rarity, 5 policies": lambda: P.plot_coverage_by_rarity(fx.comparison(n_policies=5)),
    "barcodes, 3 policies of 64 rows": lambda: P.plot_barcodes(_many_rows(64)),
    "barcodes, 3 policies of 2 rows": lambda: P.plot_barcodes(_many_rows(2)),
    "gain vs step": lambda: P.plot_gain_vs_step(fx.eval_series_comparison()),
    "compare, 1 run of 1 task": lambda: P.plot_compare(_runs(1, 1)),
    "compare, 3 runs of 5 tasks": lambda: P.plot_compare(_runs(3, 5)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_text_stays_on_the_canvas_apart_and_off_the_axes_it_does_not_label(case: str) -> None:
    from matplotlib.text import Text

    fig = CASES[case]()
    fig.canvas.draw()  # runs the layout, as savefig does
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    shown = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            shown |= {
                id(lab)
                for t in axis.get_major_ticks()
                if lo - 1e-9 <= t.get_loc() <= hi + 1e-9
                for lab in (t.label1, t.label2)
            }
    ticks = {id(lab) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for lab in axis.get_ticklabels()}
    texts = [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and (id(t) in shown or id(t) not in ticks)
    ]
    boxes = {id(t): t.get_window_extent(renderer) for t in texts}
    for t in texts:
        b = boxes[id(t)]
        inside = (b.min >= canvas.min - 1).all() and (b.max <= canvas.max + 1).all()
        assert inside, f"{t.get_text()!r} at {b.bounds} leaves the canvas {canvas.bounds}"
    upright = [t for t in texts if t.get_rotation() in (0.0, 90.0)]
    for a, b in itertools.combinations(upright, 2):
        assert not boxes[id(a)].overlaps(boxes[id(b)]), f"{a.get_text()!r} overlaps {b.get_text()!r}"
    # Titles, axis labels, tick labels and legends cover no axes.
    outside = [fig._suptitle, *(t for leg in fig.legends for t in leg.get_texts())]
    for ax in fig.axes:
        outside += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.get_xticklabels(), *ax.get_yticklabels()]
    frames = [ax.get_window_extent(renderer) for ax in fig.axes]
    for t in (t for t in outside if id(t) in boxes):
        for frame in frames:
            assert not boxes[id(t)].overlaps(frame), f"{t.get_text()!r} covers an axes"


def test_a_figure_too_small_for_its_texts_warns_and_keeps_its_axes_on_the_canvas() -> None:
    """Labels that need more room than the figure has: one warning, no axes of negative size."""
    fig = P._figure((2.0, 1.5))
    axes = fig.subplots(2, 2)
    for ax in axes.flat:
        ax.plot([0, 1e6], [0, 1])
        ax.set(xlabel=P.BUDGET, ylabel="coverage $C(k)$", title="panel $T_{1}$")
    P.suptitle(fig, "a figure title " * 5)
    P.finish(fig)
    with pytest.warns(UserWarning, match="too small for its labels"):
        fig.canvas.draw()
    for ax in axes.flat:
        box = ax.get_position()
        assert box.width > 0 and box.height > 0
        assert 0 <= box.x0 and box.x1 <= 1 and 0 <= box.y0 and box.y1 <= 1

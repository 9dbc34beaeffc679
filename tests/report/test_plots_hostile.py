"""Names from a report.json are drawn as typed: no mathtext, no escape sequences, no failed figure."""

from __future__ import annotations

import warnings

from seffi.report import plots as P
from seffi.report import schema, write_report
from tests.report import _fixtures as fx

TASK = "sort $\\frac$ \x1b]0;title\x07"  # mathtext that does not parse, an OSC 0 escape
LABEL = "learned $x$"  # mathtext that parses: still drawn as typed


def test_a_report_with_mathtext_and_escapes_in_its_names_renders_every_plot(tmp_path) -> None:
    comp = fx.comparison(task=TASK)
    pol = comp.policies[0]
    bar = pol.barcode.model_copy(update={"strategies": [f"${s}$\x07" for s in pol.barcode.strategies]})
    curves = pol.curves.model_copy(update={"label": LABEL})
    comp = comp.model_copy(update={"policies": [pol.model_copy(update={"curves": curves, "barcode": bar})]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph (an escape drawn) would warn
        files = write_report(tmp_path, schema.Report(seed=1, comparisons=[comp]))
    assert len([n for n in files if "/" in n]) == 7  # every plot of the comparison
    fig = P.plot_coverage(P.figure_safe(comp))
    texts = [fig.get_suptitle(), *(t.get_text() for t in fig.legends[0].get_texts())]
    assert any(t.startswith("sort \\$\\frac\\$  ]0;title ") for t in texts), texts
    assert any(t.startswith("learned \\$x\\$") for t in texts), texts

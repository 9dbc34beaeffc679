"""Names and notes from a report.json reach the terminal as inert text: no escapes, no broken rows."""

from __future__ import annotations

import io
import re

from seffi.cli import main
from seffi.experiment.summary import summary_table
from seffi.report.caveats import console_lines
from seffi.report.files import dumps_report
from seffi.report.schema import Comparison, CurveSet, Gain, PolicyResult, Report

TITLE = "\x1b]0;owned\x07"  # OSC 0: sets the terminal window's title
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLnNo\x07"  # OSC 52: writes the clipboard
CSI = "\x1b[2J\x1b[31m"  # clear the screen, red text
TASK = f"sort{TITLE}\nnext | line"
LABEL = f"learned{CLIPBOARD}[link=https://example.com]x[/link]"
NOTE = f"flat{CSI}\r\n# heading"
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # any control character but a line end


def _report() -> Report:
    k = [1, 2, 3, 4]
    iid = CurveSet(label=f"iid{CSI}", role="iid", k=k, coverage=[0.25, 0.5, 0.75, 0.95], auc=0.6125)
    oracle = CurveSet(label="oracle", role="oracle", k=k, coverage=[0.25, 0.5, 0.75, 1.0], auc=0.625)
    learned = CurveSet(label=LABEL, k=k, coverage=[0.25, 0.5, 0.6, 0.7], auc=0.5125)
    other = CurveSet(label="other", k=k, coverage=[0.25, 0.4, 0.5, 0.6], auc=0.4375)
    policies = [
        PolicyResult(curves=learned, gain=Gain(value=0.4, lo=0.3, hi=0.5)),
        PolicyResult(curves=other, gain=Gain(value=None, reason=NOTE)),
    ]
    comp = Comparison(task=TASK, budget=4, n_inputs=2, iid=iid, oracle=oracle, policies=policies)
    return Report(seed=0, comparisons=[comp])


def test_seffi_compare_prints_report_names_without_terminal_escapes_or_broken_rows(tmp_path, capsys):
    dirs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(dumps_report(_report()))
        dirs.append(str(tmp_path / name))
    assert main(["compare", *dirs, "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert not CONTROL.search(out), repr(out)
    lines = [line for line in out.splitlines() if line]
    rows = [line for line in lines if line.startswith("|")]
    notes = [line for line in lines if not line.startswith("|")]  # the fragile gains' reasons
    assert all(line.endswith("|") for line in rows)  # no row cut by a newline
    assert len(notes) == 2 and all(n.startswith("- sort \\]0;owned next \\| line / ") for n in notes), notes
    cells = {line.replace("\\|", "").count("|") for line in rows}
    assert cells == {7}, rows  # 6 cells a row: a "|" in a name is escaped
    assert len(rows) == 2 + 2 * 2  # header, rule, 2 runs x 2 policies
    assert "sort \\]0;owned next \\| line" in out and "flat \\[2J \\[31m # heading" in out
    assert (tmp_path / "cmp" / "compare.md").read_text().endswith(out.rstrip("\n") + "\n")


def test_seffi_run_summary_and_caveat_lines_print_names_as_plain_text():
    from rich.console import Console

    report = _report()
    console = Console(file=io.StringIO(), width=300, force_terminal=True, color_system="truecolor")
    console.print(summary_table(report))
    out = console.file.getvalue()
    for attack in (TITLE, CLIPBOARD, CSI, "\x1b]8;"):  # the last: a rich [link] markup made into OSC 8
        assert attack not in out
    assert "[link=https://example.com]x[/link]" in out  # shown as typed, not as markup
    lines = console_lines(report)
    assert lines and all(line.startswith("warning (sort ]0;owned next | line): ") for line in lines)
    assert not any(CONTROL.search(line) or "\n" in line for line in lines)

"""report.md treats every name and note from report.json as text, never as markup."""

from __future__ import annotations

import json
import re

from seffi.callbacks import CoverageMonitor
from seffi.episodes import parse_generation
from seffi.report.markdown import render_markdown, text

HOSTILE = "x<script>alert(1)</script>|[a](javascript:alert(1))\n# injected\x1b]0;title\x07"


def test_hostile_names_render_as_inert_text_and_keep_the_table_whole(tmp_path):
    monitor = CoverageMonitor(2, ["a", "b"], out_dir=tmp_path / "run", wandb="disabled", plots=False,
                              task_name=HOSTILE, label=HOSTILE, n_boot=0)  # fmt: skip
    monitor.update(parse_generation(["i", "i"], [["a"], ["b"]], monitor.coder, [True, True],
                                    sample_index=[1, 2], run_index=[0, 0]))  # fmt: skip
    report = monitor.finalize(step=2)
    md = render_markdown(report)
    assert "<script>" not in md and "\x1b" not in md and "\x07" not in md
    assert not re.search(r"(?<!\\)\]\(javascript:", md)  # an escaped bracket makes no link
    assert not any(line.startswith("# injected") for line in md.splitlines())
    table = [line for line in md.splitlines() if line.startswith("| ")]
    header = table[0].count(" | ")
    assert all(row.replace("\\|", "").count(" | ") == header for row in table)  # no row split by a name
    assert text(HOSTILE) in md  # the name is there, escaped
    assert json.loads((tmp_path / "run" / "report.json").read_text())["comparisons"][0]["task"] == HOSTILE

"""Callbacks' ``out_dir`` never mixes two runs."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from seffi.callbacks import CoverageMonitor
from seffi.report.run_folder import fresh_out_dir

STRATS = ("a", "b")


def _run(out_dir: Path, episodes: int) -> CoverageMonitor:
    monitor = CoverageMonitor(2, STRATS, out_dir=out_dir, wandb="disabled", plots=False, n_boot=0)
    for i in range(episodes):
        monitor.update_infos({"input_id": "x", "strategy_matches": ("a",), "sample_index": i % 2 + 1}, True)
    monitor.log(1)
    monitor.finalize(2)
    return monitor


def _episodes(folder: Path) -> int:
    return json.loads((folder / "report.json").read_text())["meta"]["episodes"]


def test_monitor_out_dir_holding_a_run_gets_a_fresh_sibling_and_one_warning(tmp_path: Path) -> None:
    """A second monitor on the same out_dir writes to out_dir-2, the first run intact."""
    first = tmp_path / "run"
    _run(first, 4)
    before = {p.name: p.read_bytes() for p in first.iterdir() if p.is_file()}
    assert "report.json" in before and "metrics.jsonl" in before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = _run(first, 6)
    said = [w for w in caught if issubclass(w.category, UserWarning)]
    assert len(said) == 1 and str(tmp_path / "run-2") in str(said[0].message)
    assert second.out_dir == tmp_path / "run-2"
    assert _episodes(tmp_path / "run-2") == 6
    # the first run's files are byte-for-byte what it wrote (nothing appended, nothing replaced)
    assert {p.name: p.read_bytes() for p in first.iterdir() if p.is_file()} == before
    # a third run skips run-2 too
    with pytest.warns(UserWarning, match="run-3"):
        third = _run(first, 2)
    assert third.out_dir == tmp_path / "run-3" and _episodes(tmp_path / "run-3") == 2


def test_folder_with_only_user_files_is_used_without_warning(tmp_path: Path) -> None:
    """A folder holding no seffi run (only the user's files) is used as given."""
    (tmp_path / "notes.txt").write_text("mine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monitor = _run(tmp_path, 3)
    assert monitor.out_dir == tmp_path and _episodes(tmp_path) == 3
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_nested_layout_counts_as_a_run(tmp_path: Path) -> None:
    """The SB3 "both" layout (runs in stream/ and eval/) makes the folder taken."""
    (tmp_path / "cb" / "eval").mkdir(parents=True)
    (tmp_path / "cb" / "eval" / "report.json").write_text("{}")
    (tmp_path / "cb-2").write_text("a file, not a folder: skipped")
    assert fresh_out_dir(tmp_path / "cb") == tmp_path / "cb"  # no seffi file directly inside
    with pytest.warns(UserWarning, match="cb-3") as caught:
        assert fresh_out_dir(tmp_path / "cb", nested=("stream", "eval")) == tmp_path / "cb-3"
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh_out_dir(tmp_path / "new", nested=("stream", "eval")) == tmp_path / "new"
        default = fresh_out_dir(None, "p")
    assert default.parent == Path("runs") and default.name.startswith("p-") and not default.exists()

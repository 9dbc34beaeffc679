"""The first checkpoint comes at the first log with a complete run, not after checkpoint_seconds."""

from __future__ import annotations

import json

from seffi.callbacks import CoverageMonitor
from seffi.episodes import parse_generation


def test_a_killed_loop_keeps_a_checkpoint_from_its_first_log(tmp_path):
    out = tmp_path / "run"
    options = {"wandb": "disabled", "plots": False, "log_every": 4, "n_boot": 50, "snapshot_n_boot": 10}
    monitor = CoverageMonitor(2, ["a", "b"], out_dir=out, **options)  # checkpoint_seconds: the default 300
    batch = parse_generation(["x", "x", "y", "y"], [["a"], ["b"], ["a"], ["a"]], monitor.coder, [True] * 4,
                             sample_index=[1, 2, 1, 2], run_index=[0, 0, 0, 0])  # fmt: skip
    monitor.update(batch)
    assert monitor.maybe_log(4)
    report = json.loads((out / "report.json").read_text())  # written at the first log, seconds in
    assert report["meta"]["checkpoint"] is True
    assert report["comparisons"][0]["policies"][0]["curves"]["coverage"] == [0.5, 0.75]
    assert json.loads((out / "tracker_state.json").read_text())
    monitor.update(batch)
    monitor.maybe_log(8)  # the next one waits for checkpoint_seconds
    assert json.loads((out / "report.json").read_text()) == report
    monitor.close()

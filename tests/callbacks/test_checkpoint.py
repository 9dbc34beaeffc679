"""Checkpoints: the first at the first log with a complete run; a killed run resumed from one goes on."""

from __future__ import annotations

import json

import pytest

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


_LOOP = """
import os, signal, sys
from seffi.callbacks import CoverageMonitor
out, n, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
options = dict(wandb="disabled", plots=False, log_every=30, checkpoint_every=60, n_boot=20, window=60)
resume = out if kill_at < 0 else None
if sys.argv[4] == "given":  # sinks made by the caller, as the SB3 adapter does
    from seffi.report import default_sinks

    options["sinks"] = default_sinks(out, wandb="disabled", plots=False)
monitor = CoverageMonitor(4, ("a", "b", "c"), out_dir=out, resume_from=resume, **options)
for i in range(monitor.episodes, n):  # env row i % 3 runs input x<(i // 12) % 5>; a hashed strategy
    info = {"input_id": f"x{(i // 12) % 5}", "strategy_matches": ("abc"[(i * 7919) % 11 % 3],)}
    monitor.update_infos(info, True, env_offset=i % 3)
    monitor.maybe_log(i + 1)
    if i + 1 == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
monitor.finalize(step=n + 1)
"""


@pytest.mark.parametrize("sinks", ["own", "given"])
def test_a_run_killed_after_a_checkpoint_resumes_to_the_uninterrupted_runs_logs(tmp_path, sinks):
    """Killed at episode 215 (last checkpoint at 180), resumed with ``resume_from``: the logs after
    the checkpoint are dropped and the schedule goes on, so the logs (at the same steps, with the
    same cumulative numbers), snapshots.jsonl and report.json equal those of the same 400 episodes
    run without a stop."""
    import subprocess
    import sys

    def run(out, kill_at):
        argv = [sys.executable, "-c", _LOOP, str(out), "400", str(kill_at), sinks]
        subprocess.run(argv, capture_output=True, check=kill_at != 215)

    run(tmp_path / "whole", 0)
    run(tmp_path / "killed", 215)
    lines = (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["seffi/step"] for line in lines][-2:] == [180, 210]  # 210: after it
    with (tmp_path / "killed" / "metrics.jsonl").open("a") as f:
        f.write('{"note": "mine"}\n')
    run(tmp_path / "killed", -1)
    lines = (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()
    assert lines.pop(6) == '{"note": "mine"}'  # after the 6 logs up to the checkpoint
    (tmp_path / "killed" / "metrics.jsonl").write_text("".join(f"{line}\n" for line in lines))
    snapshots = [(tmp_path / d / "snapshots.jsonl").read_text() for d in ("whole", "killed")]
    assert snapshots[1] == snapshots[0]
    logs = [[json.loads(line) for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
            for d in ("whole", "killed")]  # fmt: skip
    # A loaded run carries no date: the window holds the runs opened after the resume at first.
    cumulative = [[{k: v for k, v in line.items() if "/window/" not in k} for line in log] for log in logs]
    assert cumulative[1] == cumulative[0] and len(logs[0]) == 14
    whole, resumed = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("whole", "killed"))
    assert resumed["comparisons"] == whole["comparisons"]

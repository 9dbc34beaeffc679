"""The TensorBoard sink of a plain loop, read back with TensorBoard's own reader."""

from __future__ import annotations

import json

import numpy as np
import pytest

from seffi.callbacks import CoverageMonitor
from seffi.episodes import parse_generation
from seffi.report import LocalSink, MultiSink
from seffi.report.tensorboard import TensorBoardSink, tag
from tests.helpers import require

require("tensorboardX", "tensorboard")
event_accumulator = require("tensorboard.backend.event_processing.event_accumulator", "tensorboard")

STRATEGIES = ["bfs", "dfs", "astar"]


def test_every_logged_scalar_reads_back_from_the_event_file(tmp_path):
    rng = np.random.default_rng(2)
    out = tmp_path / "run"
    sinks = MultiSink([LocalSink(out, plots=False), TensorBoardSink(out / "tb")])
    monitor = CoverageMonitor(4, STRATEGIES, sinks=sinks, log_every=16, window=32, n_boot=20)
    for step in range(1, 13):  # a loop of the user's: 8 episodes a step, two runs of 4
        ids = [f"maze-{step % 3}"] * 4 + [f"maze-{step % 5}"] * 4
        matches = [[str(rng.choice(STRATEGIES))] for _ in ids]
        valid = rng.random(8) < 0.7
        batch = parse_generation(
            ids, matches, monitor.coder, valid, sample_index=[1, 2, 3, 4] * 2, run_index=[step] * 8
        )
        monitor.update(batch)
        monitor.maybe_log(step * 8)
    monitor.close()
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(logged) >= 5
    events = event_accumulator.EventAccumulator(str(out / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    expected: dict[str, list[tuple[int, float]]] = {}
    for record in logged:
        for key, value in record.items():
            if isinstance(value, float | int) and not isinstance(value, bool) and np.isfinite(value):
                expected.setdefault(tag(key), []).append((int(record["seffi/step"]), float(value)))
    assert {"seffi/auc", "seffi/coverage/k_4", "seffi/window/auc"} <= tags
    assert tags == set(expected)
    for key, points in expected.items():
        read = [(e.step, e.value) for e in events.Scalars(key)]
        assert [s for s, _ in read] == [s for s, _ in points], key
        assert [v for _, v in read] == pytest.approx([v for _, v in points], rel=1e-6), key  # float32 on disk


def test_a_failing_writer_warns_once_and_never_raises(tmp_path):
    sink = TensorBoardSink(tmp_path / "tb")

    class Broken:
        def add_scalar(self, *args):
            raise OSError(28, "No space left on device")

    sink._writer = Broken()
    with pytest.warns(UserWarning, match="TensorBoard logging stopped"):
        sink.log({"seffi/auc": 0.5}, step=1)
    sink.log({"seffi/auc": 0.6}, step=2)  # dropped quietly
    sink.finish()

"""The TensorBoard sink of a plain loop, read back with TensorBoard's own reader."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from seffi.callbacks import CoverageMonitor, MonitorConfig
from seffi.callbacks.gym import CoverageWrapper
from seffi.episodes import parse_generation
from seffi.errors import SeffiError
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


class _TwoInputEnv(gym.Env):
    """A user's env: one step = one sample, the action is the strategy, inputs alternate by run."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(len(STRATEGIES))
    strategies = STRATEGIES

    def __init__(self):
        self.runs, self.k = 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        self.k += 1
        info = {"input_id": f"x{self.runs % 2}", "strategy_matches": (STRATEGIES[int(action)],),
                "sample_index": self.k, "run_index": self.runs}  # fmt: skip
        if self.k == 4:  # a run is 4 samples
            self.runs, self.k = self.runs + 1, 0
        return 0, 0.0, True, False, info


def test_the_wrapper_named_sinks_write_tensorboard_events_equal_to_metrics_jsonl(tmp_path):
    out = tmp_path / "run"
    env = CoverageWrapper(_TwoInputEnv(), 4, sinks=["local", "tensorboard"], out_dir=out, log_every=8,
                          window=None, n_boot=10)  # fmt: skip
    assert env.monitor.sinks.wandb is None  # W&B only when named
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    for _ in range(48):
        env.step(int(rng.integers(len(STRATEGIES))))
        env.reset()
    env.close()
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(logged) == 6
    events = event_accumulator.EventAccumulator(str(out / "tb"))
    events.Reload()
    for key in ("seffi/auc", "seffi/coverage/k=4", "seffi/episodes"):
        read = [(e.step, e.value) for e in events.Scalars(tag(key))]
        want = [(r["seffi/step"], r[key]) for r in logged]
        assert [s for s, _ in read] == [s for s, _ in want] == [8, 16, 24, 32, 40, 48]
        assert [v for _, v in read] == pytest.approx([v for _, v in want], rel=1e-6), key
    assert logged[-1]["seffi/episodes"] == 48


def test_sinks_names_are_checked_and_local_is_always_made(tmp_path):
    with pytest.raises(SeffiError, match=r"sinks names \['tensorbord'\]; the names are"):
        CoverageMonitor(4, STRATEGIES, sinks=["local", "tensorbord"])
    with pytest.raises(SeffiError, match="names or one Sink"):
        MonitorConfig(sinks=["local", TensorBoardSink(tmp_path / "tb")])
    assert MonitorConfig(sinks="tensorboard").sink_names() == ("local", "tensorboard")
    assert MonitorConfig().sink_names() == ("local", "wandb")
    monitor = CoverageMonitor(4, STRATEGIES, sinks=["wandb"], wandb="disabled", out_dir=tmp_path / "r")
    assert [type(s).__name__ for s in monitor.sinks.sinks] == ["LocalSink"]
    monitor.close()

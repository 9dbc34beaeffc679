"""The SB3 callback records seffi/* through SB3's own logger, and to its own TensorBoard sink when named:
event files read back with TensorBoard's reader."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

from tests.helpers import require

require("stable_baselines3", "sb3")
event_accumulator = require("tensorboard.backend.event_processing.event_accumulator", "tensorboard")
torch = require("torch", "sb3")
torch.set_num_threads(1)
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

from seffi.callbacks.sb3 import CoverageCallback  # noqa: E402
from seffi.report.sinks import LocalSink  # noqa: E402
from seffi.report.tensorboard import TensorBoardSink, tag  # noqa: E402

WAYS = ("left", "right", "up")


class PickAWay(gym.Env):
    """A user's one-step env: the action picks a way; four inputs in turn."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Discrete(1)
        self.action_space = gym.spaces.Discrete(3)
        self.strategies = WAYS
        self._n = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        self._n += 1
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        info = {"input_id": f"x{self._n % 4}", "strategy_matches": (WAYS[int(action)],), "valid": True}
        return 0, 1.0, True, False, info


def test_seffi_scalars_reach_tensorboard_through_sb3s_logger(tmp_path):
    venv = make_vec_env(PickAWay, n_envs=4, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu",
                tensorboard_log=str(tmp_path / "tb"), policy_kwargs={"net_arch": [8]})  # fmt: skip
    callback = CoverageCallback(
        budget=4, out_dir=tmp_path / "run", wandb="disabled", plots=False, log_every=64
    )
    model.learn(1024, callback=callback)
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    by_step = {int(r["seffi/step"]): r for r in logged}
    (run_dir,) = (tmp_path / "tb").iterdir()
    events = event_accumulator.EventAccumulator(str(run_dir))
    events.Reload()
    tags = [t for t in events.Tags()["scalars"] if t.startswith("seffi/")]
    assert {"seffi/auc", "seffi/coverage/k=4", "seffi/episodes"} <= set(tags)
    for name in tags:
        for event in events.Scalars(name):  # SB3 writes at its own step: the log made at that step
            assert event.value == pytest.approx(by_step[event.step][name], rel=1e-6), (name, event.step)
    assert [e.step for e in events.Scalars("seffi/auc")] == sorted(by_step) == [256, 512, 768, 1024]


def test_sb3_callback_with_named_sinks_writes_tensorboard_events_equal_to_metrics_jsonl(tmp_path):
    venv = make_vec_env(PickAWay, n_envs=4, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu",
                policy_kwargs={"net_arch": [8]})  # fmt: skip
    out = tmp_path / "run"
    callback = CoverageCallback(
        budget=4, sinks=["local", "tensorboard"], out_dir=out, plots=False, log_every=64
    )
    model.learn(512, callback=callback)
    kinds = [type(s).__name__ for s in callback.monitor.sinks.sinks]
    assert kinds == [LocalSink.__name__, TensorBoardSink.__name__, "LoggerSink"]  # no W&B: not named
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    events = event_accumulator.EventAccumulator(str(out / "tb"))
    events.Reload()
    for key in ("seffi/auc", "seffi/coverage/k=4"):
        read = [(e.step, e.value) for e in events.Scalars(tag(key))]
        assert [s for s, _ in read] == [r["seffi/step"] for r in logged] == [256, 512]
        assert [v for _, v in read] == pytest.approx([r[key] for r in logged], rel=1e-6)

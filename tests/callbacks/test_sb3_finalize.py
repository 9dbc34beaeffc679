"""The SB3 callback's end of training: the report's plots are drawn by a child process during the last
policy update, and the run folder a user reads right after ``model.learn()`` returns is complete and
holds the same files, byte for byte, as when the plots are drawn in the training process."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from seffi.report import files as report_files
from seffi.report.files import dumps_report
from seffi.report.sinks import LocalSink
from tests.helpers import require

require("stable_baselines3", "sb3")
torch = require("torch", "sb3")
torch.set_num_threads(1)
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

from seffi.callbacks.sb3 import CoverageCallback  # noqa: E402

PLANS = ("bfs", "dfs", "astar")


class MazeEnv(gym.Env):
    """A user's env: a 3-step episode on one maze; the last action picks the plan; 4 mazes in turn."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(PLANS) + 1)
        self.strategies = PLANS
        self.maze, self.t, self.k = 0, 0, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if self.k == 4:  # four samples per maze, then the next maze
            self.maze, self.k = (self.maze + 1) % 4, 0
        self.t = 0
        return np.array([self.maze / 4, 0.0], dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        obs = np.array([self.maze / 4, self.t / 3], dtype=np.float32)
        if self.t < 3:
            return obs, 0.0, False, False, {}
        self.k += 1
        matches = (PLANS[int(action)],) if int(action) < len(PLANS) else ()
        info = {"input_id": f"maze-{self.maze}", "strategy_matches": matches, "valid": bool(matches)}
        return obs, 1.0, True, False, info


def _train(out_dir: Path, steps: int = 1536) -> CoverageCallback:
    venv = make_vec_env(MazeEnv, n_envs=2, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu",
                policy_kwargs={"net_arch": [16]})  # fmt: skip
    callback = CoverageCallback(budget=4, out_dir=out_dir, wandb="disabled", log_every=64)
    model.learn(steps, callback=callback)
    return callback


def _folder(out_dir: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out_dir).as_posix(): p.read_bytes() for p in sorted(out_dir.rglob("*")) if p.is_file()
    }


def test_the_folder_is_complete_when_learn_returns_and_as_drawn_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    in_process: list[int] = []
    submit, plots = report_files.PlotRenderer.submit, report_files.render_report_plots

    def recording_submit(self: report_files.PlotRenderer, report_json: str) -> None:
        events.append("submit")
        submit(self, report_json)

    def counting(*args: Any, **kwargs: Any) -> Any:
        in_process.append(1)
        return plots(*args, **kwargs)

    class Callback(CoverageCallback):
        def _on_training_end(self) -> None:
            events.append("training end")
            assert self.monitor is not None
            report, computed = self.monitor.report, []
            self.monitor.report = lambda **meta: computed.append(1) or report(**meta)  # type: ignore[method-assign]
            super()._on_training_end()
            events.append(f"{len(computed)} reports computed")

    monkeypatch.setattr(report_files.PlotRenderer, "submit", recording_submit)
    monkeypatch.setattr(report_files, "render_report_plots", counting)
    monkeypatch.setattr("tests.callbacks.test_sb3_finalize.CoverageCallback", Callback)
    child = _folder(_train(tmp_path / "child").out_dir)
    # Handed to the child at the last rollout's end, before the last policy update; not drawn here,
    # and the report computed then is the one written.
    assert events == ["submit", "training end", "0 reports computed"] and in_process == []

    # The same training with the plots drawn in this process, as they are without a child.
    monkeypatch.setattr(LocalSink, "start_renderer", lambda self: None)
    monkeypatch.setattr(LocalSink, "render_ahead", lambda self, report: None)
    here_cb = _train(tmp_path / "here")
    here = _folder(here_cb.out_dir)
    assert in_process == [1]

    pngs = sorted(name for name in child if name.endswith(".png"))
    assert pngs == sorted(name for name in here if name.endswith(".png"))
    assert len(pngs) == 5, pngs  # coverage, novelty, time to coverage, valid vs raw, barcode
    assert set(child) == set(here) >= {"report.json", "report.md", "tracker_state.json", "metrics.jsonl"}
    assert child == here  # every file, byte for byte: report.json, report.md, the PNGs, the logs
    assert child["report.json"].decode() == dumps_report(here_cb.report)


def test_a_stop_during_the_last_update_draws_the_interrupted_report(tmp_path: Path) -> None:
    class StopInLastUpdate(CoverageCallback):
        def _on_rollout_end(self) -> None:
            super()._on_rollout_end()
            if self.num_timesteps >= self.model._total_timesteps:
                self._stop.received = signal.SIGINT  # as a Ctrl-C during the last policy update would

    venv = make_vec_env(MazeEnv, n_envs=2, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu")
    callback = StopInLastUpdate(budget=4, out_dir=tmp_path / "run", wandb="disabled", log_every=64)
    with pytest.raises(KeyboardInterrupt):  # delivered once the report is written
        model.learn(512, callback=callback)
    report = callback.report
    assert report.meta.get("interrupted") is True
    assert (tmp_path / "run" / "report.json").read_text() == dumps_report(report)
    assert len(list((tmp_path / "run" / "plots").glob("*.png"))) == 5

"""The W&B run a monitor or callback starts is named, tagged and configured, read back with wandb leet."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

from seffi.callbacks import CoverageMonitor
from seffi.episodes import parse_generation
from seffi.errors import SeffiError
from tests.helpers import require, wandb_leet

WAYS = ("left", "right", "up")


def _described(run_dir) -> dict[str, Any]:
    return json.loads(wandb_leet(run_dir, "--summary", "--json"))


def test_a_plain_loops_run_says_its_task_budget_and_strategies(tmp_path):
    where = {"out_dir": tmp_path / "run", "wandb": "offline", "wandb_kwargs": {"dir": str(tmp_path)}}
    monitor = CoverageMonitor(2, list(WAYS), plots=False, task_name="maze", window=64, n_boot=10, **where)
    monitor.update(parse_generation(["x", "x"], [["left"], ["up"]], monitor.coder, [True, True],
                                    sample_index=[1, 2], run_index=[0, 0]))  # fmt: skip
    monitor.finalize(step=2)
    run = _described(monitor.sinks.wandb.run.run_dir)
    assert run["name"] == "seffi-maze-K2" and run["tags"] == ["seffi", "maze"]
    assert run["config"] | {"seffi_version": None} == {
        "seffi_version": None, "task": "maze", "env_id": None, "budget": 2, "num_strategies": 3, "window": 64,
        "n_boot": 10, "seed": 0,
    }  # fmt: skip


def test_what_the_user_sets_wins(tmp_path):
    mine = {"dir": str(tmp_path), "name": "mine", "tags": ["ablation"], "config": {"budget": "theirs"}}
    monitor = CoverageMonitor(2, list(WAYS), out_dir=tmp_path / "run", wandb="offline", wandb_kwargs=mine,
                              plots=False, task_name="maze", n_boot=10)  # fmt: skip
    monitor.finalize(step=1)
    run = _described(monitor.sinks.wandb.run.run_dir)
    assert run["name"] == "mine" and run["tags"] == ["ablation"]
    assert run["config"]["budget"] == "theirs" and run["config"]["task"] == "maze"


def test_any_wandb_init_argument_reaches_the_run(tmp_path):
    """``wandb_kwargs`` takes whatever ``wandb.init`` takes (``notes``, ``id``, ``resume``, ``settings``);
    the mode (the monitor's ``wandb=``), ``reinit`` and a misspelt name are refused in one line."""
    mine = {"dir": str(tmp_path), "notes": "ablation 3", "id": "mine0001", "resume": "allow",
            "entity": "lab", "settings": {"console": "off"}}  # fmt: skip
    monitor = CoverageMonitor(2, list(WAYS), out_dir=tmp_path / "run", wandb="offline", wandb_kwargs=mine,
                              plots=False, task_name="maze", n_boot=10)  # fmt: skip
    monitor.finalize(step=1)
    assert not monitor.sinks.wandb.run.failed
    run = _described(monitor.sinks.wandb.run.run_dir)
    assert (run["run_id"], run["notes"], run["name"]) == ("mine0001", "ablation 3", "seffi-maze-K2")
    refused = [
        ({"mode": "online"}, "may not set mode: pass wandb="),
        ({"projet": "x"}, "no argument 'projet'"),
        ({"reinit": True}, "may not set reinit"),
    ]
    for wrong, message in refused:
        with pytest.raises(SeffiError, match=message):
            CoverageMonitor(2, list(WAYS), out_dir=tmp_path / "two", wandb="offline", wandb_kwargs=wrong)
        assert not (tmp_path / "two").exists()  # refused before the folder is made


class PickAWay(gym.Env):
    """A user's one-step env with two inputs."""

    strategies = WAYS

    def __init__(self) -> None:
        self.observation_space, self.action_space = gym.spaces.Discrete(1), gym.spaces.Discrete(3)
        self._n = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        self._n += 1
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        return 0, 1.0, True, False, {"input_id": f"x{self._n % 2}", "strategy_matches": (WAYS[int(action)],)}


def test_the_sb3_callbacks_run_is_described_too(tmp_path, monkeypatch):
    require("stable_baselines3", "sb3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from seffi.callbacks.sb3 import CoverageCallback

    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    model = PPO("MlpPolicy", make_vec_env(PickAWay, n_envs=2, seed=0), n_steps=32, batch_size=32, n_epochs=1,
                seed=0, device="cpu", policy_kwargs={"net_arch": [4]})  # fmt: skip
    callback = CoverageCallback(
        budget=2, out_dir=tmp_path / "run", wandb="offline", plots=False, task_name="ways"
    )
    model.learn(64, callback=callback)
    run = _described(callback.wandb_run_dir)
    assert run["name"] == "seffi-ways-K2" and run["tags"] == ["seffi", "ways"]
    assert run["config"]["algo"] == "PPO" and run["config"]["num_strategies"] == 3

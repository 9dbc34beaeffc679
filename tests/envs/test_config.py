from __future__ import annotations

import gymnasium as gym
import pytest

from seffi.envs import RouterEnvConfig, TokenEnvConfig, env_id
from seffi.envs.config import parse_config
from seffi.errors import SeffiError


def test_defaults_are_documented_values() -> None:
    cfg = parse_config(TokenEnvConfig, {"task": "hanoi"})
    assert (cfg.n_inputs, cfg.budget, cfg.reward, cfg.schedule, cfg.history) == (
        8,
        16,
        "valid",
        "round_robin",
        False,
    )
    rcfg = parse_config(RouterEnvConfig, {"task": "hanoi"})
    assert (rcfg.history, rcfg.noise, rcfg.prior_skew, rcfg.n_latents) == (True, 0.1, 1.0, None)


@pytest.mark.parametrize(
    ("kind", "kwargs", "field"),
    [
        ("token", {"budget": 0}, "budget"),
        ("token", {"n_inputs": -1}, "n_inputs"),
        ("token", {"reward": "bogus"}, "reward"),
        ("token", {"reward": 3}, "reward"),
        ("token", {"schedule": "lifo"}, "schedule"),
        ("token", {"max_length": 1}, "max_length"),
        ("token", {"n_latents": 4}, "n_latents"),  # router-only setting on a token env
        ("token", {"novelty_bonus": float("nan")}, "novelty_bonus"),
        ("router", {"noise": 1.5}, "noise"),
        ("router", {"prior_skew": -1}, "prior_skew"),
        ("router", {"n_latents": 0}, "n_latents"),
        ("router", {"bugdet": 3}, "bugdet"),
        ("router", {"render_mode": "depth_array"}, "render_mode"),
        ("token", {"render_mode": "rgb"}, "render_mode"),
    ],
)
@pytest.mark.filterwarnings("ignore:.*render_mode")
def test_invalid_settings_raise_one_clear_error_naming_the_field(kind: str, kwargs: dict, field: str) -> None:
    with pytest.raises(SeffiError, match=field):
        gym.make(env_id("hanoi", kind), **kwargs)


def test_bad_task_config_and_unknown_task_are_clear_errors() -> None:
    with pytest.raises(SeffiError, match=r"task_config.*max_disks"):
        gym.make(env_id("hanoi"), task_config={"max_disks": 99})
    with pytest.raises(SeffiError, match="unknown task"):
        gym.make(env_id("hanoi"), task="no_such_task")
    assert issubclass(SeffiError, ValueError)

from __future__ import annotations

import gymnasium as gym
import numpy as np
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


@pytest.mark.parametrize(
    ("kind", "kwargs", "field", "shown"),
    [
        ("router", {"budget": "8"}, "budget", "not str '8'"),
        ("router", {"budget": True}, "budget", "not bool True"),
        ("token", {"budget": np.True_}, "budget", "not bool"),
        ("token", {"budget": 8.0}, "budget", "not float 8.0"),
        ("token", {"n_inputs": True}, "n_inputs", "not bool True"),
        ("token", {"input_seed": "3"}, "input_seed", "not str '3'"),
        ("token", {"max_length": False}, "max_length", "not bool False"),
        ("router", {"n_latents": "4"}, "n_latents", "not str '4'"),
        ("router", {"mapping_seed": True}, "mapping_seed", "not bool True"),
        ("router", {"noise": "0.1"}, "noise", "not str '0.1'"),
        ("router", {"prior_skew": True}, "prior_skew", "not bool True"),
        ("router", {"novelty_bonus": "1"}, "novelty_bonus", "not str '1'"),
        ("router", {"history": 1}, "history", "not int 1"),
        ("token", {"history": "yes"}, "history", "not str 'yes'"),
    ],
)
def test_settings_of_the_wrong_type_are_refused_not_coerced(
    kind: str, kwargs: dict, field: str, shown: str
) -> None:
    """``budget='8'`` and ``budget=True`` are refused, not read as 8 and 1; bools are never ints."""
    with pytest.raises(SeffiError, match=rf"^invalid \w+EnvConfig: {field}: must be .*{shown}"):
        gym.make(env_id("hanoi", kind), **kwargs)


def test_bools_are_never_ints_while_numpy_numbers_are_numbers() -> None:
    """Refusing bools and strings must not refuse numpy numbers from a sweep."""
    for flag in (True, np.True_):
        with pytest.raises(SeffiError, match="budget: must be an integer, not bool"):
            parse_config(RouterEnvConfig, {"task": "hanoi", "budget": flag})
    cfg = parse_config(
        RouterEnvConfig,
        {
            "task": "hanoi",
            "budget": np.int32(4),
            "n_latents": np.int64(6),
            "noise": np.float32(0.25),
            "history": np.False_,
        },
    )
    assert (cfg.budget, cfg.n_latents, cfg.noise, cfg.history) == (4, 6, 0.25, False)
    assert (type(cfg.budget), type(cfg.n_latents), type(cfg.noise), type(cfg.history)) == (
        int,
        int,
        float,
        bool,
    )
    assert parse_config(RouterEnvConfig, {"task": "hanoi", "prior_skew": 2}).prior_skew == 2.0

"""``MonitorConfig``: every monitor option declared once, checked once, taken by every adapter.

The SB3 and RLlib adapters' own cases live in test_sb3.py / test_rllib.py (they need the extras).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import gymnasium as gym
import pytest

import seffi.callbacks
import seffi.envs
from seffi.callbacks import CoverageEvaluator, CoverageMonitor, MonitorConfig
from seffi.callbacks.gym import CoverageVectorWrapper, CoverageWrapper
from seffi.errors import SeffiError

K = 4
ENV = "seffi/SortSwapsRouter-v0"


def _vector() -> gym.vector.VectorEnv:
    return gym.make_vec(ENV, num_envs=2, vectorization_mode="vector_entry_point", n_inputs=2, budget=K)


def _single() -> gym.Env:
    return gym.make(ENV, n_inputs=2, budget=K)


ENTRY_POINTS = {
    "MonitorConfig.build": lambda **o: MonitorConfig.build(**o),
    "CoverageMonitor": lambda **o: CoverageMonitor(K, env=_single(), **o),
    "CoverageVectorWrapper": lambda **o: CoverageVectorWrapper(_vector(), K, **o),
    "CoverageWrapper": lambda **o: CoverageWrapper(_single(), K, **o),
    "CoverageEvaluator": lambda **o: CoverageEvaluator(_single(), K, **o),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_unknown_option_is_one_error_naming_it(entry: str) -> None:
    """A misspelt option fails at once, with one line that names it and the options."""
    with pytest.raises(SeffiError) as err:
        ENTRY_POINTS[entry](n_bot=0, wandb="disabled")
    message = str(err.value)
    assert "\n" not in message
    assert "unknown monitor option(s) ['n_bot']" in message and "'n_boot'" in message


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("budget", 0, "budget must be a positive int, got 0"),
        ("log_every", 2.5, "log_every must be a positive int, got 2.5"),
        ("log_curves_every", 0, "log_curves_every must be a positive int"),
        ("log_unit", "hours", "log_unit must be 'episodes' or 'steps', got 'hours'"),
        ("n_boot", -1, "n_boot must be a non-negative int, got -1"),
        ("seed", True, "seed must be a non-negative int, got True"),
        ("stream_offset", -2, "stream_offset must be a non-negative int"),
        ("wandb", "sometimes", "wandb must be 'online', 'offline' or 'disabled', got 'sometimes'"),
    ],
)
def test_bad_values_are_refused_by_the_config(option: str, value: object, says: str) -> None:
    """Each bad value is one SeffiError naming the option (constructor and replace)."""
    with pytest.raises(SeffiError, match=f"^{option} must"):
        MonitorConfig(**{option: value})
    with pytest.raises(SeffiError) as err:
        MonitorConfig(n_boot=0).replace(**{option: value})
    assert str(err.value) == says or str(err.value).startswith(says)


def test_options_override_the_config_and_leave_it_unchanged() -> None:
    """``build(config, **options)`` = config with options on top; configs are frozen."""
    base = MonitorConfig(budget=8, n_boot=0, wandb="disabled", label="ppo")
    built = MonitorConfig.build(base, n_boot=7, scope="eval")
    assert (built.budget, built.n_boot, built.wandb) == (8, 7, "disabled")
    assert (built.label, built.scope) == ("ppo", "eval")
    assert (base.n_boot, base.scope) == (0, None)
    assert MonitorConfig.build(base) is base
    with pytest.raises(AttributeError):
        base.n_boot = 3  # type: ignore[misc]


def test_gym_wrappers_and_evaluator_take_a_config(tmp_path: Path) -> None:
    """An adapter given config=MonitorConfig(n_boot=0, wandb="disabled") builds a
    monitor with those values; keyword options go on top of the config."""
    cfg = MonitorConfig(n_boot=0, wandb="disabled", log_every=3)
    wrapped = CoverageVectorWrapper(_vector(), K, config=cfg, out_dir=tmp_path / "vec")
    single = CoverageWrapper(_single(), config=cfg.replace(budget=K), out_dir=tmp_path / "one", n_boot=5)
    evaluator = CoverageEvaluator(_single(), K, config=cfg, out_dir=tmp_path / "eval")
    for monitor, n_boot in ((wrapped.monitor, 0), (single.monitor, 5), (evaluator.monitor, 0)):
        assert (monitor.budget, monitor.n_boot, monitor.config.log_every) == (K, n_boot, 3)
        assert monitor.sinks.wandb is None  # wandb="disabled": only the local sink
    assert wrapped.monitor.out_dir == tmp_path / "vec" and single.monitor.out_dir == tmp_path / "one"
    # The evaluator keeps its own key scope and one curve snapshot per evaluation.
    assert (evaluator.monitor.scope, evaluator.monitor.label, evaluator.monitor.config.log_curves_every) == (
        "eval",
        "eval",
        1,
    )
    # Without a config the evaluator's bootstrap default stays 100.
    assert CoverageEvaluator(_single(), K, wandb="disabled", out_dir=tmp_path / "e2").monitor.n_boot == 100
    with pytest.raises(SeffiError, match="needs a budget"):
        CoverageWrapper(_single(), config=cfg)
    wrapped.close()


#: The user-facing names of ``seffi.callbacks`` and the modules that define them.
USER_FACING = {
    "CoverageMonitor": "seffi.callbacks.core",
    "MonitorConfig": "seffi.callbacks.config",
    "CoverageEvaluator": "seffi.callbacks.evaluator",
    "EpisodeBatch": "seffi.episodes.batch",
    "EpisodeRejected": "seffi.episodes.contract",
    "parse_infos": "seffi.episodes.parsers",
}


def test_package_exports_what_a_user_needs() -> None:
    """``seffi.callbacks`` exports the user-facing names (the objects of their modules), not internals."""
    assert sorted(seffi.callbacks.__all__) == sorted(USER_FACING)
    for name, module in USER_FACING.items():
        assert getattr(seffi.callbacks, name) is getattr(importlib.import_module(module), name), name
    for internal in ("EnvAccess", "MatchCoder", "rollout_episodes"):
        assert not hasattr(seffi.callbacks, internal), internal
    from seffi.callbacks.env_access import EnvAccess  # noqa: F401 - still importable from its module
    from seffi.callbacks.evaluator import rollout_episodes  # noqa: F401
    from seffi.episodes import MatchCoder  # noqa: F401

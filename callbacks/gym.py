"""Plain Gymnasium loops (CleanRL style): wrappers that record coverage (a loop by hand: docs/custom-env.md).

`CoverageVectorWrapper` / `CoverageWrapper` call ``monitor.update_infos`` and ``maybe_log`` in
``step`` and ``close`` the monitor; both take every [`MonitorConfig`][seffi.callbacks.MonitorConfig] option.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.vector import VectorWrapper

from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.core import CoverageMonitor

__all__ = ["CoverageVectorWrapper", "CoverageWrapper"]


class _Recording:
    """What both wrappers add: ``monitor``, the logging step ``global_step``, the report at ``close``."""

    def __init__(
        self, env: Any, budget: int | None = None, *, config: MonitorConfig | None = None, **options: Any
    ) -> None:
        # The monitor first: if it cannot be built, no half-made wrapper exists whose clean-up at
        # garbage collection would close the caller's env or look for a monitor.
        self.monitor = CoverageMonitor(budget, env=env, config=config, **options)
        super().__init__(env)  # type: ignore[call-arg]
        self.global_step = 0

    def _record(self, infos: Any, done: Any, steps: int) -> None:
        self.global_step += steps
        self.monitor.update_infos(infos, done)
        self.monitor.maybe_log(self.global_step)

    def close(self, **kwargs: Any) -> None:
        """Write the report (when the monitor was built), then close the wrapped env."""
        monitor = getattr(self, "monitor", None)
        if monitor is not None:
            monitor.finalize(getattr(self, "global_step", None))
        super().close(**kwargs)  # type: ignore[misc]


class CoverageVectorWrapper(_Recording, VectorWrapper):
    """A Gymnasium vector env (any kind) that records coverage of every finished episode.

    Args:
        env: A vector env whose sub-envs meet the info contract (``docs/custom-env.md``).
        budget: Per-input sample budget K (default: ``config.budget``).
        config: The monitor options ([`MonitorConfig`][seffi.callbacks.MonitorConfig]).
        **options: [`MonitorConfig`][seffi.callbacks.MonitorConfig] fields on top of ``config``.
    """

    def step(self, actions: Any) -> Any:
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        self._record(infos, terminations | truncations, self.num_envs)
        return obs, rewards, terminations, truncations, infos


class CoverageWrapper(_Recording, gym.Wrapper):
    """A single Gymnasium env that records coverage of every finished episode (as `CoverageVectorWrapper`)."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._record(info, terminated or truncated, 1)
        return obs, reward, terminated, truncated, info

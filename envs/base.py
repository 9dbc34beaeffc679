"""The single-env base class and what it shares with the vector env: shells around a numpy engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from seffi.errors import SeffiError
from seffi.tasks.base import Task, TaskInput

from .config import EnvConfig, parse_config
from .core import PoolSpec, row_info
from .render import RENDER_FPS, RENDER_MODES, render_row


class PoolAPI:
    """What single and vector envs share: their engine, rendering and a read-only view of the pool."""

    _engine: Any
    engine_cls: ClassVar[Any]
    config_cls: ClassVar[type[EnvConfig]]

    def _setup(self, kwargs: dict[str, Any], num_envs: int, metadata: dict[str, Any]) -> None:
        # Per instance: Gymnasium 1.2's vector envs write their autoreset mode into the first env's
        # metadata, else this class's dict shared by every env.
        self.metadata = metadata
        cfg = parse_config(self.config_cls, kwargs)
        self._engine = self.engine_cls(cfg, num_envs)
        self.render_mode = cfg.render_mode

    def _frames(self, rows: int) -> list[Any] | None:
        """A frame per row, or (Gymnasium's warning, as CartPole) ``None`` without a render mode."""
        if self.render_mode is None:
            eid = self.spec.id if self.spec is not None else "seffi/<Name>-v0"  # type: ignore[attr-defined]
            gym.logger.warn(
                "You are calling render() without a render mode; pass one at creation, e.g. "
                f'gym.make("{eid}", render_mode="rgb_array") (supported: {list(RENDER_MODES)})'
            )
            return None
        return [render_row(self._engine, r, self.render_mode) for r in range(rows)]

    @property
    def task(self) -> Task[Any, Any]:
        """The task instance."""
        return self._engine.spec.task

    @property
    def inputs(self) -> list[TaskInput]:
        """The fixed input pool (a copy of the list)."""
        return list(self._engine.spec.inputs)

    @property
    def input_ids(self) -> tuple[str, ...]:
        """Ids of the pool inputs, in pool order."""
        return self._engine.spec.input_ids

    @property
    def budget(self) -> int:
        """Samples per input in one run (K)."""
        return self._engine.cfg.budget

    @property
    def strategies(self) -> tuple[str, ...]:
        """The task's declared strategies (M = their number = ``info["num_strategies"]``)."""
        return self._engine.spec.strategies

    @property
    def config(self) -> EnvConfig:
        """The validated env settings."""
        return self._engine.cfg

    def base_match_distribution(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        """Exact law ``{match set: probability}`` of one iid base draw (``valid_only``: if valid)."""
        return self._engine.spec.base_match_distribution(input_id, valid_only=valid_only)

    def reference_match_sets(self, input_id: str) -> dict[str, frozenset[str]]:
        """``task.reference_match_sets`` of a pool input (what the no-repeat oracle emits)."""
        spec = self._engine.spec
        return spec.task.reference_match_sets(spec.inputs[spec.index_of(input_id)])


def explicit_inputs(spec: PoolSpec, options: Any, rows: int, allowed: frozenset[str]) -> np.ndarray | None:
    """Pool indices requested by ``options["input_id"]`` (one id, or one per row), else ``None``."""
    if options is not None and not isinstance(options, Mapping):  # a str would list its characters
        raise SeffiError(
            f"reset options must be a dict such as {{'input_id': ...}} (supported keys: {sorted(allowed)}), "
            f"got {type(options).__name__} {options!r}"
        )
    if unknown := set(options or {}) - allowed:
        raise SeffiError(f"unknown reset option(s) {sorted(unknown)}; supported: {sorted(allowed)}")
    wanted = (options or {}).get("input_id")
    if wanted is None or isinstance(wanted, str):
        return None if wanted is None else np.full(rows, spec.index_of(wanted), dtype=np.int64)
    if isinstance(wanted, Sequence | np.ndarray) and len(wanted) == rows:
        return np.array([spec.index_of(w) for w in wanted], dtype=np.int64)
    raise SeffiError(f"options['input_id'] must be an input id (str) or {rows} ids, got {wanted!r}")


_ROW0 = np.zeros(1, dtype=np.int64)


def first(obs: Any) -> Any:
    """Row 0 of a batched observation (a dict of arrays or an array)."""
    if isinstance(obs, dict):
        return {k: v[0] for k, v in obs.items()}
    return obs[0]


class SeffiEnv(gym.Env[Any, np.int64], PoolAPI):
    """Base of the single seffi envs: one engine row, Gymnasium's reset/step protocol, clear errors."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": list(RENDER_MODES), "render_fps": RENDER_FPS}

    def __init__(self, **kwargs: Any) -> None:
        self._setup(kwargs, 1, dict(type(self).metadata))
        self.observation_space = self._engine.single_observation_space
        self.action_space = self._engine.single_action_space

    def render(self) -> str | np.ndarray | None:
        """The current frame: text (``"ansi"``) or uint8 array (H, W, 3); without a mode, a warning."""
        frames = self._frames(1)
        return None if frames is None else frames[0]

    @property
    def current_input_id(self) -> str | None:
        """Id of the input of the current (or last) episode; ``None`` before the first reset."""
        cur = int(self._engine.life.cur[0])
        return None if cur < 0 else self._engine.spec.input_ids[cur]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode on the scheduled input or ``options["input_id"]``; a seed restarts all."""
        explicit = explicit_inputs(self._engine.spec, options, 1, frozenset({"input_id"}))  # checked first
        super().reset(seed=seed)
        if seed is not None or not self._engine.life.seeded(0):
            self._engine.restart(0, self.np_random)
        self._engine.reset_rows(_ROW0, explicit)
        return first(self._engine.observe(_ROW0)), {}

    def _check_action(self, action: Any) -> np.ndarray:
        if isinstance(action, np.ndarray) and action.shape == ():
            action = action[()]
        if isinstance(action, bool | np.bool_) or not isinstance(action, int | np.integer):
            raise SeffiError(f"action must be an integer, got {action!r} ({type(action).__name__})")
        n = int(self.action_space.n)
        if not 0 <= action < n:
            raise SeffiError(f"action {action} is outside the action space Discrete({n})")
        return np.array([action], dtype=np.int64)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Apply one action; ``info`` holds the final keys only on the step that ends the episode."""
        if not self._engine.life.active[0]:
            raise SeffiError("the episode is over (or never started): call reset() before step()")
        actions = self._check_action(action)
        rewards, term, trunc, fin, cols = self._engine.step_rows(_ROW0, actions)
        info = row_info(cols, 0) if fin.size else {}
        return first(self._engine.observe(_ROW0)), float(rewards[0]), bool(term[0]), bool(trunc[0]), info

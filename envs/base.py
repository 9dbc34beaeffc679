"""The single and native vector env classes: Gymnasium shells around an engine that steps rows with numpy.

A vector env's row ``i`` is seeded like the ``i``-th env of a ``SyncVectorEnv`` (``s + i``), so in
each ``autoreset_mode`` (docs/integrations.md) it equals ``SyncVectorEnv`` over the single env.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from seffi.errors import SeffiError
from seffi.tasks.base import Task, TaskInput

from .config import EnvConfig, parse_config
from .core import PoolSpec, row_info, vector_infos
from .render import RENDER_FPS, RENDER_MODES, render_ansi, render_rgb


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
        draw = render_ansi if self.render_mode == "ansi" else render_rgb
        return [draw(self._engine, r) for r in range(rows)]

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


def row_of(obs: Any, j: int = 0) -> Any:
    """Row ``j`` of a batched observation (a dict of arrays or an array)."""
    return {k: v[j] for k, v in obs.items()} if isinstance(obs, dict) else obs[j]


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
        return row_of(self._engine.observe(_ROW0)), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Apply one action; ``info`` holds the final keys only on the step that ends the episode."""
        if not self._engine.life.active[0]:
            raise SeffiError("the episode is over (or never started): call reset() before step()")
        if isinstance(action, np.ndarray) and action.shape == ():
            action = action[()]
        if isinstance(action, bool | np.bool_) or not isinstance(action, int | np.integer):
            raise SeffiError(f"action must be an integer, got {action!r} ({type(action).__name__})")
        n = int(self.action_space.n)
        if not 0 <= action < n:
            raise SeffiError(f"action {action} is outside the action space Discrete({n})")
        rewards, term, trunc, fin, cols = self._engine.step_rows(_ROW0, np.array([action], dtype=np.int64))
        info = row_info(cols, 0) if fin.size else {}
        return row_of(self._engine.observe(_ROW0)), float(rewards[0]), bool(term[0]), bool(trunc[0]), info


def parse_autoreset_mode(mode: Any) -> AutoresetMode:
    """An ``AutoresetMode`` from the enum, its value (``"SameStep"``) or its name (``"same_step"``)."""
    for member in AutoresetMode:
        if mode is member or (isinstance(mode, str) and mode.upper() in (member.value.upper(), member.name)):
            return member
    choices = ", ".join(f"AutoresetMode.{m.name} ({m.value!r})" for m in AutoresetMode)
    raise SeffiError(f"autoreset_mode must be one of {choices}, got {mode!r}")


def final_obs_info(num_envs: int, rows: np.ndarray, obs: Any) -> tuple[np.ndarray, np.ndarray]:
    """``infos["final_obs"]`` (object array) and its mask for ``rows`` that ended with batched ``obs``."""
    mask = np.zeros(num_envs, dtype=np.bool_)
    mask[rows] = True
    views = (row_of(obs, j) for j in range(rows.size)) if isinstance(obs, dict) else obs
    per_row = np.fromiter(views, dtype=object, count=rows.size)  # iterating a 2-D array yields its rows
    if rows.size == num_envs:  # every row ended (always, for router envs): rows is 0..E-1, in order
        return per_row, mask
    arr = np.full(num_envs, None, dtype=object)
    arr[rows] = per_row
    return arr, mask


class SeffiVectorEnv(VectorEnv, PoolAPI):
    """Base of the native vector envs.

    Args:
        num_envs: Number of independent envs (rows).
        autoreset_mode: ``AutoresetMode`` (or its value or name); with ``gymnasium.make_vec`` a
            keyword argument (``make_vec`` rejects ``vector_kwargs`` for ``vector_entry_point``).
        **kwargs: The env settings, as for the single env.
    """

    # The class default; each instance gets its own copy.
    metadata: ClassVar[dict[str, Any]] = {**SeffiEnv.metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self, num_envs: int = 1, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, **kwargs: Any
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise SeffiError(f"num_envs must be a positive int, got {num_envs!r}")
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        kwargs.pop("max_episode_steps", None)  # make_vec forwards the spec's value; episodes end on their own
        self._setup(kwargs, num_envs, {**type(self).metadata, "autoreset_mode": self.autoreset_mode})
        self.num_envs = num_envs
        self.single_observation_space = self._engine.single_observation_space
        self.single_action_space = self._engine.single_action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._rows = np.arange(num_envs, dtype=np.int64)
        self._autoreset = np.zeros(num_envs, dtype=bool)
        self._started = False

    def render(self) -> tuple[str | np.ndarray, ...] | None:
        """One frame per row, as ``SyncVectorEnv.render`` returns them; without a mode, a warning."""
        frames = self._frames(self.num_envs)
        return None if frames is None else tuple(frames)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset all rows (or ``options["reset_mask"]``), row ``i`` seeded ``seed + i``.

        ``options["input_id"]``: one id for every row, or ``num_envs`` ids.
        """
        n = self.num_envs
        explicit = explicit_inputs(self._engine.spec, options, n, frozenset({"input_id", "reset_mask"}))
        if seed is None or isinstance(seed, int | np.integer):
            seeds: list[int | None] = [None if seed is None else int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise SeffiError(f"reset got {len(seeds)} seeds for num_envs={n}")
        rows = self._rows
        if (mask := (options or {}).get("reset_mask")) is not None:
            mask = np.asarray(mask)
            if mask.shape != (n,) or mask.dtype != np.bool_ or not mask.any():
                raise SeffiError(f"options['reset_mask'] must be a bool array of shape ({n},) with a True")
            rows = self._rows[mask]
        for r in rows:
            if seeds[r] is not None or not self._engine.life.seeded(int(r)):
                self._engine.restart(int(r), seeding.np_random(seeds[r])[0])
        self._engine.reset_rows(rows, None if explicit is None else explicit[rows])
        self._autoreset[rows] = False
        self._started = True
        return self._engine.observe(self._rows), {}

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every row, autoresetting ended episodes as ``autoreset_mode`` says."""
        if not self._started:
            raise SeffiError("call reset() before step()")
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,) or not np.issubdtype(actions.dtype, np.integer):
            raise SeffiError(
                f"actions must be an integer array of shape ({self.num_envs},), "
                f"got dtype {actions.dtype} shape {actions.shape}"
            )
        mode = self.autoreset_mode
        auto = self._autoreset  # only ever set in NEXT_STEP and DISABLED modes
        if mode is AutoresetMode.DISABLED and auto.any():
            raise SeffiError(
                f"env {int(np.flatnonzero(auto)[0])}'s episode is over and autoreset_mode is DISABLED: "
                "reset it with reset(options={'reset_mask': terminated | truncated}) before step()"
            )
        live = self._rows[~auto]
        live_actions = actions[live].astype(np.int64, copy=False)
        n = int(self.single_action_space.n)
        bad = (live_actions < 0) | (live_actions >= n)
        if bad.any():
            raise SeffiError(
                f"action {int(live_actions[bad][0])} of env {int(live[bad][0])} is outside Discrete({n})"
            )
        self._engine.reset_rows(self._rows[auto], None)  # NEXT_STEP: the previous step's ended rows
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        r, term, trunc, fin, cols = self._engine.step_rows(live, live_actions)
        rewards[live], terminated[live], truncated[live] = r, term, trunc
        if mode is not AutoresetMode.SAME_STEP:
            self._autoreset = terminated | truncated
            infos = vector_infos(self.num_envs, fin, cols)
            return self._engine.observe(self._rows), rewards, terminated, truncated, infos
        # SAME_STEP, as SyncVectorEnv: record the final obs and info, reset at once (unseeded).
        infos = {}
        if fin.size:
            final_obs = self._engine.observe(fin)
            self._engine.reset_rows(fin, None)
            infos["final_obs"], infos["_final_obs"] = final_obs_info(self.num_envs, fin, final_obs)
            infos["final_info"] = vector_infos(self.num_envs, fin, cols)
            infos["_final_info"] = infos["_final_obs"].copy()
        return self._engine.observe(self._rows), rewards, terminated, truncated, infos

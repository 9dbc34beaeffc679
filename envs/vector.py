"""Native batched vector envs (Gymnasium's ``vector_entry_point``, like ``CartPoleVectorEnv``).

One engine steps all ``num_envs`` rows with numpy. Row ``i`` is seeded exactly like the ``i``-th env
of a ``SyncVectorEnv`` (``reset(seed=s)`` gives it ``s + i``) and autoresets in ``NEXT_STEP`` mode, so
observations, rewards, terminations and infos (dict of arrays with ``_key`` masks) equal those of
``SyncVectorEnv`` over the single env for the same seeds and actions.

Example:
    >>> import gymnasium as gym, seffi.envs
    >>> envs = gym.make_vec("seffi/HanoiRouter-v0", num_envs=4, vectorization_mode="vector_entry_point")
    >>> obs, _ = envs.reset(seed=0)
    >>> _, rewards, terminated, _, infos = envs.step(envs.action_space.sample())
    >>> bool(terminated.all()), infos["_strategy_matches"].tolist()
    (True, [True, True, True, True])
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space

from seffi.errors import SeffiError

from .base import Engine, PoolAPI, check_options, explicit_inputs, warn_no_render_mode
from .config import EnvConfig, parse_config
from .core import vector_infos
from .render import RENDER_FPS, RENDER_MODES, render_row

_RENDER: dict[str, Any] = {"render_modes": list(RENDER_MODES), "render_fps": RENDER_FPS}
try:  # gymnasium >= 1.1 names the autoreset modes; 1.0 only has NEXT_STEP
    from gymnasium.vector import AutoresetMode

    _METADATA: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, **_RENDER}
except ImportError:  # pragma: no cover - gymnasium 1.0
    _METADATA = {"autoreset_mode": "next_step", **_RENDER}


class SeffiVectorEnv(VectorEnv, PoolAPI):
    """Base of the native vector envs.

    Args:
        num_envs: Number of independent envs (rows).
        **kwargs: The env settings, as for the single env.
    """

    metadata: ClassVar[dict[str, Any]] = _METADATA
    engine_cls: ClassVar[Any]
    config_cls: ClassVar[type[EnvConfig]]

    def __init__(self, num_envs: int = 1, **kwargs: Any) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise SeffiError(f"num_envs must be a positive int, got {num_envs!r}")
        kwargs.pop("max_episode_steps", None)  # make_vec forwards the spec's value; episodes end on their own
        cfg = parse_config(self.config_cls, kwargs)
        self.num_envs = num_envs
        self._engine: Engine = self.engine_cls(cfg, num_envs)
        self.single_observation_space = self._engine.single_observation_space
        self.single_action_space = self._engine.single_action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.render_mode = cfg.render_mode
        self._rows = np.arange(num_envs, dtype=np.int64)
        self._autoreset = np.zeros(num_envs, dtype=bool)
        self._started = False

    def render(self) -> tuple[str | np.ndarray, ...] | None:
        """One frame per row, as ``SyncVectorEnv.render`` returns them (see :mod:`seffi.envs.render`).

        Rows whose episode ended on the last step show that episode's end (NEXT_STEP autoreset has not
        reset them yet), exactly like the single envs inside a ``SyncVectorEnv``. Without a render
        mode it warns and returns ``None`` (Gymnasium's ``CartPoleVectorEnv`` convention).
        """
        if self.render_mode is None:
            warn_no_render_mode(self)
            return None
        return tuple(render_row(self._engine, r, self.render_mode) for r in range(self.num_envs))  # type: ignore[arg-type]

    @property
    def current_input_ids(self) -> tuple[str | None, ...]:
        """Input id of each row's current (or last) episode."""
        ids = self._engine.spec.input_ids
        return tuple(None if c < 0 else ids[c] for c in self._engine.life.cur)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset all rows (or ``options["reset_mask"]``), seeding row ``i`` with ``seed + i``.

        ``options["input_id"]`` may be one id (for every row, as ``SyncVectorEnv`` passes it) or a
        sequence of ``num_envs`` ids.
        """
        check_options(options, frozenset({"input_id", "reset_mask"}))
        n = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, int | np.integer):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise SeffiError(f"reset got {len(seeds)} seeds for num_envs={n}")
        rows = self._rows
        mask = (options or {}).get("reset_mask")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (n,) or mask.dtype != np.bool_ or not mask.any():
                raise SeffiError(f"options['reset_mask'] must be a bool array of shape ({n},) with a True")
            rows = self._rows[mask]
        explicit = explicit_inputs(self._engine.spec, options, n)
        for r in rows:
            if seeds[r] is not None or not self._engine.life.seeded(int(r)):
                self._engine.restart(int(r), seeding.np_random(seeds[r])[0])
        self._engine.reset_rows(rows, None if explicit is None else explicit[rows])
        self._autoreset[rows] = False
        self._started = True
        return self._engine.observe(self._rows), {}

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every row; rows whose episode ended on the previous step are reset instead (NEXT_STEP)."""
        if not self._started:
            raise SeffiError("call reset() before step()")
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,) or not np.issubdtype(actions.dtype, np.integer):
            raise SeffiError(
                f"actions must be an integer array of shape ({self.num_envs},), "
                f"got dtype {actions.dtype} shape {actions.shape}"
            )
        auto = self._autoreset
        live = self._rows[~auto]
        live_actions = actions[live].astype(np.int64, copy=False)
        n = int(self.single_action_space.n)
        bad = (live_actions < 0) | (live_actions >= n)
        if bad.any():
            raise SeffiError(
                f"action {int(live_actions[bad][0])} of env {int(live[bad][0])} is outside Discrete({n})"
            )
        self._engine.reset_rows(self._rows[auto], None)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        r, term, trunc, fin, cols = self._engine.step_rows(live, live_actions)
        rewards[live], terminated[live], truncated[live] = r, term, trunc
        self._autoreset = terminated | truncated
        infos = vector_infos(self.num_envs, fin, cols)
        return self._engine.observe(self._rows), rewards, terminated, truncated, infos

"""Uniform access to what a seffi env exposes (sub-env 0 of any container)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seffi.coverage.env_baselines import EnvBaselines
from seffi.errors import SeffiError

__all__ = ["EnvAccess"]


class EnvAccess:
    """Uniform attribute/method access to sub-env 0 of any env container.

    seffi envs expose ``task``, ``input_ids``, ``budget``, ``strategies``,
    ``base_match_distribution(input_id, valid_only=False)`` and ``reference_match_sets(input_id)`` on
    ``env.unwrapped`` (and on native vector envs themselves). Wrappers, SB3 VecEnvs (possibly in
    subprocesses) and Gymnasium ``AsyncVectorEnv`` each hide them differently; this class asks the
    right way once, so the monitor never cares.

    Args:
        env: A ``gymnasium.Env``, a ``gymnasium.vector.VectorEnv`` or an SB3 ``VecEnv``.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self._target: Any = None
        if hasattr(env, "env_method") and hasattr(env, "get_attr"):  # SB3 VecEnv (maybe subprocess)
            self._kind = "sb3"
        elif hasattr(env, "call") and hasattr(env, "num_envs") and not self._native(env):
            self._kind = "gym_vector"
            sub = getattr(env, "envs", None)  # SyncVectorEnv: talk to the sub-env directly
            if sub:
                self._kind, self._target = "direct", sub[0].unwrapped
        else:
            self._kind = "direct"
            self._target = getattr(env, "unwrapped", env)

    @staticmethod
    def _native(env: Any) -> bool:
        # A seffi native vector env carries the facts itself (its unwrapped is the batched env).
        return hasattr(getattr(env, "unwrapped", env), "base_match_distribution")

    def has(self, name: str) -> bool:
        """Whether the env exposes ``name`` (attribute or method)."""
        try:
            self.get(name)
        except (AttributeError, SeffiError):
            return False
        return True

    def get(self, name: str) -> Any:
        """Attribute ``name`` of sub-env 0.

        Raises:
            AttributeError: the env does not have it.
        """
        if self._kind == "sb3":
            try:
                return self.env.get_attr(name, indices=[0])[0]
            except AttributeError:
                raise
            except Exception as exc:  # SubprocVecEnv re-raises remote errors as other types
                raise AttributeError(name) from exc
        if self._kind == "gym_vector":
            return self.env.get_attr(name)[0]
        return getattr(self._target, name)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call method ``name`` of sub-env 0."""
        if self._kind == "sb3":
            return self.env.env_method(name, *args, indices=[0], **kwargs)[0]
        if self._kind == "gym_vector":
            return self.env.call(name, *args, **kwargs)[0]
        return getattr(self._target, name)(*args, **kwargs)

    def single_action_space(self) -> Any:
        """The action space of one sub-env."""
        env = self.env
        return getattr(env, "single_action_space", None) or getattr(env, "action_space", None)

    def env_id(self) -> str | None:
        """The registered id (e.g. ``"seffi/HanoiRouter-v0"``), if known."""
        spec = None
        for obj in (self.env, self._target):
            spec = getattr(obj, "spec", None)
            if spec is not None:
                break
        if spec is None and self._kind != "direct":
            try:
                spec = self.get("spec")
            except AttributeError:
                spec = None
        return getattr(spec, "id", None)

    # -- the facts a monitor reads once ----------------------------------------------------------------

    def task_name(self, default: str | None) -> str:
        """The env's task name (``task.name``), else ``default``, else "unknown"."""
        if self.has("task"):
            task = self.get("task")
            name = getattr(task, "name", None) or (task if isinstance(task, str) else None)
            if name:
                return str(name)
        return default or "unknown"

    def num_latents(self) -> int:
        """Z of a router env (its Discrete action space), for the latent-coverage diagnostic; else 0."""
        if not self.has("config") or not hasattr(self.get("config"), "n_latents"):  # only router configs
            return 0
        return int(getattr(self.single_action_space(), "n", 0) or 0)

    def baselines(self, strategies: Sequence[str], budget: int, **kwargs: Any) -> EnvBaselines:
        """The env's exact iid and oracle baselines (whatever of them it exposes), computed lazily.

        Args:
            strategies: The declared strategy ids.
            budget: K.
            **kwargs: Other :class:`~seffi.coverage.env_baselines.EnvBaselines` arguments.
        """

        def method(name: str) -> Any:
            if not self.has(name):
                return None
            return lambda *args, **kw: self.call(name, *args, **kw)

        pool = (lambda: self.get("input_ids")) if self.has("input_ids") else None
        return EnvBaselines(
            strategies,
            budget,
            base_law=method("base_match_distribution"),
            references=method("reference_match_sets"),
            pool=pool,
            **kwargs,
        )


def env_facts(access: EnvAccess | None, config: Any) -> tuple[str | None, str, tuple[str, ...], int]:
    """(env id, task name, strategy ids, latent codes Z) of a monitor: the config's, else the env's.

    Raises:
        SeffiError: Neither the config nor the env gives the strategies.
    """
    env_name = config.env_name or (access.env_id() if access else None)
    task = config.task_name or (access.task_name(env_name) if access else env_name) or "unknown"
    if config.strategies is None and (access is None or not access.has("strategies")):
        raise SeffiError("CoverageMonitor needs `strategies` or a seffi `env` that exposes them")
    found = config.strategies if config.strategies is not None else access.get("strategies")  # type: ignore[union-attr]
    return env_name, task, tuple(str(s) for s in found), access.num_latents() if access else 0

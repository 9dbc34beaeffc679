"""Uniform access to what a seffi env exposes (sub-env 0 of any container)."""

from __future__ import annotations

from typing import Any

from seffi.errors import SeffiError

# ----------------------------------------------------------------------------------------------------
# Reading what a baseline needs out of any env (single, Gymnasium vector, SB3 VecEnv).
# ----------------------------------------------------------------------------------------------------


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

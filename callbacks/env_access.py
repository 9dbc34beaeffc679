"""One safe way to read what an env exposes (sub-env 0 of any container).

Local envs (a single env, the sub-env 0 of a ``SyncVectorEnv`` or SB3 ``DummyVecEnv`` under any
wrappers, a native vector env) are read directly through their wrappers. Remote envs (SB3
``SubprocVecEnv``, Gymnasium ``AsyncVectorEnv``) are asked: presence as a bool (a missing attribute
never raises inside a worker, which would stop it), methods called in the worker with only their
plain result coming back. Nothing the caller gave (strategies, names, baselines) is probed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from seffi._convert import brief, clip
from seffi.coverage.env_baselines import EnvBaselines
from seffi.errors import SeffiError

__all__ = ["EnvAccess"]

#: Errors by which a parent process learns that a subprocess env's worker has died.
_PIPE_ERRORS = (EOFError, BrokenPipeError, ConnectionError)


def _local_get(target: Any, name: str) -> Any:
    getter = getattr(target, "get_wrapper_attr", None)
    if callable(getter):
        return getter(name)
    return getattr(getattr(target, "unwrapped", target), name)


class EnvAccess:
    """Read-only access to sub-env 0 of any env, vector env or SB3 ``VecEnv``.

    ``kind``: ``"local"`` (read in this process), ``"sb3_subproc"`` or ``"gym_async"`` (asked).
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self._remote: Any = None
        self._has: dict[str, bool] = {}
        self._values: dict[str, Any] = {}
        if hasattr(env, "env_method") and hasattr(env, "get_attr"):  # an SB3 VecEnv
            venv = env  # the VecEnv under any VecEnvWrapper (VecNormalize, VecMonitor, ...)
            for _ in range(64):  # a wrapper chain, never a cycle; the bound only guards against odd objects
                inner = getattr(venv, "__dict__", {}).get("venv")
                if inner is None:
                    break
                venv = inner
            envs = getattr(venv, "envs", None)
            if isinstance(envs, Sequence) and envs:  # DummyVecEnv: the sub-envs live here
                self.kind, self._target = "local", envs[0]
            else:
                self.kind, self._target, self._remote = "sb3_subproc", None, venv
        elif hasattr(env, "num_envs") and hasattr(env, "single_action_space"):
            base = getattr(env, "unwrapped", env)  # the vector env under any VectorWrapper
            envs = getattr(base, "envs", None)
            if isinstance(envs, Sequence) and envs:  # SyncVectorEnv
                self.kind, self._target = "local", envs[0]
            elif callable(getattr(base, "call", None)) and not hasattr(base, "strategies"):
                self.kind, self._target, self._remote = "gym_async", None, base  # AsyncVectorEnv
            else:  # a native vector env carries the facts itself
                self.kind, self._target = "local", base
        else:
            self.kind, self._target = "local", env

    def has(self, name: str) -> bool:
        """Whether sub-env 0 exposes ``name`` (attribute, property or method); asked once, cached."""
        if name not in self._has:
            if self._remote is None:
                try:
                    _local_get(self._target, name)
                    found = True
                except Exception:  # a property that raises is as good as absent
                    found = False
            else:
                found = self._ask("has", name)
            self._has[name] = bool(found)
        return self._has[name]

    def get(self, name: str) -> Any:
        """The plain attribute ``name`` of sub-env 0 (read once, cached); AttributeError when absent."""
        if name not in self._values:
            if not self.has(name):
                raise AttributeError(f"the env has no attribute {name!r}")
            self._values[name] = (
                _local_get(self._target, name) if self._remote is None else self._ask("get", name)
            )
        return self._values[name]

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call method ``name`` of sub-env 0 with the arguments (in its worker, for a remote env)."""
        if self._remote is None:
            return _local_get(self._target, name)(*args, **kwargs)
        return self._ask("call", name, *args, **kwargs)

    def _ask(self, op: str, name: str, *args: Any, **kwargs: Any) -> Any:
        venv = self._remote
        try:
            if self.kind == "gym_async":
                if op == "has":
                    return all(venv.call("has_wrapper_attr", name))
                return venv.call(name, *args, **kwargs)[0]
            if op == "has" and callable(getattr(venv, "has_attr", None)):  # SB3 >= 2.4: every worker
                return venv.has_attr(name)
            if op == "has":
                return venv.env_method("has_wrapper_attr", name, indices=[0])[0]
            if op == "get":
                return venv.get_attr(name, indices=[0])[0]
            return venv.env_method(name, *args, indices=[0], **kwargs)[0]
        except _PIPE_ERRORS as exc:
            raise SeffiError(
                f"reading `{name}` from the {self._describe()} failed: a worker has stopped "
                f"({type(exc).__name__}: {exc}); the worker's own traceback is printed above"
            ) from exc
        except SeffiError:
            raise
        except Exception as exc:  # Gymnasium re-raises a worker's error (and has shut that worker down)
            raise SeffiError(
                f"`{name}` raised in the {self._describe()}'s worker: {type(exc).__name__}: {exc}"
            ) from exc

    def _describe(self) -> str:
        return {"sb3_subproc": "SB3 subprocess VecEnv", "gym_async": "Gymnasium AsyncVectorEnv"}.get(
            self.kind, "env"
        )

    def method(self, name: str) -> Callable[..., Any] | None:
        """A local callable that calls method ``name`` of sub-env 0, or None when the env has none."""
        if not self.has(name):
            return None
        if self._remote is None:
            found = _local_get(self._target, name)
            return found if callable(found) else None
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def env_id(self) -> str | None:
        """The registered id (e.g. ``"seffi/HanoiRouter-v0"``), if known."""
        env = self.env
        specs = (getattr(obj, "spec", None) for obj in (env, getattr(env, "unwrapped", env), self._target))
        spec = next((s for s in specs if s is not None), None)
        if spec is None and self._remote is not None and self.has("spec"):
            spec = self.get("spec")
        return getattr(spec, "id", None)

    def task_name(self, default: str | None) -> str:
        """The env's task name (``task.name``), else ``default``, else "unknown"."""
        if self.has("task"):
            task = self.get("task")
            name = getattr(task, "name", None) or (task if isinstance(task, str) else None)
            if name:
                return str(name)
        return default or "unknown"

    def num_latents(self) -> int:
        """Z of a router-style env (``n_latents``, or a local env's ``config.n_latents``); else 0."""
        space = getattr(self.env, "single_action_space", None) or getattr(self.env, "action_space", None)
        if not hasattr(space, "n"):  # only a Discrete action picks a latent code
            return 0
        if self.has("n_latents"):
            z = self.get("n_latents")
            try:
                return max(int(operator.index(z)), 0) if not isinstance(z, bool) else 0
            except TypeError:  # not an int: some other meaning of the name
                return 0
        if self._remote is None and self.has("config") and hasattr(self.get("config"), "n_latents"):
            return int(getattr(space, "n", 0) or 0)
        return 0

    def baselines(self, strategies: Sequence[str], budget: int, **kwargs: Any) -> EnvBaselines:
        """The env's exact iid and oracle baselines, computed lazily; one given in ``kwargs`` is not asked."""
        given_iid, given_oracle = kwargs.get("iid") is not None, kwargs.get("oracle") is not None
        base_law = None if given_iid else self.method("base_match_distribution")
        references = None if given_oracle else self.method("reference_match_sets")
        pool = None
        # The pool serves only baselines computed from the env's own methods.
        if not (given_iid or given_oracle) and (base_law or references) and self.has("input_ids"):
            pool = lambda: self.get("input_ids")  # noqa: E731 - read when first needed
        return EnvBaselines(strategies, budget, base_law=base_law, references=references, pool=pool, **kwargs)


def _check_ids(found: Any, where: str) -> tuple[str, ...]:
    if callable(found) or isinstance(found, str | bytes) or not isinstance(found, Sequence | set | frozenset):
        raise SeffiError(
            f"{where} must be a sequence of strategy ids (e.g. a tuple of str), got {clip(repr(found))}"
        )
    ids = tuple(found)
    if bad := [s for s in ids if not isinstance(s, str)]:  # 1 would become "1": ids keep their type
        raise SeffiError(
            f"{where} must be str strategy ids, got {type(bad[0]).__name__} {clip(repr(bad[0]))}"
        )
    ids = tuple(map(str, ids))  # numpy str as str
    if not ids or len(set(ids)) != len(ids):
        raise SeffiError(f"{where} must be non-empty and unique, got {len(ids)}: {brief(ids)}")
    return ids


def env_facts(access: EnvAccess | None, config: Any) -> tuple[str | None, str, tuple[str, ...], int]:
    """(env id, task name, strategy ids, latent codes Z) of a monitor: the config's, else the env's."""
    env_name = config.env_name or (access.env_id() if access else None)
    task = config.task_name or (access.task_name(env_name) if access else env_name) or "unknown"
    if config.strategies is not None:
        strategies = _check_ids(config.strategies, "strategies")
    elif access is not None and access.has("strategies"):
        strategies = _check_ids(access.get("strategies"), "the env's `strategies`")
    else:
        where = "" if access is None else f" (the {access._describe()} has no `strategies` attribute)"
        raise SeffiError(
            "CoverageMonitor needs `strategies` (the declared strategy ids, the coverage denominator M): "
            f"pass strategies=(...) or give the env a `strategies` attribute{where}"
        )
    return env_name, task, strategies, access.num_latents() if access else 0

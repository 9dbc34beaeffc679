"""Ray RLlib (new API stack) integration: per-env-runner monitors merged exactly on the driver.

Every env runner records its finished episodes in its own monitor from ``on_episode_end``. After
each training iteration the driver fetches every healthy runner's *cumulative* state and loads
their exact union (:class:`seffi.callbacks.workers.WorkerStates`), so the merged curves are those of
one monitor fed with all episodes; RLlib's own mean of per-runner means would weigh runners, not
runs. A runner that dies keeps its last gathered state; a restarted one is a new incarnation.
``result["seffi"]`` and ``report.json`` (``meta``) say how many runners contributed.

Usage::

    from seffi.callbacks.rllib import CoverageCallback, finalize

    config = (PPOConfig().environment("seffi/HanoiRouter-v0", env_config={"budget": 8})
              .env_runners(num_env_runners=2)
              .callbacks(CoverageCallback.configure(out_dir="runs/ppo", wandb="offline")))
    algo = config.build_algo()
    result = algo.train()                  # result["seffi"] holds the merged scalars
    finalize(algo)                         # report.json/md + plots, W&B summary; then algo.stop()

Evaluation env runners are not recorded: they are not the exploration process being measured.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping
from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

import seffi.envs  # noqa: F401  (registers seffi/* env ids in every runner process that unpickles us)
from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.core import CoverageMonitor
from seffi.callbacks.env_access import EnvAccess
from seffi.callbacks.workers import MergedMonitor, WorkerStates, worker_identity, worker_snapshot
from seffi.errors import SeffiError
from seffi.report.sinks import NullSink

__all__ = ["CoverageCallback", "finalize"]

#: Callback objects living in this process, by ``id(env_runner)``; how a driver request finds them
#: without touching RLlib's private attributes.
_LOCAL: dict[int, list[weakref.ReferenceType[CoverageCallback]]] = {}


def _runner_states(env_runner: Any) -> list[dict[str, Any]]:
    """Executed on each env runner: the cumulative state of every seffi callback attached to it."""
    callbacks = (ref() for ref in _LOCAL.get(id(env_runner), []))
    live = [cb for cb in callbacks if cb is not None and cb.runner is not None]
    return [worker_snapshot(cb.runner, cb.identity) for cb in live]


class CoverageCallback(RLlibCallback):
    """An ``RLlibCallback`` measuring exploration coverage across all env runners.

    RLlib instantiates callbacks itself without arguments, so configure it with
    :meth:`configure` (a picklable ``functools.partial``) — or subclass and set the arguments.

    Args:
        budget: Per-input sample budget K; default: ``config.budget``, else the env's ``budget``.
        env: A seffi env (or a zero-argument factory) for the driver's baselines; default: built
            from the algorithm config (``gym.make(config.env, **config.env_config)``).
        log_every: Gather, merge and log every this many *training iterations* (the driver logs
            per iteration, so ``MonitorConfig.log_every``/``log_unit`` do not apply here).
        gather_timeout_s: How long the driver waits for runners' states.
        config: The monitor options shared by every adapter (:class:`~seffi.callbacks.MonitorConfig`:
            out_dir, wandb, wandb_kwargs, iid, oracle, strategies, n_boot, seed, plots, verbose, ...).
        **options: :class:`~seffi.callbacks.MonitorConfig` fields on top of ``config``.
    """

    def __init__(
        self,
        budget: int | None = None,
        *,
        env: Any = None,
        log_every: int = 1,
        gather_timeout_s: float = 30.0,
        config: MonitorConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
            raise SeffiError(f"log_every must be a positive int, got {log_every!r}")
        if budget is not None:
            options["budget"] = budget
        self.config = MonitorConfig.build(config, **options)
        self.env, self.log_every, self.gather_timeout_s = env, log_every, float(gather_timeout_s)
        self.runner: CoverageMonitor | None = None  # runner side
        self.identity: dict[str, Any] = {}  # worker index and incarnation of this runner
        self.monitor: MergedMonitor | None = None  # driver side
        self.workers = WorkerStates()
        self._owned_env: Any = None

    @classmethod
    def configure(cls, **kwargs: Any) -> functools.partial[CoverageCallback]:
        """A picklable factory for ``config.callbacks(...)`` with these arguments."""
        cls(**kwargs)  # validate now, on the driver, with a clear error
        return functools.partial(cls, **kwargs)

    # -- env runner side -------------------------------------------------------------------------------

    def on_episode_end(
        self, *, episode: Any, env_runner: Any = None, env: Any = None, env_index: int = 0, **kwargs: Any
    ) -> None:
        """Record the finished episode's final-step info in this runner's monitor."""
        if env_runner is None or getattr(getattr(env_runner, "config", None), "in_evaluation", False):
            return
        if self.runner is None:
            # Runners log nothing and need no baselines: the driver logs the merged numbers.
            cfg = self.config.replace(budget=self._budget(env), sinks=NullSink(), plots=False, n_boot=0)
            self.runner = CoverageMonitor(env=env, config=cfg.replace(iid=None, oracle=None))
            self.identity = worker_identity(getattr(env_runner, "worker_index", 0))
            _LOCAL.setdefault(id(env_runner), []).append(weakref.ref(self))
        self.runner.ingest_episode(episode.get_infos(-1), env_index=int(env_index))

    # -- driver side ---------------------------------------------------------------------------------------

    def on_algorithm_init(self, *, algorithm: Any, **kwargs: Any) -> None:
        """Build the driver's monitor (baselines from the env, W&B + local sinks)."""
        env = self.env() if callable(self.env) and not hasattr(self.env, "step") else self.env
        if env is None:
            env = self._owned_env = _make_env(algorithm.config)
        self.monitor = MergedMonitor(env=env, config=self.config.replace(budget=self._budget(env)))

    def _budget(self, env: Any) -> int:
        if self.config.budget is not None:
            return self.config.budget
        access = EnvAccess(env)
        if not access.has("budget"):
            raise SeffiError("CoverageCallback needs budget=K: the env does not expose a `budget`")
        return int(access.get("budget"))

    def on_train_result(self, *, algorithm: Any, result: dict, **kwargs: Any) -> None:
        """Every ``log_every`` iterations: gather runner states, merge exactly, log."""
        if self.monitor is None or self.monitor.finalized:
            return
        if int(getattr(algorithm, "iteration", 0)) % self.log_every:
            return
        self.gather(algorithm)
        scalars = self.monitor.log(_step(algorithm, result)) if self.workers.load_into(self.monitor) else None
        result["seffi"] = {**(scalars or {}), **self.workers.summary()}

    def gather(self, algorithm: Any) -> int:
        """Fetch every healthy runner's cumulative state; returns how many runners answered.

        A failed or timed-out request keeps the previous states (one warning); dead runners keep
        their last state in the merge.
        """
        group = getattr(algorithm, "env_runner_group", None)
        if group is None:
            return 0
        try:
            timeout = self.gather_timeout_s
            answers = group.foreach_env_runner(
                _runner_states, local_env_runner=True, healthy_only=True, timeout_seconds=timeout
            )
        except Exception as exc:  # a dying actor must not stop training; states are cumulative
            self.workers.failed(exc)
            return 0
        return self.workers.answered(snap for states in answers for snap in states or [])

    def merged_tracker(self) -> Any:
        """The exact union of all runners' trackers (None before any episode)."""
        m = self.monitor
        return m.tracker if m is not None and self.workers.load_into(m) else None

    def finalize(self, algorithm: Any = None) -> Any:
        """Gather a last time, write the report (with the runner summary) and close the sinks."""
        m = self.monitor
        if m is None or m.finalized:
            return None
        if algorithm is not None:
            self.gather(algorithm)
        self.workers.load_into(m)
        m.workers_summary = self.workers.summary()
        step = (m.last_step + 1) if m.last_step is not None else 0
        report = m.finalize(step if algorithm is None else _step(algorithm, {}) or step)
        if self._owned_env is not None:
            self._owned_env.close()
        return report


def finalize(algorithm: Any) -> Any:
    """Finalize every seffi :class:`CoverageCallback` of ``algorithm`` (call before ``algo.stop()``).

    Returns:
        The report of the (first) seffi callback, or None if there is none or it already finished.
    """
    cbs = getattr(algorithm, "callbacks", None)
    cbs = cbs if isinstance(cbs, list) else [cbs]
    reports = [cb.finalize(algorithm) for cb in cbs if isinstance(cb, CoverageCallback)]
    return reports[0] if reports else None


def _step(algorithm: Any, result: Mapping[str, Any]) -> int:
    """The x-axis of seffi's W&B keys: env steps sampled so far (fallback: the iteration)."""
    key = "num_env_steps_sampled_lifetime"
    value = result.get(key) or result.get("env_runners", {}).get(key)
    return int(value) if value else int(getattr(algorithm, "iteration", 0))


def _make_env(config: Any) -> Any:
    """A driver-side copy of the training env, for baselines."""
    import gymnasium as gym

    env_spec, env_config = config.env, dict(config.env_config or {})
    try:
        if env_spec is not None:
            return gym.make(env_spec, **env_config) if isinstance(env_spec, str) else env_spec(env_config)
    except Exception as exc:
        raise SeffiError(
            f"seffi could not build the env {env_spec!r} on the driver for the baselines ({exc}); "
            "pass CoverageCallback.configure(env=...)"
        ) from exc
    raise SeffiError("the algorithm config has no env; pass CoverageCallback.configure(env=...)")

"""Ray RLlib (new API stack) integration: per-env-runner trackers merged exactly on the driver.

Every env runner (a Ray actor) records its own finished episodes in its own
:class:`~seffi.callbacks.core.CoverageMonitor` from ``on_episode_end``. After each training iteration
the driver asks every healthy runner for its *cumulative* state (``CoverageMonitor.state_dict()``:
tracker state, per-input sums and counters, O(runs x strategies)) and loads their exact union with
``CoverageMonitor.load_states`` — each runner incarnation in its own block of tracker streams, runs a
disjoint union and sums added — so the merged curves are exactly those of one monitor fed with all
episodes. RLlib's own metric reduction (a mean of per-runner means) is
not used: it would weigh runners equally instead of runs.

Faults: states are cumulative, so a missed gather loses nothing; a runner that dies keeps its last
gathered state in the merge (only episodes after that gather are lost); a restarted runner is a new
*incarnation* with fresh streams, so nothing is counted twice. ``report.json`` (``meta``) and the
``result["seffi"]`` dict say how many runners contributed and which were unreachable.

Usage::

    from seffi.callbacks.rllib import CoverageCallback, finalize

    config = (PPOConfig().environment("seffi/HanoiRouter-v0", env_config={"budget": 8})
              .env_runners(num_env_runners=2)
              .callbacks(CoverageCallback.configure(out_dir="runs/ppo", wandb="offline")))
    algo = config.build_algo()
    for _ in range(10):
        result = algo.train()              # result["seffi"] holds the merged scalars
    finalize(algo)                         # report.json/md + plots, W&B summary; then algo.stop()

Evaluation env runners (``config.evaluation(...)``) are not recorded: they are not the exploration
process being measured.
"""

from __future__ import annotations

import functools
import os
import uuid
import warnings
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

import seffi.envs  # noqa: F401  (registers seffi/* env ids in every runner process that unpickles us)
from seffi.callbacks.core import CoverageMonitor
from seffi.errors import SeffiError

__all__ = ["CoverageCallback", "finalize"]

#: Callback objects living in this process, by ``id(env_runner)``; how a driver request finds them
#: without touching RLlib's private attributes.
_LOCAL: dict[int, list[weakref.ReferenceType[CoverageCallback]]] = {}


class _NullSink:
    """Runners log nothing themselves; the driver logs the merged numbers."""

    def log(self, data: Any, step: int) -> None:
        """Drop."""

    def log_snapshot(self, comparison: Any, step: int, scope: str | None = None) -> None:
        """Drop."""

    def finish(self, report: Any = None, tracker_state: Any = None) -> None:
        """Drop."""


def _runner_states(env_runner: Any) -> list[dict[str, Any]]:
    """Executed on each env runner: the cumulative state of every seffi callback attached to it."""
    out = []
    for ref in _LOCAL.get(id(env_runner), []):
        cb = ref()
        if cb is not None and cb._runner is not None:
            out.append(cb._runner_state())
    return out


class CoverageCallback(RLlibCallback):
    """An ``RLlibCallback`` measuring exploration coverage across all env runners.

    RLlib instantiates callbacks itself without arguments, so configure it with
    :meth:`configure` (a picklable ``functools.partial``) — or subclass and set the arguments.

    Args:
        budget: Per-input sample budget K; default: the env's ``budget``.
        out_dir: Local report folder (default ``runs/seffi-<timestamp>``).
        wandb: "offline" (default unless ``WANDB_MODE`` says otherwise), "online" or "disabled".
        wandb_kwargs: Extra ``wandb.init`` arguments (project, name, group, config, run).
        log_every: Gather, merge and log every this many training iterations.
        env: A seffi env (or a zero-argument factory) for the driver's baselines; default: built
            from the algorithm config (``gym.make(config.env, **config.env_config)``).
        iid: A user iid baseline (replaces the env's).
        oracle: A user oracle baseline (replaces the env's).
        gather_timeout_s: How long the driver waits for runners' states.
        n_boot: Bootstrap replicates of the logged CIs.
        seed: Bootstrap seed.
        plots: Render PNG plots at :func:`finalize`.
        verbose: 1 prints a one-line summary per log.
    """

    def __init__(
        self,
        budget: int | None = None,
        *,
        out_dir: str | Path | None = None,
        wandb: str | None = None,
        wandb_kwargs: Mapping[str, Any] | None = None,
        log_every: int = 1,
        env: Any = None,
        iid: Any = None,
        oracle: Any = None,
        gather_timeout_s: float = 30.0,
        n_boot: int = 200,
        seed: int = 0,
        plots: bool = True,
        verbose: int = 0,
    ) -> None:
        super().__init__()
        if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
            raise SeffiError(f"log_every must be a positive int, got {log_every!r}")
        self.budget = budget
        self.out_dir = out_dir
        self.wandb = wandb
        self.wandb_kwargs = dict(wandb_kwargs or {})
        self.log_every = log_every
        self.env = env
        self.iid, self.oracle = iid, oracle
        self.gather_timeout_s = float(gather_timeout_s)
        self.n_boot, self.seed, self.plots, self.verbose = n_boot, seed, plots, verbose
        # runner side
        self._runner: CoverageMonitor | None = None
        self._runner_id: dict[str, Any] = {}
        # driver side
        self.monitor: CoverageMonitor | None = None
        self._snapshots: dict[tuple[int, str], dict[str, Any]] = {}
        self._incarnation_order: dict[tuple[int, str], int] = {}
        self._last_reachable: set[int] = set()
        self._known_workers: set[int] = set()
        self._gather_failures = 0
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
        if self._runner is None:
            self._start_runner(env_runner, env)
        assert self._runner is not None
        self._runner.ingest_episode(episode.get_infos(-1), env_index=int(env_index))

    def _start_runner(self, env_runner: Any, env: Any) -> None:
        budget = self.budget if self.budget is not None else _env_budget(env)
        self._runner = CoverageMonitor(budget, env=env, sinks=_NullSink(), plots=False, n_boot=0)
        self._runner_id = {
            "worker_index": int(getattr(env_runner, "worker_index", 0)),
            # A restarted actor is a new incarnation: its streams must not collide with the old one's.
            "incarnation": uuid.uuid4().hex,
            "pid": os.getpid(),
        }
        _LOCAL.setdefault(id(env_runner), []).append(weakref.ref(self))

    def _runner_state(self) -> dict[str, Any]:
        assert self._runner is not None
        return {**self._runner_id, "monitor": self._runner.state_dict()}

    # -- driver side ---------------------------------------------------------------------------------------

    def on_algorithm_init(self, *, algorithm: Any, **kwargs: Any) -> None:
        """Build the driver's monitor (baselines from the env, W&B + local sinks)."""
        env = self.env() if callable(self.env) and not hasattr(self.env, "step") else self.env
        if env is None:
            env = self._owned_env = _make_env(algorithm.config)
        budget = self.budget if self.budget is not None else _env_budget(env)
        self.monitor = CoverageMonitor(
            budget,
            env=env,
            iid=self.iid,
            oracle=self.oracle,
            out_dir=self.out_dir,
            wandb=self.wandb,
            wandb_kwargs=self.wandb_kwargs,
            n_boot=self.n_boot,
            seed=self.seed,
            plots=self.plots,
            verbose=self.verbose,
        )

    def on_train_result(self, *, algorithm: Any, result: dict, **kwargs: Any) -> None:
        """Every ``log_every`` iterations: gather runner states, merge exactly, log."""
        if self.monitor is None or self.monitor.finalized:
            return
        if int(getattr(algorithm, "iteration", 0)) % self.log_every:
            return
        self.gather(algorithm)
        scalars = self.log(_step(algorithm, result))
        result["seffi"] = {**(scalars or {}), **self.runner_summary()}

    def gather(self, algorithm: Any) -> int:
        """Fetch every healthy runner's cumulative state; returns how many runners answered.

        A failed or timed-out request keeps the previous states (one warning); dead runners keep
        their last state in the merge.
        """
        group = getattr(algorithm, "env_runner_group", None)
        if group is None:
            return 0
        try:
            answers = group.foreach_env_runner(
                _runner_states,
                local_env_runner=True,
                healthy_only=True,
                timeout_seconds=self.gather_timeout_s,
            )
        except Exception as exc:  # a dying actor must not stop training; states are cumulative
            self._gather_failures += 1
            if self._gather_failures == 1:
                warnings.warn(
                    f"seffi: could not gather coverage from env runners ({type(exc).__name__}: {exc}); "
                    "keeping their last states",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return 0
        reachable: set[int] = set()
        for states in answers:
            for snap in states or []:
                self.add_snapshot(snap)
                reachable.add(int(snap["worker_index"]))
        self._last_reachable = reachable
        self._known_workers |= reachable
        return len(reachable)

    def add_snapshot(self, snap: Mapping[str, Any]) -> None:
        """Store one runner's cumulative state (replacing that incarnation's older one)."""
        key = (int(snap["worker_index"]), str(snap["incarnation"]))
        self._incarnation_order.setdefault(key, len(self._incarnation_order))
        self._snapshots[key] = dict(snap)

    def _ordered(self) -> list[dict[str, Any]]:
        # Deterministic: by worker index, then by when the incarnation was first seen.
        keys = sorted(self._snapshots, key=lambda k: (k[0], self._incarnation_order[k]))
        return [self._snapshots[k] for k in keys]

    def merged_tracker(self) -> Any:
        """The exact union of all runners' trackers (None before any episode)."""
        return self.monitor.tracker if self.monitor is not None and self._load_merged() else None

    def runner_summary(self) -> dict[str, Any]:
        """How many runners (incarnations) contributed, and which known runners did not answer."""
        snaps = self._ordered()
        contributed = sorted({s["worker_index"] for s in snaps if s["monitor"]["episodes"] > 0})
        return {
            "runners_contributed": len(contributed),
            "runner_incarnations": sum(1 for s in snaps if s["monitor"]["episodes"] > 0),
            "runners_unreachable": sorted(self._known_workers - self._last_reachable),
            "gather_failures": self._gather_failures,
        }

    def log(self, step: int) -> dict[str, float] | None:
        """Load the merged state into the driver monitor and log at ``step``."""
        assert self.monitor is not None
        if not self._load_merged():
            return None
        return self.monitor.log(step)

    def _load_merged(self) -> bool:
        # The driver monitor's data becomes the exact union of the runners' states (public state API).
        m = self.monitor
        assert m is not None
        m.load_states([s["monitor"] for s in self._ordered()])
        return m.samples > 0

    def finalize(self, algorithm: Any = None) -> Any:
        """Gather a last time, write the report (with the runner summary) and close the sinks."""
        if self.monitor is None or self.monitor.finalized:
            return None
        if algorithm is not None:
            self.gather(algorithm)
        self._load_merged()
        m = self.monitor
        summary = self.runner_summary()
        original = m.report

        def report_with_runners() -> Any:
            rep = original()
            # report meta holds scalars: the unreachable runner ids become one string
            flat = {k: (",".join(map(str, v)) if isinstance(v, list) else v) for k, v in summary.items()}
            return rep.model_copy(update={"meta": {**dict(rep.meta or {}), **flat}})

        m.report = report_with_runners  # type: ignore[method-assign]
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
    reports = [cb.finalize(algorithm) for cb in _driver_callbacks(algorithm)]
    return reports[0] if reports else None


def _driver_callbacks(algorithm: Any) -> list[CoverageCallback]:
    cbs = getattr(algorithm, "callbacks", None)
    cbs = cbs if isinstance(cbs, list) else [cbs]
    return [cb for cb in cbs if isinstance(cb, CoverageCallback)]


def _step(algorithm: Any, result: Mapping[str, Any]) -> int:
    """The x-axis of seffi's W&B keys: env steps sampled so far (fallback: the iteration)."""
    for key in ("num_env_steps_sampled_lifetime",):
        value = result.get(key) or result.get("env_runners", {}).get(key)
        if value:
            return int(value)
    return int(getattr(algorithm, "iteration", 0))


def _env_budget(env: Any) -> int:
    from seffi.callbacks.env_access import EnvAccess

    access = EnvAccess(env)
    if not access.has("budget"):
        raise SeffiError("CoverageCallback needs budget=K: the env does not expose a `budget`")
    return int(access.get("budget"))


def _make_env(config: Any) -> Any:
    """A driver-side copy of the training env, for baselines."""
    import gymnasium as gym

    env_spec, env_config = config.env, dict(config.env_config or {})
    try:
        if isinstance(env_spec, str):
            return gym.make(env_spec, **env_config)
        if callable(env_spec):
            return env_spec(env_config)
    except Exception as exc:
        raise SeffiError(
            f"seffi could not build the env {env_spec!r} on the driver for the baselines ({exc}); "
            "pass CoverageCallback.configure(env=...)"
        ) from exc
    raise SeffiError("the algorithm config has no env; pass CoverageCallback.configure(env=...)")

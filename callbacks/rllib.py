"""Ray RLlib (new API stack) integration: per-env-runner monitors merged exactly on the driver.

Every env runner records its finished episodes in its own monitor from ``on_episode_end``. After
each training iteration the driver fetches every healthy runner's *cumulative* state and loads
their exact union (`seffi.callbacks.workers.WorkerStates`), so the merged curves are those of
one monitor fed with all episodes; RLlib's own mean of per-runner means would weigh runners, not
runs. A runner that dies keeps its last gathered state; a restarted one is a new incarnation.
``result["seffi"]`` and ``report.json`` (``meta``) say how many runners contributed.

The driver does not build the env (nor does RLlib, which asks its runners for the spaces): each
runner reads the env it samples from, whatever made it (a ``register_env`` creator, a class, a
Gymnasium id), and sends plain data: budget, strategies and, when the env has
``base_match_distribution``/``reference_match_sets``, the exact base law and reference sets of the
inputs it saw, from which the driver computes the iid and oracle baselines. ``iid=``/``oracle=``
replace those (the env is then not asked); ``env=`` gives the driver an env of its own instead.

Usage:

```python
from seffi.callbacks import rllib as seffi_rllib

config = (PPOConfig().environment("seffi/HanoiRouter-v0", env_config={"budget": 8})
          .env_runners(num_env_runners=2)
          .callbacks(seffi_rllib.CoverageCallback.configure(out_dir="runs/ppo", wandb="offline")))
algo = config.build_algo()
result = algo.train()             # result["seffi"]: seffi_rllib.metrics(algo) + the runner counts
seffi_rllib.curves(algo)          # the merged policy Curves; seffi_rllib.to_dataframe(algo): pandas
seffi_rllib.finalize(algo)        # report.json/md + plots, W&B summary; then algo.stop()
```

Evaluation env runners are not recorded: they are not the exploration process being measured.
Runner states are cumulative, so a gather grows with the runs recorded; the time and memory RLlib
takes on a CPU: ``docs/integrations.md``.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

import seffi.envs  # noqa: F401  (registers seffi/* env ids in every runner process that unpickles us)
from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.core import CoverageMonitor
from seffi.callbacks.env_access import EnvAccess
from seffi.callbacks.workers import (
    MergedMonitor,
    WorkerLaws,
    WorkerStates,
    agreed_facts,
    worker_facts,
    worker_identity,
    worker_snapshot,
)
from seffi.errors import SeffiError
from seffi.report.sinks import NullSink

__all__ = ["CoverageCallback", "coverage_callback", "curves", "finalize", "metrics", "to_dataframe"]

#: Callback objects living in this process, by ``id(env_runner)``; how a driver request finds them
#: without touching RLlib's private attributes.
_LOCAL: dict[int, list[weakref.ReferenceType[CoverageCallback]]] = {}


def _local(env_runner: Any, slot: int | None) -> list[CoverageCallback]:
    """This runner's seffi callbacks; ``slot``: only the one at that position of RLlib's callback list.

    RLlib builds the same callback list on the driver and on every runner, so the i-th seffi
    callback of a runner belongs to the i-th one of the driver; two seffi callbacks on one
    algorithm never see each other's episodes.
    """
    refs = _LOCAL.get(id(env_runner), [])
    callbacks = (ref() for ref in (refs if slot is None else refs[slot : slot + 1]))
    return [cb for cb in callbacks if cb is not None]


def _runner_states(env_runner: Any, slot: int | None = None) -> list[dict[str, Any]]:
    """Executed on each env runner: the cumulative state of its seffi callback(s)."""
    return [worker_snapshot(cb.runner, cb.identity, cb.laws) for cb in _local(env_runner, slot) if cb.runner]


def _runner_facts(env_runner: Any, slot: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    """Executed on each env runner: its env's facts (or why they could not be read), plain data."""
    index = int(getattr(env_runner, "worker_index", 0) or 0)
    return [
        (index, {"error": cb.error} if cb.runner is None else worker_facts(cb.runner, cb.laws))
        for cb in _local(env_runner, slot)
    ]


def _in_evaluation(env_runner: Any) -> bool:
    return bool(getattr(getattr(env_runner, "config", None), "in_evaluation", False))


class CoverageCallback(RLlibCallback):
    """An ``RLlibCallback`` measuring exploration coverage across all env runners.

    RLlib instantiates callbacks itself without arguments, so configure it with
    `configure` (a picklable ``functools.partial``) — or subclass and set the arguments.
    On the driver, read it with [`metrics`][seffi.callbacks.rllib.CoverageCallback.metrics],
    [`curves`][seffi.callbacks.rllib.CoverageCallback.curves] and
    [`to_dataframe`][seffi.callbacks.rllib.CoverageCallback.to_dataframe] (or the methods of the same names on
    [`coverage_callback`][seffi.callbacks.rllib.coverage_callback]).

    Args:
        budget: Per-input sample budget K; default: ``config.budget``, else the env's ``budget``.
        env: A seffi env (or a zero-argument factory) for the driver's baselines; default: none, the
            runners read their envs and send the baselines' data.
        log_every: Gather, merge and log every this many *training iterations* (the driver logs
            per iteration, so ``MonitorConfig.log_every``/``log_unit`` do not apply here).
        gather_timeout_s: How long the driver waits for runners' states.
        config: The monitor options shared by every adapter ([`MonitorConfig`][seffi.callbacks.MonitorConfig]:
            out_dir, wandb, wandb_kwargs, iid, oracle, strategies, n_boot, seed, plots, verbose, ...).
        **options: [`MonitorConfig`][seffi.callbacks.MonitorConfig] fields on top of ``config``.
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
        self.laws: WorkerLaws | None = None  # runner side: the env's laws of the inputs seen
        self.error: str | None = None  # runner side: why the env could not be read
        self.identity: dict[str, Any] = {}  # worker index and incarnation of this runner
        self.monitor: MergedMonitor | None = None  # driver side
        self.workers = WorkerStates()
        self.slot: int | None = None  # driver side: position among the algorithm's seffi callbacks

    @classmethod
    def configure(cls, **kwargs: Any) -> functools.partial[CoverageCallback]:
        """A picklable factory for ``config.callbacks(...)`` with these arguments."""
        cls(**kwargs)  # validate now, on the driver, with a clear error
        return functools.partial(cls, **kwargs)

    # -- env runner side -------------------------------------------------------------------------------

    def on_environment_created(self, *, env_runner: Any = None, env: Any = None, **kwargs: Any) -> None:
        """Read the new env's facts now, so the driver can build its monitor before any episode."""
        if env_runner is not None and not _in_evaluation(env_runner):
            self._start_runner(env_runner, env)

    def on_episode_end(
        self, *, episode: Any, env_runner: Any = None, env: Any = None, env_index: int = 0, **kwargs: Any
    ) -> None:
        """Record the finished episode's final-step info in this runner's monitor."""
        if env_runner is None or _in_evaluation(env_runner):
            return
        if not self._start_runner(env_runner, env):
            raise SeffiError(f"seffi cannot record this env runner's episodes: {self.error}")
        self.runner.update_infos(episode.get_infos(-1), True, env_offset=int(env_index))  # type: ignore[union-attr]

    def _start_runner(self, env_runner: Any, env: Any) -> bool:
        """Build this runner's monitor once (a re-created env keeps it); whether it exists."""
        if self.runner is not None or self.error is not None:
            return self.runner is not None
        _LOCAL.setdefault(id(env_runner), []).append(weakref.ref(self))
        self.identity = worker_identity(getattr(env_runner, "worker_index", 0) or 0)
        try:
            # Runners log nothing and compute no baselines: the driver logs the merged numbers. A
            # user iid/oracle stays in the config so that the env is not asked for its own.
            cfg = self.config.replace(budget=self._budget(env), sinks=NullSink(), plots=False, n_boot=0)
            self.runner = CoverageMonitor(env=env, config=cfg)
        except SeffiError as exc:  # sent to the driver, which raises it once, at build time
            self.error = str(exc)
            return False
        iid, oracle = self.config.iid is None, self.config.oracle is None
        self.laws = WorkerLaws(self.runner.env_baselines, iid=iid, oracle=oracle)
        return True

    def _budget(self, env: Any) -> int:
        if self.config.budget is not None:
            return self.config.budget
        access = EnvAccess(env)
        if not access.has("budget"):
            raise SeffiError("CoverageCallback needs budget=K: the env does not expose a `budget`")
        return int(access.get("budget"))

    # -- driver side ---------------------------------------------------------------------------------------

    def on_algorithm_init(self, *, algorithm: Any, **kwargs: Any) -> None:
        """Build the driver's monitor (W&B + local sinks) from the runners' env facts, or ``env=``.

        Raises:
            SeffiError: A runner could not read its env (e.g. no ``strategies``), runners disagree,
                or no runner answered and ``strategies``/``budget`` were not given.
        """
        mine = [i for i, cb in enumerate(_callbacks(algorithm)) if cb is self]
        self.slot = mine[0] if mine else None
        if self.env is not None:
            env = self.env() if callable(self.env) and not hasattr(self.env, "step") else self.env
            self.monitor = MergedMonitor(env=env, config=self.config.replace(budget=self._budget(env)))
            return
        facts = agreed_facts(answer for answers in self._ask(algorithm, _runner_facts) for answer in answers)
        if facts is None:
            cfg = self.config
            if cfg.strategies is None or cfg.budget is None:
                raise SeffiError(
                    "no env runner reported its env's facts; pass CoverageCallback.configure(env=...) "
                    "or strategies=... and budget=..."
                )
            facts = {"strategies": tuple(cfg.strategies), "budget": cfg.budget}
        self.monitor = MergedMonitor.from_facts(facts, self.config, self.workers.laws)

    def _ask(self, algorithm: Any, fn: Callable[[Any], Any]) -> list[Any]:
        group = getattr(algorithm, "env_runner_group", None)
        if group is None:
            return []
        fn = functools.partial(fn, slot=self.slot)
        return list(
            group.foreach_env_runner(
                fn, local_env_runner=True, healthy_only=True, timeout_seconds=self.gather_timeout_s
            )
        )

    def on_train_result(self, *, algorithm: Any, result: dict, **kwargs: Any) -> None:
        """Every ``log_every`` iterations: gather runner states, merge exactly, log."""
        if self.monitor is None or self.monitor.finalized:
            return
        if int(getattr(algorithm, "iteration", 0)) % self.log_every:
            return
        self.gather(algorithm)
        scalars = self.monitor.log(_step(algorithm, result)) if self.workers.load_into(self.monitor) else None
        result[self.result_key] = {**(scalars or {}), **self.workers.summary()}

    @property
    def result_key(self) -> str:
        """The key of ``result`` under which `on_train_result` puts the merged scalars.

        ``"seffi"``, or ``"seffi_<i>"`` for the i-th seffi callback (i >= 1) of an algorithm with several.
        """
        return "seffi" if not self.slot else f"seffi_{self.slot}"

    def gather(self, algorithm: Any) -> int:
        """Fetch every healthy runner's cumulative state; returns how many runners answered.

        A failed or timed-out request keeps the previous states (one warning); dead runners keep
        their last state in the merge.
        """
        try:
            answers = self._ask(algorithm, _runner_states)
        except Exception as exc:  # a dying actor must not stop training; states are cumulative
            self.workers.failed(exc)
            return 0
        return self.workers.answered(snap for states in answers for snap in states or [])

    def merged_tracker(self) -> Any:
        """The exact union of all runners' trackers (None before any episode)."""
        m = self.monitor
        return m.tracker if m is not None and self.workers.load_into(m) else None

    # -- read API (driver side) ------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """A copy of the latest logged merged scalars (``{}`` before the first log).

        ``result["seffi"]`` of that iteration holds the same keys and values, plus the runner counts
        (``runners_contributed``, ...). See
        [`seffi.callbacks.CoverageMonitor.metrics`][seffi.callbacks.CoverageMonitor.metrics].
        """
        return self.monitor.metrics() if self.monitor is not None else {}

    def curves(self, algorithm: Any = None) -> Any:
        """The merged policy [`Curves`][seffi.coverage.Curves] (fresh from the runners given ``algorithm``).

        Raises:
            SeffiError: before the algorithm is built, or before any runner finished an episode.
        """
        return self._current(algorithm).curves()

    def to_dataframe(self, algorithm: Any = None) -> Any:
        """The merged curves (policy, iid, oracle) as a long pandas DataFrame, one row per (method, k).

        See [`seffi.callbacks.CoverageMonitor.to_dataframe`][seffi.callbacks.CoverageMonitor.to_dataframe];
        empty before any episode.
        """
        return self._current(algorithm, empty_ok=True).to_dataframe()

    def _current(self, algorithm: Any, *, empty_ok: bool = False) -> MergedMonitor:
        m = self.monitor
        if m is None:
            raise SeffiError("no coverage monitor yet: the algorithm has not been built with this callback")
        if algorithm is not None and not m.finalized:  # finalize gathered a last time
            self.gather(algorithm)
        if not self.workers.load_into(m) and not empty_ok:
            raise SeffiError("no coverage recorded yet: curves() is available once an episode has ended")
        return m

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
        return m.finalize(step if algorithm is None else _step(algorithm, {}) or step)


def _callbacks(algorithm: Any) -> list[CoverageCallback]:
    cbs = getattr(algorithm, "callbacks", None)
    cbs = cbs if isinstance(cbs, list) else [cbs]
    return [cb for cb in cbs if isinstance(cb, CoverageCallback)]


def coverage_callback(algorithm: Any) -> CoverageCallback:
    """The driver-side seffi `CoverageCallback` of ``algorithm`` (the first, if several).

    Raises:
        SeffiError: ``algorithm`` has no seffi callback.
    """
    cbs = _callbacks(algorithm)
    if not cbs:
        raise SeffiError(
            "this algorithm has no seffi CoverageCallback: "
            "add config.callbacks(CoverageCallback.configure(...))"
        )
    return cbs[0]


def metrics(algorithm: Any) -> dict[str, float]:
    """The latest logged merged scalars of ``algorithm``'s seffi callback (``{}`` before the first log)."""
    return coverage_callback(algorithm).metrics()


def curves(algorithm: Any) -> Any:
    """The merged policy [`Curves`][seffi.coverage.Curves], gathered from the runners now."""
    return coverage_callback(algorithm).curves(algorithm)


def to_dataframe(algorithm: Any) -> Any:
    """The merged curves (policy, iid, oracle) as a long pandas DataFrame, gathered from the runners now."""
    return coverage_callback(algorithm).to_dataframe(algorithm)


def finalize(algorithm: Any) -> Any:
    """Finalize every seffi `CoverageCallback` of ``algorithm`` (call before ``algo.stop()``).

    Returns:
        The report of the (first) seffi callback, or None if there is none or it already finished.
    """
    reports = [cb.finalize(algorithm) for cb in _callbacks(algorithm)]
    return reports[0] if reports else None


def _step(algorithm: Any, result: Mapping[str, Any]) -> int:
    """The x-axis of seffi's W&B keys: env steps sampled so far (fallback: the iteration)."""
    key = "num_env_steps_sampled_lifetime"
    value = result.get(key) or result.get("env_runners", {}).get(key)
    return int(value) if value else int(getattr(algorithm, "iteration", 0))

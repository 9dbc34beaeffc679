"""Ray RLlib (new API stack): per-env-runner monitors, merged exactly on the driver.

Each env runner records its episodes in its own monitor; every iteration the driver loads the exact
union of the runners' cumulative states (not RLlib's mean of per-runner means). Runners send their
env's facts and exact laws as plain data: the driver never builds the env. Evaluation env runners
are not recorded. Example: docs/integrations.md.
"""

from __future__ import annotations

import functools
import os
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

import seffi.envs  # noqa: F401  (registers seffi/* env ids in every runner process that unpickles us)
from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.core import CoverageMonitor
from seffi.callbacks.env_access import EnvAccess
from seffi.coverage.env_baselines import EnvBaselines
from seffi.errors import SeffiError
from seffi.report.sinks import NullSink

__all__ = ["CoverageCallback", "coverage_callback", "curves", "finalize", "metrics", "to_dataframe"]

#: This process's callbacks by ``id(env_runner)``: how a driver request finds them.
_LOCAL: dict[int, list[weakref.ReferenceType[CoverageCallback]]] = {}
#: The facts of a runner's env the driver's monitor needs (all runners must agree on them).
FACTS = ("budget", "strategies", "env_name", "task_name", "num_latents", "base_law", "references")


def worker_snapshot(
    monitor: CoverageMonitor, identity: Mapping[str, Any], laws: EnvLaws | None = None
) -> dict[str, Any]:
    """What a runner sends: its identity, counts, monitor state and (``laws``) its inputs' env laws."""
    counts = {"episodes": monitor.episodes, "samples": monitor.samples}
    snap = {**identity, **counts, "monitor": monitor.state_dict()}
    if laws is not None:
        snap["laws"] = laws.read(monitor.inputs, int(identity["worker_index"]))
    return snap


def _agreed_facts(answers: Iterable[tuple[int, Mapping[str, Any]]]) -> dict[str, Any] | None:
    """The facts all runners agree on (None when none answered); a runner's error or a disagreement raises."""
    first: tuple[int, Mapping[str, Any]] | None = None
    for worker, facts in answers:
        if "error" in facts:
            raise SeffiError(f"env runner {worker}: {facts['error']}")
        first = first or (worker, facts)
        for name in FACTS:
            if facts.get(name) != first[1].get(name):
                raise SeffiError(
                    f"env runners {first[0]} and {worker} disagree on the env's {name}: "
                    f"{first[1].get(name)!r} vs {facts.get(name)!r}; every runner must measure the same task"
                )
    return dict(first[1]) if first is not None else None


def _law(law: Mapping[Any, Any]) -> dict[frozenset[str], float]:
    return {frozenset(map(str, a)): float(p) for a, p in law.items()}


class EnvLaws:
    """The env's exact base law and reference sets per input: read on a runner, served on the driver.

    A runner reads each input once (an error is kept and raised on the driver where a baseline needs
    it); the driver serves each input's first entry with the env methods' signatures.
    """

    def __init__(
        self, base_law: Callable[..., Any] | None = None, references: Callable[..., Any] | None = None
    ):
        self.sources = (base_law, references)
        self.entries: dict[str, tuple[int, Mapping[str, Any]]] = {}

    def read(self, inputs: Iterable[str], worker: int) -> dict[str, Mapping[str, Any]]:
        """The entries of ``inputs`` (read from the env for the new ones)."""
        base, refs = self.sources
        for x in inputs:
            if x in self.entries:
                continue
            entry: dict[str, Any] = {}
            try:
                if base is not None:
                    entry.update(base=_law(base(x)), base_valid=_law(base(x, valid_only=True)))
            except Exception as exc:  # the driver raises it where a baseline is needed
                entry["base_error"] = f"{type(exc).__name__}: {exc}"
            try:
                if refs is not None:
                    entry["references"] = {str(s): frozenset(map(str, a)) for s, a in refs(x).items()}
            except Exception as exc:
                entry["references_error"] = f"{type(exc).__name__}: {exc}"
            self.entries[x] = (worker, entry)
        return {x: self.entries[x][1] for x in inputs}

    def add(self, laws: Mapping[str, Mapping[str, Any]], worker: int) -> None:
        """Keep the entries of inputs not seen before."""
        for x, entry in laws.items():
            self.entries.setdefault(str(x), (int(worker), entry))

    def base_law(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        return dict(self._get(input_id, "base_valid" if valid_only else "base", "base law"))

    def references(self, input_id: str) -> dict[str, frozenset[str]]:
        return dict(self._get(input_id, "references", "reference match sets"))

    def _get(self, x: str, key: str, what: str) -> Any:
        if x not in self.entries:
            raise SeffiError(f"no env runner sent the {what} of input {x!r}")
        worker, entry = self.entries[x]
        error = entry.get(key.replace("_valid", "") + "_error")
        if error is not None:
            raise SeffiError(f"env runner {worker} could not read the env's {what} of input {x!r}: {error}")
        return entry[key]


class WorkerStates:
    """The latest cumulative snapshot of every runner incarnation, and who answered the last gather.

    A missed gather loses nothing, a dead runner keeps its last snapshot, a restarted one is a new
    incarnation (nothing counted twice).
    """

    def __init__(self) -> None:
        self.snapshots: dict[tuple[int, str], dict[str, Any]] = {}  # by (worker, incarnation), as first seen
        self.last_reachable: set[int] = set()
        self.known_workers: set[int] = set()
        self.gather_failures, self.laws = 0, EnvLaws()

    def add(self, snap: Mapping[str, Any]) -> None:
        """Store one runner's snapshot (replacing that incarnation's older one)."""
        snap = dict(snap)
        self.laws.add(snap.pop("laws", None) or {}, int(snap["worker_index"]))
        self.snapshots[(int(snap["worker_index"]), str(snap["incarnation"]))] = snap

    def answered(self, snaps: Iterable[Mapping[str, Any]]) -> int:
        """Record one gather's answers; returns how many runners answered."""
        reachable: set[int] = set()
        for snap in snaps:
            self.add(snap)
            reachable.add(int(snap["worker_index"]))
        self.last_reachable = reachable
        self.known_workers |= reachable
        return len(reachable)

    def failed(self, exc: BaseException) -> None:
        """A gather failed: keep the last snapshots (one warning, at the first failure)."""
        self.gather_failures += 1
        if self.gather_failures == 1:
            msg = f"seffi: could not gather coverage from workers ({type(exc).__name__}: {exc})"
            warnings.warn(f"{msg}; keeping their last states", RuntimeWarning, stacklevel=3)

    def ordered(self) -> list[dict[str, Any]]:
        """Snapshots by worker index, then by when the incarnation was first seen (deterministic)."""
        return [self.snapshots[k] for k in sorted(self.snapshots, key=lambda k: k[0])]  # a stable sort

    def load_into(self, monitor: CoverageMonitor) -> bool:
        """Load the exact union of the snapshots into ``monitor``; whether it holds any sample."""
        monitor.load_states([s["monitor"] for s in self.ordered()])
        return monitor.samples > 0

    def summary(self) -> dict[str, Any]:
        """How many runners (incarnations) contributed; which known runners did not answer."""
        active = [s for s in self.ordered() if s["episodes"] > 0]
        return {
            "runners_contributed": len({s["worker_index"] for s in active}),
            "runner_incarnations": len(active),
            "runners_unreachable": sorted(self.known_workers - self.last_reachable),
            "gather_failures": self.gather_failures,
        }


class MergedMonitor(CoverageMonitor):
    """The driver's monitor: its reports (checkpoints and the final one) say which runners contributed."""

    workers: WorkerStates | None = None

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any], config: MonitorConfig, laws: EnvLaws) -> MergedMonitor:
        """The driver's monitor from the runners' agreed facts and laws, without an env."""
        cfg = config.replace(
            budget=int(config.budget or facts["budget"]),
            strategies=config.strategies if config.strategies is not None else tuple(facts["strategies"]),
            env_name=config.env_name or facts.get("env_name"),
            task_name=config.task_name or facts.get("task_name"),
        )
        baselines = EnvBaselines(
            tuple(str(s) for s in cfg.strategies),  # type: ignore[union-attr]
            cfg.budget,  # type: ignore[arg-type]
            base_law=laws.base_law if facts.get("base_law") else None,
            references=laws.references if facts.get("references") else None,
            iid=cfg.iid,
            oracle=cfg.oracle,
            seed=cfg.seed,
        )
        monitor = cls(config=cfg, baselines=baselines)
        if facts.get("num_latents"):  # the latent-coverage diagnostic of router envs
            monitor.num_latents = int(facts["num_latents"])
            monitor.reset_tracker()
        return monitor

    def report(self, **meta: Any) -> Any:
        """The report, with the runners' summary in ``meta`` (lists joined: meta holds scalars)."""
        summary = self.workers.summary() if self.workers is not None else {}
        flat = {k: (",".join(map(str, v)) if isinstance(v, list) else v) for k, v in summary.items()}
        return super().report(**flat, **meta)


def _local(env_runner: Any, slot: int | None) -> list[CoverageCallback]:
    """This runner's seffi callbacks; ``slot``: only the one at that position of RLlib's callback list.

    RLlib builds the same list on the driver and every runner: a runner's i-th seffi callback belongs
    to the driver's i-th.
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
    out = []
    for cb in _local(env_runner, slot):
        m, laws = cb.runner, cb.laws
        if m is None or laws is None:
            out.append((index, {"error": cb.error}))
            continue
        names = {"env_name": m.env_name, "task_name": m.task_name, "num_latents": int(m.num_latents)}
        sends = {"base_law": laws.sources[0] is not None, "references": laws.sources[1] is not None}
        out.append((index, {"budget": int(m.budget), "strategies": tuple(m.strategies), **names, **sends}))
    return out


def _in_evaluation(env_runner: Any) -> bool:
    return bool(getattr(getattr(env_runner, "config", None), "in_evaluation", False))


class CoverageCallback(RLlibCallback):
    """An ``RLlibCallback`` measuring exploration coverage across all env runners.

    RLlib builds callbacks without arguments: pass `configure` (a picklable ``functools.partial``).
    On the driver, read it with `metrics`, `curves` and `to_dataframe` (also module functions).

    Args:
        budget: Per-input sample budget K; default: ``config.budget``, else the env's ``budget``.
        env: A seffi env (or a zero-argument factory) for the driver's baselines; default: none, the
            runners read their envs and send the baselines' data.
        log_every: Gather, merge and log every this many *training iterations* (``MonitorConfig``'s
            ``log_every``/``log_unit`` do not apply here).
        gather_timeout_s: How long the driver waits for runners' states.
        config: The monitor options ([`MonitorConfig`][seffi.callbacks.MonitorConfig]).
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
        self.laws: EnvLaws | None = None  # runner side: the env's laws of the inputs seen
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
        # A fresh incarnation id: a restarted runner's streams must not collide with its predecessor's.
        index = int(getattr(env_runner, "worker_index", 0) or 0)
        self.identity = {"worker_index": index, "incarnation": uuid.uuid4().hex, "pid": os.getpid()}
        try:
            # Runners log nothing and compute no baselines: the driver logs the merged numbers. A
            # user iid/oracle stays in the config so that the env is not asked for its own.
            cfg = self.config.replace(budget=self._budget(env), sinks=NullSink(), plots=False, n_boot=0)
            self.runner = CoverageMonitor(env=env, config=cfg)
        except SeffiError as exc:  # sent to the driver, which raises it once, at build time
            self.error = str(exc)
            return False
        base = self.runner.env_baselines  # the env is asked only for what the user did not give
        self.laws = EnvLaws(
            base.base_law if self.config.iid is None else None,
            base.references if self.config.oracle is None else None,
        )
        return True

    def _budget(self, env: Any) -> int:
        if self.config.budget is not None:
            return self.config.budget
        access = EnvAccess(env)
        if not access.has("budget"):
            raise SeffiError("CoverageCallback needs budget=K: the env does not expose a `budget`")
        return int(access.get("budget"))

    def on_algorithm_init(self, *, algorithm: Any, **kwargs: Any) -> None:
        """Build the driver's monitor (W&B + local sinks) from the runners' env facts, or ``env=``."""
        mine = [i for i, cb in enumerate(_callbacks(algorithm)) if cb is self]
        self.slot = mine[0] if mine else None
        if self.env is not None:
            env = self.env() if callable(self.env) and not hasattr(self.env, "step") else self.env
            self.monitor = MergedMonitor(env=env, config=self.config.replace(budget=self._budget(env)))
        else:
            facts = _agreed_facts(a for answers in self._ask(algorithm, _runner_facts) for a in answers)
            cfg = self.config
            if facts is None and (cfg.strategies is None or cfg.budget is None):
                raise SeffiError(
                    "no env runner reported its env's facts; pass CoverageCallback.configure(env=...) "
                    "or strategies=... and budget=..."
                )
            facts = facts or {"strategies": tuple(cfg.strategies), "budget": cfg.budget}
            self.monitor = MergedMonitor.from_facts(facts, cfg, self.workers.laws)
        self.monitor.workers = self.workers

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
        """The key of the merged scalars in ``result``: ``"seffi"``, ``"seffi_<i>"`` for the i-th (i >= 1)."""
        return "seffi" if not self.slot else f"seffi_{self.slot}"

    def gather(self, algorithm: Any) -> int:
        """Fetch every healthy runner's cumulative state (a failure keeps the last); how many answered."""
        try:
            answers = self._ask(algorithm, _runner_states)
        except Exception as exc:  # a dying actor must not stop training; states are cumulative
            self.workers.failed(exc)
            return 0
        return self.workers.answered(snap for states in answers for snap in states or [])

    def metrics(self) -> dict[str, float]:
        """A copy of the latest logged merged scalars (as ``result["seffi"]``; ``{}`` before a log)."""
        return self.monitor.metrics() if self.monitor is not None else {}

    def curves(self, algorithm: Any = None) -> Any:
        """The merged policy `Curves` (gathered from the runners first when ``algorithm`` is given)."""
        return self._current(algorithm).curves()

    def to_dataframe(self, algorithm: Any = None) -> Any:
        """The merged curves (policy, iid, oracle) as a long pandas DataFrame (empty before any episode)."""
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
        step = (m.last_step + 1) if m.last_step is not None else 0
        return m.finalize(step if algorithm is None else _step(algorithm, {}) or step)


def _callbacks(algorithm: Any) -> list[CoverageCallback]:
    cbs = getattr(algorithm, "callbacks", None)
    cbs = cbs if isinstance(cbs, list) else [cbs]
    return [cb for cb in cbs if isinstance(cb, CoverageCallback)]


def coverage_callback(algorithm: Any) -> CoverageCallback:
    """The driver-side seffi `CoverageCallback` of ``algorithm`` (the first, if several)."""
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
    """Finalize every seffi callback of ``algorithm`` (before ``algo.stop()``); the first one's report."""
    reports = [cb.finalize(algorithm) for cb in _callbacks(algorithm)]
    return reports[0] if reports else None


def _step(algorithm: Any, result: Mapping[str, Any]) -> int:
    """The x-axis of seffi's W&B keys: env steps sampled so far (fallback: the iteration)."""
    key = "num_env_steps_sampled_lifetime"
    value = result.get(key) or result.get("env_runners", {}).get(key)
    return int(value) if value else int(getattr(algorithm, "iteration", 0))

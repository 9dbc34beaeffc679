"""Distributed workers' cumulative monitor states, kept on the driver and merged exactly.

Framework-independent part of the RLlib adapter: each worker (an env-runner incarnation) sends its
*cumulative* [`CoverageMonitor.state_dict`][seffi.callbacks.CoverageMonitor.state_dict]; the driver keeps the
latest one per incarnation and loads their exact union with
[`CoverageMonitor.load_states`][seffi.callbacks.CoverageMonitor.load_states] (each in its own block of
streams).

The driver never builds the env: the workers read it where it lives and send plain data, its facts
(`worker_facts`: budget, strategies, names) and, for each input they saw, its exact base law
and reference match sets (`WorkerLaws`), from which the driver computes the baselines
(`GatheredLaws`). Nothing but dicts, sets and floats crosses the process boundary.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.core import CoverageMonitor
from seffi.coverage.env_baselines import EnvBaselines
from seffi.errors import SeffiError

__all__ = [
    "GatheredLaws",
    "MergedMonitor",
    "WorkerLaws",
    "WorkerStates",
    "agreed_facts",
    "worker_facts",
    "worker_identity",
    "worker_snapshot",
]

#: The facts of a worker's env that the driver's monitor needs (all must agree across workers).
FACTS = ("budget", "strategies", "env_name", "task_name", "num_latents", "base_law", "references")


def worker_snapshot(
    monitor: CoverageMonitor, identity: Mapping[str, Any], laws: WorkerLaws | None = None
) -> dict[str, Any]:
    """What a worker sends: its identity (``worker_index``, ``incarnation``), counts and monitor state.

    Args:
        monitor: The worker's monitor.
        identity: `worker_identity`.
        laws: The worker's `WorkerLaws`; the snapshot then carries the laws of every input
            the monitor has seen (``"laws"``).
    """
    counts = {"episodes": monitor.episodes, "samples": monitor.samples}
    snap = {**identity, **counts, "monitor": monitor.state_dict()}
    if laws is not None:
        snap["laws"] = laws.update(monitor.inputs)
    return snap


def worker_facts(monitor: CoverageMonitor, laws: WorkerLaws | None = None) -> dict[str, Any]:
    """What the driver needs to build its monitor, read from a worker's monitor (plain data).

    ``base_law``/``references`` say whether the worker will send the env's exact iid law and oracle
    reference sets (False when the env lacks them or the user passed ``iid=``/``oracle=``).
    """
    return {
        "budget": int(monitor.budget),
        "strategies": tuple(monitor.strategies),
        "env_name": monitor.env_name,
        "task_name": monitor.task_name,
        "num_latents": int(monitor.num_latents),
        "base_law": laws is not None and laws.base_law is not None,
        "references": laws is not None and laws.references is not None,
    }


def agreed_facts(answers: Iterable[tuple[int, Mapping[str, Any]]]) -> dict[str, Any] | None:
    """The facts all workers agree on (None when none answered).

    Args:
        answers: ``(worker_index, facts or {"error": message})`` per worker.

    Raises:
        SeffiError: A worker could not read its env (its message), or two workers disagree.
    """
    first: tuple[int, Mapping[str, Any]] | None = None
    for worker, facts in answers:
        if "error" in facts:
            raise SeffiError(f"env runner {worker}: {facts['error']}")
        if first is None:
            first = (worker, facts)
            continue
        for name in FACTS:
            if facts.get(name) != first[1].get(name):
                raise SeffiError(
                    f"env runners {first[0]} and {worker} disagree on the env's {name}: "
                    f"{first[1].get(name)!r} vs {facts.get(name)!r}; every runner must measure the same task"
                )
    return dict(first[1]) if first is not None else None


class WorkerLaws:
    """A worker's record of its env's exact base law and reference sets, per input seen (plain data).

    Each input's entry is read once from the env (through the worker monitor's baselines, i.e.
    `EnvAccess`); an env method that raises is recorded as an
    error message, which the driver raises as a `SeffiError` if it needs that
    baseline.

    Args:
        baselines: The worker monitor's [`EnvBaselines`][seffi.coverage.env_baselines.EnvBaselines].
        iid: Read the base law (False when the user gave ``iid=``: the env is not asked).
        oracle: Read the reference sets (False when the user gave ``oracle=``).
    """

    def __init__(self, baselines: EnvBaselines, *, iid: bool = True, oracle: bool = True) -> None:
        self.base_law = baselines.base_law if iid else None
        self.references = baselines.references if oracle else None
        self.entries: dict[str, dict[str, Any]] = {}

    def update(self, inputs: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The entries of ``inputs`` (read from the env for the new ones), as plain dicts."""
        for x in inputs:
            if x not in self.entries:
                self.entries[x] = self._read(x)
        return {x: self.entries[x] for x in inputs}

    def _read(self, x: str) -> dict[str, Any]:
        entry: dict[str, Any] = {}
        if self.base_law is not None:
            try:
                entry["base"] = _law(self.base_law(x))
                entry["base_valid"] = _law(self.base_law(x, valid_only=True))
            except Exception as exc:  # the driver raises it where a baseline is needed
                entry["base_error"] = f"{type(exc).__name__}: {exc}"
        if self.references is not None:
            try:
                entry["references"] = {str(s): frozenset(map(str, a)) for s, a in self.references(x).items()}
            except Exception as exc:
                entry["references_error"] = f"{type(exc).__name__}: {exc}"
        return entry


def _law(law: Mapping[Any, Any]) -> dict[frozenset[str], float]:
    return {frozenset(map(str, a)): float(p) for a, p in law.items()}


class GatheredLaws:
    """The driver's copy of the workers' `WorkerLaws` entries, served as an env's methods.

    `base_law` and `references` have the signatures of the env's
    ``base_match_distribution`` and ``reference_match_sets``, so an
    [`EnvBaselines`][seffi.coverage.env_baselines.EnvBaselines] computes the exact baselines from them.
    """

    def __init__(self) -> None:
        self.entries: dict[str, tuple[int, Mapping[str, Any]]] = {}

    def add(self, laws: Mapping[str, Mapping[str, Any]], worker_index: int) -> None:
        """Keep the entries of inputs not seen before (every worker reads the same env law)."""
        for x, entry in laws.items():
            self.entries.setdefault(str(x), (int(worker_index), entry))

    def base_law(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        """The env's ``base_match_distribution(input_id, valid_only)`` as a worker read it."""
        return dict(self._get(input_id, "base_valid" if valid_only else "base", "base law"))

    def references(self, input_id: str) -> dict[str, frozenset[str]]:
        """The env's ``reference_match_sets(input_id)`` as a worker read it."""
        return dict(self._get(input_id, "references", "reference match sets"))

    def _get(self, x: str, key: str, what: str) -> Any:
        if x not in self.entries:
            raise SeffiError(f"no env runner sent the {what} of input {x!r}")
        worker, entry = self.entries[x]
        error = entry.get(key.replace("_valid", "") + "_error")
        if error is not None:
            raise SeffiError(f"env runner {worker} could not read the env's {what} of input {x!r}: {error}")
        return entry[key]


def worker_identity(worker_index: int) -> dict[str, Any]:
    """A fresh incarnation id: a restarted worker's streams must not collide with its predecessor's."""
    return {"worker_index": int(worker_index), "incarnation": uuid.uuid4().hex, "pid": os.getpid()}


class WorkerStates:
    """The latest cumulative snapshot of every worker incarnation, and who answered the last gather.

    States are cumulative, so a missed gather loses nothing; a worker that dies keeps its last
    snapshot in the merge; a restarted worker is a new incarnation, so nothing is counted twice.
    """

    def __init__(self) -> None:
        self.snapshots: dict[tuple[int, str], dict[str, Any]] = {}
        self._first_seen: dict[tuple[int, str], int] = {}
        self.last_reachable: set[int] = set()
        self.known_workers: set[int] = set()
        self.gather_failures = 0
        #: The env laws the workers sent, for the driver's baselines.
        self.laws = GatheredLaws()

    def add(self, snap: Mapping[str, Any]) -> None:
        """Store one worker's cumulative snapshot (replacing that incarnation's older one).

        Its env laws (``"laws"``, see `worker_snapshot`) go to `laws`.
        """
        key = (int(snap["worker_index"]), str(snap["incarnation"]))
        self._first_seen.setdefault(key, len(self._first_seen))
        snap = dict(snap)
        self.laws.add(snap.pop("laws", None) or {}, key[0])
        self.snapshots[key] = snap

    def answered(self, snaps: Iterable[Mapping[str, Any]]) -> int:
        """Record one gather's answers; returns how many workers answered."""
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
            warnings.warn(
                f"seffi: could not gather coverage from workers ({type(exc).__name__}: {exc}); "
                "keeping their last states",
                RuntimeWarning,
                stacklevel=3,
            )

    def ordered(self) -> list[dict[str, Any]]:
        """Snapshots by worker index, then by when the incarnation was first seen (deterministic)."""
        keys = sorted(self.snapshots, key=lambda k: (k[0], self._first_seen[k]))
        return [self.snapshots[k] for k in keys]

    def load_into(self, monitor: CoverageMonitor) -> bool:
        """Make ``monitor``'s data the exact union of the snapshots; whether it holds any sample."""
        monitor.load_states([s["monitor"] for s in self.ordered()])
        return monitor.samples > 0

    def summary(self) -> dict[str, Any]:
        """How many workers (incarnations) contributed, and which known workers did not answer."""
        active = [s for s in self.ordered() if s["episodes"] > 0]
        return {
            "runners_contributed": len({s["worker_index"] for s in active}),
            "runner_incarnations": len(active),
            "runners_unreachable": sorted(self.known_workers - self.last_reachable),
            "gather_failures": self.gather_failures,
        }


class MergedMonitor(CoverageMonitor):
    """The driver's monitor: its report's ``meta`` also says which workers contributed."""

    #: Set by the driver before `finalize`: `WorkerStates.summary`.
    workers_summary: Mapping[str, Any] | None = None

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any], config: MonitorConfig, laws: GatheredLaws) -> MergedMonitor:
        """The driver's monitor from the workers' `agreed_facts`, without an env.

        Its exact baselines come from ``laws`` (what the workers read from their envs) where the
        workers have them; ``config.iid``/``config.oracle`` replace them as usual.
        """
        strategies, budget = tuple(facts["strategies"]), int(config.budget or facts["budget"])
        cfg = config.replace(
            budget=budget,
            strategies=config.strategies if config.strategies is not None else strategies,
            env_name=config.env_name or facts.get("env_name"),
            task_name=config.task_name or facts.get("task_name"),
        )
        baselines = EnvBaselines(
            tuple(str(s) for s in cfg.strategies),  # type: ignore[union-attr]
            budget,
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

    def report(self) -> Any:
        """The report, with the workers' summary in ``meta`` (lists joined: meta holds scalars)."""
        rep = super().report()
        summary = self.workers_summary or {}
        flat = {k: (",".join(map(str, v)) if isinstance(v, list) else v) for k, v in summary.items()}
        return rep.model_copy(update={"meta": {**dict(rep.meta or {}), **flat}})

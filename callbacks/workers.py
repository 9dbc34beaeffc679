"""Distributed workers' cumulative monitor states, kept on the driver and merged exactly.

Framework-independent part of the RLlib adapter: each worker (an env-runner incarnation) sends its
*cumulative* :meth:`CoverageMonitor.state_dict`; the driver keeps the latest one per incarnation and
loads their exact union with :meth:`CoverageMonitor.load_states` (each in its own block of streams).
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from seffi.callbacks.core import CoverageMonitor

__all__ = ["MergedMonitor", "WorkerStates", "worker_identity", "worker_snapshot"]


def worker_snapshot(monitor: CoverageMonitor, identity: Mapping[str, Any]) -> dict[str, Any]:
    """What a worker sends: its identity (``worker_index``, ``incarnation``), counts and monitor state."""
    counts = {"episodes": monitor.episodes, "samples": monitor.samples}
    return {**identity, **counts, "monitor": monitor.state_dict()}


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

    def add(self, snap: Mapping[str, Any]) -> None:
        """Store one worker's cumulative snapshot (replacing that incarnation's older one)."""
        key = (int(snap["worker_index"]), str(snap["incarnation"]))
        self._first_seen.setdefault(key, len(self._first_seen))
        self.snapshots[key] = dict(snap)

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

    #: Set by the driver before :meth:`finalize`: :meth:`WorkerStates.summary`.
    workers_summary: Mapping[str, Any] | None = None

    def report(self) -> Any:
        """The report, with the workers' summary in ``meta`` (lists joined: meta holds scalars)."""
        rep = super().report()
        summary = self.workers_summary or {}
        flat = {k: (",".join(map(str, v)) if isinstance(v, list) else v) for k, v in summary.items()}
        return rep.model_copy(update={"meta": {**dict(rep.meta or {}), **flat}})

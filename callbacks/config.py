"""``MonitorConfig``: every option of a coverage monitor, declared once for it and every adapter."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from seffi.errors import SeffiError

__all__ = ["SINK_NAMES", "LogUnit", "MonitorConfig"]

LogUnit = Literal["episodes", "steps"]

#: The sinks a monitor makes itself when ``sinks`` names them.
SINK_NAMES = ("local", "wandb", "tensorboard")


#: The int options: (name, lowest value, whether None is allowed).
_INTS = (
    ("budget", 1, True),
    ("log_every", 1, False),
    ("log_curves_every", 1, False),
    ("window", 1, True),
    ("checkpoint_every", 1, True),
    ("n_boot", 0, False),
    ("snapshot_n_boot", 0, True),
    ("seed", 0, False),
    ("stream_offset", 0, False),
)


@dataclass(frozen=True, kw_only=True)
class MonitorConfig:
    """What a [`CoverageMonitor`][seffi.callbacks.CoverageMonitor] measures, where it logs and how often.

    Attributes:
        budget: Per-input sample budget K (``None``: an adapter reads it from the env).
        strategies: Declared strategy ids (the coverage denominator M). ``None``: read from the env.
        iid: A user iid baseline (e.g. ``IidBaseline.from_samples(...)``) — replaces the env's.
        oracle: A user oracle baseline — replaces the env's.
        sinks: A [`Sink`][seffi.report.Sink] of the caller's, or names out of `SINK_NAMES` of sinks
            the monitor makes: ``"local"`` (``out_dir``, always made), ``"wandb"`` (an active
            ``wandb.run`` is reused), ``"tensorboard"`` (``out_dir/tb``). ``None``: local and wandb.
        out_dir: Local report folder (default ``runs/seffi-<timestamp>``); one that holds a seffi run
            gives ``out_dir-2`` (``-3``, ...) with one warning.
        wandb: "offline", "online" or "disabled"; ``None`` uses ``WANDB_MODE`` if set, else offline.
        wandb_kwargs: Extra ``wandb.init`` arguments (project, entity, name, group, notes, config, dir,
            ...), or ``run``: a run to log into.
        log_every: Log after this many new episodes (or steps, ``log_unit="steps"``); the default is a
            quarter of the default ``window``: logging more often adds cost, not information.
        log_unit: What ``log_every`` counts.
        log_curves_every: Every this many logs (the first too) is a *curve snapshot*: curves with
            bootstrap intervals to ``sinks.log_snapshot`` and the gain's ``_lo``/``_hi`` bounds; after
            a snapshot over U inputs the next waits until K x U more episodes came.
        scope: Key scope, e.g. ``"eval"`` gives ``seffi/eval/auc`` (``None``: ``seffi/auc``).
        label: Legend name of the policy in plots and report.
        n_boot: Bootstrap replicates of the final report's intervals (0: no intervals).
        snapshot_n_boot: Bootstrap replicates of mid-training snapshots and checkpoints, at most
            ``n_boot`` (``None``: ``n_boot``): fewer make the frequent snapshots, read as a trend, cheaper.
        seed: Seed of the bootstrap.
        stream_offset: Added to every stream id, so trackers of several workers merge without clashes
            when the offsets lie further apart than the runs a worker records per input (e.g. 10**6 x rank).
        plots: Render PNG plots into the local folder at ``finalize``.
        env_name: Env id used in error messages and the report (default: read from the env).
        task_name: Task name for the report (default: read from the env).
        verbose: 1 prints a one-line summary at every log.
        window: Each log also describes the runs whose every sample came in the last ``window``
            episodes under ``seffi/window/<metric>`` (like SB3's ``stats_window_size``);
            ``seffi/<metric>`` describes every run, as the report, the W&B summary and `metrics` do.
            A run is dated by its first sample (exact with ``window`` a multiple of ``log_every``);
            ``seffi/window/age`` is the age of the oldest sample. ``None``: no window keys.
        checkpoint_every: Also write a checkpoint (tracker_state.json and report.json) at the first
            log after this many more episodes (``None``: by time only).
        checkpoint_seconds: Write a checkpoint at the first log this many seconds after the last
            (``None``: by episodes only), the first at the first log with a complete run. ``seffi
            report DIR`` renders a killed run's last checkpoint; ``resume_from=DIR`` continues it.
        resume_from: A run folder holding a checkpoint (or a finished run's tracker_state.json): the
            monitor continues its runs and episodes and, unless ``out_dir`` differs, its folder.

    Examples:
        >>> cfg = MonitorConfig(budget=16, n_boot=100, wandb="disabled")
        >>> cfg.replace(scope="eval").scope
        'eval'
    """

    budget: int | None = None
    strategies: Sequence[str] | None = None
    iid: Any = None
    oracle: Any = None
    sinks: Any = None
    out_dir: str | Path | None = None
    wandb: str | None = None
    wandb_kwargs: Mapping[str, Any] = field(default_factory=dict)
    log_every: int = 1024
    log_unit: LogUnit = "episodes"
    log_curves_every: int = 10
    scope: str | None = None
    label: str = "policy"
    n_boot: int = 200
    snapshot_n_boot: int | None = 100
    seed: int = 0
    stream_offset: int = 0
    plots: bool = True
    env_name: str | None = None
    task_name: str | None = None
    verbose: int = 0
    window: int | None = 4096
    checkpoint_every: int | None = None
    checkpoint_seconds: float | None = 300.0
    resume_from: str | Path | None = None

    def __post_init__(self) -> None:
        for name, low, optional in _INTS:
            value = getattr(self, name)
            if value is None and optional:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                kind = "a positive" if low else "a non-negative"
                raise SeffiError(f"{name} must be {kind} int, got {value!r}")
        seconds = self.checkpoint_seconds
        number = isinstance(seconds, int | float) and not isinstance(seconds, bool)
        if seconds is not None and (not number or seconds <= 0):
            raise SeffiError(f"checkpoint_seconds must be a positive number or None, got {seconds!r}")
        if self.log_unit not in ("episodes", "steps"):
            raise SeffiError(f"log_unit must be 'episodes' or 'steps', got {self.log_unit!r}")
        if self.wandb is not None and self.wandb not in ("online", "offline", "disabled"):
            raise SeffiError(f"wandb must be 'online', 'offline' or 'disabled', got {self.wandb!r}")
        self.sink_names()  # names out of SINK_NAMES, or one clear error

    def sink_names(self) -> tuple[str, ...] | None:
        """The sinks the monitor makes itself (``sinks`` None or names), or None for a caller's sink."""
        sinks = self.sinks
        if sinks is None:
            return ("local", "wandb")
        if isinstance(sinks, str):
            sinks = [sinks]
        elif not isinstance(sinks, Sequence) or not all(isinstance(s, str) for s in sinks):
            if isinstance(sinks, Sequence) and any(isinstance(s, str) for s in sinks):
                raise SeffiError("sinks takes names or one Sink (a MultiSink for several), not a mix")
            return None
        unknown = [s for s in sinks if s not in SINK_NAMES]
        if unknown or not sinks:
            raise SeffiError(f"sinks names {unknown or 'nothing'}; the names are {list(SINK_NAMES)}")
        return ("local", *dict.fromkeys(s for s in sinks if s != "local"))

    @classmethod
    def build(cls, config: MonitorConfig | None = None, **options: Any) -> MonitorConfig:
        """``config`` (or the defaults) with the fields ``options`` on top (an unknown one: one error)."""
        names = [f.name for f in dataclasses.fields(cls)]
        if unknown := sorted(set(options) - set(names)):
            raise SeffiError(f"unknown monitor option(s) {unknown}; options are {names}")
        base = config if config is not None else cls()
        return dataclasses.replace(base, **options) if options else base

    def replace(self, **options: Any) -> MonitorConfig:
        """A copy with ``options`` changed (checked like the constructor)."""
        return MonitorConfig.build(self, **options)

"""``CoverageMonitor``: episodes in, tracker updated, curves vs baselines out to the sinks."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seffi import __version__
from seffi.callbacks.config import LogUnit, MonitorConfig
from seffi.callbacks.env_access import EnvAccess, env_facts
from seffi.callbacks.schedule import LogSchedule, RecentRuns
from seffi.coverage import state_v1
from seffi.coverage.barcode import BARCODE_ROWS
from seffi.coverage.env_baselines import BaselineAucSums, EnvBaselines
from seffi.coverage.gain import point_gain
from seffi.coverage.state import check
from seffi.coverage.summaries import Gain, inputs_holding
from seffi.coverage.tracker import CoverageTracker
from seffi.episodes import EpisodeBatch, EpisodeRejected, MatchCoder, parse_infos
from seffi.errors import SeffiError
from seffi.report import keys
from seffi.report.assemble import BaselineSets, curves_dataframe, monitor_report, policy_comparison
from seffi.report.safe_load import load_json_file
from seffi.report.sinks import TRACKER_STATE_JSON, LocalSinkWarning, closing_lines, own_sinks, state_for

__all__ = ["MONITOR_STATE_FORMAT", "CoverageMonitor", "LogUnit"]

#: Format tag of ``CoverageMonitor.state_dict`` (format-1 states still load: `seffi.coverage.state_v1`).
MONITOR_STATE_FORMAT = state_v1.MONITOR_STATE_FORMAT


class CoverageMonitor:
    """Framework-agnostic coverage monitoring: feed episode ends, get curves logged to the sinks.

    Four verbs: `update` (or `update_infos`) records episodes, `log` (or `maybe_log`) sends the
    scalars, `flush` folds buffered episodes into `tracker` (a
    [`CoverageTracker`][seffi.coverage.CoverageTracker]), `close` writes the report.

    Args:
        budget: Per-input sample budget K (or ``config.budget``).
        strategies: Declared strategy ids (the coverage denominator M). ``None``: taken from ``env``.
        env: A seffi env (single, Gymnasium vector or SB3 VecEnv) to read strategies and baselines from.
        config: A [`MonitorConfig`][seffi.callbacks.MonitorConfig]; ``**options`` (its fields) go on top.
        baselines: Precomputed [`EnvBaselines`][seffi.coverage.env_baselines.EnvBaselines].

    Examples:
        >>> monitor = CoverageMonitor.for_env(envs, budget=16)  # doctest: +SKIP
        >>> monitor.update_infos(infos, terminated | truncated); monitor.maybe_log(step)  # doctest: +SKIP
        >>> monitor.close()  # doctest: +SKIP
    """

    #: Buffered episodes are folded into the tracker at the latest after this many.
    flush_every = 4096

    def __init__(
        self,
        budget: int | None = None,
        strategies: Sequence[str] | None = None,
        *,
        env: Any = None,
        config: MonitorConfig | None = None,
        baselines: EnvBaselines | None = None,
        **options: Any,
    ) -> None:
        given = {k: v for k, v in (("budget", budget), ("strategies", strategies)) if v is not None}
        cfg = self.config = MonitorConfig.build(config, **options, **given)
        if cfg.budget is None:
            raise SeffiError("CoverageMonitor needs a budget K (a positive int)")
        self.budget, self.scope, self.label = int(cfg.budget), cfg.scope, cfg.label
        self.n_boot, self.seed, self.stream_offset = int(cfg.n_boot), int(cfg.seed), int(cfg.stream_offset)
        snap_boot = cfg.snapshot_n_boot  # replicates of mid-training snapshots (the report uses n_boot)
        self.snapshot_n_boot = self.n_boot if snap_boot is None else min(self.n_boot, int(snap_boot))
        self.access = EnvAccess(env) if env is not None else None
        self.env_name, self.task_name, self.strategies, self.num_latents = env_facts(self.access, cfg)
        kwargs = {"iid": cfg.iid, "oracle": cfg.oracle, "seed": self.seed, "iid_seed": self.seed}
        self.env_baselines = baselines or (
            self.access.baselines(self.strategies, self.budget, env_id=self._env_id, **kwargs)
            if self.access
            else EnvBaselines(self.strategies, self.budget, **kwargs)
        )
        names = cfg.sink_names()
        self._owns_sinks = names is not None
        resume = Path(cfg.resume_from) if cfg.resume_from is not None else None
        resumed = _read_checkpoint(resume) if resume is not None else None
        if resumed is not None:  # refused before any sink claims the folder or starts a W&B run
            resumed = _unpack(resumed, self._new_tracker())
        if names is not None:  # sinks of its own; a folder that holds a run gets a fresh sibling
            same = resume is not None and (cfg.out_dir is None or _same_folder(cfg.out_dir, resume))
            folder = resume if same else cfg.out_dir
            self.out_dir, self.sinks = own_sinks(
                folder, cfg.wandb, cfg.plots, cfg.wandb_kwargs, reuse=same, names=names
            )
        else:
            self.out_dir, self.sinks = Path(cfg.out_dir) if cfg.out_dir is not None else None, cfg.sinks
        wandb = getattr(self.sinks, "wandb", None)
        if wandb is not None:  # runs group and filter in the W&B UI by task, env, K and M
            wandb.run.share(self.scope)  # a run the user started: another monitor's keys are not ours
            task = self.task_name or self.env_name or "coverage"
            settings = {"seffi_version": __version__, "task": self.task_name, "env_id": self.env_name}
            settings |= {"budget": self.budget, "num_strategies": len(self.strategies), "window": cfg.window}
            settings |= {"n_boot": self.n_boot, "seed": self.seed}
            wandb.run.describe(name=f"seffi-{task}-K{self.budget}", tags=["seffi", task], config=settings)
        self.coder = MatchCoder(self.strategies)  # match sets coded once, across calls
        self._episodes = 0  # finished episodes accepted (lifetime)
        self.reset_tracker()
        if resumed is not None:  # a checkpoint's runs and episodes; its open runs continue
            self._load(*resumed)
        self.schedule = LogSchedule(cfg.log_every, cfg.log_unit, cfg.log_curves_every, self.budget)
        local = getattr(self.sinks, "local", None)
        if resume is not None and local is not None and _same_folder(local.out_dir, resume):
            # The run goes on in its folder: a killed run's lines after the checkpoint go, the logs go on.
            n_logs, last_step = local.cut_after(keys.episodes_key(self.scope), self.episodes)
            self.schedule.resume(n_logs, last_step, self.episodes)
        #: (episodes, time) of the last checkpoint; time None until the first one.
        self._checkpointed: tuple[int, float | None] = (self.episodes, None)
        self.baseline_sets = BaselineSets()
        self.finalized = False
        #: Why the report files were not written at `finalize` (a full disk), None when they were.
        self.write_error: str | None = None
        self.last_scalars: dict[str, float] = {}
        self.last_comparison: Any = None
        #: Extra policy lines for the final report (the evaluator's earlier evaluations).
        self.extra_policies: list[Any] = []
        #: (tracker, episodes, report) of `prepare_finalize`: `finalize` reuses the report of unchanged data.
        self._prepared: tuple[CoverageTracker, int, Any] | None = None

    @classmethod
    def for_env(cls, env: Any, budget: int, **kwargs: Any) -> CoverageMonitor:
        """A monitor whose strategies and baselines come from the seffi ``env`` (any container)."""
        return cls(budget, env=env, **kwargs)

    def _new_tracker(self) -> CoverageTracker:
        return CoverageTracker(
            self.strategies,
            task=self.task_name,
            budget=self.budget,
            barcode_rows=BARCODE_ROWS,  # the smallest input keys: a barcode's cost stays flat in inputs
            barcode_cols=self.budget,
            num_latents=self.num_latents,
            stream_offset=self.stream_offset,
        )

    def reset_tracker(self) -> None:
        """Drop all recorded samples (the evaluator does this per evaluation); ``episodes`` stays."""
        self._batches: list[EpisodeBatch] = []
        self.pending = 0  # episodes buffered, not yet folded into the tracker
        self._tracker = self._new_tracker()
        self._auc_sums = BaselineAucSums()
        #: (tracker, its counts, policy curves, (iid, oracle, their `policy_comparison`) or None) of a
        #: snapshot log, for the checkpoint written with it.
        self._curves: tuple[CoverageTracker, tuple[int, ...], Any, Any] | None = None
        self._new_window()

    def _new_window(self, *, loaded: bool = False) -> None:
        w = self.config.window  # the runs of the last ``w`` episodes (None: no window, or undated runs)
        self.recent = None if w is None else RecentRuns(w, self._tracker, since=self.episodes, loaded=loaded)

    def flush(self) -> CoverageTracker:
        """Fold the buffered episodes into the tracker (run assignment, sums, barcode, latents)."""
        if self._batches:
            b = EpisodeBatch.concat(self._batches)
            self._batches, self.pending = [], 0
            self._tracker.record(b)
            if self.recent is not None:  # date the runs this batch completed
                self.recent.folded(self._tracker, self.episodes)
        return self._tracker

    @property
    def tracker(self) -> CoverageTracker:
        """The `CoverageTracker` that owns every counted sample (flushed first)."""
        return self.flush()

    def _env_id(self, x: str) -> Any:
        """The env's own id of input ``x``: ids are kept as str, and ids that came as ints go back as ints."""
        return int(x) if self.coder.ids_are_str is False else x

    @property
    def fold_every(self) -> int:
        """Episodes a fold holds at most: ``flush_every``, and ``window`` when there is one.

        A run is dated by the fold that brought its first sample, so folds no longer than the window
        keep it filled when one call brings more episodes than it spans (an SB3 rollout).
        """
        window = self.config.window
        return self.flush_every if window is None else min(self.flush_every, window)

    @property
    def episodes(self) -> int:
        """Finished episodes ingested (lifetime; including those beyond a run's budget)."""
        return self._episodes

    @property
    def skipped_beyond_budget(self) -> int:
        """Episodes past their run's K samples (they never enter C(k <= K))."""
        return self.tracker.skipped

    @property
    def samples(self) -> int:
        """Samples that entered the curves."""
        return self.tracker.samples

    @property
    def inputs(self) -> list[str]:
        """Ids of the inputs seen so far, in order of appearance."""
        return [x for _, x in self.tracker.keys]

    def update(self, batch: EpisodeBatch) -> int:
        """Record a batch of finished episodes (buffered until `flush`); returns its size."""
        n = len(batch)
        if n == 0:
            return 0
        if batch.strategies is not self.strategies and batch.strategies != self.strategies:
            raise SeffiError(f"a batch over strategies {batch.strategies} fed a monitor of {self.strategies}")
        fold = self.fold_every
        for start in range(0, n, fold):  # a batch longer than a fold is folded a fold at a time
            end = min(n, start + fold)
            self._batches.append(batch if (start, end) == (0, n) else batch.take(slice(start, end)))
            self.pending += end - start
            self._episodes += end - start
            if self.pending >= fold:
                self.flush()
        return n

    def update_infos(self, infos: Any, dones: Any = None, *, env_offset: int = 0) -> int:
        """Record the episodes that ended in one step's ``infos`` (any format); returns how many.

        The format is told by the shape (`seffi.episodes.parse_infos`): a Gymnasium vector info dict
        (any autoreset mode), a list of per-env dicts (or of steps' lists, ``dones`` (steps, envs)),
        or one single-env info. ``dones`` (``terminated | truncated``) lets an ended episode whose
        info lacks ``strategy_matches`` be rejected, not unseen; ``env_offset`` is added to sub-env
        indices. An `EpisodeRejected` comes after the call's good episodes were recorded.
        """
        if isinstance(dones, np.ndarray) and dones.dtype == np.bool_ and not np.count_nonzero(dones):
            return 0  # nothing ended (every other step of NEXT_STEP autoreset): nothing to parse
        try:
            batch = parse_infos(infos, self.coder, dones, env_name=self.env_name, env_offset=env_offset)
        except EpisodeRejected as exc:
            raise exc.recorded_as(self.update(exc.batch)) from None
        return self.update(batch)

    @property
    def n_logs(self) -> int:
        """Logs written so far."""
        return self.schedule.n_logs

    @property
    def last_step(self) -> int | None:
        """The step of the last log."""
        return self.schedule.last_step

    def maybe_log(self, step: int) -> bool:
        """Log if ``log_every`` episodes (or steps) passed since the last log. O(1) when not due."""
        return self.schedule.due(step, self.episodes) and self.log(step) is not None

    def log(self, step: int) -> dict[str, float] | None:
        """Send the scalars (and, on snapshot logs, the curves) to the sinks at ``step``; returns them.

        ``seffi/<metric>`` describes every run (the final report's numbers), ``seffi/window/<metric>``
        the runs of the last ``window`` episodes. ``None``: no complete run yet, or a step not above
        the last logged one (refused with one warning).
        """
        return self._log(step, checkpoint=True)

    def _log(self, step: int, *, checkpoint: bool) -> dict[str, float] | None:
        step = int(step)
        if not self.schedule.start(step, self.episodes) or self.tracker.complete_runs() == 0:
            return None
        comparison = None
        if self.schedule.snapshot:
            comparison, scalars = self._snapshot(n_boot=self.snapshot_n_boot)
        else:
            scalars = self._cumulative_scalars()
        scalars.update(self._window_scalars())
        self.last_comparison = comparison or self.last_comparison
        scalars[keys.STEP_KEY] = float(step)
        self.sinks.log(scalars, step)
        if comparison is not None:
            self.sinks.log_snapshot(comparison, step, self.scope)
        self.schedule.done(step, snapshot_inputs=None if comparison is None else len(self._tracker.keys))
        self.last_scalars = scalars
        if checkpoint and self._checkpoint_due():
            self.checkpoint()
        self._curves = None  # its per-input arrays are O(inputs): not kept between logs
        if self.config.verbose:  # opt-in console progress
            print(keys.progress_line(scalars, self.scope, step, self.episodes, len(self._tracker.keys)))
        return scalars

    @property
    def baseline_seconds(self) -> float:
        """Wall time spent computing baselines (each once)."""
        return self.env_baselines.seconds

    def point_scalars(self) -> dict[str, float]:
        """The scalars of a log from point estimates only, O(inputs x K), as `log` sends them."""
        return {**self._cumulative_scalars(), **self._window_scalars()}

    def _point_gain(self, point: dict[str, Any], codes: np.ndarray | None = None) -> Gain | None:
        """The gain of a point estimate over the inputs ``codes`` (None: every complete run), no interval."""
        # As Curves.gain: no gain until some run reaches K (an AUC over fewer budgets is another K).
        if point["auc"] is None or not np.isfinite(point["coverage"][-1]):
            return None
        t, sums, each = self._tracker, self._auc_sums, None
        if codes is None:  # every complete run: running sums, O(new inputs) per log
            codes = t.complete_inputs()
            aucs = sums.mean(self.env_baselines, codes, t.keys)
        elif not self.env_baselines.sources:
            return None
        else:  # the mean of each input's AUCs (one unavailable: NaN, no mean)
            each = sums.of(self.env_baselines, codes, t.keys)
            aucs = tuple(float(np.mean(v)) if v.size and not np.isnan(v).any() else None for v in each.T)
        value = point_gain(point["auc"], *aucs)
        if value is None:
            return None
        iid, oracle = (sums.of(self.env_baselines, codes, t.keys) if each is None else each).T  # read once
        rooms = oracle - iid
        return Gain(value=value, room=aucs[1] - aucs[0], held_by=inputs_holding(rooms), n_inputs=len(rooms))

    def _cumulative_scalars(self) -> dict[str, float]:
        t = self.tracker
        point = t.point()
        scalars = self._scalars(point, self._point_gain(point), t.valid / max(t.samples, 1))
        for name, est in t.metric_estimates(self._base_law).items():  # `seffi.coverage.metrics`
            scalars.update(keys.estimate_scalars(name, est, self.scope))
        return scalars

    @property
    def _base_law(self) -> Any:
        """The env's base law per input id (read once each), or None without one."""
        return self.env_baselines.law if self.env_baselines.base_law is not None else None

    def _window_scalars(self) -> dict[str, float]:
        """``seffi/window/*``: the runs of the last ``window`` episodes ({} without a window)."""
        if self.recent is None:
            return {}
        t = self.tracker  # fold the buffer first: its runs are dated now
        win, reach, age = self.recent.at(self.episodes, t)
        runs = t.complete if win is None else win
        counts = {
            keys.window_key("episodes", self.scope): float(reach),
            keys.window_key("runs", self.scope): float(runs.runs),  # type: ignore[union-attr]
        }
        if age is not None:
            counts[keys.window_key("age", self.scope)] = float(age)
        scope = f"{self.scope}/window" if self.scope else "window"
        if win is None:  # nothing left yet: the window holds every run
            point, gain = t.point(), self._point_gain(t.point())
            valid_rate, inputs = t.valid / max(t.samples, 1), t.complete_inputs().size
        elif win.runs:
            point, codes = win.point(), win.input_codes()
            gain, valid_rate = self._point_gain(point, codes), win.valid / max(win.samples, 1)
            inputs = codes.size
        else:  # an empty window has no estimates, only counts
            return counts
        return {**self._scalars(point, gain, valid_rate, scope, inputs=inputs), **counts}

    def _scalars(
        self, curves: Any, gain: Any, valid_rate: float, scope: str | None = None, inputs: int | None = None
    ) -> dict[str, float]:
        scope = self.scope if scope is None else scope
        inputs = len(self._tracker.keys) if inputs is None else inputs
        scalars = keys.scalars_from_curves(
            curves, gain=gain, episodes=self.episodes, inputs=inputs, scope=scope
        )
        scalars[keys.valid_rate_key(scope)] = valid_rate
        return scalars

    def curves(self) -> Any:
        """The policy's `Curves` over every run, k = 1..K, with bootstrap CIs."""
        return self.tracker.curves(self.budget, n_boot=self.n_boot, seed=self.seed)

    def metrics(self) -> dict[str, float]:
        """A copy of the scalars of the latest log (``{}`` before the first), keys as logged (see `log`)."""
        return dict(self.last_scalars)

    def to_dataframe(self) -> Any:
        """The policy, iid and oracle curves as a long pandas DataFrame, one row per (method, k).

        Columns: ``seffi.report.assemble.FRAME_COLUMNS``; empty before the first complete sample.
        """
        if self.tracker.samples == 0:
            return curves_dataframe({}, label=self.label)
        iid, oracle = self.baselines()
        return curves_dataframe({"policy": self.curves(), "iid": iid, "oracle": oracle}, label=self.label)

    def baselines(self, *, pool: bool = False) -> tuple[Any, Any]:
        """(iid, oracle) curves over the inputs seen (or the env's pool, see ``EnvBaselines.curves``)."""
        if not self.env_baselines.sources:  # no list of every input id for nothing
            return None, None
        return self.env_baselines.curves(self.inputs, pool=pool)

    def snapshot(self, *, exact: bool = False) -> tuple[Any, dict[str, float]]:
        """(``Comparison``, scalars) of every run, with intervals (``exact``: the report's baselines)."""
        comparison, scalars = self._snapshot(exact=exact)
        self._curves = None
        return comparison, {**scalars, **self._window_scalars()}

    def _snapshot(self, *, exact: bool = False, n_boot: int | None = None) -> tuple[Any, dict[str, float]]:
        iid, oracle = self.baselines(pool=not exact)
        n_boot = self.n_boot if n_boot is None else n_boot
        t = self.tracker
        # A snapshot log and the checkpoint written right after it share one curves computation, and
        # one comparison when their baselines are the same (none, or the same objects).
        data = (t.samples, t.skipped, t.n_done, n_boot)
        if self._curves is None or self._curves[0] is not t or self._curves[1] != data:
            self._curves = (t, data, t.curves(self.budget, n_boot=n_boot, seed=self.seed), None)
        compared = self._curves[3]
        if compared is None or compared[0] is not iid or compared[1] is not oracle:
            got = policy_comparison(
                t,
                self._curves[2],
                iid,
                oracle,
                label=self.label,
                env_id=self.env_name,
                baseline_sets=self.baseline_sets,
                base_law=self._base_law,
            )
            compared = (iid, oracle, got)
            self._curves = (*self._curves[:3], compared)
        comparison, policy_set, gain = compared[2]
        scalars = self._scalars(policy_set, gain, t.valid / max(t.samples, 1))
        for name, est in comparison.policies[0].metrics.items():
            scalars.update(keys.estimate_scalars(name, est, self.scope))
        return comparison, scalars

    def state_dict(self) -> dict[str, Any]:
        """Everything recorded, JSON-safe: the tracker's state and ``episodes``."""
        tracker = self.tracker.state_dict()
        return {"format": MONITOR_STATE_FORMAT, "episodes": self.episodes, "tracker": tracker}

    def load_state_dict(self, state: Mapping[str, Any]) -> CoverageMonitor:
        """Replace everything recorded with ``state`` (open runs continue); a bad state changes nothing."""
        return self._load(*_unpack(state, self._tracker))

    def _load(self, checked: dict[str, Any], episodes: int) -> CoverageMonitor:
        self._replace(CoverageTracker.from_state_dict(checked, barcode_rows=BARCODE_ROWS), episodes)
        self.stream_offset = self._tracker.stream_offset
        self._new_window(loaded=True)  # the loaded runs have no dates: windows hold runs opened after
        return self

    def merge(self, other: CoverageMonitor | Mapping[str, Any]) -> CoverageMonitor:
        """Add another monitor's (or state's) data: exact, order-independent, atomic; shared runs raise."""
        state = other.state_dict() if isinstance(other, CoverageMonitor) else other
        return self._union(self.tracker, [state], self._episodes, shift=False)

    def load_states(self, states: Sequence[Mapping[str, Any]]) -> CoverageMonitor:
        """Replace everything recorded with the exact union of workers' ``states`` (own streams each)."""
        return self._union(self._new_tracker(), states, 0, shift=True)

    def _union(self, into: CoverageTracker, states: Any, episodes: int, *, shift: bool) -> CoverageMonitor:
        parts, offset = [_unpack(s, self._tracker) for s in states], 0
        try:  # a tracker merges atomically, and a fresh one leaves this monitor unchanged on an error
            for checked, n in parts:
                moved = CoverageTracker.shift_streams(checked, offset) if shift else checked
                into.merge(CoverageTracker.from_state_dict(moved, barcode_rows=BARCODE_ROWS))
                offset, episodes = offset + CoverageTracker.stream_span(checked), episodes + n
        except ValueError as exc:
            why = str(exc).replace("both trackers", "both monitors")
            raise SeffiError(
                f"cannot merge CoverageMonitor states: {why}; give workers stream_offset values further "
                "apart than the runs one worker records per input (e.g. 10**6 x its rank)"
            ) from exc
        self._replace(into, episodes)
        return self

    def _replace(self, tracker: CoverageTracker, episodes: int) -> None:
        self._batches, self.pending = [], 0
        self._tracker, self._episodes = tracker, episodes
        self._auc_sums.restart()  # the tracker lists its complete inputs anew
        self._curves = self.recent = None  # merged runs have no dates: logs cover every run

    def report(self, *, n_boot: int | None = None, **meta: Any) -> Any:
        """The `seffi.report.schema.Report` of everything recorded so far, ``meta`` added to its meta."""
        comparison = self._snapshot(exact=True, n_boot=n_boot)[0] if self.tracker.complete_runs() else None
        self._curves = None  # reused by a report right after a snapshot log only
        report = monitor_report(self, comparison)
        return report.model_copy(update={"meta": {**report.meta, **meta}}) if meta else report

    def _checkpoint_due(self) -> bool:
        every, seconds = self.config.checkpoint_every, self.config.checkpoint_seconds
        episodes, at = self._checkpointed
        if at is None and seconds is not None:  # a time schedule starts at the first log with a complete
            return self.tracker.complete_runs() > 0  # run: a kill in the first minutes keeps a report
        return (every is not None and self.episodes - episodes >= every) or (
            seconds is not None and at is not None and time.monotonic() - at >= seconds
        )

    def checkpoint(self) -> bool:
        """Write tracker_state.json and report.json of the run so far; returns whether the sinks had files."""
        save = getattr(self.sinks, "checkpoint", None)
        # The early first checkpoint of a time schedule leaves an episode schedule where it was.
        base, at = self._checkpointed
        every, seconds = self.config.checkpoint_every, self.config.checkpoint_seconds
        early = at is None and seconds is not None and (every is None or self.episodes - base < every)
        self._checkpointed = (base if early else self.episodes, time.monotonic())
        if save is None or self.finalized:
            return False
        # A checkpoint is a fallback for a killed run: the snapshots' replicates keep it cheap.
        save(self.report(n_boot=self.snapshot_n_boot, checkpoint=True), state_for(self.sinks, self.tracker))
        return True

    def prepare_finalize(self) -> None:
        """Start drawing the final report's plots in a child process (`finalize` reuses unchanged data's)."""
        ahead = getattr(self.sinks, "render_ahead", None)
        if ahead is not None and not self.finalized and self.tracker.complete_runs():
            report = self.report()
            self._prepared = (self._tracker, self.episodes, report)
            ahead(report)

    def finalize(self, step: int | None = None, *, interrupted: bool = False) -> Any:
        """Log a last time (if ``step`` is new), write the report, close the sinks; idempotent.

        Chart sinks (W&B) get the report's C(k) chart; a monitor with its own sinks prints where the
        report went. ``interrupted``: the run was stopped early, the report's meta says so.
        """
        if self.finalized:
            return None
        if step is not None and (self.last_step is None or step > self.last_step):
            self._log(step, checkpoint=False)  # the report and state written next supersede one
        prepared, self._prepared = self._prepared, None
        if prepared and not interrupted and prepared[0] is self._tracker and prepared[1] == self.episodes:
            report = prepared[2]  # computed once: report.json, report.md, the plots and W&B share it
        else:
            report = self.report(interrupted=True) if interrupted else self.report()
        # Data since the last log (a close without a step): metrics() ends on the final numbers, as the
        # W&B summary does.
        stale = self.last_scalars.get(keys.episodes_key(self.scope)) != self.episodes
        if stale and self.scope is None and len(keys.report_scopes(report)) == 1:
            self.last_scalars = {**self.last_scalars, **keys.report_scalars(report)}
        final = getattr(self.sinks, "log_final_curves", None)
        if final is not None and report.comparisons:  # the chart ends on every policy of the report
            final(report.comparisons[0], None, self.scope)
        self.finalized = True
        try:
            self.sinks.finish(report, state_for(self.sinks, self.tracker))  # run.summary, report files, state
        except SeffiError as exc:  # a full disk after training: one message, the training's result stands
            self.write_error = str(exc)
            warnings.warn(f"{exc}; monitor.report() still holds the numbers", LocalSinkWarning, stacklevel=2)
            return report
        if self._owns_sinks:  # sinks passed in belong to an adapter (or seffi run), which says this itself
            contents = "report.json, report.md" + (", plots" if self.config.plots else "")
            wandb = getattr(self.sinks, "wandb", None)
            for line in closing_lines(self.out_dir, wandb, contents=contents, prefix="[seffi] "):
                print(line, flush=True)
        return report

    close = finalize

    def __enter__(self) -> CoverageMonitor:
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        # Ctrl-C or an error inside the ``with`` block: what was measured is still written, marked
        # interrupted (a report of a run cut short never reads as a finished one).
        self.finalize(interrupted=exc_type is not None)


def _unpack(state: Any, like: CoverageTracker) -> tuple[dict[str, Any], int]:
    """(checked tracker state, episodes) of a monitor state (any format) that fits tracker ``like``."""
    try:
        state = state_v1.upgrade(state)
        if not isinstance(state, Mapping) or state.get("format") != MONITOR_STATE_FORMAT:
            raise ValueError(f"not a CoverageMonitor state (expected format {MONITOR_STATE_FORMAT!r})")
        s, episodes = check(state["tracker"]), state["episodes"]
        if type(episodes) is not int or episodes != s["samples"] + s["skipped"]:  # a sample or beyond K
            raise ValueError(
                f"episodes={episodes!r} must be the tracker's {s['samples']} samples and "
                f"{s['skipped']} beyond the budget"
            )
    except (ValueError, KeyError, TypeError) as exc:
        raise SeffiError(f"corrupted CoverageMonitor state: {exc}") from exc
    mine = {"budget": like.budget, "strategies": list(like.strategies), "task_name": like.task}
    theirs = {"budget": s["budget"], "strategies": s["strategies"], "task_name": s["task"]}
    if differ := [f"{k}={theirs[k]!r} (this monitor: {mine[k]!r})" for k in mine if mine[k] != theirs[k]]:
        raise SeffiError(f"the state does not mix with this monitor: it has {', '.join(differ)}")
    return s, episodes


def _same_folder(a: Any, b: Path) -> bool:
    return Path(a).resolve() == b.resolve()  # runs/od and /abs/path/runs/od are one folder


def _read_checkpoint(folder: Path) -> dict[str, Any]:
    """The monitor state of a run folder's tracker_state.json (episodes = samples + skipped ones)."""
    path = folder / TRACKER_STATE_JSON
    if not path.is_file():
        raise SeffiError(f"resume_from={folder}: no {TRACKER_STATE_JSON} there (no checkpoint was written)")
    # About 10 bytes per episode: room for 10^8 episodes.
    tracker = load_json_file(path, what="tracker state", max_bytes=2**30, max_depth=16)
    # Checked before any sink claims the folder, so a bad file leaves it untouched.
    counts = [tracker.get("samples"), tracker.get("skipped")] if isinstance(tracker, Mapping) else [None]
    if not all(type(c) is int and c >= 0 for c in counts):
        raise SeffiError(f"corrupted CoverageMonitor state: {path} holds no tracker state with sample counts")
    # Every episode a monitor folds is a sample or one beyond its run's budget.
    return {"format": MONITOR_STATE_FORMAT, "episodes": counts[0] + counts[1], "tracker": dict(tracker)}

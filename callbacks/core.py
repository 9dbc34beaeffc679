"""``CoverageMonitor``: episodes in, tracker updated, curves vs baselines out to the sinks."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from seffi.callbacks.config import LogUnit, MonitorConfig
from seffi.callbacks.env_access import EnvAccess
from seffi.callbacks.infos import EpisodeColumns, EpisodeEnd
from seffi.callbacks.ingest import EpisodeBuffer
from seffi.coverage import _tracker_state as state_io
from seffi.coverage.env_baselines import EnvBaselines
from seffi.coverage.tracker import CoverageTracker
from seffi.errors import SeffiError
from seffi.report import keys

__all__ = ["MONITOR_STATE_FORMAT", "CoverageMonitor", "LogUnit"]

#: Format tag of ``CoverageMonitor.state_dict`` (version 1 states still load).
MONITOR_STATE_FORMAT = "seffi.callbacks.monitor/2"


class CoverageMonitor:
    """Framework-agnostic coverage monitoring: feed episode ends, get curves logged to the sinks.

    A *run* is one input's sequence of samples in one env row (one stream of the tracker); its first
    ``budget`` samples count, so the curves are per-input-budget curves C(k), k = 1..K, averaged over
    runs. Baselines (exact iid and oracle) come from the env (:meth:`for_env`) or from the caller;
    without them the policy curves are still logged, only the gain is missing (with its reason).

    The monitor owns the log schedule, the step order and the sinks; the recorded data belongs to
    :attr:`tracker` (a :class:`~seffi.coverage.CoverageTracker` with budget K). Episodes are checked
    and buffered (:class:`~seffi.callbacks.ingest.EpisodeBuffer`, O(num_envs) numpy per step) and
    folded into the tracker in batches; a log costs O(inputs x K) from the tracker's per-input sums;
    bootstrap intervals are computed only for curve snapshots and the final report.

    Args:
        budget: Per-input sample budget K (or ``config.budget``).
        strategies: Declared strategy ids (the coverage denominator M). ``None``: taken from ``env``.
        env: A seffi env (single, Gymnasium vector or SB3 VecEnv) to read strategies, the exact iid
            baseline and the oracle from. Optional when ``strategies`` is given.
        config: A :class:`~seffi.callbacks.config.MonitorConfig`; ``**options`` (its fields) go on top.
        baselines: Precomputed :class:`~seffi.coverage.env_baselines.EnvBaselines` (else built from
            ``env`` or the config's ``iid``/``oracle``).

    Example:
        >>> monitor = CoverageMonitor.for_env(envs, budget=16)      # doctest: +SKIP
        >>> obs, _ = envs.reset(seed=0)                             # doctest: +SKIP
        >>> for step in range(10_000):                              # doctest: +SKIP
        ...     obs, r, term, trunc, infos = envs.step(policy(obs))
        ...     monitor.ingest_infos(infos, term | trunc)
        ...     monitor.maybe_log(step)
        >>> monitor.close()                                         # doctest: +SKIP
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
        if budget is not None:
            options["budget"] = budget
        if strategies is not None:
            options["strategies"] = strategies
        cfg = self.config = MonitorConfig.build(config, **options)
        if cfg.budget is None:
            raise SeffiError("CoverageMonitor needs a budget K (a positive int)")
        self.budget, self.scope, self.label = int(cfg.budget), cfg.scope, cfg.label
        self.n_boot, self.seed, self.stream_offset = int(cfg.n_boot), int(cfg.seed), int(cfg.stream_offset)
        self.log_every, self.log_unit, self.log_curves_every = (
            cfg.log_every,
            cfg.log_unit,
            cfg.log_curves_every,
        )
        self.user_iid, self.user_oracle, self.verbose = cfg.iid, cfg.oracle, cfg.verbose
        self.access = EnvAccess(env) if env is not None else None
        self.env_name = cfg.env_name or (self.access.env_id() if self.access else None)
        self.task_name = cfg.task_name or self._task_name()
        if cfg.strategies is None and (self.access is None or not self.access.has("strategies")):
            raise SeffiError("CoverageMonitor needs `strategies` or a seffi `env` that exposes them")
        found = cfg.strategies if cfg.strategies is not None else self.access.get("strategies")  # type: ignore[union-attr]
        self.strategies: tuple[str, ...] = tuple(str(s) for s in found)
        self.num_latents = self._num_latents()
        has = self.access.has if self.access is not None else (lambda _: False)
        self.env_baselines = baselines or EnvBaselines(
            self.strategies,
            self.budget,
            base_law=self._env_call("base_match_distribution") if has("base_match_distribution") else None,
            references=self._env_call("reference_match_sets") if has("reference_match_sets") else None,
            pool=(lambda: self.access.get("input_ids")) if has("input_ids") else None,  # type: ignore[union-attr]
            iid=self.user_iid,
            oracle=self.user_oracle,
            seed=self.seed,
        )
        self.out_dir: Path | None = Path(cfg.out_dir) if cfg.out_dir is not None else None
        self._owns_sinks = cfg.sinks is None
        if cfg.sinks is None:
            from seffi.report.run_folder import fresh_out_dir
            from seffi.report.sinks import default_sinks
            from seffi.report.wandb_run import wandb_mode

            self.out_dir = fresh_out_dir(cfg.out_dir)  # a folder holding a run gets a fresh sibling
            self.sinks = default_sinks(
                self.out_dir,
                wandb=wandb_mode(cfg.wandb),
                log_curves_every=1,
                plots=cfg.plots,
                **dict(cfg.wandb_kwargs),
            )
        else:
            self.sinks = cfg.sinks
        self.buffer = EpisodeBuffer(self.strategies, self.env_name)
        self.reset_tracker()
        self.n_logs, self.last_step, self.log_seconds = 0, None, 0.0
        self._episodes_at_log, self._step_at_log, self._warned_order = 0, None, False
        self._set_cache: dict[str, tuple[Any, Any]] = {}  # "iid"/"oracle" -> (curves, CurveSet)
        self.finalized = False
        self.last_scalars: dict[str, float] = {}
        self.last_comparison: Any = None
        #: Extra policy lines for the final report (the evaluator's earlier evaluations).
        self.extra_policies: list[Any] = []

    @classmethod
    def for_env(cls, env: Any, budget: int, **kwargs: Any) -> CoverageMonitor:
        """A monitor whose strategies and baselines come from the seffi ``env`` (any container)."""
        return cls(budget, env=env, **kwargs)

    def _env_call(self, name: str) -> Any:
        return lambda *args, **kwargs: self.access.call(name, *args, **kwargs)  # type: ignore[union-attr]

    def _task_name(self) -> str:
        if self.access is not None and self.access.has("task"):
            task = self.access.get("task")
            name = getattr(task, "name", None) or (task if isinstance(task, str) else None)
            if name:
                return str(name)
        return self.env_name or "unknown"

    def _num_latents(self) -> int:
        """Z of a router env (its Discrete action space), for the latent-coverage diagnostic; else 0."""
        if self.access is None or not self.access.has("config"):
            return 0
        if not hasattr(self.access.get("config"), "n_latents"):  # only router configs have latents
            return 0
        return int(getattr(self.access.single_action_space(), "n", 0) or 0)

    def _new_tracker(self) -> CoverageTracker:
        return CoverageTracker(
            self.strategies,
            task=self.task_name,
            budget=self.budget,
            barcode_rows=2**31,  # one row per input (at most K cells each)
            barcode_cols=self.budget,
            num_latents=self.num_latents,
            stream_offset=self.stream_offset,
        )

    def reset_tracker(self) -> None:
        """Drop all recorded samples (the periodic evaluator does this per evaluation); ``episodes`` stays."""
        self.buffer.clear()
        self._tracker = self._new_tracker()

    # -- recorded data ---------------------------------------------------------------------------------

    @property
    def tracker(self) -> CoverageTracker:
        """The :class:`~seffi.coverage.CoverageTracker` that owns every counted sample."""
        self._flush()
        return self._tracker

    @property
    def episodes(self) -> int:
        """Finished episodes ingested (lifetime; including those beyond a run's budget)."""
        return self.buffer.episodes

    @property
    def skipped_beyond_budget(self) -> int:
        """Episodes past their run's K samples (they never enter C(k <= K))."""
        self._flush()
        return self._tracker.skipped

    @property
    def samples(self) -> int:
        """Samples that entered the curves."""
        return self.tracker.samples

    @property
    def inputs(self) -> list[str]:
        """Ids of the inputs seen so far, in order of appearance."""
        return [x for _, x in self.tracker.keys]

    # -- ingestion -------------------------------------------------------------------------------------

    def ingest_infos(self, infos: Any, dones: Any = None, *, env_offset: int = 0) -> int:
        """Record every episode that ended in one step's ``infos``.

        Every finished episode is checked against the info contract (``strategy_matches`` and
        ``input_id`` present; ``valid`` a bool; ``input_id`` a str or int; ``sample_index``,
        ``run_index`` and ``z`` ints >= 0; strategy ids among the declared ones). A bad episode is
        refused on its own: the good ones of the call are recorded first, then
        :class:`~seffi.callbacks.rules.EpisodeRejected` names the key, env and sub-env.

        Args:
            infos: Gymnasium vector info dict (either autoreset mode), SB3 list of dicts, or one
                single-env info dict.
            dones: ``terminated | truncated`` of this step: bool array, shape (num_envs,), or a bool.
                Recommended: with it, an ended episode whose info lacks ``strategy_matches`` is
                rejected instead of going unseen.
            env_offset: Added to sub-env indices (e.g. a worker's first env index).

        Returns:
            The number of episodes recorded.
        """
        try:
            return self.buffer.add_infos(infos, dones, env_offset=env_offset)
        finally:
            self._maybe_flush()

    def ingest_episode(self, info: Mapping[str, Any], *, env_index: int = 0) -> None:
        """Record one finished episode from its final-step ``info`` (single-env loops, RLlib, TRL)."""
        try:
            self.buffer.add_info(info, env_index=env_index)
        finally:
            self._maybe_flush()

    def ingest_end(self, end: EpisodeEnd, *, env_offset: int = 0) -> None:
        """Record one parsed :class:`~seffi.callbacks.infos.EpisodeEnd`."""
        self.ingest_ends([end], env_offset=env_offset)

    def ingest_ends(self, ends: Sequence[EpisodeEnd], *, env_offset: int = 0) -> int:
        """Record parsed episode ends in order (bad ones rejected, as in :meth:`ingest_infos`)."""
        try:
            return self.buffer.add_ends(ends, env_offset=env_offset)
        finally:
            self._maybe_flush()

    def ingest_columns(self, cols: EpisodeColumns, *, env_offset: int = 0) -> int:
        """Record finished episodes given as columns (the lowest-level entry point)."""
        try:
            return self.buffer.add_columns(cols, env_offset=env_offset)
        finally:
            self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self.buffer.pending >= self.flush_every:
            self._flush()

    def _flush(self) -> None:
        """Fold the buffered episodes into the tracker (run assignment, sums, barcode, latents)."""
        got = self.buffer.drain()
        if got is not None:
            cols, hits = got
            self._tracker.record(
                cols.input_id, cols.env_index, cols.sample_index, cols.run_index, hits, cols.valid, cols.z
            )

    # -- logging ---------------------------------------------------------------------------------------

    def due(self, step: int) -> bool:
        """Whether :meth:`maybe_log` would log at ``step``."""
        if self.episodes == 0:
            return False
        if self.log_unit == "episodes":
            return self.episodes - self._episodes_at_log >= self.log_every
        return self._step_at_log is None or step - self._step_at_log >= self.log_every

    def maybe_log(self, step: int) -> bool:
        """Log if ``log_every`` episodes (or steps) passed since the last log. O(1) when not due."""
        return self.due(step) and self.log(step) is not None

    def log(self, step: int) -> dict[str, float] | None:
        """Send the scalars of the key scheme (and, on snapshot logs, the curves) to the sinks at ``step``.

        Steps must increase: a step not above the last logged one is refused with one warning (the
        tracker keeps every episode; the final report uses them all).

        Returns:
            The logged scalars, or ``None`` when nothing was logged (no data or an out-of-order step).
        """
        step = int(step)
        self._episodes_at_log, self._step_at_log = self.episodes, step
        if self.samples == 0:
            return None
        if self.last_step is not None and step <= self.last_step:
            if not self._warned_order:
                self._warned_order = True
                warnings.warn(
                    f"coverage log at step {step} skipped: steps must increase (last logged "
                    f"{self.last_step}); the data stays in the tracker and the final report",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return None
        started = time.perf_counter()
        if self.n_logs % self.log_curves_every == 0:
            comparison, scalars = self.snapshot()
            self.last_comparison = comparison
        else:
            comparison, scalars = None, self.point_scalars()
        scalars[keys.STEP_KEY] = float(step)
        self.sinks.log(scalars, step)
        if comparison is not None:
            self.sinks.log_snapshot(comparison, step, self.scope)
        self.last_step, self.last_scalars = step, scalars
        self.n_logs += 1
        self.log_seconds += time.perf_counter() - started
        if self.verbose:
            gain = scalars.get(keys.gain_key(self.scope))
            print(  # opt-in console progress
                f"[seffi] step {step}: {self.episodes} episodes, {len(self._tracker.keys)} inputs, "
                f"AUC {scalars.get(keys.auc_key(self.scope), float('nan')):.3f}, "
                f"gain vs iid {'n/a' if gain is None else f'{gain:.3f}'}"
            )
        return scalars

    @property
    def baseline_seconds(self) -> float:
        """Wall time spent computing baselines (each once)."""
        return self.env_baselines.seconds

    def point_scalars(self) -> dict[str, float]:
        """The scalars of a log from point estimates only, O(inputs x K) (the gain without interval)."""
        point = self.tracker.point()
        gain = None
        # As Curves.gain: no gain until some run reaches K (an AUC over fewer budgets is another K).
        if point["auc"] is not None and point["coverage"][-1] == point["coverage"][-1]:
            value = self.env_baselines.point_gain(point["auc"], self.inputs)
            gain = {"value": value} if value is not None else None
        return self._scalars(point, gain)

    def _scalars(self, curves: Any, gain: Any) -> dict[str, float]:
        t = self._tracker
        scalars = keys.scalars_from_curves(
            curves, gain=gain, episodes=self.episodes, inputs=len(t.keys), scope=self.scope
        )
        scalars[keys.valid_rate_key(self.scope)] = t.valid / max(t.samples, 1)
        return scalars

    # -- curves ----------------------------------------------------------------------------------------

    def curves(self, *, exact: bool = False) -> Any:
        """The policy's :class:`~seffi.coverage.Curves` (k = 1..K, bootstrap CIs over inputs).

        ``exact`` is kept for compatibility: the tracker has one estimator, so both are the same.
        """
        return self.tracker.curves(self.budget, n_boot=self.n_boot, seed=self.seed)

    def baselines(self, *, pool: bool = False) -> tuple[Any, Any]:
        """(iid, oracle) curves over the inputs seen (or the env's pool, see ``EnvBaselines.curves``)."""
        return self.env_baselines.curves(self.inputs, pool=pool)

    def snapshot(self, *, exact: bool = False) -> tuple[Any, dict[str, float]]:
        """(``Comparison`` for the report/sinks, scalar dict of the key scheme) of the data so far.

        Args:
            exact: Baselines over exactly the inputs seen (the final report) instead of the pool.
        """
        from seffi.report.schema import Barcode, Comparison, CurveSet, Gain, LatentCurve, PolicyResult

        curves = self.curves()
        iid, oracle = self.baselines(pool=not exact)
        valid_rate = self._tracker.valid / max(self._tracker.samples, 1)
        policy_set = CurveSet.from_curves(curves, self.label, "policy", valid_rate=valid_rate)
        if iid is not None and oracle is not None:
            gain = curves.gain(iid, oracle)
        else:
            gain = Gain(reason="no iid/oracle baseline (not a seffi env and none given)")
        latent = None
        cov = self._tracker.latent_coverage()
        if cov is not None:
            ok = [i for i in range(len(cov)) if cov[i] == cov[i]]  # k no run reached yet is NaN
            latent = LatentCurve(
                label=self.label,
                k=[i + 1 for i in ok],
                coverage=[float(cov[i]) for i in ok],
                num_codes=self.num_latents,
            )
        barcode = Barcode.from_tracker(self._tracker.barcode(self.budget))
        comparison = Comparison(
            task=self.task_name,
            env_id=self.env_name,
            budget=self.budget,
            n_inputs=len(self._tracker.keys),
            num_strategies=len(self.strategies),
            iid=self._baseline_set(iid, "iid"),
            oracle=self._baseline_set(oracle, "oracle"),
            policies=[PolicyResult(curves=policy_set, gain=gain, barcode=barcode, latent=latent)],
        )
        return comparison, self._scalars(policy_set, gain)

    def _baseline_set(self, curves: Any, kind: str) -> Any:
        """``CurveSet`` of cached baseline ``curves``, converted once (else half of a snapshot's cost)."""
        if curves is None:
            return None
        hit = self._set_cache.get(kind)
        if hit is None or hit[0] is not curves:  # identity: a recomputed baseline is a new object
            from seffi.report.schema import CurveSet

            hit = self._set_cache[kind] = (curves, CurveSet.from_curves(curves, kind, kind))
        return hit[1]

    # -- state: checkpoint, resume, exact merge --------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Everything recorded, JSON-safe: the tracker's state (runs, open runs, barcode) and counters."""
        return {
            "format": MONITOR_STATE_FORMAT,
            "episodes": self.episodes,
            "tracker": self.tracker.state_dict(),
        }

    def _tracker_state(self, state: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """(checked tracker state, episodes) of a monitor state of version 1 or 2; one SeffiError if bad."""
        try:
            if isinstance(state, Mapping) and state.get("format") == state_io.MONITOR_V1_FORMAT:
                tracker, episodes = state_io.from_monitor_v1(state)
            elif isinstance(state, Mapping) and state.get("format") == MONITOR_STATE_FORMAT:
                tracker, episodes = state["tracker"], state["episodes"]
            else:
                raise ValueError(f"not a CoverageMonitor state (expected format {MONITOR_STATE_FORMAT!r})")
            checked = state_io.check(tracker)
            mine = self._tracker
            if (checked["budget"], checked["strategies"], checked["task"]) != (
                mine.budget,
                list(self.strategies),
                mine.task,
            ):
                raise ValueError("the state's budget, strategies or task do not mix with this monitor's")
            if isinstance(episodes, bool) or not isinstance(episodes, int) or not 0 <= episodes < 2**53:
                raise ValueError("episodes must be a non-negative int")
        except (ValueError, KeyError, TypeError) as exc:
            raise SeffiError(f"corrupted CoverageMonitor state: {exc}") from exc
        return checked, episodes

    def load_state_dict(self, state: Mapping[str, Any]) -> CoverageMonitor:
        """Replace everything recorded with ``state`` (version 1 or 2); open runs continue.

        A foreign or corrupted state raises :class:`~seffi.errors.SeffiError` and leaves the monitor
        unchanged. The monitor's ``stream_offset`` becomes the state's.
        """
        tracker_state, episodes = self._tracker_state(state)
        try:
            tracker = CoverageTracker.from_state_dict(tracker_state)
        except Exception as exc:  # not expected after the check; this monitor is untouched either way
            raise SeffiError(f"corrupted CoverageMonitor state: {type(exc).__name__}: {exc}") from exc
        self._tracker = tracker
        self.stream_offset = self._tracker.stream_offset
        self.buffer.clear()
        self.buffer.episodes = episodes
        return self

    def merge(self, other: CoverageMonitor | Mapping[str, Any]) -> CoverageMonitor:
        """Add another monitor's (or monitor state's) data: exact and order-independent (as the tracker's).

        Runs present in both raise (give workers distinct ``stream_offset`` values, or move a state
        with :meth:`shift_streams`); only this monitor's own open runs continue.
        """
        state = other.state_dict() if isinstance(other, CoverageMonitor) else other
        tracker_state, episodes = self._tracker_state(state)
        try:
            self.tracker.merge(CoverageTracker.from_state_dict(tracker_state))
        except Exception as exc:  # the tracker merges atomically: nothing changed
            text = str(exc).replace("both trackers", "both monitors")
            hint = "give workers distinct stream_offset values or use load_states"
            raise SeffiError(f"{text}; {hint}") from exc
        self.buffer.episodes += episodes
        return self

    @staticmethod
    def shift_streams(state: Mapping[str, Any], offset: int) -> dict[str, Any]:
        """A copy of a monitor state with every stream moved up by ``offset`` (workers' own blocks)."""
        return {**state, "tracker": CoverageTracker.shift_streams(state["tracker"], offset)}

    @staticmethod
    def stream_span(state: Mapping[str, Any]) -> int:
        """1 + the highest stream number in a monitor state (0 when it holds no run)."""
        return CoverageTracker.stream_span(state["tracker"])

    def load_states(self, states: Sequence[Mapping[str, Any]]) -> CoverageMonitor:
        """Replace everything recorded with the exact union of ``states`` (one per worker).

        Each state is moved to its own block of streams (in the order given) first, so workers may
        all use the same ``stream_offset``. On a bad state the monitor is left unchanged.
        """
        parts = [self._tracker_state(s) for s in states]
        merged, offset = self._new_tracker(), 0
        try:
            for tracker_state, _ in parts:
                merged.merge(
                    CoverageTracker.from_state_dict(CoverageTracker.shift_streams(tracker_state, offset))
                )
                offset += CoverageTracker.stream_span(tracker_state)
        except Exception as exc:  # merged into a scratch tracker: this monitor is unchanged
            raise SeffiError(f"cannot merge CoverageMonitor states: {exc}") from exc
        self.buffer.clear()
        self._tracker, self.buffer.episodes = merged, sum(e for _, e in parts)
        return self

    # -- the end ---------------------------------------------------------------------------------------

    def report(self) -> Any:
        """The :class:`seffi.report.schema.Report` of everything recorded so far."""
        from seffi.report.schema import Report

        comparisons = []
        if self.samples:
            comparison = self.snapshot(exact=True)[0]
            if self.extra_policies:
                comparison = comparison.model_copy(
                    update={"policies": [*comparison.policies, *self.extra_policies]}
                )
            comparisons.append(comparison)
        return Report(
            title=f"seffi coverage: {self.task_name} (K={self.budget})",
            seed=self.seed,
            config={"budget": self.budget, "log_every": self.log_every, "log_unit": self.log_unit},
            meta={"episodes": self.episodes, "skipped_beyond_budget": self.skipped_beyond_budget},
            comparisons=comparisons,
        )

    def finalize(self, step: int | None = None) -> Any:
        """Log a last time (if ``step`` is new), write the report, close the sinks. Idempotent.

        A monitor that made its own sinks then prints where the report went and the ``wandb sync``
        command (:func:`seffi.report.sinks.closing_lines`).

        Returns:
            The final report (``None`` if called before).
        """
        if self.finalized:
            return None
        if step is not None and self.samples and (self.last_step is None or step > self.last_step):
            self.log(step)
        report = self.report()
        self.sinks.finish(report, self.tracker.state_dict())  # run.summary, report files, state artifact
        self.finalized = True
        if self._owns_sinks:  # sinks passed in belong to an adapter (or seffi run), which says this itself
            from seffi.report.sinks import closing_lines

            for line in closing_lines(self.out_dir, getattr(self.sinks, "wandb", None), prefix="[seffi] "):
                print(line, flush=True)
        return report

    close = finalize

    def __enter__(self) -> CoverageMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finalize()

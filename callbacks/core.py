"""``CoverageMonitor``: episodes in, tracker updated, curves vs baselines out to the sinks."""

from __future__ import annotations

import copy
import dataclasses
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.env_access import EnvAccess
from seffi.callbacks.infos import (
    EpisodeColumns,
    EpisodeEnd,
    _as_bool_array,
    _BadMatches,
    _from_ends,
    _from_list,
    _list_rows,
    _matches_problem,
    _objects,
    _parse,
    _rows_to_columns,
)
from seffi.callbacks.rules import _BOOLS, _ENV, _MATCHES, _NO_REJECTS, _Rejects, _screen, _show
from seffi.callbacks.streaming import N_STATS, RunAssigner, RunSums
from seffi.errors import SeffiError
from seffi.report import keys

#: Format tag of ``CoverageMonitor.state_dict``; ``load_state_dict``/``merge`` refuse anything else.
MONITOR_STATE_FORMAT = "seffi.callbacks.monitor/1"

class _StateProblem(Exception):
    """One field of a monitor state that is wrong (its message names the field)."""


#: Largest count a monitor state may hold: beyond 2**53 float conversions lose integers and sums overflow.
_STATE_MAX = 2**53

# ----------------------------------------------------------------------------------------------------
# The monitor: episodes in, tracker updated, curves vs baselines out to the sinks.
# ----------------------------------------------------------------------------------------------------



def default_out_dir(prefix: str = "seffi") -> Path:
    """A fresh run folder: ``runs/<prefix>-<UTC timestamp>``, or ``runs/<UTC timestamp>`` without a prefix.

    Made unique if it exists; the timestamp lives in the folder name only, never in report.json.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path("runs") / (f"{prefix}-{stamp}" if prefix else stamp)
    out, n = base, 1
    while out.exists():
        n += 1
        out = Path(f"{base}-{n}")
    return out


def fresh_out_dir(out_dir: str | Path | None, prefix: str = "seffi", *, nested: Sequence[str] = ()) -> Path:
    """The folder a callback writes its run into: never one that already holds a seffi run.

    Training must not stop over a reused folder, and two runs must never mix in one (report.json
    overwritten, metrics.jsonl appended to with its step going backwards, old plots beside new ones).
    So an explicit ``out_dir`` that holds a seffi run is replaced by the first free ``out_dir-2``,
    ``out_dir-3``, ... with one :class:`UserWarning` naming it (see
    :func:`seffi.report.run_folder.fresh_run_folder`).

    Args:
        out_dir: The user's folder; ``None`` gives :func:`default_out_dir` (always fresh).
        prefix: Prefix of the default folder name.
        nested: Sub-folders that also hold a run of this layout (the SB3 callback's ``stream``/``eval``
            in ``mode="both"``): a folder counts as taken when it or one of them holds a seffi run.

    Returns:
        The folder to write into (not created here; the sinks create it).
    """
    from seffi.report.run_folder import fresh_run_folder, holds_seffi_run

    if out_dir is None:
        return default_out_dir(prefix)
    path = Path(out_dir)
    if not nested:
        return fresh_run_folder(path)

    def taken(p: Path) -> bool:
        return holds_seffi_run(p) or any(holds_seffi_run(p / sub) for sub in nested)

    if not taken(path):
        return path
    n = 2
    while True:
        candidate = path.with_name(f"{path.name}-{n}")
        if not candidate.exists() or (candidate.is_dir() and not taken(candidate)):
            break
        n += 1
    warnings.warn(
        f"{path} already holds a seffi run; writing this run to {candidate} instead",
        UserWarning,
        stacklevel=3,
    )
    return candidate


def _wandb_mode(mode: str | None) -> str:
    """Explicit mode, else ``WANDB_MODE`` when it names one, else offline (never online by surprise)."""
    if mode is not None:
        return mode
    env = os.environ.get("WANDB_MODE", "").strip().lower()
    if env in ("online", "offline", "disabled"):
        return env
    if env == "dryrun":
        return "offline"
    return "offline"


class CoverageMonitor:
    """Framework-agnostic coverage monitoring: feed episode ends, get curves logged to the sinks.

    A *run* is one input's sequence of samples in one env row (one stream of the tracker); its first
    ``budget`` samples count, so the curves are per-input-budget curves C(k), k = 1..K, averaged over
    runs. Baselines (exact iid and oracle) come from the env (:meth:`for_env`) or from the caller;
    without them the policy curves are still logged, only the gain is missing (with its reason).

    Cost: ingestion is O(num_envs) numpy per step (plus one dict lookup per key per finished episode
    for SB3 lists); finished episodes are buffered and folded in batches into the tracker
    (``CoverageTracker.update_many``) and into per-input sums (:class:`~seffi.callbacks.streaming.
    RunSums`). A log computes point estimates from those sums in O(inputs x K), whatever the number
    of runs; bootstrap intervals (gain ``_lo``/``_hi``, CI bands) are computed only for curve
    snapshots (every ``log_curves_every``-th log) and the final report.

    Args:
        budget: Per-input sample budget K.
        strategies: Declared strategy ids (the coverage denominator M). ``None``: taken from ``env``.
        env: A seffi env (single, Gymnasium vector or SB3 VecEnv) to read strategies, the exact iid
            baseline and the oracle from. Optional when ``strategies`` is given.
        iid: A user iid baseline (e.g. ``IidBaseline.from_samples(...)``) — replaces the env's.
        oracle: A user oracle baseline — replaces the env's.
        sinks: Where to log (a :class:`seffi.report.sinks.Sink`). ``None``: the default pair, a local
            folder ``out_dir`` (always) and W&B (``wandb`` mode; an active ``wandb.run`` is reused).
        out_dir: Local report folder for the default sinks (default ``runs/seffi-<timestamp>``). If it
            already holds a seffi run, the run goes to ``out_dir-2`` (``-3``, ...) with one warning.
        wandb: "offline", "online" or "disabled"; ``None`` uses ``WANDB_MODE`` if set, else offline.
        wandb_kwargs: Extra ``wandb.init`` arguments (project, name, group, config, dir, run).
        log_every: Log after this many new episodes (``log_unit="episodes"``) or steps (``"steps"``).
        log_unit: What ``log_every`` counts.
        log_curves_every: Every this many logs (starting with the first) a log is a *curve snapshot*:
            curves with bootstrap intervals go to ``sinks.log_snapshot`` (W&B table + image, a line
            of snapshots.jsonl) and the gain gets its ``_lo``/``_hi`` bounds.
        scope: Key scope, e.g. ``"eval"`` gives ``seffi/eval/auc`` (``None``: ``seffi/auc``).
        label: Legend name of the policy in plots and report.
        n_boot: Bootstrap replicates for snapshot and final intervals (0: no intervals).
        seed: Seed of the bootstrap.
        stream_offset: Added to every stream id, so trackers of several workers merge without clashes.
        plots: Render PNG plots into the local folder at :meth:`finalize`.
        env_name: Env id used in error messages and the report (default: read from ``env``).
        task_name: Task name for the report (default: read from ``env``).
        verbose: 1 prints a one-line summary at every log.

    Example:
        >>> monitor = CoverageMonitor.for_env(envs, budget=16)      # doctest: +SKIP
        >>> obs, _ = envs.reset(seed=0)                             # doctest: +SKIP
        >>> for step in range(10_000):                              # doctest: +SKIP
        ...     obs, r, term, trunc, infos = envs.step(policy(obs))
        ...     monitor.ingest_infos(infos, term | trunc)
        ...     monitor.maybe_log(step)
        >>> monitor.close()                                         # doctest: +SKIP
    """

    #: Buffered episodes are folded into the tracker and sums at the latest after this many.
    flush_every = 4096

    def __init__(
        self,
        budget: int | None = None,
        strategies: Sequence[str] | None = None,
        *,
        env: Any = None,
        config: MonitorConfig | None = None,
        **options: Any,
    ) -> None:
        if budget is not None:
            options["budget"] = budget
        if strategies is not None:
            options["strategies"] = strategies
        cfg = self.config = MonitorConfig.build(config, **options)
        if cfg.budget is None:
            raise SeffiError("CoverageMonitor needs a budget K (a positive int)")
        budget, strategies = cfg.budget, cfg.strategies
        iid, oracle, sinks, out_dir, wandb = cfg.iid, cfg.oracle, cfg.sinks, cfg.out_dir, cfg.wandb
        wandb_kwargs, log_every, log_unit = cfg.wandb_kwargs, cfg.log_every, cfg.log_unit
        log_curves_every, scope, label, n_boot = cfg.log_curves_every, cfg.scope, cfg.label, cfg.n_boot
        seed, stream_offset, plots, verbose = cfg.seed, cfg.stream_offset, cfg.plots, cfg.verbose
        env_name, task_name = cfg.env_name, cfg.task_name
        self.budget = int(budget)
        self.access = EnvAccess(env) if env is not None else None
        self.env_name = env_name or (self.access.env_id() if self.access else None)
        self.task_name = task_name or self._task_name()
        if strategies is None:
            if self.access is None or not self.access.has("strategies"):
                raise SeffiError("CoverageMonitor needs `strategies` or a seffi `env` that exposes them")
            strategies = self.access.get("strategies")
        self.strategies: tuple[str, ...] = tuple(str(s) for s in strategies)
        self.user_iid, self.user_oracle = iid, oracle
        self.log_every, self.log_unit = int(log_every), log_unit
        self.log_curves_every = int(log_curves_every)
        self.scope, self.label = scope, label
        self.n_boot, self.seed, self.stream_offset = int(n_boot), int(seed), int(stream_offset)
        self.verbose = verbose
        self.log_seconds = 0.0
        #: Wall time spent computing exact baselines (cached: once per input, once per snapshot set).
        self.baseline_seconds = 0.0
        self.num_latents = self._num_latents()
        self._owns_sinks = sinks is None
        if sinks is None:
            from seffi.report.sinks import default_sinks

            kwargs = dict(wandb_kwargs or {})
            # an explicit folder that holds an earlier run gets a fresh sibling (one warning)
            self.out_dir = fresh_out_dir(out_dir)
            sinks = default_sinks(
                self.out_dir,
                wandb=_wandb_mode(wandb),  # type: ignore[arg-type]
                log_curves_every=1,  # the monitor decides which logs are snapshots
                plots=plots,
                **kwargs,
            )
        else:
            self.out_dir = Path(out_dir) if out_dir is not None else None
        self.sinks = sinks
        #: Input ids (str) that passed the info contract: a column of known ids is checked at once.
        self._known_ids: set[Any] = set()
        self.episodes = 0
        self.skipped_beyond_budget = 0
        self.reset_tracker()
        self.n_logs = 0
        self.last_step: int | None = None
        self._episodes_at_log = 0
        self._step_at_log: int | None = None
        self._warned_order = False
        self._baseline_cache: dict[frozenset[str], tuple[Any, Any]] = {}
        self._auc_cache: dict[str, tuple[float | None, float | None]] = {}
        self._set_cache: dict[str, tuple[Any, Any]] = {}  # "iid"/"oracle" -> (curves, CurveSet)
        self._pool: frozenset[str] | None = None
        self.finalized = False
        self.last_scalars: dict[str, float] = {}
        self.last_comparison: Any = None
        #: Extra policy lines for the final report (the evaluator's earlier evaluations).
        self.extra_policies: list[Any] = []

    # -- construction helpers ---------------------------------------------------------------------

    @classmethod
    def for_env(cls, env: Any, budget: int, **kwargs: Any) -> CoverageMonitor:
        """A monitor whose strategies and baselines come from the seffi ``env``.

        Args:
            env: A seffi env: single, Gymnasium vector (native or Sync/Async) or an SB3 VecEnv.
            budget: Per-input sample budget K.
            **kwargs: Any other :class:`CoverageMonitor` argument.
        """
        return cls(budget, env=env, **kwargs)

    def _task_name(self) -> str:
        if self.access is not None:
            try:
                task = self.access.get("task")
                name = getattr(task, "name", None) or (task if isinstance(task, str) else None)
                if name:
                    return str(name)
            except AttributeError:
                pass
        return self.env_name or "unknown"

    def _num_latents(self) -> int | None:
        """Z of a router env (its Discrete action space), for the latent-coverage diagnostic."""
        if self.access is None or not self.access.has("config"):
            return None
        if not hasattr(self.access.get("config"), "n_latents"):  # only router configs have latents
            return None
        space = self.access.single_action_space()
        n = getattr(space, "n", None)
        return int(n) if n is not None else None

    def reset_tracker(self) -> None:
        """Drop all recorded samples (tracker, sums, runs); the periodic evaluator does this per evaluation.

        The lifetime counters ``episodes`` and ``skipped_beyond_budget`` are kept.
        """
        self.__dict__.update(self._blank())

    def _blank(self) -> dict[str, Any]:
        """Fresh recorded-data attributes (see :meth:`state_dict` for what they hold)."""
        M, Z = len(self.strategies), self.num_latents or 0
        return {
            "_tracker": None,  # built from the run arrays on demand (see ``tracker``)
            "_sums": RunSums(M, self.budget, M),
            # latents feed one diagnostic curve (coverage): the cheaper coverage-only sums suffice
            "_latent_sums": RunSums(Z, self.budget, Z, coverage_only=True) if Z else None,
            "_has_latent": False,
            "_runs": RunAssigner(self.budget, self.stream_offset),
            "_input_ids": [],
            "_input_code": {},
            "_order_cache": (None, None),
            "_barcode": {},
            "_barcode_stream": {},  # input -> the stream its barcode row comes from
            "_valid": 0,
            "_counted": 0,
            "_pending": [],
            "_rows": [],  # checked SB3 rows waiting to become columns (see ``_ingest_list``)
            "_row_codes": [],  # their match-table rows
            "_n_pending": 0,
            # strategy_matches value -> row of the match table (a bool row per distinct match set)
            "_match_code": {},
            "_match_sets": [],
            "_match_table": np.zeros((0, M), dtype=bool),
        }

    # -- recorded data -----------------------------------------------------------------------------

    @property
    def tracker(self) -> Any:
        """The :class:`seffi.coverage.CoverageTracker` of every counted sample.

        The monitor records runs as numpy arrays (the tracker's per-run fields); the tracker is built
        from them through its public state format when asked for (O(runs x strategies)), and cached
        until new episodes arrive.
        """
        self._flush()
        if self._tracker is None:
            from seffi.coverage import CoverageTracker

            state = CoverageTracker(strategies=self.strategies, task=self.task_name).state_dict()
            slots = np.arange(self._runs.n_slots)
            ids, streams = self._runs.slot_input.tolist(), self._runs.slot_stream.tolist()
            state["runs"] = [
                {"task": self.task_name, "input_id": self._input_ids[ids[i]], "stream": streams[i], **rec}
                for i, rec in enumerate(self._sums.run_records(slots, self.strategies))
            ]
            self._tracker = CoverageTracker.from_state_dict(state)
        return self._tracker

    @property
    def samples(self) -> int:
        """Samples that entered the curves (episodes minus those beyond a run's budget K)."""
        self._flush()
        return self._counted

    @property
    def inputs(self) -> list[str]:
        """Ids of the inputs seen so far, in order of appearance."""
        self._flush()
        return list(self._input_ids)

    # -- ingestion -----------------------------------------------------------------------------------

    def ingest_infos(self, infos: Any, dones: Any = None, *, env_offset: int = 0) -> int:
        """Record every episode that ended in one step's ``infos``.

        Every finished episode is checked against the info contract as it arrives (``strategy_matches``
        and ``input_id`` present; ``valid`` a bool; ``input_id`` a str or int; ``sample_index``,
        ``run_index`` and ``z`` ints >= 0; strategy ids among the declared ones). A bad episode
        is refused on its own: the good episodes of the same call are recorded first, then
        :class:`EpisodeRejected` names the key, env and sub-env. Nothing recorded earlier is ever lost,
        so a caller may catch it and carry on.

        Args:
            infos: Gymnasium vector info dict (either autoreset mode), SB3 list of dicts, or one
                single-env info dict.
            dones: ``terminated | truncated`` of this step: bool array, shape (num_envs,), or a bool.
                Recommended: with it, an ended episode whose info lacks ``strategy_matches`` (or is
                ``None``) is rejected instead of going unseen.
            env_offset: Added to sub-env indices (e.g. a worker's first env index).

        Returns:
            The number of episodes recorded.

        Raises:
            EpisodeRejected: Some finished episodes broke the contract (after the others were recorded).
            SeffiError: ``dones`` is not boolean or does not fit the infos (nothing recorded).
        """
        if isinstance(infos, (list, tuple)) and dones is not None:
            return self._ingest_list(infos, dones, env_offset)
        cols, rejects = _parse(infos, dones, self.env_name, self._known_ids)
        return self._ingest_checked(cols, rejects, env_offset)

    def _ingest_list(self, infos: Sequence[Mapping[str, Any]], dones: Any, env_offset: int) -> int:
        """SB3's list of info dicts: checked rows per finished episode, columns built at the flush.

        A training step ends a few episodes; building numpy columns for each step would cost more
        than the dict lookups themselves, so checked rows are buffered and converted once per flush.
        """
        if type(dones) is np.ndarray and dones.dtype == bool and dones.shape == (len(infos),):
            done = dones.nonzero()[0].tolist()  # SB3's dones: skip the checks and copies below
        else:
            done = np.flatnonzero(_as_bool_array(dones, len(infos))).tolist()
        if not done:
            return 0
        rows, rejects = _list_rows(infos, done, env_offset, self._known_ids)
        # map/itemgetter rather than comprehensions: this runs at every SB3 step that ends an episode
        try:
            codes = list(map(self._match_code.__getitem__, map(_MATCHES, rows)))
        except (KeyError, TypeError):  # a new or unhashable match set, or a placeholder row
            if rejects is _NO_REJECTS:
                rejects = _Rejects(list(map(_ENV, rows)))
            codes = self._match_codes_slow(list(map(_MATCHES, rows)), rejects).tolist()
        bad = rejects.mask
        if bad is not None:
            rows = [r for r, b in zip(rows, bad.tolist(), strict=True) if not b]
            codes = [c for c, b in zip(codes, bad.tolist(), strict=True) if not b]
        self._rows.extend(rows)
        self._row_codes.extend(codes)
        n = len(rows)
        self._n_pending += n
        self.episodes += n
        if self._n_pending >= self.flush_every:
            self._flush()
        if bad is not None:
            raise rejects.error(self.env_name, recorded=n)
        return n

    def _rows_to_pending(self) -> None:
        rows, self._rows = self._rows, []
        codes, self._row_codes = self._row_codes, []
        self._pending.append((_rows_to_columns(rows), np.array(codes, dtype=np.int64)))

    def ingest_episode(self, info: Mapping[str, Any], *, env_index: int = 0) -> None:
        """Record one finished episode from its final-step ``info`` (single-env loops, RLlib, TRL).

        Raises:
            EpisodeRejected: The info breaks the contract (see :meth:`ingest_infos`); nothing recorded.
        """
        cols, rejects = _from_list([info], np.zeros(1, dtype=np.int64), self._known_ids, int(env_index))
        self._ingest_checked(cols, rejects)

    def ingest_end(self, end: EpisodeEnd, *, env_offset: int = 0) -> None:
        """Record one parsed :class:`EpisodeEnd`."""
        self.ingest_ends([end], env_offset=env_offset)

    def ingest_ends(self, ends: Sequence[EpisodeEnd], *, env_offset: int = 0) -> int:
        """Record parsed :class:`EpisodeEnd` objects in order (bad ones rejected, as in ingest_infos)."""
        cols, rejects = _from_ends(ends)
        return self._ingest_checked(cols, rejects, env_offset)

    def ingest_columns(self, cols: EpisodeColumns, *, env_offset: int = 0) -> int:
        """Record finished episodes given as columns (the lowest-level entry point).

        Values and match sets are checked here (bad episodes are rejected as in :meth:`ingest_infos`);
        the episodes are then buffered and folded into the tracker in batches.
        """
        rejects = _Rejects(cols.env_index)
        have = {key: getattr(cols, key) != -1 for key in ("sample_index", "run_index", "z")}
        raw = {key: getattr(cols, key) for key in ("input_id", "valid", *have)}
        _screen(raw, have, rejects, self._known_ids)
        return self._ingest_checked(cols.take(rejects.good) if rejects else cols, rejects, env_offset)

    def _ingest_checked(self, cols: EpisodeColumns, rejects: _Rejects, env_offset: int = 0) -> int:
        """Record columns whose values were checked, then raise for the episodes ``rejects`` refused.

        Args:
            cols: The good episodes of the call.
            rejects: The call's bad episodes (their env indices without ``env_offset``).
            env_offset: Added to sub-env indices.
        """
        n = len(cols)
        bad_matches = None
        if n:
            if env_offset:
                cols = dataclasses.replace(cols, env_index=cols.env_index + int(env_offset))
            try:
                table = self._match_code
                codes = np.fromiter((table[m] for m in cols.matches), dtype=np.int64, count=n)
            except (KeyError, TypeError):  # a new match set, or an unhashable value (a list): slow path
                bad_matches = _Rejects(cols.env_index)
                codes = self._match_codes_slow(cols.matches, bad_matches)
                if bad_matches.mask is not None:
                    keep = ~bad_matches.mask
                    cols, codes, n = cols.take(keep), codes[keep], int(keep.sum())
                else:
                    bad_matches = None
            if n:
                self._pending.append((cols, codes))
                self._n_pending += n
                self.episodes += n
                if self._n_pending >= self.flush_every:
                    self._flush()
        if rejects.mask is not None or bad_matches is not None:
            total = sum(int(r.mask.sum()) for r in (rejects, bad_matches) if r)
            if rejects.mask is not None:
                raise rejects.error(self.env_name, env_offset=env_offset, recorded=n, rejected=total)
            assert bad_matches is not None
            raise bad_matches.error(self.env_name, recorded=n, rejected=total)
        return n

    def _match_codes_slow(self, raw: Sequence[Any], rejects: _Rejects) -> np.ndarray:
        """:meth:`_match_codes` one by one: bad match sets are marked in ``rejects`` (code 0)."""
        out = np.zeros(len(raw), dtype=np.int64)
        skip = rejects.mask
        bad: np.ndarray | None = None
        reasons: dict[int, str] = {}
        for i, m in enumerate(raw):
            if skip is not None and skip[i]:
                continue  # already rejected (a placeholder row)
            try:
                out[i] = self._new_match_code(m)
            except _BadMatches as exc:
                if bad is None:
                    bad = np.zeros(len(raw), dtype=bool)
                bad[i] = True
                reasons[i] = str(exc)
        if bad is not None:
            rejects.add(bad, "strategy_matches", reasons.__getitem__)
        return out

    def _new_match_code(self, raw: Any) -> int:
        try:
            return self._match_code[raw]
        except (KeyError, TypeError):
            pass
        problem = _matches_problem(raw)
        if problem is not None:
            raise _BadMatches(problem)
        ms = tuple(sorted(str(s) for s in raw))
        code = self._match_code.get(ms)
        if code is None:
            index = {s: j for j, s in enumerate(self.strategies)}
            unknown = sorted(set(ms) - set(index))
            if unknown:
                raise _BadMatches(
                    f"'strategy_matches' holds strategy ids {unknown} that are not among the declared "
                    f"strategies {list(self.strategies)}"
                )
            row = np.zeros((1, len(self.strategies)), dtype=bool)
            row[0, [index[s] for s in ms]] = True
            code = self._match_code[ms] = len(self._match_sets)
            self._match_sets.append(ms)
            self._match_table = np.concatenate([self._match_table, row])
        try:
            self._match_code[raw] = code
        except TypeError:
            pass
        return code

    def _input_codes(self, ids: np.ndarray) -> np.ndarray:
        table = self._input_code
        try:
            return np.fromiter((table[x] for x in ids), dtype=np.int64, count=ids.shape[0])
        except KeyError:
            out = np.empty(ids.shape[0], dtype=np.int64)
            for i, x in enumerate(ids):
                code = table.get(x)
                if code is None:
                    code = table.get(str(x))
                    if code is None:
                        code = len(self._input_ids)
                        self._input_ids.append(str(x))
                        table[str(x)] = code
                    table[x] = code
                out[i] = code
            return out

    def _flush(self) -> None:
        """Fold the buffered episodes into the run assignment, the sums and the tracker (in numpy)."""
        if self._rows:
            self._rows_to_pending()
        if not self._pending:
            return
        pending, self._pending, self._n_pending = self._pending, [], 0
        cols = EpisodeColumns.concat([c for c, _ in pending])
        codes = np.concatenate([m for _, m in pending]) if len(pending) > 1 else pending[0][1]
        u = self._input_codes(cols.input_id)
        slot, k = self._runs.assign(u, cols.env_index, cols.sample_index, cols.run_index)
        keep = k <= self.budget
        if not keep.all():
            # Samples beyond K of a run do not enter C(k) for k <= K; counting them would need O(samples).
            self.skipped_beyond_budget += int((~keep).sum())
            cols, codes, u, slot, k = cols.take(keep), codes[keep], u[keep], slot[keep], k[keep]
        n = len(cols)
        if n == 0:
            return
        hits = self._match_table[codes]
        self._sums.add(u, slot, k, hits, cols.valid)
        if self._latent_sums is not None:
            Z = self._latent_sums.C
            z = cols.z
            ok = (z >= 0) & (z < Z)
            self._has_latent |= bool(ok.any())
            lat = np.zeros((n, Z), dtype=bool)
            lat[np.flatnonzero(ok), z[ok]] = True
            self._latent_sums.add(u, slot, k, lat, np.ones(n, dtype=bool))
        self._tracker = None  # rebuilt from the run arrays when asked for
        streams = self._runs.slot_stream[slot]
        for i in np.flatnonzero(streams == self.stream_offset).tolist():
            # The first run of each input draws its barcode row (at most K cells per input).
            x = self._input_ids[u[i]]
            if self._barcode_stream.setdefault(x, self.stream_offset) == self.stream_offset:
                row = self._barcode.setdefault(x, [])
                row.append(self._barcode_cell(self._match_sets[codes[i]], row))
        self._counted += n
        self._valid += int(cols.valid.sum())

    def _barcode_cell(self, matches: tuple[str, ...], row: list[int]) -> int:
        if not matches:
            return -1
        seen = {self.strategies[c] for c in row if c >= 0}
        new = [s for s in matches if s not in seen]
        return self.strategies.index(new[0] if new else matches[0])

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
        if not self.due(step):
            return False
        return self.log(step) is not None

    def log(self, step: int) -> dict[str, float] | None:
        """Send the scalars of the key scheme (and, on snapshot logs, the curves) to the sinks at ``step``.

        Steps must increase: a step not above the last logged one is refused with one warning (nothing
        is lost: the tracker still holds every episode and the final report uses them all).

        Returns:
            The logged scalars, or ``None`` when nothing was logged (no data or an out-of-order step).
        """
        step = int(step)
        self._episodes_at_log, self._step_at_log = self.episodes, step
        self._flush()
        if self._counted == 0:
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
        self.last_step = step
        self.n_logs += 1
        self.log_seconds += time.perf_counter() - started
        self.last_scalars = scalars
        if self.verbose:
            gain = scalars.get(keys.gain_key(self.scope))
            print(  # opt-in console progress
                f"[seffi] step {step}: {self.episodes} episodes, {len(self._input_ids)} inputs, "
                f"AUC {scalars.get(keys.auc_key(self.scope), float('nan')):.3f}, "
                f"gain vs iid {'n/a' if gain is None else f'{gain:.3f}'}"
            )
        return scalars

    def point_scalars(self) -> dict[str, float]:
        """The scalars of a log from point estimates only, O(inputs x K).

        No bootstrap and no baseline recomputed (per-input baseline AUCs are cached), so the gain
        comes without ``_lo``/``_hi``.
        """
        self._flush()
        point = self._sums.point(self._input_order())
        gain = None
        iid_auc, oracle_auc = self._baseline_aucs()
        # As Curves.gain: no gain at K until some run reaches K (an AUC over fewer budgets is another K).
        reaches_k = bool(np.isfinite(np.asarray(point["coverage"], dtype=np.float64)[-1]))
        if iid_auc is not None and oracle_auc is not None and point["auc"] is not None and reaches_k:
            den = oracle_auc - iid_auc
            if den > 1e-12:  # as Curves.gain: no room for improvement -> undefined
                gain = {"value": (point["auc"] - iid_auc) / den}
        scalars = keys.scalars_from_curves(
            point, gain=gain, episodes=self.episodes, inputs=len(self._input_ids), scope=self.scope
        )
        scalars[keys.valid_rate_key(self.scope)] = self._valid / max(self._counted, 1)
        return scalars

    def _baseline_aucs(self) -> tuple[float | None, float | None]:
        """(iid AUC, oracle AUC) averaged over the inputs seen, from a per-input cache.

        Both baselines average their per-input curves with equal weights, so their AUC over a set of
        inputs is the mean of per-input AUCs: a new input costs one small computation, never a
        recomputation over all inputs.
        """
        if self.user_iid is not None or self.user_oracle is not None:
            if "__user__" not in self._auc_cache:
                iid, oracle = self.baselines()
                self._auc_cache["__user__"] = (
                    iid.auc if iid is not None else None,
                    oracle.auc if oracle is not None else None,
                )
            return self._auc_cache["__user__"]
        if self.access is None:
            return None, None
        for x in self._input_ids:
            if x not in self._auc_cache:
                started = time.perf_counter()
                oracle = self._oracle_curves(frozenset([x]))
                self._auc_cache[x] = (self._iid_auc(x), oracle.auc if oracle is not None else None)
                self.baseline_seconds += time.perf_counter() - started
        pairs = [self._auc_cache[x] for x in self._input_ids]
        if not pairs or any(a is None or b is None for a, b in pairs):
            return None, None
        return float(np.mean([a for a, _ in pairs])), float(np.mean([b for _, b in pairs]))

    def _iid_auc(self, x: str) -> float | None:
        """AUC of the exact iid coverage of input ``x``: (1/K) sum_k (1/M) sum_s 1 - (1 - pi_s)^k.

        pi_s = Pr[s in the base sample's match set]; coverage is linear in strategies, so this is
        exact for set-valued matches too (the same formula ``IidBaseline`` uses for C(k), without its
        Monte Carlo time-to-coverage, which a log does not need).
        """
        if not self.access.has("base_match_distribution"):  # type: ignore[union-attr]
            return None
        from seffi.coverage.estimators import expected_covered_exact

        law = self.access.call("base_match_distribution", x)  # type: ignore[union-attr]
        index = {s: j for j, s in enumerate(self.strategies)}
        pi = np.zeros(len(self.strategies))
        for ms, p in law.items():
            for s in ms:
                pi[index[s]] += p
        return float(expected_covered_exact(np.minimum(pi, 1.0), self.budget).mean() / len(self.strategies))

    # -- curves ----------------------------------------------------------------------------------------

    def curves(self, *, exact: bool = False) -> Any:
        """The policy's :class:`seffi.coverage.Curves` over runs so far (k = 1..K, bootstrap CIs).

        Args:
            exact: Compute them with ``CoverageTracker.curves`` (cost grows with the number of runs;
                used for the final report) instead of from the streaming sums (O(inputs x K)). Both
                give the same numbers up to float rounding.
        """
        self._flush()
        if exact:
            return self.tracker.curves(self.budget, n_boot=self.n_boot, seed=self.seed)
        order = self._input_order()
        keys = [(self.task_name, self._input_ids[i]) for i in order.tolist()]
        return self._sums.curves(order, n_boot=self.n_boot, seed=self.seed, input_keys=keys)

    def _input_order(self) -> np.ndarray:
        """Input codes in sorted-id order (the tracker's order), cached until a new input appears."""
        if self._order_cache[0] != len(self._input_ids):
            order = np.argsort(np.array(self._input_ids, dtype=object), kind="stable").astype(np.int64)
            self._order_cache = (len(self._input_ids), order)
        return self._order_cache[1]

    def baselines(self, *, pool: bool = False) -> tuple[Any, Any]:
        """(iid, oracle) curves for the inputs seen so far (``None`` where unavailable); cached.

        Args:
            pool: Over the env's whole input pool instead, when the env exposes ``input_ids`` and
                every input seen is in it. Curve snapshots during training use this: it is computed
                once, whereas the seen set grows early in training and each new set would mean
                computing the exact baselines again; ``Curves.gain`` restricts per-input baselines
                to the policy's inputs, so the gain is the same. The final report uses the seen set.
        """
        self._flush()
        seen = frozenset(self._input_ids)
        if pool and self.access is not None and self.user_iid is None and self.user_oracle is None:
            if self._pool is None:
                self._pool = (
                    frozenset(map(str, self.access.get("input_ids")))
                    if self.access.has("input_ids")
                    else frozenset()
                )
            if seen <= self._pool:
                seen = self._pool
        if seen not in self._baseline_cache:
            if len(self._baseline_cache) >= 2:  # the pool's and the seen set's
                self._baseline_cache.clear()
            started = time.perf_counter()
            self._baseline_cache[seen] = (self._iid_curves(seen), self._oracle_curves(seen))
            self.baseline_seconds += time.perf_counter() - started
        return self._baseline_cache[seen]

    def _iid_curves(self, inputs: frozenset[str]) -> Any:
        if self.user_iid is not None:
            return self.user_iid.curves(self.budget)
        if self.access is None or not self.access.has("base_match_distribution") or not inputs:
            return None
        from seffi.coverage import IidBaseline

        order = sorted(inputs)
        raw = {x: self.access.call("base_match_distribution", x) for x in order}
        valid = {x: self.access.call("base_match_distribution", x, valid_only=True) for x in order}
        return IidBaseline.from_match_distribution(
            raw, strategies=self.strategies, valid_distribution=valid
        ).curves(self.budget)

    def _oracle_curves(self, inputs: frozenset[str]) -> Any:
        if self.user_oracle is not None:
            return self.user_oracle.curves(self.budget)
        if self.access is None or not self.access.has("reference_match_sets") or not inputs:
            return None
        from seffi.coverage import OracleBaseline

        order = sorted(inputs)
        refs = {x: self.access.call("reference_match_sets", x) for x in order}
        return OracleBaseline(refs, strategies=self.strategies, seed=self.seed).curves(self.budget)

    def snapshot(self, *, exact: bool = False) -> tuple[Any, dict[str, float]]:
        """(``Comparison`` for the report/sinks, scalar dict of the key scheme) of the data so far.

        Args:
            exact: Policy curves from the tracker instead of the streaming sums (see :meth:`curves`),
                and baselines over exactly the inputs seen (else over the env's pool, see
                :meth:`baselines`).
        """
        from seffi.report.schema import Barcode, Comparison, CurveSet, Gain, LatentCurve, PolicyResult

        curves = self.curves(exact=exact)
        iid, oracle = self.baselines(pool=not exact)
        policy_set = CurveSet.from_curves(curves, self.label, "policy")
        if iid is not None and oracle is not None:
            g = curves.gain(iid, oracle)
            gain = Gain(value=g.value, lo=g.lo, hi=g.hi, reason=g.reason)
        else:
            gain = Gain(reason="no iid/oracle baseline (not a seffi env and none given)")
        latent = None
        if self._latent_sums is not None and self._has_latent:
            cov = self._latent_sums.point(self._input_order())["coverage"]
            ok = np.flatnonzero(np.isfinite(cov))  # k no run reached yet is NaN: leave it out
            latent = LatentCurve(
                label=self.label,
                k=[int(i) + 1 for i in ok],
                coverage=[float(cov[i]) for i in ok],
                num_codes=self.num_latents,
            )
        barcode = Barcode(
            strategies=list(self.strategies),
            input_ids=sorted(self._barcode),
            matrix=[self._barcode[x] for x in sorted(self._barcode)],
        )
        comparison = Comparison(
            task=self.task_name,
            env_id=self.env_name,
            budget=self.budget,
            n_inputs=len(self._input_ids),
            num_strategies=len(self.strategies),
            iid=self._baseline_set(iid, "iid"),
            oracle=self._baseline_set(oracle, "oracle"),
            policies=[PolicyResult(curves=policy_set, gain=gain, barcode=barcode, latent=latent)],
        )
        scalars = keys.scalars_from_curves(
            policy_set, gain=gain, episodes=self.episodes, inputs=len(self._input_ids), scope=self.scope
        )
        scalars[keys.valid_rate_key(self.scope)] = self._valid / max(self._counted, 1)
        return comparison, scalars

    def _baseline_set(self, curves: Any, kind: str) -> Any:
        """``CurveSet`` of baseline ``curves``, converted once per (cached) baseline object.

        Baselines are cached (:meth:`baselines`), so every snapshot would convert the same curves
        again — about half of a snapshot's cost.
        """
        if curves is None:
            return None
        hit = self._set_cache.get(kind)
        if hit is None or hit[0] is not curves:  # identity: a recomputed baseline is a new object
            from seffi.report.schema import CurveSet

            hit = self._set_cache[kind] = (curves, CurveSet.from_curves(curves, kind, kind))
        return hit[1]

    # -- state: checkpoint, resume, exact merge ----------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Everything recorded, as JSON-safe data (see :meth:`load_state_dict` and :meth:`merge`).

        Holds the tracker state, per-input sums of the streaming estimator, the barcode, counters and
        the runs still open (so a resumed monitor continues them). Size O(runs x strategies), like the
        tracker's.
        """
        self._flush()
        open_runs = []
        for u, env, slot, count, si, ri in self._runs.open_runs():
            rec = {
                "input_id": self._input_ids[u],
                "env_index": env,
                "stream": int(self._runs.slot_stream[slot]),
                "count": count,
                "sample_index": si,
                "run_index": ri,
            }
            if self._latent_sums is not None:  # latents are not in the tracker: what the run tried
                rec["latent_covered"] = np.flatnonzero(self._latent_sums.first_hit[slot] >= 0).tolist()
            open_runs.append(rec)
        inputs = {}
        for u, x in sorted(enumerate(self._input_ids), key=lambda p: p[1]):
            inputs[x] = {
                **self._sums.input_state(u),
                "next_stream": int(self._runs.next_stream[u]),
                "latent": self._latent_sums.input_state(u) if self._latent_sums is not None else None,
                "barcode": (
                    {"stream": self._barcode_stream[x], "cells": list(self._barcode[x])}
                    if x in self._barcode
                    else None
                ),
            }
        return {
            "format": MONITOR_STATE_FORMAT,
            "budget": self.budget,
            "strategies": list(self.strategies),
            "num_latents": self.num_latents,
            "stream_offset": self.stream_offset,
            "episodes": self.episodes,
            "samples": self._counted,
            "valid": self._valid,
            "skipped_beyond_budget": self.skipped_beyond_budget,
            "has_latent": self._has_latent,
            "inputs": inputs,
            "open_runs": sorted(open_runs, key=lambda r: (r["input_id"], r["env_index"])),
            "tracker": self.tracker.state_dict(),
        }

    def _check_state(self, state: Mapping[str, Any]) -> None:
        """Validate a monitor state completely, before anything is changed (one SeffiError naming the field).

        Every field :meth:`_merge_state` reads is checked for type and range, so loading or merging
        cannot fail half-way; counts are bounded (<= 2**53), so a state like ``n = 10**30`` is refused
        here rather than overflowing later in ``curves()``.
        """
        if not isinstance(state, Mapping) or state.get("format") != MONITOR_STATE_FORMAT:
            raise SeffiError(f"not a CoverageMonitor state (expected format {MONITOR_STATE_FORMAT!r})")
        mine = (self.budget, list(self.strategies), self.num_latents)
        theirs = (state.get("budget"), state.get("strategies"), state.get("num_latents"))
        if mine != theirs:
            raise SeffiError(
                f"monitor state has (budget, strategies, latents) {theirs}, this monitor {mine}: "
                "they do not mix"
            )
        try:
            self._check_state_fields(state)
        except _StateProblem as exc:
            raise SeffiError(f"corrupted CoverageMonitor state: {exc}") from None

    def _check_state_fields(self, state: Mapping[str, Any]) -> None:
        from seffi.coverage import CoverageTracker

        K, M, Z = self.budget, len(self.strategies), self.num_latents or 0

        def field(parent: Mapping[str, Any], key: str, where: str) -> Any:
            if not isinstance(parent, Mapping) or key not in parent:
                raise _StateProblem(f"{where}: missing {key!r}")
            return parent[key]

        def count(value: Any, where: str, lo: int = 0, hi: int = _STATE_MAX) -> int:
            if isinstance(value, _BOOLS) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
                raise _StateProblem(f"{where} must be an int in [{lo}, {hi}], got {_show(value)}")
            return int(value)

        def sums(value: Any, where: str) -> None:
            try:
                arr = np.asarray(value)
            except (ValueError, TypeError) as exc:  # ragged lists
                raise _StateProblem(f"{where}: {exc}") from None
            if arr.shape != (K, N_STATS) or arr.dtype.kind not in "iu":
                raise _StateProblem(
                    f"{where} must be ints of shape ({K}, {N_STATS}), got {arr.dtype} {arr.shape}"
                )
            if arr.size and (arr.min() < 0 or arr.max() > _STATE_MAX):
                raise _StateProblem(f"{where} holds counts outside [0, {_STATE_MAX}]")

        top = "state"
        count(field(state, "stream_offset", top), "stream_offset")
        counters = {
            k: count(field(state, k, top), k)
            for k in ("episodes", "samples", "valid", "skipped_beyond_budget")
        }
        if counters["valid"] > counters["samples"]:
            raise _StateProblem("valid exceeds samples")
        if not isinstance(field(state, "has_latent", top), bool):
            raise _StateProblem(f"has_latent must be a bool, got {_show(state['has_latent'])}")
        try:
            tracker = CoverageTracker.from_state_dict(field(state, "tracker", top)).state_dict()
        except ValueError as exc:
            raise _StateProblem(f"tracker: {exc}") from None
        runs = set()
        for r in tracker["runs"]:
            where = f"tracker run ({r['input_id']!r}, stream {r['stream']})"
            count(r["stream"], f"{where} stream")
            count(r["n"], f"{where} n", hi=K)  # the monitor keeps at most K samples of a run
            runs.add((r["input_id"], r["stream"]))
        inputs = field(state, "inputs", top)
        if not isinstance(inputs, Mapping):
            raise _StateProblem(f"inputs must be a mapping, got {_show(inputs)}")
        for x, d in inputs.items():
            where = f"inputs[{x!r}]"
            if not isinstance(x, str):
                raise _StateProblem(f"{where}: input ids must be str")
            count(field(d, "n_runs", where), f"{where}.n_runs")
            sums(field(d, "sums", where), f"{where}.sums")
            count(field(d, "next_stream", where), f"{where}.next_stream")
            latent = d.get("latent")
            if latent is not None:
                if not Z:
                    raise _StateProblem(f"{where}.latent given but this monitor has no latents")
                count(field(latent, "n_runs", f"{where}.latent"), f"{where}.latent.n_runs")
                sums(field(latent, "sums", f"{where}.latent"), f"{where}.latent.sums")
            bar = d.get("barcode")
            if bar is not None:
                count(field(bar, "stream", f"{where}.barcode"), f"{where}.barcode.stream")
                cells = field(bar, "cells", f"{where}.barcode")
                if not isinstance(cells, list) or len(cells) > K:
                    raise _StateProblem(f"{where}.barcode.cells must be a list of at most {K} cells")
                for c in cells:
                    count(c, f"{where}.barcode cell", lo=-1, hi=M - 1)
        open_runs = field(state, "open_runs", top)
        if not isinstance(open_runs, list):
            raise _StateProblem(f"open_runs must be a list, got {_show(open_runs)}")
        for i, r in enumerate(open_runs):
            where = f"open_runs[{i}]"
            x = field(r, "input_id", where)
            stream = count(field(r, "stream", where), f"{where}.stream")
            if not isinstance(x, str) or (x, stream) not in runs or x not in inputs:
                raise _StateProblem(f"{where} is run ({x!r}, stream {stream}), which the state does not hold")
            count(field(r, "env_index", where), f"{where}.env_index")
            count(field(r, "count", where), f"{where}.count", lo=1, hi=K)
            count(field(r, "sample_index", where), f"{where}.sample_index", lo=-1)
            count(field(r, "run_index", where), f"{where}.run_index", lo=-1)
            covered = r.get("latent_covered", [])
            if not isinstance(covered, list):
                raise _StateProblem(f"{where}.latent_covered must be a list")
            for c in covered:
                count(c, f"{where}.latent_covered", hi=max(Z - 1, 0))

    def load_state_dict(self, state: Mapping[str, Any]) -> CoverageMonitor:
        """Replace everything recorded with ``state`` (from :meth:`state_dict`); returns self.

        The state is validated completely and loaded into a scratch copy first; only a complete load
        replaces this monitor's data. So a foreign or corrupted state raises
        :class:`~seffi.errors.SeffiError` and leaves the monitor unchanged (``state_dict()``,
        ``curves()`` and ingestion work as before). The monitor's own ``stream_offset`` becomes the
        state's.
        """
        self._check_state(state)
        scratch = copy.copy(self)  # shares sinks and caches; every recorded-data field is replaced
        scratch.stream_offset = int(state["stream_offset"])
        scratch.__dict__.update(scratch._blank())
        scratch.episodes = scratch.skipped_beyond_budget = 0
        try:
            scratch._merge_state(state, keep_open=True)
        except Exception as exc:  # not expected after _check_state; this monitor is untouched either way
            raise SeffiError(f"corrupted CoverageMonitor state: {type(exc).__name__}: {exc}") from exc
        for name in (*self._blank(), "episodes", "skipped_beyond_budget", "stream_offset"):
            setattr(self, name, getattr(scratch, name))
        return self

    def merge(self, other: CoverageMonitor | Mapping[str, Any]) -> CoverageMonitor:
        """Add another monitor's (or monitor state's) recorded data to this one; returns self.

        Exact and order-independent, like ``CoverageTracker.merge``: tracker runs form a disjoint
        union (runs present in both raise — give workers distinct ``stream_offset`` values, or move a
        state with :meth:`shift_streams`), the per-input sums and counters are integer sums, and the
        barcode row of an input is the one of its lowest-numbered first run. Curves, counters and the
        tracker of ``a.merge(b)`` and ``b.merge(a)`` are identical; only the receiving monitor's own
        open runs continue (the other's env rows are not this monitor's).
        """
        state = other.state_dict() if isinstance(other, CoverageMonitor) else other
        self._check_state(state)
        self._flush()
        saved = self.state_dict()
        try:
            self._merge_state(state, keep_open=False)
        except Exception as exc:  # not expected after _check_state; the saved state is restored
            self.load_state_dict(saved)
            if isinstance(exc, SeffiError):
                raise
            raise SeffiError(f"cannot merge CoverageMonitor state: {type(exc).__name__}: {exc}") from exc
        return self

    def _merge_state(self, state: Mapping[str, Any], *, keep_open: bool) -> None:
        from seffi.coverage import CoverageTracker

        runs = CoverageTracker.from_state_dict(state["tracker"]).state_dict()["runs"]  # validated
        have = set(
            zip(
                (self._input_ids[c] for c in self._runs.slot_input.tolist()),
                self._runs.slot_stream.tolist(),
                strict=True,
            )
        )
        clash = sorted({(r["input_id"], r["stream"]) for r in runs} & have)
        if clash:
            raise SeffiError(
                f"cannot merge: both monitors hold run(s) {clash[:3]} (input, stream); give workers distinct "
                "stream_offset values or use shift_streams/load_states"
            )
        if any(r["m"] != len(self.strategies) or r["task"] != self.task_name for r in runs):
            raise SeffiError("cannot merge: the state's runs are of another task or strategy count")
        self._tracker = None
        slot_of: dict[tuple[str, int], int] = {}
        for r in runs:
            u = int(self._input_codes(_objects([r["input_id"]]))[0])
            slot = self._runs.restore_slot(u, int(r["stream"]))
            self._sums.set_run(slot, r, self.strategies)
            slot_of[(r["input_id"], int(r["stream"]))] = slot
        top: dict[str, int] = {}  # highest stream per input among the added runs
        for x, st in slot_of:
            top[x] = max(top.get(x, -1), st)
        for x, d in state["inputs"].items():
            u = int(self._input_codes(_objects([x]))[0])
            self._runs._grow(u + 1, 0)
            self._sums.add_input_state(u, d)
            if self._latent_sums is not None and d.get("latent") is not None:
                self._latent_sums.add_input_state(u, d["latent"])
            local = int(d["next_stream"]) if keep_open else top.get(x, -1) - self.stream_offset + 1
            self._runs.next_stream[u] = max(int(self._runs.next_stream[u]), local)
            bar = d.get("barcode")
            if bar is not None:
                mine = self._barcode_stream.get(x)
                if mine is None or int(bar["stream"]) < mine:
                    self._barcode[x] = [int(c) for c in bar["cells"]]
                    self._barcode_stream[x] = int(bar["stream"])
        if keep_open:
            for r in state["open_runs"]:
                slot = slot_of[(r["input_id"], int(r["stream"]))]
                u = self._input_code[r["input_id"]]
                count, si, ri = int(r["count"]), int(r["sample_index"]), int(r["run_index"])
                self._runs.restore_open(u, int(r["env_index"]), slot, count, si, ri)
                if self._latent_sums is not None:
                    z = [str(c) for c in r.get("latent_covered", [])]
                    rec = {"n": count, "n_valid": count, "first_valid": 0, "first_valid_hit": {}}
                    cols = [str(c) for c in range(self._latent_sums.C)]
                    self._latent_sums.set_run(
                        slot, {**rec, "first_hit": dict.fromkeys(z, 0), "counts": {}}, cols
                    )
        self.episodes += int(state["episodes"])
        self._counted += int(state["samples"])
        self._valid += int(state["valid"])
        self.skipped_beyond_budget += int(state["skipped_beyond_budget"])
        self._has_latent |= bool(state["has_latent"])

    @staticmethod
    def shift_streams(state: Mapping[str, Any], offset: int) -> dict[str, Any]:
        """A copy of a monitor state with every stream moved up by ``offset``.

        Workers that all started at ``stream_offset=0`` hold runs with the same stream numbers; moving
        each state to its own block (see :meth:`stream_span`) makes them mergeable.
        """
        offset = int(offset)
        out = copy.deepcopy(dict(state))
        out["stream_offset"] = int(state["stream_offset"]) + offset
        for r in out["tracker"]["runs"]:
            r["stream"] = int(r["stream"]) + offset
        for r in out["open_runs"]:
            r["stream"] = int(r["stream"]) + offset
        for d in out["inputs"].values():
            if d.get("barcode") is not None:
                d["barcode"]["stream"] = int(d["barcode"]["stream"]) + offset
        return out

    @staticmethod
    def stream_span(state: Mapping[str, Any]) -> int:
        """1 + the highest stream number in a monitor state (0 when it holds no run)."""
        return 1 + max((int(r["stream"]) for r in state["tracker"]["runs"]), default=-1)

    def load_states(self, states: Sequence[Mapping[str, Any]]) -> CoverageMonitor:
        """Replace everything recorded with the exact union of ``states`` (e.g. one per worker).

        Each state is moved to its own block of streams (in the order given) before merging, so
        workers may all use the same ``stream_offset``. Counters are sums; curves equal those of one
        monitor fed with every episode. On a bad state the monitor is left unchanged.
        """
        self._flush()
        saved = self.state_dict()
        try:
            self.__dict__.update(self._blank())
            self.episodes = self.skipped_beyond_budget = 0
            offset = 0
            for state in states:
                self._check_state(state)
                self._merge_state(self.shift_streams(state, offset), keep_open=False)
                offset += self.stream_span(state)
        except Exception as exc:  # a bad state (or a clash): the saved state is restored
            self.load_state_dict(saved)
            if isinstance(exc, SeffiError):
                raise
            raise SeffiError(f"cannot merge CoverageMonitor states: {type(exc).__name__}: {exc}") from exc
        return self

    # -- the end ---------------------------------------------------------------------------------------

    def report(self) -> Any:
        """The :class:`seffi.report.schema.Report` of everything recorded so far."""
        from seffi.report.schema import Report

        self._flush()
        comparisons = []
        if self._counted:
            comparison = self.snapshot(exact=True)[0]  # the tracker's curves: the reference numbers
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
        """Log a last time (if ``step`` is new), then write the report and close the sinks. Idempotent.

        A monitor that made its own sinks then prints where the report went and, for an offline W&B
        run, the ``wandb sync`` command (:func:`seffi.report.sinks.closing_lines`).

        Returns:
            The final report (``None`` if called before).
        """
        if self.finalized:
            return None
        self._flush()
        if step is not None and self._counted and (self.last_step is None or step > self.last_step):
            self.log(step)
        report = self.report()
        # The sinks put the report's final scalars into run.summary and upload report + tracker state.
        self.sinks.finish(report, self.tracker.state_dict())
        self.finalized = True
        if self._owns_sinks:
            # Sinks the caller passed in belong to an adapter (or seffi run), which says this once itself.
            from seffi.report.sinks import closing_lines

            for line in closing_lines(self.out_dir, getattr(self.sinks, "wandb", None), prefix="[seffi] "):
                print(line, flush=True)
        return report

    close = finalize

    def __enter__(self) -> CoverageMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finalize()

"""``CoverageTracker``: mergeable, checkpointable per-(input, stream) coverage state.

State is declared once (``_RUN_FIELDS`` with the merge rule of the whole structure: runs are a
disjoint union keyed by (task, input_id, stream)); ``update``, ``merge``, ``state_dict`` and
``load_state_dict`` all derive from it. Per run we keep only first-hit indices and counts, so memory
is O(runs x strategies), never O(samples) -- except the optional, bounded strategy barcode.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seffi.coverage.curves import Curves, check_budget
from seffi.coverage.runs import curves_from_runs

__all__ = ["STATE_FORMAT", "CoverageTracker"]

#: Format tag of ``state_dict``; ``load_state_dict`` refuses anything else.
STATE_FORMAT = "seffi.coverage.tracker/1"

RunKey = tuple[str, str, int]  # (task, input_id, stream)


@dataclass
class _Run:
    """One run: the sample sequence of one input in one stream.

    Attributes:
        m: the denominator M_x.
        n: samples seen.
        first_hit: strategy -> index of the first sample matching it.
        first_valid_hit: strategy -> index of the first *correct* sample matching it.
        counts: strategy -> number of samples matching it.
        first_valid: index of the first correct sample, -1 if none.
        n_valid: number of correct samples.
    """

    m: int
    n: int = 0
    first_hit: dict[str, int] = field(default_factory=dict)
    first_valid_hit: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    first_valid: int = -1
    n_valid: int = 0


#: The declared per-run state: field -> JSON type. Everything else derives from this table.
_RUN_FIELDS: dict[str, type] = {
    "m": int,
    "n": int,
    "first_hit": dict,
    "first_valid_hit": dict,
    "counts": dict,
    "first_valid": int,
    "n_valid": int,
}


def _input_id(input_id: Any) -> str:
    """Input ids are strings; ints are accepted and turned into their decimal string."""
    if isinstance(input_id, bool) or not isinstance(input_id, str | int | np.integer):
        raise ValueError(f"input_id must be a str (or int), got {type(input_id).__name__}: {input_id!r}")
    return str(input_id)


def _match_set(matches: Any) -> frozenset[str]:
    """One sample's strategy ids as a frozenset; a bare string or non-str ids raise."""
    if isinstance(matches, str):
        raise ValueError(f"matches must be an iterable of strategy ids, not the string {matches!r}")
    ms = frozenset(matches)
    bad = [s for s in ms if not isinstance(s, str)]
    if bad:
        raise ValueError(f"strategy ids must be str, got {bad!r}")
    return ms


def _check_declared(ids: frozenset[str], strategies: tuple[str, ...] | None) -> None:
    """Raise on strategy ids outside the declared set (no-op when nothing is declared)."""
    if strategies is not None:
        unknown = sorted(ids.difference(strategies))
        if unknown:
            raise ValueError(f"unknown strategy ids {unknown}; declared: {list(strategies)}")


class CoverageTracker:
    """Accumulates, per (input, stream) run, which strategies were covered and when.

    Args:
        strategies: the declared strategy ids (a sequence of str; unknown ids in ``update`` raise),
            or an int M: strategies are then free-form ids and M is the default denominator.
            None: free-form ids; every input's M_x must then come with its first ``update``.
        task: task name; runs of different tasks form separate bootstrap strata after ``merge``.
        barcode_rows: keep per-sample data (the "strategy barcode") for this many runs -- the runs
            with the smallest (task, input_id, stream) keys, so the choice does not depend on update
            or merge order. 0 (default) keeps none. Memory: barcode_rows x barcode_cols cells.
        barcode_cols: number of leading samples kept per barcode row.

    Example:
        >>> t = CoverageTracker(strategies=("a", "b", "c"))
        >>> t.update("x1", {"a"}); t.update("x1", {"a", "b"}, valid=False)
        >>> c = t.curves(4, n_boot=0)
    """

    def __init__(
        self,
        strategies: Sequence[str] | int | None = None,
        *,
        task: str = "",
        barcode_rows: int = 0,
        barcode_cols: int = 256,
    ) -> None:
        if isinstance(strategies, bool):
            raise ValueError("strategies must be a sequence of ids, a count or None")
        if isinstance(strategies, int | np.integer):
            if strategies < 1:
                raise ValueError(f"strategy count must be >= 1, got {strategies}")
            self.strategies: tuple[str, ...] | None = None
            self.num_strategies: int | None = int(strategies)
        elif strategies is None:
            self.strategies, self.num_strategies = None, None
        else:
            if isinstance(strategies, str) or not all(isinstance(s, str) for s in strategies):
                raise ValueError(f"strategies must be a sequence of str ids, got {strategies!r}")
            ids = tuple(strategies)
            if not ids or len(set(ids)) != len(ids):
                raise ValueError(f"strategies must be non-empty and unique, got {ids!r}")
            self.strategies, self.num_strategies = ids, len(ids)
        if not isinstance(task, str):
            raise ValueError(f"task must be a str, got {task!r}")
        for name, v in (("barcode_rows", barcode_rows), ("barcode_cols", barcode_cols)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a non-negative int, got {v!r}")
        self.task = task
        self.barcode_rows, self.barcode_cols = barcode_rows, barcode_cols
        self._runs: dict[RunKey, _Run] = {}
        self._input_m: dict[tuple[str, str], int] = {}
        # barcode: run key -> list of (sorted matched strategies, valid) per sample, first barcode_cols
        self._barcode: dict[RunKey, list[list[str]]] = {}

    # -- accumulation ----------------------------------------------------------------------------

    def update(
        self,
        input_id: str | int,
        matches: Iterable[str],
        *,
        valid: bool = True,
        stream: int = 0,
        num_strategies: int | None = None,
    ) -> None:
        """Record one sample of ``input_id`` in ``stream``.

        Args:
            input_id: the input.
            matches: strategy ids the sample's trace matches (empty for parse failures/off-strategy).
            valid: whether the sample is a correct solution.
            stream: the stream (e.g. vector-env index) the sample belongs to; each (input, stream)
                is its own run, whose samples are in order.
            num_strategies: M_x for this input (defaults to the declared strategy count); must not
                change once set.
        """
        iid = _input_id(input_id)
        ms = _match_set(matches)
        _check_declared(ms, self.strategies)
        if isinstance(stream, bool) or not isinstance(stream, int | np.integer) or stream < 0:
            raise ValueError(f"stream must be a non-negative int, got {stream!r}")
        if not isinstance(valid, bool | np.bool_):
            raise ValueError(f"valid must be a bool, got {valid!r}")
        m = self._resolve_m(iid, num_strategies)
        key = (self.task, iid, int(stream))
        run = self._runs.get(key)
        # Every check runs before the first write: a refused sample must not leave an empty run
        # behind (it would count as a run that never reaches k and reweight the input).
        seen = (set(run.first_hit) if run is not None else set()) | ms
        m_run = run.m if run is not None else m
        if len(seen) > m_run:
            raise ValueError(
                f"input {iid!r} has matched {len(seen)} distinct strategies but its M_x is {m_run}"
            )
        self._input_m[(self.task, iid)] = m
        if run is None:
            run = self._runs[key] = _Run(m=m)
            self._admit_barcode(key)
        i = run.n
        for s in ms:
            run.first_hit.setdefault(s, i)
            run.counts[s] = run.counts.get(s, 0) + 1
            if valid:
                run.first_valid_hit.setdefault(s, i)
        if valid:
            run.n_valid += 1
            if run.first_valid < 0:
                run.first_valid = i
        run.n += 1
        row = self._barcode.get(key)
        if row is not None and len(row) < self.barcode_cols:
            row.append(sorted(ms, key=self._order_key))

    def update_many(
        self,
        input_ids: Sequence[str | int],
        matches: np.ndarray | Sequence[Iterable[str]],
        *,
        valid: bool | Sequence[bool] | np.ndarray = True,
        stream: int | Sequence[int] | np.ndarray = 0,
        num_strategies: int | None = None,
    ) -> None:
        """Record N samples at once: exactly ``update(input_ids[i], matches[i], ...)`` for i = 0..N-1.

        The batch is grouped by run in numpy, so the Python work is per run touched and strategy
        column, not per sample (the barcode, when kept, is still filled per sample). The whole batch
        is checked before anything is recorded: on ValueError the tracker is unchanged.

        Args:
            input_ids: the N inputs, in sample order.
            matches: bool array, shape (N, M), whose columns are the declared ``strategies`` (needs
                declared strategies), or N iterables of strategy ids.
            valid: bool array, shape (N,), or one bool for every sample.
            stream: non-negative int array, shape (N,), or one stream for every sample.
            num_strategies: M_x for every input of the batch (as in :meth:`update`).
        """
        ids = [_input_id(x) for x in input_ids]
        n = len(ids)
        if isinstance(matches, np.ndarray) and matches.ndim == 2:
            if self.strategies is None:
                raise ValueError("a match matrix needs declared strategies (its columns)")
            if matches.dtype != np.bool_ or matches.shape != (n, len(self.strategies)):
                raise ValueError(
                    f"matches must be a bool array of shape ({n}, {len(self.strategies)}), "
                    f"got {matches.dtype} {matches.shape}"
                )
            cols, mat = list(self.strategies), matches
        else:
            rows = list(matches)
            if len(rows) != n:
                raise ValueError(f"{n} input ids but {len(rows)} match sets")
            sets = [_match_set(ms) for ms in rows]
            union = frozenset().union(*sets)
            _check_declared(union, self.strategies)
            cols = list(self.strategies) if self.strategies is not None else sorted(union)
            index = {s: j for j, s in enumerate(cols)}
            mat = np.zeros((n, len(cols)), dtype=bool)
            for i, fs in enumerate(sets):
                mat[i, [index[s] for s in fs]] = True
        v = np.asarray(valid)
        if v.dtype != np.bool_ or v.ndim > 1 or (v.ndim == 1 and v.shape[0] != n):
            raise ValueError(f"valid must be a bool or a bool array of shape ({n},)")
        v = np.broadcast_to(v, (n,))
        st_ = np.asarray(stream)
        if (
            not np.issubdtype(st_.dtype, np.integer)
            or st_.ndim > 1
            or (st_.ndim == 1 and st_.shape[0] != n)
            or (st_.size and st_.min() < 0)
        ):
            raise ValueError(f"stream must be a non-negative int or an int array of shape ({n},)")
        st_ = np.broadcast_to(st_.astype(np.int64), (n,))
        if n == 0:
            return
        if num_strategies is not None and (
            isinstance(num_strategies, bool)
            or not isinstance(num_strategies, int | np.integer)
            or num_strategies < 1
        ):
            raise ValueError(f"num_strategies must be an int >= 1, got {num_strategies!r}")
        # M_x per distinct input, resolved like ``update`` does but stored only once all checks pass.
        m_of: dict[str, int] = {}
        for iid in dict.fromkeys(ids):
            known = self._input_m.get((self.task, iid))
            if num_strategies is not None:
                if known is not None and known != num_strategies:
                    raise ValueError(f"input {iid!r} already has M_x={known}, got {num_strategies!r}")
                m_of[iid] = int(num_strategies)
            elif known is not None or self.num_strategies is not None:
                m_of[iid] = known if known is not None else int(self.num_strategies)  # type: ignore[arg-type]
            else:
                raise ValueError(
                    f"input {iid!r}: no strategy count; pass num_strategies= or declare strategies "
                    "on the tracker"
                )
        # Group samples by run, keeping sample order inside each run (stable sort).
        code = {iid: c for c, iid in enumerate(m_of)}
        icode = np.fromiter((code[x] for x in ids), dtype=np.int64, count=n)
        key = icode * (int(st_.max()) + 1) + st_
        order = np.argsort(key, kind="stable")
        ks = key[order]
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        group_of = np.cumsum(np.r_[True, ks[1:] != ks[:-1]]) - 1
        run_keys: list[RunKey] = []
        n0 = np.empty(len(starts), dtype=np.int64)
        names = list(m_of)
        for g, i in enumerate(order[starts]):
            rk = (self.task, names[icode[i]], int(st_[i]))
            run_keys.append(rk)
            run = self._runs.get(rk)
            n0[g] = run.n if run is not None else 0
        pos = n0[group_of] + np.arange(n) - starts[group_of]  # index of each sample in its run
        big = np.iinfo(np.int64).max
        m_sorted, v_sorted = mat[order], v[order]
        first = np.minimum.reduceat(np.where(m_sorted, pos[:, None], big), starts, axis=0)
        first_v = np.minimum.reduceat(
            np.where(m_sorted & v_sorted[:, None], pos[:, None], big), starts, axis=0
        )
        counts = np.add.reduceat(m_sorted.astype(np.int64), starts, axis=0)
        n_valid = np.add.reduceat(v_sorted.astype(np.int64), starts)
        first_valid = np.minimum.reduceat(np.where(v_sorted, pos, big), starts)
        sizes = np.diff(np.r_[starts, n])
        runs = [self._runs.get(rk) for rk in run_keys]
        m_run = [r.m if r is not None else m_of[rk[1]] for r, rk in zip(runs, run_keys, strict=True)]
        if min(m_run) < len(cols):  # M_x can only be exceeded when it is below the column count
            for g, rk in enumerate(run_keys):
                seen = set(runs[g].first_hit) if runs[g] is not None else set()
                seen.update(cols[j] for j in np.flatnonzero(counts[g]))
                if len(seen) > m_run[g]:
                    raise ValueError(
                        f"input {rk[1]!r} has matched {len(seen)} distinct strategies but its M_x is "
                        f"{m_run[g]}"
                    )
        # Checked: record. One Python step per (run, matched column), none per sample.
        for iid, m in m_of.items():
            self._input_m[(self.task, iid)] = m
        for g, rk in enumerate(run_keys):
            if runs[g] is None:
                runs[g] = self._runs[rk] = _Run(m=m_of[rk[1]])
                self._admit_barcode(rk)
        gs, js = np.nonzero(counts)
        hits = zip(
            gs.tolist(),
            js.tolist(),
            first[gs, js].tolist(),
            first_v[gs, js].tolist(),
            counts[gs, js].tolist(),
            strict=True,
        )
        for g, j, f, fv, c in hits:
            run, s = runs[g], cols[j]
            run.first_hit.setdefault(s, f)
            run.counts[s] = run.counts.get(s, 0) + c
            if fv != big:
                run.first_valid_hit.setdefault(s, fv)
        for run, nv, fvi, size in zip(
            runs, n_valid.tolist(), first_valid.tolist(), sizes.tolist(), strict=True
        ):
            run.n_valid += nv
            if run.first_valid < 0 and fvi != big:
                run.first_valid = fvi
            run.n += size
        if self._barcode:
            for g, rk in enumerate(run_keys):
                row = self._barcode.get(rk)
                if row is None:
                    continue
                for i in order[starts[g] : starts[g] + sizes[g]]:
                    if len(row) >= self.barcode_cols:
                        break
                    row.append(sorted((cols[j] for j in np.flatnonzero(mat[i])), key=self._order_key))

    def _resolve_m(self, iid: str, num_strategies: int | None) -> int:
        """M_x for ``iid`` (checked, not stored: the caller stores it once the whole sample passed)."""
        known = self._input_m.get((self.task, iid))
        if num_strategies is not None:
            if isinstance(num_strategies, bool) or not isinstance(num_strategies, int | np.integer):
                raise ValueError(f"num_strategies must be an int, got {num_strategies!r}")
            if num_strategies < 1:
                raise ValueError(f"num_strategies must be >= 1, got {num_strategies}")
            if known is not None and known != num_strategies:
                raise ValueError(f"input {iid!r} already has M_x={known}, got {num_strategies!r}")
            m = int(num_strategies)
        elif known is not None:
            m = known
        elif self.num_strategies is not None:
            m = self.num_strategies
        else:
            raise ValueError(
                f"input {iid!r}: no strategy count; pass num_strategies= or declare strategies on the tracker"
            )
        return m

    def _order_key(self, s: str) -> tuple[int, str]:
        """Declared order when strategies are declared, else alphabetical."""
        if self.strategies is not None:
            return (self.strategies.index(s), s)
        return (0, s)

    def _admit_barcode(self, key: RunKey) -> None:
        """Keep the barcode of the ``barcode_rows`` smallest run keys.

        New runs start empty, so a run evicted once can never qualify again: the kept set is always
        complete and independent of update/merge order.
        """
        if self.barcode_rows == 0:
            return
        self._barcode[key] = []
        if len(self._barcode) > self.barcode_rows:
            del self._barcode[max(self._barcode)]

    # -- merging ---------------------------------------------------------------------------------

    def merge(self, other: CoverageTracker) -> CoverageTracker:
        """Add another tracker's runs to this one (in place; returns self).

        Runs are a disjoint union keyed by (task, input_id, stream), so merging is exact,
        associative and commutative. Both trackers must declare the same strategies (or count) and
        barcode bounds; a run present in both raises (give each worker its own streams).
        """
        if not isinstance(other, CoverageTracker):
            raise ValueError(f"can only merge a CoverageTracker, got {type(other).__name__}")
        if (self.strategies, self.num_strategies) != (other.strategies, other.num_strategies):
            raise ValueError(
                "cannot merge trackers with different strategy sets: "
                f"{self.strategies or self.num_strategies!r} vs {other.strategies or other.num_strategies!r}"
            )
        if (self.barcode_rows, self.barcode_cols) != (other.barcode_rows, other.barcode_cols):
            raise ValueError("cannot merge trackers with different barcode_rows/barcode_cols")
        clash = sorted(set(self._runs) & set(other._runs))
        if clash:
            raise ValueError(f"cannot merge: both trackers hold run(s) {clash[:3]} (task, input_id, stream)")
        for key, m in other._input_m.items():
            if self._input_m.get(key, m) != m:
                raise ValueError(f"cannot merge: input {key[1]!r} has M_x {self._input_m[key]} vs {m}")
        self._input_m.update(other._input_m)
        self._runs.update(copy.deepcopy(other._runs))
        self._barcode.update(copy.deepcopy(other._barcode))
        for key in sorted(self._barcode)[self.barcode_rows :]:
            del self._barcode[key]
        return self

    # -- checkpointing ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (plain dicts, lists, str and int; runs in sorted key order)."""
        runs = []
        for (task, iid, stream), run in sorted(self._runs.items()):
            d: dict[str, Any] = {"task": task, "input_id": iid, "stream": stream}
            for name in _RUN_FIELDS:
                v = getattr(run, name)
                d[name] = dict(sorted(v.items())) if isinstance(v, dict) else v
            if (task, iid, stream) in self._barcode:
                d["barcode"] = copy.deepcopy(self._barcode[(task, iid, stream)])
            runs.append(d)
        return {
            "format": STATE_FORMAT,
            "strategies": None if self.strategies is None else list(self.strategies),
            "num_strategies": self.num_strategies,
            "task": self.task,
            "barcode_rows": self.barcode_rows,
            "barcode_cols": self.barcode_cols,
            "runs": runs,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> CoverageTracker:
        """Replace this tracker's state with ``state`` (from :meth:`state_dict`); returns self.

        A foreign or corrupted state raises ValueError and leaves the tracker unchanged.
        """
        fresh = self.from_state_dict(state)
        self.__dict__.update(fresh.__dict__)
        return self

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> CoverageTracker:
        """A new tracker from :meth:`state_dict` output (validated; ValueError when corrupted)."""
        if isinstance(state, str | bytes):
            try:
                state = json.loads(state)
            except json.JSONDecodeError as exc:
                raise ValueError(f"tracker state is not valid JSON: {exc}") from exc
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"not a seffi CoverageTracker state (expected format {STATE_FORMAT!r})")
        try:
            strategies = state["strategies"]
            spec = strategies if strategies is not None else state["num_strategies"]
            t = cls(
                spec,
                task=state["task"],
                barcode_rows=state["barcode_rows"],
                barcode_cols=state["barcode_cols"],
            )
            for d in state["runs"]:
                key = (d["task"], _input_id(d["input_id"]), d["stream"])
                if not isinstance(key[0], str) or not isinstance(key[2], int) or key[2] < 0:
                    raise ValueError(f"bad run key {key!r}")
                if key in t._runs:
                    raise ValueError(f"duplicate run {key!r}")
                run = _Run(**{name: _typed(d[name], typ, name) for name, typ in _RUN_FIELDS.items()})
                _check_run(run, t.strategies, key)
                if t._input_m.setdefault(key[:2], run.m) != run.m:
                    raise ValueError(f"input {key[1]!r} has inconsistent M_x across runs")
                t._runs[key] = run
                if "barcode" in d:
                    rows = d["barcode"]
                    if not isinstance(rows, list) or len(rows) > min(run.n, t.barcode_cols):
                        raise ValueError(f"bad barcode for run {key!r}")
                    if not all(isinstance(r, list) and all(isinstance(s, str) for s in r) for r in rows):
                        raise ValueError(f"bad barcode for run {key!r}")
                    t._barcode[key] = [list(r) for r in rows]
            if len(t._barcode) > t.barcode_rows:
                raise ValueError("more barcode rows than barcode_rows")
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"corrupted CoverageTracker state: {type(exc).__name__}: {exc}") from exc
        return t

    # -- results ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of runs."""
        return len(self._runs)

    @property
    def n_samples(self) -> int:
        """Total samples recorded."""
        return sum(r.n for r in self._runs.values())

    def input_ids(self) -> list[str]:
        """Sorted ids of the inputs seen (over all tasks)."""
        return sorted({iid for _, iid, _ in self._runs})

    def curves(
        self,
        K: int,
        *,
        n_boot: int = 1000,
        seed: int = 0,
        ci_level: float = 0.95,
        rarity: Any = None,
        rarity_bins: int = 4,
    ) -> Curves:
        """The policy's curves for k = 1..K with bootstrap intervals (inputs resampled within tasks).

        Args:
            K: budget.
            n_boot: bootstrap replicates (0 skips intervals).
            seed: bootstrap seed.
            ci_level: interval level.
            rarity: the base law for the common-vs-rare split: an ``IidBaseline`` or a mapping
                ``{input_id: {strategy: base probability pi_s}}``; None skips the split.
            rarity_bins: number of within-input quantile bins of base probability.

        Returns:
            Curves with kind "policy" (and the barcode, when kept).
        """
        K = check_budget(K)
        if not self._runs:
            raise ValueError("the tracker has no samples yet: cannot compute curves")
        keys = sorted(self._runs)
        columns = (
            list(self.strategies)
            if self.strategies is not None
            else sorted({s for r in self._runs.values() for s in r.first_hit})
        )
        col = {s: j for j, s in enumerate(columns)}
        R, M = len(keys), max(len(columns), 1)
        fh = np.full((R, M), -1, dtype=np.int64)
        fvh = np.full((R, M), -1, dtype=np.int64)
        lengths = np.empty(R, dtype=np.int64)
        m = np.empty(R, dtype=np.int64)
        fv = np.empty(R, dtype=np.int64)
        for r, key in enumerate(keys):
            run = self._runs[key]
            for s, i in run.first_hit.items():
                fh[r, col[s]] = i
            for s, i in run.first_valid_hit.items():
                fvh[r, col[s]] = i
            lengths[r], m[r], fv[r] = run.n, run.m, run.first_valid
        inputs = sorted({k[:2] for k in keys})
        uidx = {k: u for u, k in enumerate(inputs)}
        unit = np.array([uidx[k[:2]] for k in keys])
        tasks = sorted({k[0] for k in keys})
        strata = np.array([tasks.index(k[0]) for k in inputs])
        bins = None
        if rarity is not None:
            from seffi.coverage.baselines import rarity_bin_matrix

            bins = rarity_bin_matrix(rarity, [k[1] for k in keys], columns, m, rarity_bins)
        c = curves_from_runs(
            fh,
            lengths,
            m,
            K,
            unit=unit,
            strata=strata,
            first_valid=fv,
            first_valid_hit=fvh,
            rarity_bin=bins,
            n_bins=rarity_bins,
            n_boot=n_boot,
            seed=seed,
            ci_level=ci_level,
            input_keys=[(str(t), str(i)) for t, i in inputs],  # pairs the gain bootstrap by input
        )
        if self._barcode:
            c.barcode = self.barcode(K)
        return c

    def barcode(self, K: int | None = None) -> dict[str, Any]:
        """Per-sample data of the kept runs, for a "strategy barcode" plot.

        Returns:
            A JSON-safe dict: ``rows`` (list of "task/input_id/stream" labels, R of them),
            ``strategies`` (column labels for the values), ``first_strategy`` (int, R x C nested
            lists: index into ``strategies`` of the first matched strategy of each sample, -1 for no
            match or no sample), ``new`` (bool, R x C: the sample added a new strategy), ``lengths``
            (samples recorded per row). C = min(K, barcode_cols).
        """
        cols = self.barcode_cols if K is None else min(check_budget(K), self.barcode_cols)
        keys = sorted(self._barcode)
        names = (
            list(self.strategies)
            if self.strategies is not None
            else sorted({s for k in keys for sample in self._barcode[k] for s in sample})
        )
        index = {s: j for j, s in enumerate(names)}
        first, new, lengths = [], [], []
        for key in keys:
            seen: set[str] = set()
            f_row, n_row = [-1] * cols, [False] * cols
            for i, sample in enumerate(self._barcode[key][:cols]):
                if sample:
                    f_row[i] = index[min(sample, key=self._order_key)]
                n_row[i] = not set(sample) <= seen
                seen.update(sample)
            first.append(f_row)
            new.append(n_row)
            lengths.append(len(self._barcode[key]))
        return {
            "rows": [f"{t}/{i}/{s}" if t else f"{i}/{s}" for t, i, s in keys],
            "strategies": names,
            "first_strategy": first,
            "new": new,
            "lengths": lengths,
        }


def _typed(v: Any, typ: type, name: str) -> Any:
    if typ is int and (isinstance(v, bool) or not isinstance(v, int)):
        raise ValueError(f"run field {name!r} must be an int, got {v!r}")
    if typ is dict:
        if not isinstance(v, dict) or not all(
            isinstance(k, str) and isinstance(i, int) and not isinstance(i, bool) for k, i in v.items()
        ):
            raise ValueError(f"run field {name!r} must map strategy ids to ints, got {v!r}")
        return dict(v)
    return v


def _check_run(run: _Run, strategies: tuple[str, ...] | None, key: RunKey) -> None:
    """Internal consistency of a loaded run (a corrupted state must not produce silent nonsense)."""
    problems = []
    if run.m < 1 or run.n < 0 or not 0 <= run.n_valid <= run.n:
        problems.append("bad m/n/n_valid")
    if not -1 <= run.first_valid < max(run.n, 0) or (run.first_valid < 0) != (run.n_valid == 0):
        problems.append("bad first_valid")
    if set(run.counts) != set(run.first_hit) or len(run.first_hit) > run.m:
        problems.append("counts/first_hit disagree")
    if not set(run.first_valid_hit) <= set(run.first_hit):
        problems.append("first_valid_hit has strategies never hit")
    for s, i in run.first_hit.items():
        if not 0 <= i < run.n or not 1 <= run.counts[s] <= run.n - i:
            problems.append(f"bad first hit/count of {s!r}")
        if s in run.first_valid_hit and not i <= run.first_valid_hit[s] < run.n:
            problems.append(f"bad first valid hit of {s!r}")
    if strategies is not None:
        unknown = set(run.first_hit) - set(strategies)
        if unknown:
            problems.append(f"unknown strategy ids {sorted(unknown)}")
    if problems:
        raise ValueError(f"corrupted CoverageTracker state, run {key!r}: {'; '.join(problems)}")

"""``CoverageTracker``: the one owner of recorded run data — runs, inputs, barcode, latent codes.

The per-run fields are declared once (``seffi.coverage.sums.RunTable.FIELDS``, with their fill
values): growing, saving and loading iterate them. :data:`STATE` states how each part of the state
merges; ``seffi.coverage._tracker_state`` implements those rules for ``merge``, ``state_dict`` /
``load_state_dict`` and stream shifting. A run is one
input's sample sequence in one stream; per run we keep first-hit indices (``seffi.coverage.sums.
RunTable``), so memory is O(runs x strategies), never O(samples). With a ``budget`` K the per-input
sums of the curves are also kept up to date as samples arrive, so a log costs O(inputs x K).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from seffi.coverage import _tracker_state as state_io
from seffi.coverage._common import _input_id, _int_array, _match_set, rarity_bin_matrix
from seffi.coverage.assign import RunAssigner
from seffi.coverage.barcode import BarcodeRows
from seffi.coverage.curves import Curves, check_budget
from seffi.coverage.sums import InputSums, RunTable, _segment_starts, fold, sums_from_runs
from seffi.coverage.sums_curves import curves_from_sums, point_from_sums

__all__ = ["STATE", "STATE_FORMAT", "CoverageTracker"]

STATE_FORMAT = state_io.STATE_FORMAT
#: How each part of the recorded state combines in ``merge`` (the rules ``_tracker_state`` implements).
STATE: dict[str, str] = {
    "inputs": "union by (task, input id); M_x must agree",
    "runs": "disjoint union by (task, input id, stream); a run in both trackers is an error",
    "barcode": "per input, the row of its lowest stream; the barcode_rows smallest inputs",
    "latent": "per run, like runs (latent codes tried: a diagnostic, never strategy coverage)",
    "open_runs": "kept from the tracker merged into (resume); a merged-in tracker's runs are closed",
    "samples, valid, skipped": "sums",
}


class CoverageTracker:
    """Records, per (input, stream) run, which strategies were covered and when.

    Args:
        strategies: the declared strategy ids (a sequence of str; unknown ids raise), or an int M:
            strategies are then free-form ids and M is the default denominator. None: free-form ids;
            every input's M_x must then come with its first ``update``.
        task: task name; runs of different tasks form separate bootstrap strata after ``merge``.
        budget: K, or None. With K, only each run's first K samples are recorded (later ones are
            counted in ``skipped``), per-input sums are kept for O(inputs x K) logs, and
            :meth:`curves` defaults to K.
        barcode_rows: keep the strategy barcode of this many inputs (the smallest (task, input_id)
            keys, so the choice does not depend on update or merge order). 0 keeps none.
        barcode_cols: samples kept per barcode row.
        num_latents: Z > 0 records which latent codes each run tried (``record(..., z=...)``).
        stream_offset: first stream number of runs that :meth:`record` opens.

    The barcode rule (one, everywhere): a row is an input's lowest-stream run; a cell is the first
    strategy (declared order; alphabetical when free-form) the sample adds to its run's coverage,
    else its first matched strategy, else -1 (no match).

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
        budget: int | None = None,
        barcode_rows: int = 0,
        barcode_cols: int = 256,
        num_latents: int = 0,
        stream_offset: int = 0,
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
        for name, v in (
            ("barcode_rows", barcode_rows),
            ("barcode_cols", barcode_cols),
            ("num_latents", num_latents),
            ("stream_offset", stream_offset),
        ):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
                raise ValueError(f"{name} must be a non-negative int, got {v!r}")
        self.task = task
        self.budget = None if budget is None else check_budget(budget)
        self.barcode_rows, self.barcode_cols = int(barcode_rows), int(barcode_cols)
        self.num_latents, self.stream_offset = int(num_latents), int(stream_offset)
        self.reset()

    def reset(self) -> None:
        """Drop everything recorded (the declared state back to empty)."""
        self.columns: list[str] = list(self.strategies or ())
        self._col = {s: j for j, s in enumerate(self.columns)}
        self.keys: list[tuple[str, str]] = []  # input code -> (task, input_id)
        self._code: dict[Any, int] = {}  # (task, input_id) -> input code (and raw ids on the record path)
        self._m = np.zeros(16, dtype=np.int64)  # M_x per input code (capacity doubles)
        self.assigner = RunAssigner(self.budget or 1, self.stream_offset)
        self._slot_of: dict[tuple[int, int], int] = {}  # (input code, stream) -> slot
        self.runs = RunTable(len(self.columns))
        self.sums = InputSums(self.budget) if self.budget else None
        self.latent_runs = RunTable(self.num_latents) if self.num_latents else None
        self.latent_sums = InputSums(self.budget) if self.budget and self.num_latents else None
        self.has_latent = False
        self.bar = BarcodeRows(self.barcode_rows, self.barcode_cols)
        self.samples = self.valid = self.skipped = 0
        self._order: tuple[int, np.ndarray] = (-1, np.zeros(0, dtype=np.int64))
        self._point: tuple[Any, Any, dict[str, Any]] = (None, None, {})  # (sums, key, point()) last

    @property
    def m(self) -> np.ndarray:
        """M_x per input code: int array, shape (U,)."""
        return self._m[: len(self.keys)]

    # -- coding --------------------------------------------------------------------------------------

    def _input_code(self, key: tuple[str, str], m: int) -> int:
        code = self._code.get(key)
        if code is None:
            code = self._code[key] = len(self.keys)
            self.keys.append(key)
            if code >= self._m.size:
                self._m = np.r_[self._m, np.zeros(self._m.size, dtype=np.int64)]
            self._m[code] = m
            self.assigner._grow(code + 1, 0)
            if self.sums is not None:
                self.sums.grow(code + 1)
            if self.latent_sums is not None:
                self.latent_sums.grow(code + 1)
        return code

    def _column(self, s: str) -> int:
        j = self._col.get(s)
        if j is None:
            j = self._col[s] = len(self.columns)
            self.columns.append(s)
            self.runs.grow(0, len(self.columns))
        return j

    def _resolve_m(self, key: tuple[str, str], num_strategies: int | None) -> int:
        """M_x of input ``key`` (checked, not stored)."""
        code = self._code.get(key)
        known = int(self.m[code]) if code is not None else None
        if num_strategies is not None:
            if isinstance(num_strategies, bool) or not isinstance(num_strategies, int | np.integer):
                raise ValueError(f"num_strategies must be an int, got {num_strategies!r}")
            if num_strategies < 1:
                raise ValueError(f"num_strategies must be >= 1, got {num_strategies}")
            if known is not None and known != num_strategies:
                raise ValueError(f"input {key[1]!r} already has M_x={known}, got {num_strategies!r}")
            return int(num_strategies)
        if known is not None:
            return known
        if self.num_strategies is not None:
            return self.num_strategies
        raise ValueError(
            f"input {key[1]!r}: no strategy count; pass num_strategies= or declare strategies on the tracker"
        )

    def _order_key(self, s: str) -> tuple[int, str]:
        """Declared order when strategies are declared, else alphabetical."""
        return (self.strategies.index(s), s) if self.strategies is not None else (0, s)

    # -- recording -----------------------------------------------------------------------------------

    def update(
        self,
        input_id: str | int,
        matches: Iterable[str],
        *,
        valid: bool = True,
        stream: int = 0,
        num_strategies: int | None = None,
    ) -> None:
        """Record one sample of ``input_id`` in ``stream`` (each (input, stream) is one run, in order).

        Args:
            input_id: the input.
            matches: strategy ids the sample's trace matches (empty for parse failures/off-strategy).
            valid: whether the sample is a correct solution.
            stream: the stream (e.g. vector-env index) the sample belongs to.
            num_strategies: M_x for this input (defaults to the declared count); fixed once set.
        """
        if not isinstance(valid, bool | np.bool_):
            raise ValueError(f"valid must be a bool, got {valid!r}")
        if isinstance(stream, bool) or not isinstance(stream, int | np.integer) or stream < 0:
            raise ValueError(f"stream must be a non-negative int, got {stream!r}")
        self.update_many(
            [input_id], [matches], valid=bool(valid), stream=int(stream), num_strategies=num_strategies
        )

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

        The whole batch is checked before anything is recorded: on ValueError the tracker is unchanged.

        Args:
            input_ids: the N inputs, in sample order.
            matches: bool array, shape (N, M), whose columns are the declared ``strategies``, or N
                iterables of strategy ids.
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
            mat, names = matches, list(self.strategies)
        else:
            sets = [_match_set(ms) for ms in matches]
            if len(sets) != n:
                raise ValueError(f"{n} input ids but {len(sets)} match sets")
            union = frozenset().union(*sets)
            if self.strategies is not None:
                unknown = sorted(union.difference(self.strategies))
                if unknown:
                    raise ValueError(f"unknown strategy ids {unknown}; declared: {list(self.strategies)}")
                names = list(self.strategies)
            else:
                names = sorted(union)
            index = {s: j for j, s in enumerate(names)}
            mat = np.zeros((n, len(names)), dtype=bool)
            for i, fs in enumerate(sets):
                mat[i, [index[s] for s in fs]] = True
        v = np.asarray(valid)
        if v.dtype != np.bool_ or v.ndim > 1 or (v.ndim == 1 and v.shape[0] != n):
            raise ValueError(f"valid must be a bool or a bool array of shape ({n},)")
        v = np.broadcast_to(v, (n,))
        st = _int_array(stream, n, "stream")
        if n == 0:
            return
        m_of = {x: self._resolve_m((self.task, x), num_strategies) for x in dict.fromkeys(ids)}
        # Check M_x before the first write: a refused batch must not leave runs behind.
        keys = list(zip(ids, st.tolist(), strict=True))
        seen: dict[tuple[str, int], set[str]] = {}
        # M_x can only be exceeded when it is below the column count: skip the per-sample check otherwise
        limit = len(set(self.columns).union(names))
        for (x, s), row in zip(keys, mat, strict=True) if min(m_of.values()) < limit else ():
            got = seen.get((x, s))
            if got is None:
                got = seen[(x, s)] = self._run_strategies(x, s)
            got.update(names[j] for j in np.flatnonzero(row))
            if len(got) > m_of[x]:
                raise ValueError(
                    f"input {x!r} has matched {len(got)} distinct strategies but its M_x is {m_of[x]}"
                )
        u = np.array([self._input_code((self.task, x), m_of[x]) for x in ids], dtype=np.int64)
        slots = np.empty(n, dtype=np.int64)
        for i, (_, s) in enumerate(keys):
            slots[i] = self._slot(int(u[i]), s)
        cols = np.array([self._column(s) for s in names], dtype=np.int64)
        hits = np.zeros((n, len(self.columns)), dtype=bool)
        hits[:, cols] = mat
        self._fold(u, slots, hits, v)

    def _run_strategies(self, x: str, stream: int) -> set[str]:
        code = self._code.get((self.task, x))
        slot = None if code is None else self._slot_of.get((code, stream))
        if slot is None:
            return set()
        return {self.columns[j] for j in np.flatnonzero(self.runs.first_hit[slot, : len(self.columns)] >= 0)}

    def _slot(self, u: int, stream: int) -> int:
        """The slot of run (input ``u``, ``stream``), created on first use."""
        slot = self._slot_of.get((u, stream))
        if slot is None:
            slot = self._slot_of[(u, stream)] = self.assigner.restore_slot(u, stream)
            local = stream - self.stream_offset + 1
            if local > self.assigner.next_stream[u]:  # record() must never reuse this stream
                self.assigner.next_stream[u] = local
        return slot

    def _fold(self, u: np.ndarray, slots: np.ndarray, hits: np.ndarray, valid: np.ndarray) -> None:
        """Positions in their runs, then the run table, sums and barcode (``update``'s path)."""
        self.runs.grow(self.assigner.n_slots)
        order = np.argsort(slots, kind="stable")
        ss = slots[order]
        starts = np.flatnonzero(_segment_starts(ss))
        within = np.arange(ss.size) - np.repeat(starts, np.diff(np.append(starts, ss.size)))
        k = np.empty_like(slots)
        k[order] = self.runs.n[ss] + within + 1
        self._record_positions(u, slots, k, hits, valid, None)

    def record(
        self,
        input_ids: np.ndarray,
        env_index: np.ndarray,
        sample_index: np.ndarray,
        run_index: np.ndarray,
        hits: np.ndarray,
        valid: np.ndarray,
        z: np.ndarray | None = None,
    ) -> int:
        """Record finished episodes of a training loop, assigning each to its run (the monitor's path).

        A run is one input's consecutive samples in one env row (see :class:`~seffi.coverage.assign.
        RunAssigner`); needs declared strategies and a ``budget``. Inputs get M = the declared count.

        Args:
            input_ids: object array, shape (N,): str (or int) input ids.
            env_index: int array, shape (N,).
            sample_index: int array, shape (N,): the env's position k, -1 if not reported.
            run_index: int array, shape (N,): the env's run counter, -1 if not reported.
            hits: bool array, shape (N, M): the declared strategies each episode matched.
            valid: bool array, shape (N,).
            z: int array, shape (N,): latent code (-1 if none), or None.

        Returns:
            The number of samples recorded (the rest were beyond their run's budget).
        """
        if self.budget is None or self.strategies is None:
            raise ValueError("record() needs declared strategies and a budget")
        u = self._codes(input_ids)
        slot, k = self.assigner.assign(u, env_index, sample_index, run_index)
        new = self.assigner.n_slots - len(self._slot_of)
        if new:  # register the runs just opened (one dict entry per run, not per sample)
            fresh = np.arange(self.assigner.n_slots - new, self.assigner.n_slots)
            su, st = self.assigner.slot_input[fresh].tolist(), self.assigner.slot_stream[fresh].tolist()
            self._slot_of.update(zip(zip(su, st, strict=True), fresh.tolist(), strict=True))
        self.runs.grow(self.assigner.n_slots)
        before = self.samples
        self._record_positions(u, slot, k, hits, valid, z)
        return self.samples - before

    def _codes(self, ids: np.ndarray) -> np.ndarray:
        """Input codes of raw ids (str or int), new inputs added with M = the declared count."""
        table = self._code
        try:
            return np.fromiter(map(table.__getitem__, ids.tolist()), dtype=np.int64, count=ids.shape[0])
        except (KeyError, TypeError):
            out = np.empty(ids.shape[0], dtype=np.int64)
            for i, x in enumerate(ids):
                code = table.get(x) if isinstance(x, str) else None
                if code is None:
                    key = (self.task, _input_id(x))
                    code = self._input_code(key, self.num_strategies)  # type: ignore[arg-type]
                    table[key[1]] = code
                    if isinstance(x, int | np.integer):
                        table[x] = code
                out[i] = code
            return out

    def _record_positions(
        self,
        u: np.ndarray,
        slot: np.ndarray,
        k: np.ndarray,
        hits: np.ndarray,
        valid: np.ndarray,
        z: np.ndarray | None,
    ) -> None:
        if u.shape[0] == 0:
            return
        in_budget = k <= self.budget if self.budget is not None else None
        if in_budget is not None and not in_budget.all():
            # Samples beyond K never enter C(k <= K); keeping them would cost O(samples).
            self.skipped += int((~in_budget).sum())
            keep = in_budget
            u, slot, k, hits, valid = u[keep], slot[keep], k[keep], hits[keep], valid[keep]
            z = z[keep] if z is not None else None
        self.bar.grow(len(self.keys))
        rank = [self._order_key(s) for s in self.columns]
        self.bar.add(
            u, slot, k, hits, self.assigner.slot_stream[slot],
            lambda sl: set(np.flatnonzero(self.runs.first_hit[sl] >= 0).tolist()),
            self.keys, sorted(range(len(self.columns)), key=rank.__getitem__),
        )  # fmt: skip
        fold(self.runs, self.sums, u, slot, k, hits, valid, self.m)
        if z is not None and self.latent_runs is not None:
            Z = self.num_latents
            ok = (z >= 0) & (z < Z)
            self.has_latent |= bool(ok.any())
            self.latent_runs.grow(self.assigner.n_slots)
            Zs, i = np.full(self.m.shape, Z), np.flatnonzero(ok)  # one code per sample: its hit is (i, z)
            lat = (self.latent_runs, self.latent_sums)
            fold(*lat, u, slot, k, None, valid, Zs, coverage_only=True, hit=(i, z[i]))
        self.samples += int(u.shape[0])
        self.valid += int(valid.sum())

    # -- merging and checkpoints ---------------------------------------------------------------------

    def merge(self, other: CoverageTracker) -> CoverageTracker:
        """Add another tracker's runs to this one (in place; returns self).

        Runs are a disjoint union keyed by (task, input_id, stream), so merging is exact,
        associative and commutative. Both trackers must declare the same strategies (or count) and
        barcode bounds; a run present in both raises (give each worker its own streams).
        """
        if not isinstance(other, CoverageTracker):
            raise ValueError(f"can only merge a CoverageTracker, got {type(other).__name__}")
        # Merged into a copy first: a merge that fails half-way must leave this tracker unchanged.
        fresh = state_io.from_state(type(self), self.state_dict())
        state_io.merge_into(fresh, other.state_dict(), keep_open=False)
        self.__dict__.update(fresh.__dict__)
        return self

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state (format version 2: integer arrays, runs in sorted key order)."""
        return state_io.to_state(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> CoverageTracker:
        """Replace this tracker's state with ``state`` (version 1 or 2); returns self.

        A foreign or corrupted state raises ValueError and leaves the tracker unchanged.
        """
        fresh = self.from_state_dict(state)
        self.__dict__.update(fresh.__dict__)
        return self

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any] | str | bytes) -> CoverageTracker:
        """A new tracker from :meth:`state_dict` output (versions 1 and 2; ValueError when corrupted)."""
        if isinstance(state, str | bytes):
            try:
                state = json.loads(state)
            except json.JSONDecodeError as exc:
                raise ValueError(f"tracker state is not valid JSON: {exc}") from exc
        return state_io.from_state(cls, state)

    @staticmethod
    def shift_streams(state: Mapping[str, Any], offset: int) -> dict[str, Any]:
        """A copy of a (version 2) state with every stream moved up by ``offset`` (workers' blocks)."""
        return state_io.shift_streams(state, offset)

    @staticmethod
    def stream_span(state: Mapping[str, Any]) -> int:
        """1 + the highest stream number in a state (0 when it holds no run)."""
        return state_io.stream_span(state)

    # -- results -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of runs."""
        return self.assigner.n_slots

    @property
    def n_samples(self) -> int:
        """Total samples recorded."""
        return self.samples

    def input_ids(self) -> list[str]:
        """Sorted ids of the inputs seen (over all tasks)."""
        return sorted({x for _, x in self.keys})

    def input_order(self) -> np.ndarray:
        """Input codes in sorted (task, input_id) order; cached until a new input appears."""
        if self._order[0] != len(self.keys):
            order = sorted(range(len(self.keys)), key=self.keys.__getitem__)
            self._order = (len(self.keys), np.array(order, dtype=np.int64))
        return self._order[1]

    def complete_runs(self, K: int | None = None) -> int:
        """Runs that reached K (default: the budget): the only ones the curves use."""
        K = self.budget if K is None else K
        if K is None:
            raise ValueError("complete_runs() needs K (the tracker has no budget)")
        return int((self.runs.n[: self.assigner.n_slots] >= K).sum())

    def point(self) -> dict[str, Any]:
        """Point estimates at the budget for a log, O(inputs x K) (needs ``budget``)."""
        if self.sums is None:
            raise ValueError("point() needs a tracker budget")
        # Sums change only when a run completes (or inputs are added): most logs see the same sums,
        # so the last estimates are reused (a shallow copy: callers may add keys).
        key, (sums, last, got) = (len(self.keys), int(self.sums.n_runs.sum())), self._point
        if sums is not self.sums or last != key:
            got = point_from_sums(self._trimmed(self.sums), self.m, self.input_order())
            self._point = (self.sums, key, got)
        return dict(got)

    def latent_coverage(self) -> np.ndarray | None:
        """Latent-code coverage per k (NaN where no run reached k), or None when none was recorded."""
        if self.latent_sums is None or not self.has_latent:
            return None
        Z = np.full(self.m.shape, self.num_latents)
        return point_from_sums(self._trimmed(self.latent_sums), Z, self.input_order())["coverage"]

    def _trimmed(self, sums: InputSums) -> InputSums:
        U = len(self.keys)
        if sums.sums.shape[0] == U:
            return sums
        return sums.take(np.arange(U))

    def derived_sums(self, K: int, **rarity: Any) -> tuple[InputSums, np.ndarray | None]:
        """Per-input sums for budget K derived from the runs (``sums_from_runs``; ``rarity``: its options)."""
        S, C = self.assigner.n_slots, len(self.columns)
        return sums_from_runs(
            self.runs.first_hit[:S, :C],
            self.runs.n[:S],
            self.assigner.slot_input,
            self.m,
            K,
            first_valid_hit=self.runs.first_valid_hit[:S, :C],
            first_valid=self.runs.first_valid[:S],
            **rarity,
        )

    def curves(
        self,
        K: int | None = None,
        *,
        n_boot: int = 1000,
        seed: int = 0,
        ci_level: float = 0.95,
        rarity: Any = None,
        rarity_bins: int = 4,
    ) -> Curves:
        """The policy's curves for k = 1..K with bootstrap intervals (inputs resampled within tasks).

        Args:
            K: budget (default: the tracker's ``budget``).
            n_boot: bootstrap replicates (0 skips intervals).
            seed: bootstrap seed.
            ci_level: interval level.
            rarity: the base law for the common-vs-rare split: an ``IidBaseline`` or a mapping
                ``{input_id: {strategy: base probability pi_s}}``; None skips the split.
            rarity_bins: number of within-input quantile bins of base probability.
        """
        if K is None:
            if self.budget is None:
                raise ValueError("curves() needs K (the tracker has no budget)")
            K = self.budget
        K = check_budget(K)
        if self.assigner.n_slots == 0:
            raise ValueError("the tracker has no samples yet: cannot compute curves")
        order = self.input_order()
        tasks = sorted({t for t, _ in self.keys})
        strata = np.array([tasks.index(self.keys[c][0]) for c in order.tolist()], dtype=np.int64)
        keys = [self.keys[c] for c in order.tolist()]
        if K == self.budget and rarity is None and self.sums is not None:
            sums, rare = self._trimmed(self.sums), None
        else:
            bins = None
            if rarity is not None:
                unit = self.assigner.slot_input
                ids = [self.keys[c][1] for c in unit.tolist()]
                bins = rarity_bin_matrix(rarity, ids, self.columns, self.m[unit], rarity_bins)
            sums, rare = self.derived_sums(K, rarity_bin=bins, n_bins=rarity_bins)
        S = self.assigner.n_slots
        c = curves_from_sums(
            sums, self.m, incomplete=int((self.runs.n[:S] < K).sum()), order=order, strata=strata,
            n_boot=n_boot, seed=seed, ci_level=ci_level, input_keys=keys, samples=self.samples, rarity=rare,
        )  # fmt: skip
        if self.bar.data:
            c.barcode = self.barcode(K)
        return c

    def barcode(self, K: int | None = None) -> dict[str, Any]:
        """The strategy barcode (rule: :mod:`seffi.coverage.barcode`), JSON-safe.

        Returns:
            ``rows`` ("task/input_id/stream" labels), ``input_ids``, ``strategies`` (column labels),
            ``first_strategy`` (int, rows x C: the cell, -1 for no match or no sample), ``new``
            (bool, rows x C: the sample added a strategy), ``lengths`` (samples per row).
            C = min(K, barcode_cols).
        """
        names = list(self.strategies) if self.strategies is not None else sorted(self.columns)
        return self.bar.to_dict(self.keys, self.columns, names, None if K is None else check_budget(K))

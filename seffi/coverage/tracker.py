"""``CoverageTracker``: the one owner of recorded run data — runs, inputs, barcode, latent codes.

Its state is declared in `seffi.coverage.state`. Per run it keeps first-hit indices (memory
O(runs x strategies)); with a budget K, per-input sums as runs complete (a log costs O(groups x K)).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from seffi.coverage import state as states
from seffi.coverage._common import _check_strategies, _input_id, _int_array, _match_set, rarity_bin_matrix
from seffi.coverage.assign import InputKeys, KeyIndex, RunAssigner, pair_keys
from seffi.coverage.barcode import BARCODE_ROWS, BarcodeRows
from seffi.coverage.curves import Curves, KeyView, check_budget
from seffi.coverage.input_metrics import Estimate, InputMetric, registered
from seffi.coverage.resampling import MIN_INPUTS
from seffi.coverage.room import grow
from seffi.coverage.state import MAX_STRATEGIES, STATE, STATE_FORMAT
from seffi.coverage.sums import (
    _TOP,
    GroupTotals,
    InputSums,
    RunTable,
    _segment_starts,
    add_runs,
    fit,
    fold,
    fold_latent,
    int_type,
    run_sums,
    sums_from_runs,
)
from seffi.coverage.sums_curves import curves_from_sums, point_from_totals
from seffi.episodes import EpisodeBatch

__all__ = ["BARCODE_ROWS", "STATE", "STATE_FORMAT", "CoverageTracker"]

_RECENT = 256  # ids whose codes `CoverageTracker._codes` keeps between batches


class CoverageTracker:
    """Records, per (input, stream) run, which strategies were covered and when.

    Args:
        strategies: the declared strategy ids (a sequence of str; unknown ids raise), or an int M:
            strategies are then free-form ids and M is the default denominator (and the largest
            M_x). None: free-form ids; every input's M_x must then come with its first ``update``.
        task: task name; runs of different tasks form separate bootstrap strata after ``merge``.
        budget: K (at most ``state.MAX_BUDGET``), or None. With K, only each run's first K samples
            are recorded (later ones are counted in ``skipped``) and `curves` defaults to K.
        barcode_rows: keep the strategy barcode (`seffi.coverage.barcode`) of this many inputs (the
            smallest (task, input_id) keys). 0 keeps none; a monitor keeps `BARCODE_ROWS`.
        barcode_cols: samples kept per barcode row.
        num_latents: Z > 0 records which latent codes each run tried (the batch's ``z``).
        stream_offset: first stream number of runs that `record` opens.

    Examples:
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
            raise ValueError(f"strategies must be str ids, a count or None, got {strategies!r}")
        if isinstance(strategies, int | np.integer):
            self.strategies: tuple[str, ...] | None = None
            self.num_strategies: int | None = int(strategies)
        else:  # non-empty unique str ids, or None
            self.strategies = _check_strategies(strategies)
            self.num_strategies = None if self.strategies is None else len(self.strategies)
        if self.num_strategies is not None and not 1 <= self.num_strategies <= MAX_STRATEGIES:
            raise ValueError(
                f"the strategy count must be in [1, {MAX_STRATEGIES}], got {self.num_strategies}"
            )
        given = {"task": task, "budget": budget, "barcode_rows": barcode_rows, "barcode_cols": barcode_cols}
        given |= {"num_latents": num_latents, "stream_offset": stream_offset}
        if budget is not None:
            check_budget(budget)
        for p in states.SETTINGS[2:-1]:  # bounded by the declaration, as a loaded state is
            setattr(self, p.name, states.setting(p, given[p.name], given))
        self.reset()

    def reset(self) -> None:
        """Drop everything recorded (every part of `STATE` back to empty)."""
        self.columns: list[str] = list(self.strategies or ())
        self._col = {s: j for j, s in enumerate(self.columns)}
        self.keys = InputKeys()  # input code -> (task, input_id), and back
        self._recent: dict[str, int] = {}  # id -> code of recent batches' ids (a log's batch repeats them)
        self._m = np.zeros(16, dtype=np.int64)  # M_x per input code
        self.assigner = RunAssigner(self.budget or 1, self.stream_offset)
        self._slots = KeyIndex("V16")  # pair_keys(input code, stream) -> slot, synced lazily
        self._slots_synced = 0
        self.runs = RunTable(len(self.columns), self.num_latents, budget=self.budget)
        self.complete = CompleteRuns(self.budget) if self.budget else None  # sums of every complete run
        self._done = np.zeros(0, dtype=np.int32)  # slots of complete runs, in order of completion
        self.n_done = 0
        self.bar = BarcodeRows(self.barcode_rows, self.barcode_cols)
        self.metrics: list[InputMetric] = [cls() for cls in registered()]  # `seffi.coverage.metrics`
        for p in states.COUNTERS:
            setattr(self, p.name, bool(p.fill) if p.kind == "bool" else p.fill)
        self._order: tuple[int, np.ndarray] = (-1, np.zeros(0, dtype=np.int64))
        self._rule: tuple[int, np.ndarray] = (-1, np.zeros(0, dtype=np.int64))
        self._fitted = False  # metric state fitted to its cells at the first batch (or a load)

    @property
    def m(self) -> np.ndarray:
        """M_x per input code: int array, shape (U,)."""
        return self._m[: len(self.keys)]

    def _add_inputs(self, keys: list[tuple[str, str]], m: Any) -> None:
        """New inputs ``keys`` with M_x ``m`` (one int, or one per key)."""
        start = len(self.keys)
        self.keys.add(keys)
        grow(self, "_m", len(self.keys))
        self._m[start : len(self.keys)] = m
        self.assigner.ensure_inputs(len(self.keys))

    def _column(self, s: str) -> int:
        j = self._col.get(s)
        if j is None:
            j = self._col[s] = len(self.columns)
            self.columns.append(s)
            self.runs.grow(0, len(self.columns))
        return j

    def _resolve_m(self, key: tuple[str, str], num_strategies: int | None) -> int:
        """M_x of input ``key`` (checked, not stored)."""
        code = self.keys.get(key)
        known = int(self.m[code]) if code is not None else self.num_strategies
        if num_strategies is None and known is None:
            raise ValueError(
                f"input {key[1]!r}: no strategy count; pass num_strategies= or declare strategies"
            )
        if num_strategies is None:
            return known  # type: ignore[return-value]
        top, given = self.num_strategies or MAX_STRATEGIES, num_strategies
        if isinstance(given, bool) or not isinstance(given, int | np.integer) or not 1 <= given <= top:
            raise ValueError(f"num_strategies must be in [1, {top}] (the tracker's count), got {given!r}")
        if code is not None and known != given:
            raise ValueError(f"input {key[1]!r} already has M_x={known}, got {given!r}")
        return int(given)

    def _rule_order(self) -> np.ndarray:
        """Columns in the barcode rule's order: declared order when declared, else alphabetical."""
        C = len(self.columns)
        if self._rule[0] != C:
            order = sorted(range(C), key=self.columns.__getitem__) if self.strategies is None else range(C)
            self._rule = (C, np.array(order, dtype=np.int64))
        return self._rule[1]

    def _slots_of(self, u: np.ndarray, streams: np.ndarray) -> np.ndarray:
        """Slots of the runs (input codes ``u``, ``streams``), -1 where none (index synced first)."""
        S = self.assigner.n_slots
        if self._slots_synced < S:
            a = self._slots_synced
            keys = pair_keys(self.assigner.slot_input[a:], self.assigner.slot_stream[a:])
            self._slots.add(keys, np.arange(a, S, dtype=np.int64))
            self._slots_synced = S
        return self._slots.get(pair_keys(u, streams))

    def record(self, batch: EpisodeBatch) -> int:
        """Record finished episodes (a `seffi.episodes.EpisodeBatch`), each assigned to its run.

        A run is one input's consecutive samples in one env row (`RunAssigner`); needs declared
        strategies (the batch's) and a ``budget``. Returns the samples recorded (not beyond budgets).
        """
        if self.budget is None or self.strategies is None:
            raise ValueError("record() needs declared strategies and a budget")
        if batch.strategies != self.strategies:
            raise ValueError(f"a batch over {batch.strategies} for a tracker of {self.strategies}")
        u, before = self._codes(batch.input_id), self.samples
        slot, k = self.assigner.assign(u, batch.env_index, batch.sample_index, batch.run_index)
        self.runs.grow(self.assigner.n_slots)
        self._record_positions(u, slot, k, batch.hits, batch.valid, batch.z)
        return self.samples - before

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
        self.update_many([input_id], [matches], valid=valid, stream=stream, num_strategies=num_strategies)

    def update_many(
        self,
        input_ids: Sequence[str | int],
        matches: np.ndarray | Sequence[Iterable[str]],
        *,
        valid: bool | Sequence[bool] | np.ndarray = True,
        stream: int | Sequence[int] | np.ndarray = 0,
        num_strategies: int | None = None,
    ) -> None:
        """Record N samples at once, as ``update`` each in order; a refused batch records nothing.

        Args:
            input_ids: the N inputs, in sample order.
            matches: bool array, shape (N, M), whose columns are the declared ``strategies``, or N
                iterables of strategy ids.
            valid: bool array, shape (N,), or one bool for every sample.
            stream: non-negative int array, shape (N,), or one stream for every sample.
            num_strategies: M_x for every input of the batch (as in `update`).
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
        # M_x checked before the first write (a refused batch leaves no run), only where it can be passed
        seen: dict[tuple[str, int], set[str]] = {}
        limit = len(set(self.columns).union(names))
        if min(m_of.values()) < limit:  # else no input can match more than its M_x
            for x, s, row in zip(ids, st.tolist(), mat, strict=True):
                if (x, s) not in seen:  # the strategies its run (if any) already matched
                    code = self.keys.get((self.task, x))
                    slot = -1 if code is None else int(self._slots_of(np.array([code]), np.array([s]))[0])
                    have = self.runs.first_hit[slot, : len(self.columns)] >= 0 if slot >= 0 else ()
                    seen[(x, s)] = {self.columns[j] for j in np.flatnonzero(have)}
                got = seen[(x, s)]
                got.update(names[j] for j in np.flatnonzero(row))
                if len(got) > m_of[x]:
                    raise ValueError(
                        f"input {x!r} has matched {len(got)} distinct strategies but its M_x is {m_of[x]}"
                    )
        known = self.keys.codes(self.task, list(m_of))
        new = [x for x, c in zip(m_of, known.tolist(), strict=True) if c < 0]
        self._add_inputs([(self.task, x) for x in new], np.array([m_of[x] for x in new], dtype=np.int64))
        u = self.keys.codes(self.task, ids)
        slots = self._slots_of(u, st)
        new = np.flatnonzero(slots < 0)
        if new.size:  # new runs get slots in order of first appearance; record() never reuses a stream
            _, first, inv = np.unique(pair_keys(u[new], st[new]), return_index=True, return_inverse=True)
            made = np.empty(first.size, dtype=np.int64)
            made[np.argsort(first)] = self.assigner.add_slots(st[new][np.sort(first)], u[new][np.sort(first)])
            slots[new] = made[inv.reshape(-1)]
        cols = np.array([self._column(s) for s in names], dtype=np.int64)
        hits = np.zeros((n, len(self.columns)), dtype=bool)
        hits[:, cols] = mat
        self.runs.grow(self.assigner.n_slots)
        order = np.argsort(slots, kind="stable")
        ss = slots[order]
        starts = np.flatnonzero(_segment_starts(ss))
        within = np.arange(ss.size) - np.repeat(starts, np.diff(np.append(starts, ss.size)))
        k = np.empty_like(slots)
        k[order] = self.runs.n[ss] + within + 1
        self._record_positions(u, slots, k, hits, v, None)

    def _codes(self, ids: np.ndarray) -> np.ndarray:
        """Input codes of raw ids (str or int), new inputs added with M = the declared count."""
        raw = ids.tolist()
        with contextlib.suppress(KeyError):  # every id seen in a recent batch: one dict pass
            return np.fromiter(map(self._recent.__getitem__, raw), np.int64, len(raw))
        if not set(map(type, raw)) <= {str}:
            raw = [x if type(x) is str else _input_id(x) for x in raw]
        # A batch repeats few ids: code each distinct one once (a str caches its hash, so this is cheap).
        distinct = list(dict.fromkeys(raw))
        codes = self.keys.codes(self.task, distinct)
        miss = np.flatnonzero(codes < 0)
        if miss.size:  # new inputs: added at once, in order of appearance
            self._add_inputs([(self.task, distinct[i]) for i in miss.tolist()], self.num_strategies)
            codes[miss] = self.keys.codes(self.task, [distinct[i] for i in miss.tolist()])
        code_of = dict(zip(distinct, codes.tolist(), strict=True))
        if len(code_of) <= _RECENT:  # a batch of few inputs; bounded: memory follows no input count
            if len(self._recent) + len(code_of) > _RECENT:
                self._recent.clear()
            self._recent.update(code_of)
        return np.fromiter(map(code_of.__getitem__, raw), np.int64, len(raw))

    def _record_positions(self, u: Any, slot: Any, k: Any, hits: Any, valid: Any, z: Any) -> None:
        """Record samples at their positions ``k`` in their runs ``slot`` (arrays, (N,); hits (N, C))."""
        if u.shape[0] == 0:
            return
        if self.budget is not None:
            keep = k <= self.budget
            if not keep.all():
                # Samples beyond K never enter C(k <= K); keeping them would cost O(samples).
                self.skipped += int((~keep).sum())
                np.add.at(self.runs.beyond, slot[~keep], 1)  # per run: the state ties skipped to them
                u, slot, k, hits, valid = u[keep], slot[keep], k[keep], hits[keep], valid[keep]
                z = z[keep] if z is not None else None
        self._fit_metrics(u)
        for metric in self.metrics:
            metric.update(u, hits, valid)
        if self.bar.rows:
            C, streams = len(self.columns), self.assigner.slot_stream[slot]
            covered = lambda sl: self.runs.first_hit[sl, :C] >= 0  # noqa: E731
            self.bar.add(u, slot, k, hits, streams, covered, self.keys, self._rule_order())
        fold(self.runs, slot, k, hits, valid)
        if z is not None and self.num_latents:
            self.has_latent |= fold_latent(self.runs, slot, k, z)
        if self.complete is not None:
            done = k == self.budget  # a run enters the sums once complete: its K-th sample just arrived
            if done.any():
                self._complete(slot[done], u[done])
        self.samples += int(u.shape[0])
        self.valid += int(valid.sum())

    def _fit_metrics(self, u: np.ndarray | None) -> None:
        """Hold each metric's state in the narrowest integer type its cells can need (None: refit all).

        A sample adds at most one to a cell, so a cell stays below the samples recorded: while those fit
        the type, the cells are not read; else a cell grows by at most its input's samples in ``u``.
        """
        full, extra, codes = u is None or not self._fitted, 0, None
        for metric in self.metrics:
            metric.grow(len(self.keys), len(self.columns))
            for spec in metric.specs.values():
                arr = getattr(metric, spec.name)
                if not full and max(self.samples + u.shape[0], -spec.lo) <= _TOP[arr.dtype]:  # type: ignore[union-attr]
                    continue
                if codes is None and u is not None:
                    codes, n = np.unique(u, return_counts=True)
                    extra = int(n.max(initial=0))
                cells = arr if full else arr[codes]
                top = max(int(cells.max(initial=0)), -int(cells.min(initial=0))) + extra
                if full or top > _TOP[arr.dtype]:
                    setattr(metric, spec.name, arr.astype(int_type(top)))
        self._fitted = True

    def _complete(self, slots: np.ndarray, u: np.ndarray) -> None:
        """Runs ``slots`` (of input codes ``u``) just completed: into the sums, noted in order."""
        self.complete.add(self.runs, slots, u, self.m)  # type: ignore[union-attr]
        n = self.n_done + slots.size
        grow(self, "_done", n)
        self._done = fit(self._done, self.assigner.n_slots)
        self._done[self.n_done : n] = slots
        self.n_done = n

    @property
    def done(self) -> np.ndarray:
        """Slots of the complete runs, in the order they completed (a loaded state's in slot order)."""
        return self._done[: self.n_done]

    def _rebuild_sums(self) -> None:
        """Per-input sums of every complete run (after a load); metrics fitted."""
        self._fit_metrics(None)
        if self.budget is None:
            return
        self.complete, self._done, self.n_done = CompleteRuns(self.budget), np.zeros(0, dtype=np.int32), 0
        done = np.flatnonzero(self.runs.n[: self.assigner.n_slots] >= self.budget)
        if done.size:
            self._complete(done, self.assigner.slot_input[done])

    def merge(self, other: CoverageTracker) -> CoverageTracker:
        """Add another tracker's runs to this one (in place, atomic; returns self).

        Runs are a disjoint union keyed by (task, input_id, stream): merging is exact, associative
        and commutative. Both must declare the same strategies (or count), budget and latent codes;
        a run present in both raises (give each worker its own streams).
        """
        if not isinstance(other, CoverageTracker):
            raise ValueError(f"can only merge a CoverageTracker, got {type(other).__name__}")
        # Merged into a new tracker first: a merge that fails half-way leaves this one unchanged.
        fresh = states.merge(type(self), states.dump(self), states.dump(other))
        self.__dict__.update(fresh.__dict__)
        return self

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state (format 2: integer arrays, runs in sorted key order)."""
        return states.to_json(states.dump(self))

    def load_state_dict(self, state: Mapping[str, Any] | str | bytes) -> CoverageTracker:
        """Replace this tracker's state with ``state`` (format 1 or 2; ValueError leaves it unchanged)."""
        fresh = self.from_state_dict(state)
        self.__dict__.update(fresh.__dict__)
        return self

    @classmethod
    def from_state_dict(
        cls, state: Mapping[str, Any] | str | bytes, *, barcode_rows: int | None = None
    ) -> CoverageTracker:
        """A new tracker from `state_dict` output or its JSON text (formats 1, 2; ValueError if corrupted).

        ``barcode_rows``: keep this many barcode rows (the smallest keys) instead of the state's.
        """
        if isinstance(state, str | bytes):
            try:
                state = json.loads(state)
            except json.JSONDecodeError as exc:
                raise ValueError(f"tracker state is not valid JSON: {exc}") from exc
        return states.load(cls, state, barcode_rows=barcode_rows)

    @staticmethod
    def shift_streams(state: Mapping[str, Any], offset: int) -> dict[str, Any]:
        """A copy of a state with every stream moved up by ``offset`` (workers' blocks)."""
        return states.shift_streams(state, offset)

    @staticmethod
    def stream_span(state: Mapping[str, Any]) -> int:
        """1 + the highest stream number in a state (0 when it holds no run)."""
        return states.stream_span(state)

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
            self._order = (len(self.keys), self.keys.order())
        return self._order[1]

    def complete_inputs(self) -> np.ndarray:
        """Codes of the inputs with a complete run, in the order their first run completed (it only grows)."""
        return self.complete.codes if self.complete is not None else np.zeros(0, dtype=np.int64)

    def complete_runs(self, K: int | None = None) -> int:
        """Runs that reached K (default: the budget): the only ones the curves use."""
        K = self.budget if K is None else K
        if K is None:
            raise ValueError("complete_runs() needs K (the tracker has no budget)")
        if K == self.budget:  # counted as they complete: O(1) per log
            return self.complete.runs  # type: ignore[union-attr]
        return int((self.runs.n[: self.assigner.n_slots] >= K).sum())

    def _window(self, slots: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(runs, their rows 0..P-1, input codes of the rows in sorted key order) of run slots ``slots``."""
        slots = np.asarray(slots, dtype=np.int64).reshape(-1)
        if slots.size and (slots.min() < 0 or slots.max() >= self.assigner.n_slots):
            raise ValueError(f"slots must be runs of this tracker (0..{self.assigner.n_slots - 1})")
        codes, unit = np.unique(self.assigner.slot_input[slots], return_inverse=True)
        keys = self.keys.take(codes)
        by_key = np.array(sorted(range(codes.size), key=keys.__getitem__), dtype=np.int64)
        row = np.empty(codes.size, dtype=np.int64)
        row[by_key] = np.arange(codes.size)
        return slots, row[unit.reshape(-1)], codes[by_key]

    def point(self, slots: Any = None) -> dict[str, Any]:
        """Point estimates at the budget for a log, over run ``slots`` (O(their runs x K)) or every run."""
        if self.complete is None:
            raise ValueError("point() needs a tracker budget")
        if slots is not None:
            runs, unit, codes = self._window(slots)
            part = run_sums(self.runs, runs, unit, self.m[codes], self.budget)  # type: ignore[arg-type]
            return point_from_totals(GroupTotals.of(part, self.m[codes]))
        return self.complete.point()

    def latent_coverage(self) -> np.ndarray | None:
        """Latent-code coverage per k (NaN where no run reached k), or None when none was recorded."""
        if self.budget is None or not self.num_latents or not self.has_latent:
            return None
        S = self.assigner.n_slots
        runs, unit, codes = self._window(np.flatnonzero(self.runs.n[:S] >= self.budget))
        Z = np.full(codes.size, self.num_latents)
        part = run_sums(self.runs, runs, unit, Z, self.budget, latent=True)
        return curves_from_sums(part, Z, n_boot=0).coverage if codes.size else None  # sorted keys, as curves

    def metric_estimates(
        self, base_law: Callable[[str], Mapping[frozenset[str], float]] | None = None
    ) -> dict[str, Estimate]:
        """Every per-input metric's estimate over the inputs recorded, by name.

        Args:
            base_law: ``base_law(input_id)``: the base sampler's law over match sets (an env's
                ``base_match_distribution``), for each metric's iid figure; None: no iid figure.
        """
        keys, out = self.keys, {}
        law_of = None if base_law is None else lambda code: _matched_law(base_law(keys[code][1]))
        for m in self.metrics:
            m.grow(len(self.keys), len(self.columns))
            est = m.compute(self.keys.strata(), law_of)
            if m.partial:
                note = "counts only the samples recorded after loading a state without this metric"
                est = est.model_copy(update={"reason": f"{est.reason}; {note}" if est.reason else note})
            out[m.name] = est
        return out

    def derived_sums(self, K: int, **rarity: Any) -> tuple[InputSums, np.ndarray | None]:
        """Per-input sums for budget K derived from the runs (``sums_from_runs``; ``rarity``: its options)."""
        S, C, r = self.assigner.n_slots, len(self.columns), self.runs
        kw = {"first_valid_hit": r.first_valid_hit[:S, :C], "first_valid": r.first_valid[:S], **rarity}
        return sums_from_runs(r.first_hit[:S, :C], r.n[:S], self.assigner.slot_input, self.m, K, **kw)

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
        S, U, order = self.assigner.n_slots, len(self.keys), self.input_order()
        incomplete, done = int((self.runs.n[:S] < K).sum()), self.complete
        rows = np.full(U, -1, dtype=np.int64)
        if done is not None:
            have = min(U, done.row_of.size)
            rows[:have] = done.row_of[:have]
        rows = rows[order]  # the sums row of each input in sorted key order (-1: no complete run)
        held = rows >= 0
        # The streamed sums are read in canonical order where they are (``at``), never copied whole.
        if K == self.budget and rarity is None and done is not None and held.sum() >= MIN_INPUTS:
            codes, at = (order, rows) if held.all() else (order[held], rows[held])
            sums, m, absent, rare = done.sums, self.m[done.codes], U - codes.size, None
        else:
            bins = None
            if rarity is not None:
                unit = self.assigner.slot_input
                ids = self.keys.input_ids()[unit].tolist()
                bins = rarity_bin_matrix(rarity, ids, self.columns, self.m[unit], rarity_bins)
            sums, rare = self.derived_sums(K, rarity_bin=bins, n_bins=rarity_bins)
            m, codes, at, absent = self.m[: len(self.keys)], order, order, 0
        strata = self.keys.strata(codes)  # a stratum per task
        c = curves_from_sums(
            sums,
            m,
            order=at,
            incomplete=incomplete,
            strata=strata,
            n_boot=n_boot,
            seed=seed,
            ci_level=ci_level,
            input_keys=KeyView(self.keys, codes),
            samples=self.samples,
            rarity=rare,
            absent=absent,
        )
        if self.bar.data:
            c.barcode = self.barcode(K)
        return c

    def barcode(self, K: int | None = None) -> dict[str, Any]:
        """The strategy barcode (rule: `seffi.coverage.barcode`), JSON-safe.

        Returns:
            ``rows`` ("task/input_id/stream" labels), ``input_ids``, ``strategies`` (column labels),
            ``first_strategy`` (int, rows x C: the cell, -1 for no match or no sample), ``new``
            (bool, rows x C: the sample added a strategy), ``lengths`` (samples per row).
            C = min(K, barcode_cols).
        """
        names = list(self.strategies) if self.strategies is not None else sorted(self.columns)
        return self.bar.to_dict(self.keys, self.columns, names, None if K is None else check_budget(K))


class CompleteRuns:
    """Per-input sums of a set of complete runs and their group totals: point estimates in O(groups x K).

    A tracker keeps one over every complete run, a monitor's window one over its recent runs (added
    and removed: integer sums, exact in any order). ``reuse_rows``: an input whose runs all left gives
    its row to the next new input (memory follows the runs held).
    """

    def __init__(self, budget: int, *, reuse_rows: bool = False) -> None:
        self.budget = int(budget)
        self.reuse_rows = reuse_rows
        self._free = np.zeros(0, dtype=np.int64)  # rows given back (``reuse_rows``)
        self.sums = InputSums(self.budget, dtype=np.int8, squares=False)
        self.totals = GroupTotals(self.budget)
        # int32: a tracker holds far fewer than 2^31 inputs (as `RunAssigner.slot_input`)
        self.row_of = np.full(16, -1, dtype=np.int32)  # input code -> row of ``sums`` (-1: none)
        self._codes = np.zeros(16, dtype=np.int32)  # row of ``sums`` -> input code (capacity grows)
        self.runs = self.samples = self.valid = self.n_rows = 0
        self._point: dict[str, Any] | None = None
        #: (slots, input codes, their sums) of the runs added or removed last.
        self.last: tuple[np.ndarray, np.ndarray, InputSums] | None = None

    def add(
        self,
        table: RunTable,
        slots: np.ndarray,
        u: np.ndarray,
        m: np.ndarray,
        sign: int = 1,
        *,
        known: tuple[np.ndarray, Any, Any] | None = None,
    ) -> None:
        """Add (``sign`` 1) or remove (-1) the complete runs ``slots`` (R,) of inputs ``u`` (R,).

        ``m``: M_x per input code. ``known``: a `last` (sums None: not known); when it holds these
        runs, their sums are reused (a window adds the runs the tracker just added, removes its own).
        """
        if slots.size == 0:
            return
        if known is not None and known[2] is not None and np.array_equal(known[0], slots):
            codes, part = known[1], known[2]
        else:
            codes, unit = np.unique(u, return_inverse=True)
            part = run_sums(table, slots, unit.reshape(-1), m[codes], self.budget)
        self.last = (slots, codes, part)
        grow(self, "row_of", int(codes[-1]) + 1, -1)
        rows = self.row_of[codes]
        new = np.flatnonzero(rows < 0)
        if new.size:  # the first run of these inputs: a row each (a freed one first)
            reused, self._free = self._free[: new.size], self._free[new.size :]
            have, fresh = self.n_rows, new.size - reused.size
            rows[new] = np.concatenate([reused, np.arange(have, have + fresh)])
            self.row_of[codes[new]] = rows[new]
            grow(self, "_codes", have + fresh)
            self._codes[rows[new]] = codes[new]
            self.n_rows = have + fresh
            self.sums.grow(have + fresh)
        add_runs(self.sums, self.totals, rows, part, m[codes], sign)
        if sign < 0 and self.reuse_rows:  # integer sums: an input without runs left holds zeros
            gone = rows[self.sums.n_runs[rows] == 0]
            self.row_of[self._codes[gone]] = -1
            self._free = np.concatenate([self._free, gone])
        self.runs += sign * int(slots.size)
        self.samples += sign * int(table.n[slots].sum())
        self.valid += sign * int(table.n_valid[slots].sum())
        self._point = None

    @property
    def codes(self) -> np.ndarray:
        """Row of ``sums`` -> input code: inputs in the order their first run was added."""
        return self._codes[: self.n_rows]

    def point(self) -> dict[str, Any]:
        """Point estimates over the runs held (cached until runs come or go; a copy)."""
        if self._point is None:
            self._point = point_from_totals(self.totals)
        return dict(self._point)

    def input_codes(self) -> np.ndarray:
        """Codes of the inputs with a run held, ascending."""
        return np.sort(self.codes[self.sums.n_runs[: self.codes.size] > 0])


def _matched_law(law: Mapping[frozenset[str], float]) -> dict[str, float]:
    """P(a sample matches s) per strategy s, from a law over match sets."""
    out: dict[str, float] = {}
    for matched, p in law.items():
        for s in matched:
            out[s] = out.get(s, 0.0) + float(p)
    return out

"""Streaming run statistics: coverage curves in O(inputs x K) however many runs and samples came in.

:func:`seffi.coverage.runs.curves_from_runs` (behind ``CoverageTracker.curves``) rebuilds per-run
arrays at every call, so its cost grows with the number of runs — fine for a report, too slow for a
log every few hundred episodes. Every quantity it reports is, per input, a *sum over runs* of a
contribution that is fixed the moment a run's k-th sample arrives (coverage after k samples, whether
sample k was new, the Kaplan-Meier event and at-risk indicators at k, ...). :class:`RunSums` adds
those contributions as samples arrive (vectorised over a batch) into integer arrays of shape
(inputs, K, statistics); curves, their bootstrap intervals over inputs and the point estimates for a
log are then small numpy reductions over those sums. Integer sums merge exactly in any order.

:class:`RunAssigner` decides, also vectorised, which run (tracker stream) each finished episode
belongs to and its position k in that run.

The estimator is the one of ``curves_from_runs``; ``tests/callbacks/test_streaming.py`` checks that
both give the same curves and intervals on the same samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seffi.coverage.curves import TAUS, Curves, TimeToCoverage, survival_summary, tau_key
from seffi.coverage.resampling import bootstrap_counts, percentile_interval
from seffi.coverage.sums import input_auc_contributions

#: Statistics summed per (input, k): names in storage order. ``risk``/``event`` come once per tau.
BASE_STATS: tuple[str, ...] = ("runs", "covered", "novel", "new", "full", "valid_covered", "valid_any")
#: Curves metrics in the order ``curves_from_runs`` stacks them (after the availability block).
METRICS: tuple[str, ...] = (
    "coverage",
    "novelty",
    "expected_new",
    "full_coverage",
    "valid_coverage",
    "valid_at_k",
)
N_STATS = len(BASE_STATS) + 2 * len(TAUS)


def _segment_starts(keys: np.ndarray) -> np.ndarray:
    """Bool array, shape (N,): True where a run of equal consecutive ``keys`` starts."""
    return np.r_[True, keys[1:] != keys[:-1]] if keys.size else np.zeros(0, dtype=bool)


def _cum_or(x: np.ndarray, starts: np.ndarray, seg: np.ndarray, init: np.ndarray) -> np.ndarray:
    """Cumulative OR along axis 0 restarted at each segment, OR-ed with each segment's initial row.

    Args:
        x: bool array, shape (N, C).
        starts: int array, shape (G,): first row of each segment.
        seg: int array, shape (N,): segment of each row.
        init: bool array, shape (G, C).
    """
    c = np.cumsum(x, axis=0, dtype=np.int64)
    before = c[starts] - x[starts]
    return ((c - before[seg]) > 0) | init[seg]


def _add_rows(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``np.add.at(target, index, values)`` for rows, exact in integers and several times faster.

    Args:
        target: int array, shape (R, S), updated in place.
        index: int array, shape (N,): target row of each value row (repeats allowed).
        values: int array, shape (N, S).
    """
    if index.size == 0:
        return
    order = np.argsort(index, kind="stable")
    index = index[order]
    starts = np.flatnonzero(_segment_starts(index))
    target[index[starts]] += np.add.reduceat(values[order], starts, axis=0)


class RunSums:
    """Per-input sums of per-run contributions at each k (the sufficient statistics of the curves).

    Args:
        num_columns: Strategy columns C of the match matrices.
        budget: K.
        m: The coverage denominator M (the same for every input).
        coverage_only: Keep only what a coverage curve needs — the ``runs`` and ``covered`` sums
            and ``first_hit`` — and leave the other statistics and per-run fields at their initial
            values (the router envs' latent-coverage diagnostic: about half the work of a full add).

    Attributes:
        sums: int array, shape (U, K, N_STATS): for input u and budget k, the sums over runs of
            ``BASE_STATS`` then (risk, event) per tau in ``TAUS``.
        n_runs: int array, shape (U,): runs per input.
        samples: samples added.
        first_hit, first_valid_hit, counts: int arrays, shape (S, C): per run slot, the tracker's
            per-run fields (index of the first sample / first correct sample matching each column,
            -1 for never; matches per column); n, n_valid, first_valid: int arrays, shape (S,).
    """

    def __init__(self, num_columns: int, budget: int, m: int, *, coverage_only: bool = False) -> None:
        self.C, self.K, self.m = int(num_columns), int(budget), int(m)
        self.coverage_only = bool(coverage_only)
        self.need = np.array([math.ceil(tau * self.m - 1e-9) for tau in TAUS], dtype=np.int64)
        self.sums = np.zeros((0, self.K, N_STATS), dtype=np.int64)
        self.n_runs = np.zeros(0, dtype=np.int64)
        self.samples = 0
        # Per run slot, the tracker's run state as arrays (first-hit indices are -1 for "never"), so a
        # batch is recorded by numpy scatters and a CoverageTracker can be built from it on demand.
        self.first_hit = np.full((0, self.C), -1, dtype=np.int64)
        self.first_valid_hit = np.full((0, self.C), -1, dtype=np.int64)
        self.counts = np.zeros((0, self.C), dtype=np.int64)
        self.n = np.zeros(0, dtype=np.int64)
        self.n_valid = np.zeros(0, dtype=np.int64)
        self.first_valid = np.zeros(0, dtype=np.int64)

    def grow(self, n_inputs: int, n_slots: int) -> None:
        """Make room for ``n_inputs`` inputs and ``n_slots`` run slots (amortised doubling)."""
        if n_inputs > self.sums.shape[0]:
            extra = n_inputs - self.sums.shape[0]
            self.sums = np.concatenate([self.sums, np.zeros((extra, self.K, N_STATS), dtype=np.int64)])
            self.n_runs = np.concatenate([self.n_runs, np.zeros(extra, dtype=np.int64)])
        if n_slots > self.n.shape[0]:
            extra = max(n_slots, 2 * self.n.shape[0], 64) - self.n.shape[0]
            for name, fill in (("first_hit", -1), ("first_valid_hit", -1), ("counts", 0)):
                grown = np.full((extra, self.C), fill, dtype=np.int64)
                setattr(self, name, np.concatenate([getattr(self, name), grown]))
            for name, fill in (("n", 0), ("n_valid", 0), ("first_valid", -1)):
                setattr(
                    self, name, np.concatenate([getattr(self, name), np.full(extra, fill, dtype=np.int64)])
                )

    def add(
        self, u: np.ndarray, slot: np.ndarray, k: np.ndarray, hits: np.ndarray, valid: np.ndarray
    ) -> None:
        """Add samples (any order across runs, in order within a run).

        Args:
            u: int array, shape (N,): input index of each sample.
            slot: int array, shape (N,): run slot (a run's samples share it).
            k: int array, shape (N,): 1-based position of the sample in its run, <= K.
            hits: bool array, shape (N, C): the strategy columns the sample matched.
            valid: bool array, shape (N,): the sample was correct.
        """
        n = u.shape[0]
        if n == 0:
            return
        self.grow(int(u.max()) + 1, int(slot.max()) + 1)
        order = np.lexsort((k, slot))
        u, slot, k, hits, valid = u[order], slot[order], k[order], hits[order], valid[order]
        first = _segment_starts(slot)
        starts = np.flatnonzero(first)
        seg = np.cumsum(first) - 1
        s0 = slot[starts]
        init = self.first_hit[s0] >= 0
        cov = _cum_or(hits, starts, seg, init)
        before = np.empty_like(cov)
        before[1:] = cov[:-1]
        before[starts] = init
        if self.coverage_only:
            self._add_coverage(u, slot, k, hits, cov, before)
            return
        vhits = hits & valid[:, None]
        vinit = self.first_valid_hit[s0] >= 0
        vcov = _cum_or(vhits, starts, seg, vinit)
        vbefore = np.empty_like(vcov)
        vbefore[1:] = vcov[:-1]
        vbefore[starts] = vinit
        any_valid = _cum_or(valid[:, None], starts, seg, (self.first_valid[s0] >= 0)[:, None])[:, 0]
        n_after, n_before = cov.sum(axis=1), before.sum(axis=1)
        new = n_after - n_before
        vals = np.empty((n, N_STATS), dtype=np.int64)
        vals[:, :7] = np.column_stack(
            [
                np.ones(n, dtype=np.int64),
                n_after,
                new > 0,
                new,
                n_after >= self.m,
                vcov.sum(axis=1),
                any_valid,
            ]
        )
        risk = n_before[:, None] < self.need[None, :]
        vals[:, 7::2] = risk
        vals[:, 8::2] = risk & (n_after[:, None] >= self.need[None, :])
        _add_rows(self.sums.reshape(-1, N_STATS), u * self.K + (k - 1), vals)
        self.n_runs += np.bincount(u[k == 1], minlength=self.n_runs.shape[0])
        self.samples += n
        # The tracker's run state: each (run, column) is first hit once, so plain scatters suffice.
        i, j = np.nonzero(hits & ~before)
        self.first_hit[slot[i], j] = k[i] - 1
        i, j = np.nonzero(vhits & ~vbefore)
        self.first_valid_hit[slot[i], j] = k[i] - 1
        i, j = np.nonzero(hits)
        # Scatter only the touched cells: a bincount over all slots would grow with the run count.
        cells, times = np.unique(slot[i] * self.C + j, return_counts=True)
        self.counts[cells // self.C, cells % self.C] += times
        ends = np.r_[starts[1:], n] - 1
        self.n[s0] = k[ends]
        cells, times = np.unique(slot[valid], return_counts=True)
        self.n_valid[cells] += times
        first_valid_now = valid & ~np.r_[False, any_valid[:-1]]
        first_valid_now[starts] = valid[starts] & (self.first_valid[s0] < 0)
        self.first_valid[slot[first_valid_now]] = k[first_valid_now] - 1

    def _add_coverage(
        self,
        u: np.ndarray,
        slot: np.ndarray,
        k: np.ndarray,
        hits: np.ndarray,
        cov: np.ndarray,
        before: np.ndarray,
    ) -> None:
        """The ``coverage_only`` part of :meth:`add` (arrays sorted by run, cumulative ORs done).

        Args:
            u: int array, shape (N,): input index of each sample.
            slot: int array, shape (N,): run slot.
            k: int array, shape (N,): 1-based position in the run.
            hits: bool array, shape (N, C): the columns each sample matched.
            cov: bool array, shape (N, C): the run's columns covered after each sample.
            before: bool array, shape (N, C): the run's columns covered before each sample.
        """
        flat = u * self.K + (k - 1)
        size = self.sums.shape[0] * self.K
        view = self.sums.reshape(-1, N_STATS)
        # bincount, not np.add.at: the same integer sums, several times faster
        view[:, 0] += np.bincount(flat, minlength=size)
        view[:, 1] += np.bincount(flat, weights=cov.sum(axis=1), minlength=size).astype(np.int64)
        self.n_runs += np.bincount(u[k == 1], minlength=self.n_runs.shape[0])
        self.samples += u.shape[0]
        i, j = np.nonzero(hits & ~before)
        self.first_hit[slot[i], j] = k[i] - 1

    def run_records(self, slots: np.ndarray, columns: Sequence[str]) -> list[dict[str, Any]]:
        """The tracker's per-run fields (``m``, ``n``, ``first_hit``, ...) of run ``slots``."""
        out = []
        fh, fvh, cnt = (
            self.first_hit[slots].tolist(),
            self.first_valid_hit[slots].tolist(),
            self.counts[slots].tolist(),
        )
        scalars = zip(
            self.n[slots].tolist(),
            self.n_valid[slots].tolist(),
            self.first_valid[slots].tolist(),
            strict=True,
        )
        for r, (n, nv, fv) in enumerate(scalars):
            hit = [j for j, v in enumerate(fh[r]) if v >= 0]
            out.append(
                {
                    "m": self.m,
                    "n": n,
                    "first_hit": {columns[j]: fh[r][j] for j in hit},
                    "first_valid_hit": {columns[j]: fvh[r][j] for j in hit if fvh[r][j] >= 0},
                    "counts": {columns[j]: cnt[r][j] for j in hit},
                    "first_valid": fv,
                    "n_valid": nv,
                }
            )
        return out

    def set_run(self, slot: int, record: Mapping[str, Any], columns: Sequence[str]) -> None:
        """Restore run ``slot`` from tracker run fields (inverse of :meth:`run_records`)."""
        self.grow(0, slot + 1)
        index = {s: j for j, s in enumerate(columns)}
        self.first_hit[slot], self.first_valid_hit[slot], self.counts[slot] = -1, -1, 0
        for name, arr in (
            ("first_hit", self.first_hit),
            ("first_valid_hit", self.first_valid_hit),
            ("counts", self.counts),
        ):
            for s_, v in record[name].items():
                arr[slot, index[s_]] = int(v)
        self.n[slot], self.n_valid[slot], self.first_valid[slot] = (
            record["n"],
            record["n_valid"],
            record["first_valid"],
        )

    # -- estimates -------------------------------------------------------------------------------------

    def _weighted(self, order: np.ndarray | None = None) -> np.ndarray:
        """Float array, shape (U, N_STATS, K): per-input sums, each run weighted 1 / (runs of its input).

        The coverage sums are divided by M, so every block is what ``curves_from_runs`` sums per input.
        """
        sums = self.sums if order is None else self.sums[order]
        n_runs = self.n_runs if order is None else self.n_runs[order]
        scale = np.ones(N_STATS)
        scale[[1, 5]] = 1.0 / self.m  # covered counts -> coverage fractions
        w = 1.0 / np.maximum(n_runs, 1)
        return (sums * scale * w[:, None, None]).transpose(0, 2, 1)

    def _unpack(self, s: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Summed blocks, shape (..., N_STATS, K) -> metric curves and Kaplan-Meier survival curves."""
        den = s[..., 0, :]
        pos = den > 0
        safe = np.where(pos, den, 1.0)
        vals = {}
        for name, j in zip(METRICS, (1, 2, 3, 4, 5, 6), strict=True):
            vals[name] = np.where(pos, s[..., j, :] / safe, np.nan)
        surv = {}
        for t, tau in enumerate(TAUS):
            r, d = s[..., 7 + 2 * t, :], s[..., 8 + 2 * t, :]
            hazard = np.where(r > 0, d / np.where(r > 0, r, 1.0), 0.0)
            surv[tau_key(tau)] = np.cumprod(1.0 - hazard, axis=-1)
        return vals, surv

    def point(self, input_order: np.ndarray | None = None) -> dict[str, Any]:
        """Point estimates for a log, O(inputs x K): the fields ``seffi.report.keys`` reads.

        Args:
            input_order: int array, shape (U,): the order in which inputs are summed (pass a canonical
                one, e.g. sorted ids, for bit-identical numbers however the data was merged).

        Returns:
            ``k``, the metric curves (float arrays, shape (K,), NaN where no run reached k), ``auc``,
            ``valid_auc`` and ``time_to_coverage`` (list of {tau, median, restricted_mean,
            fraction_censored}).
        """
        vals, surv = self._unpack(self._weighted(input_order).sum(axis=0))
        reached = np.isfinite(vals["coverage"])  # k that some run reached (never empty: k = 1 is)
        out: dict[str, Any] = {"k": list(range(1, self.K + 1)), **vals}
        out["auc"] = float(_mean_finite(vals["coverage"])) if reached.any() else None
        out["valid_auc"] = float(_mean_finite(vals["valid_coverage"])) if reached.any() else None
        ttc = []
        for key, s in surv.items():
            med, rmean, cens = survival_summary(s)
            ttc.append(
                {
                    "tau": float(key),
                    "median": float(med),
                    "restricted_mean": float(rmean),
                    "fraction_censored": float(cens),
                }
            )
        out["time_to_coverage"] = ttc
        return out

    def curves(
        self,
        input_order: np.ndarray,
        *,
        n_boot: int,
        seed: int,
        ci_level: float = 0.95,
        input_keys: list[tuple[str | None, str]] | None = None,
    ) -> Curves:
        """The :class:`~seffi.coverage.Curves` ``CoverageTracker.curves`` gives on the same samples.

        Args:
            input_order: int array, shape (U,): inputs in the tracker's order (sorted ids), so the
                bootstrap draws the same inputs as the tracker's.
            input_keys: (task, input_id) of the inputs in ``input_order`` (labels the per-input AUC
                contributions for the paired gain bootstrap).
            n_boot: Bootstrap replicates over inputs (0: no intervals).
            seed: Bootstrap seed.
            ci_level: Interval level.
        """
        stacked = self._weighted(input_order)  # (U, N_STATS, K)
        U = stacked.shape[0]
        point, surv = self._unpack(stacked.sum(axis=0))
        reached = point["coverage"] == point["coverage"]  # not NaN: some run reached k
        reps: dict[str, np.ndarray] = {}
        surv_reps: dict[str, np.ndarray] = {}
        if n_boot > 0:
            W = bootstrap_counts(np.zeros(U, dtype=np.int64), n_boot, seed)
            flat = stacked.reshape(U, -1)
            # float32 like curves_from_runs: the same replicate sums, so the same intervals
            sums = (W.astype(np.float32) @ flat.astype(np.float32)).astype(np.float64)
            reps, surv_reps = self._unpack(sums.reshape(n_boot, N_STATS, self.K))
        runs_at_k = self.sums[:, :, 0].sum(axis=0)
        R = int(self.n_runs.sum())
        c = Curves(
            kind="policy",
            K=self.K,
            coverage=point["coverage"],
            novelty=point["novelty"],
            expected_new=point["expected_new"],
            full_coverage=point["full_coverage"],
            auc=float(_mean_finite(point["coverage"])),
            time_to_coverage={
                key: TimeToCoverage.from_survival(float(key), surv[key], surv_reps.get(key), level=ci_level)
                for key in surv
            },
            runs_at_k=runs_at_k.astype(np.int64),
            n_inputs=U,
            n_runs=R,
            samples=int(self.samples),
            ci_level=ci_level,
            n_boot=int(n_boot),
            seed=seed if n_boot > 0 else None,
        )
        for name in METRICS:
            setattr(c, name, point[name])
            if name in reps:
                # Intervals only where some run reached k: no reductions over empty columns.
                lo, hi = _interval(reps[name], reached, ci_level)
                setattr(c, f"{name}_lo", lo)
                setattr(c, f"{name}_hi", hi)
        for prefix, name in (("", "coverage"), ("valid_", "valid_coverage")):
            setattr(c, f"{prefix}auc", float(_mean_finite(point[name])))
            if name in reps:
                r = _mean_finite(reps[name])
                setattr(c, f"{prefix}auc_reps", r)
                lo, hi = percentile_interval(r, ci_level)
                setattr(c, f"{prefix}auc_lo", float(lo))
                setattr(c, f"{prefix}auc_hi", float(hi))
        # Each input's share of the AUCs, for Curves.gain's paired (inputs jointly) bootstrap.
        c.input_auc = input_auc_contributions(stacked[:, 1, :], stacked[:, 0, :])
        c.input_valid_auc = input_auc_contributions(stacked[:, 5, :], stacked[:, 0, :])
        c.input_keys = list(input_keys) if input_keys is not None else None
        short = int((runs_at_k < R).sum())
        if short:
            n_short = int(R - runs_at_k[-1])
            c.notes.append(
                f"{n_short} of {R} runs have fewer than K={self.K} samples: the estimate at k uses the "
                "runs_at_k runs observed that long; time-to-coverage treats short runs as censored "
                "(Kaplan-Meier)"
            )
        if (runs_at_k == 0).any():
            c.notes.append(
                f"no run reaches k={int(np.argmin(runs_at_k)) + 1}: later values are undefined (NaN)"
            )
        return c

    # -- state -----------------------------------------------------------------------------------------

    def input_state(self, u: int) -> dict[str, Any]:
        """JSON-safe sums of input ``u``."""
        return {"n_runs": int(self.n_runs[u]), "sums": self.sums[u].tolist()}

    def add_input_state(self, u: int, state: dict[str, Any]) -> None:
        """Add the sums of another monitor's input (exact: integer sums)."""
        sums = np.asarray(state["sums"], dtype=np.int64)
        if sums.shape != (self.K, N_STATS):
            raise ValueError(f"input sums must have shape ({self.K}, {N_STATS}), got {sums.shape}")
        self.grow(u + 1, 0)
        self.sums[u] += sums
        self.n_runs[u] += int(state["n_runs"])
        self.samples += int(sums[:, 0].sum())


def _interval(reps: np.ndarray, reached: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column of replicates (B, K), NaN where no run reached k.

    Only reached columns are reduced (no reductions over empty columns, so no warnings); columns
    without NaN replicates take the vectorised ``np.quantile`` (what ``percentile_interval``'s
    ``nanquantile`` computes there, much faster), the rest ``percentile_interval``.
    """
    lo, hi = np.full(reps.shape[1], np.nan), np.full(reps.shape[1], np.nan)
    full = reached & np.isfinite(reps).all(axis=0)
    part = reached & ~full
    if full.any():
        a = (1.0 - level) / 2.0
        lo[full], hi[full] = np.quantile(reps[:, full], [a, 1.0 - a], axis=0)
    if part.any():
        lo[part], hi[part] = percentile_interval(reps[:, part], level)
    return lo, hi


def _mean_finite(x: np.ndarray) -> Any:
    """Mean over the last axis of the finite entries, like ``np.nanmean`` (same summation order).

    Shape (..., K) -> (...). Never reduces an empty slice: k = 1 is reached by every run, so each
    curve and each bootstrap replicate (which draws some input) has a finite entry.
    """
    ok = np.isfinite(x)
    return np.where(ok, x, 0.0).sum(axis=-1) / np.maximum(ok.sum(axis=-1), 1)


class RunAssigner:
    """Which run (tracker stream) each episode end belongs to, and its position k in that run.

    A run is one input's consecutive samples in one env row. With ``run_index`` from the env (seffi
    envs report it) a run changes when the run index does; otherwise when ``sample_index`` does not
    increase; without either, after ``budget`` samples. Streams are numbered per input from
    ``stream_offset`` in order of appearance, so trackers of several workers merge without clashes.
    Batches where every episode has a ``run_index`` (or none has one and every one has a
    ``sample_index``) are assigned in numpy; anything else goes through the per-episode loop, with
    the same result. The open run of each (input, env row) lives in dense arrays, shape (U, E).

    Args:
        budget: K.
        stream_offset: First stream number.
    """

    def __init__(self, budget: int, stream_offset: int = 0) -> None:
        self.budget, self.stream_offset = int(budget), int(stream_offset)
        self.env_cols: dict[int, int] = {}  # env index -> column of the open-run arrays
        # open run of (input code, env column): slot (-1 none), samples so far, last indices (-1 unknown)
        self.o_slot = np.full((0, 0), -1, dtype=np.int64)
        self.o_cnt = np.zeros((0, 0), dtype=np.int64)
        self.o_si = np.full((0, 0), -1, dtype=np.int64)
        self.o_ri = np.full((0, 0), -1, dtype=np.int64)
        self.next_stream = np.zeros(0, dtype=np.int64)  # per input: the next local stream number
        self._slot_stream = np.zeros(64, dtype=np.int64)
        self._slot_input = np.zeros(64, dtype=np.int64)
        self.n_slots = 0  # runs created so far

    @property
    def slot_stream(self) -> np.ndarray:
        """The tracker stream of each run slot: int array, shape (n_slots,)."""
        return self._slot_stream[: self.n_slots]

    @property
    def slot_input(self) -> np.ndarray:
        """The input code of each run slot: int array, shape (n_slots,)."""
        return self._slot_input[: self.n_slots]

    def restore_slot(self, u: int, stream: int) -> int:
        """A slot for an existing run of input ``u`` with tracker ``stream`` (when loading a state)."""
        self._grow(u + 1, 0)
        return int(self._add_slots(np.array([stream], dtype=np.int64), np.array([u], dtype=np.int64))[0])

    def _add_slots(self, streams: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        n = self.n_slots + streams.size
        if n > self._slot_stream.size:
            extra = np.zeros(max(n, 2 * self._slot_stream.size), dtype=np.int64)
            self._slot_stream, self._slot_input = (
                np.r_[self._slot_stream, extra],
                np.r_[self._slot_input, extra],
            )
        self._slot_stream[self.n_slots : n] = streams
        self._slot_input[self.n_slots : n] = inputs
        slots = np.arange(self.n_slots, n, dtype=np.int64)
        self.n_slots = n
        return slots

    def _grow(self, n_inputs: int, n_envs: int) -> None:
        U, E = self.o_slot.shape
        if n_inputs <= U and n_envs <= E:
            return
        U2, E2 = max(n_inputs, U, 2 * U if n_inputs > U else U), max(n_envs, E)
        for name, fill in (("o_slot", -1), ("o_cnt", 0), ("o_si", -1), ("o_ri", -1)):
            new = np.full((U2, E2), fill, dtype=np.int64)
            new[:U, :E] = getattr(self, name)
            setattr(self, name, new)
        self.next_stream = np.r_[self.next_stream, np.zeros(U2 - U, dtype=np.int64)]

    def env_columns(self, env: np.ndarray) -> np.ndarray:
        """Columns of env indices (new indices get new columns)."""
        uniq, inv = np.unique(env, return_inverse=True)
        cols = np.array([self.env_cols.setdefault(int(e), len(self.env_cols)) for e in uniq.tolist()])
        return cols[inv].astype(np.int64)

    def _new_slots(self, u: np.ndarray) -> np.ndarray:
        """Slots for new runs of inputs ``u`` (in that order), with their streams."""
        order = np.argsort(u, kind="stable")
        su = u[order]
        first = _segment_starts(su)
        within = np.arange(su.size) - np.flatnonzero(first)[np.cumsum(first) - 1]
        local = np.empty(u.size, dtype=np.int64)
        local[order] = self.next_stream[su] + within
        np.add.at(self.next_stream, u, 1)
        return self._add_slots(self.stream_offset + local, u)

    def assign(
        self, u: np.ndarray, env: np.ndarray, sample_index: np.ndarray, run_index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(slot, k) of every episode, in the order given (-1 = not reported, for the two indices).

        Args:
            u: int array, shape (N,): input codes.
            env: int array, shape (N,): env indices.
            sample_index: int array, shape (N,).
            run_index: int array, shape (N,).
        """
        n = u.shape[0]
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        e = self.env_columns(env)
        self._grow(int(u.max()) + 1, len(self.env_cols))
        if (run_index >= 0).all():
            got = self._vectorised(u, e, sample_index, run_index, self.o_ri, run_index, True)
        elif (run_index < 0).all() and (sample_index >= 0).all():
            got = self._vectorised(u, e, sample_index, run_index, self.o_si, sample_index, False)
        else:
            got = None
        return got if got is not None else self._loop(u, e, sample_index, run_index)

    def _loop(
        self, u: np.ndarray, e: np.ndarray, sample_index: np.ndarray, run_index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        n = u.shape[0]
        slots, ks = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        rows = zip(u.tolist(), e.tolist(), sample_index.tolist(), run_index.tolist(), strict=True)
        for i, (ui, ei, si, ri) in enumerate(rows):
            slot = int(self.o_slot[ui, ei])
            new = slot < 0
            if not new:
                last_si, last_ri = self.o_si[ui, ei], self.o_ri[ui, ei]
                if ri >= 0 and last_ri >= 0:
                    new = ri != last_ri
                elif si >= 0 and last_si >= 0:
                    new = si <= last_si
                else:
                    new = self.o_cnt[ui, ei] >= self.budget
            if new:
                slot = int(self._new_slots(np.array([ui]))[0])
                self.o_slot[ui, ei], self.o_cnt[ui, ei] = slot, 0
            self.o_cnt[ui, ei] += 1
            self.o_si[ui, ei], self.o_ri[ui, ei] = si, ri
            slots[i], ks[i] = slot, self.o_cnt[ui, ei]
        return slots, ks

    def _vectorised(
        self,
        u: np.ndarray,
        e: np.ndarray,
        sample_index: np.ndarray,
        run_index: np.ndarray,
        last: np.ndarray,
        key: np.ndarray,
        differs: bool,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        n = u.shape[0]
        pair = u * self.o_slot.shape[1] + e
        order = np.argsort(pair, kind="stable")
        ps, kk = pair[order], key[order]
        gfirst = _segment_starts(ps)
        gstarts = np.flatnonzero(gfirst)
        gp = ps[gstarts]
        o_slot, o_cnt, o_key = self.o_slot.flat[gp], self.o_cnt.flat[gp], last.flat[gp]
        has_open = o_slot >= 0
        if (has_open & (o_key < 0)).any():
            return None  # an open run without this index: the loop's fallback rules apply
        prev = np.r_[np.int64(-1), kk[:-1]]
        prev[gstarts] = o_key
        new = kk != prev if differs else kk <= prev
        new[gstarts] |= ~has_open
        boundary = new | gfirst
        seg = np.cumsum(boundary) - 1
        seg_first = np.flatnonzero(boundary)
        cont = ~new[seg_first]  # only a group's first segment can continue an open run
        g_of_seg = np.cumsum(gfirst)[seg_first] - 1
        k = np.arange(n) - seg_first[seg] + 1 + np.where(cont, o_cnt[g_of_seg], 0)[seg]
        seg_slot = np.where(cont, o_slot[g_of_seg], -1)
        # New runs get slots and streams in the order they appear in the batch, as in the loop.
        fresh = np.flatnonzero(~cont)
        fresh = fresh[np.argsort(order[seg_first[fresh]], kind="stable")]
        seg_slot[fresh] = self._new_slots(u[order[seg_first[fresh]]])
        slot_sorted = seg_slot[seg]
        gends = np.r_[gstarts[1:], n] - 1
        last_orig = order[gends]
        self.o_slot.flat[gp] = slot_sorted[gends]
        self.o_cnt.flat[gp] = k[gends]
        self.o_si.flat[gp] = sample_index[last_orig]
        self.o_ri.flat[gp] = run_index[last_orig]
        slots, ks = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        slots[order], ks[order] = slot_sorted, k
        return slots, ks

    def open_runs(self) -> list[tuple[int, int, int, int, int, int]]:
        """(input code, env index, slot, samples so far, last sample_index, last run_index) of open runs."""
        env_of = {c: e for e, c in self.env_cols.items()}
        us, cs = np.nonzero(self.o_slot >= 0)
        return [
            (
                int(a),
                env_of[int(b)],
                int(self.o_slot[a, b]),
                int(self.o_cnt[a, b]),
                int(self.o_si[a, b]),
                int(self.o_ri[a, b]),
            )
            for a, b in zip(us.tolist(), cs.tolist(), strict=True)
        ]

    def restore_open(self, u: int, env: int, slot: int, count: int, si: int, ri: int) -> None:
        """Reopen a run (inverse of :meth:`open_runs`)."""
        col = self.env_cols.setdefault(int(env), len(self.env_cols))
        self._grow(u + 1, len(self.env_cols))
        self.o_slot[u, col], self.o_cnt[u, col], self.o_si[u, col], self.o_ri[u, col] = slot, count, si, ri

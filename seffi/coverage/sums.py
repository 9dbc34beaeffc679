"""The one estimator of adaptive curves: runs -> per-input sums -> curves.

Every per-k quantity of a run (coverage after k samples, whether sample k was new, the Kaplan-Meier
event and at-risk indicators at k, ...) is fixed the moment the run's k-th sample arrives, so the
curves need only, per input, integer *sums over runs* of those contributions: an array of shape
(U, K, N_STATS). They come from two places that give the same integers — :func:`fold` adds a batch
of samples as they arrive (the streaming path), :func:`sums_from_runs` derives them from per-run
first-hit indices for any K — and :func:`curves_from_sums` / :func:`point_from_sums` turn them into
curves. Every input weighs the same (its runs are averaged); a run shorter than k does not enter the
estimate at k; time-to-coverage is Kaplan-Meier (short runs are censored). Intervals: the bootstrap
over inputs, stratified by task. Integer sums merge exactly in any order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from seffi.coverage.curves import TAUS, Curves, TimeToCoverage, check_budget, survival_summary, tau_key
from seffi.coverage.resampling import bootstrap_counts, percentile_interval

__all__ = [
    "BASE_STATS",
    "METRICS",
    "N_STATS",
    "InputSums",
    "RunTable",
    "curves_from_runs",
    "curves_from_sums",
    "fold",
    "input_auc_contributions",
    "point_from_sums",
    "rarity_labels",
    "sums_from_runs",
]

#: Statistics summed per (input, k), in storage order; ``risk``/``event`` follow once per tau.
BASE_STATS: tuple[str, ...] = ("runs", "covered", "novel", "new", "full", "valid_covered", "valid_any")
#: Curve metrics and the statistic each is the ratio of (to ``runs``).
METRICS: dict[str, int] = {
    "coverage": 1,
    "novelty": 2,
    "expected_new": 3,
    "full_coverage": 4,
    "valid_coverage": 5,
    "valid_at_k": 6,
}
N_STATS = len(BASE_STATS) + 2 * len(TAUS)
_COVERED_STATS = (1, 5)  # counts of strategies: divided by M_x to become fractions
_NEVER = np.iinfo(np.int64).max // 2


def _need(m: np.ndarray) -> np.ndarray:
    """Strategies needed for each tau: int array, shape (U, len(TAUS)), from M_x, shape (U,)."""
    return np.ceil(np.asarray(m, dtype=np.float64)[:, None] * np.array(TAUS)[None, :] - 1e-9).astype(np.int64)


# -- state -----------------------------------------------------------------------------------------------


@dataclass
class RunTable:
    """Per run slot, what the curves need: first-hit indices (-1 = never) and lengths.

    Attributes:
        first_hit: int array, shape (S, C): 0-based index of the run's first sample matching column c.
        first_valid_hit: int array, shape (S, C): the same over correct samples only.
        n: int array, shape (S,): samples in the run.
        n_valid: int array, shape (S,): correct samples.
        first_valid: int array, shape (S,): index of the first correct sample, -1 if none.
    """

    columns: int
    first_hit: np.ndarray = field(init=False)
    first_valid_hit: np.ndarray = field(init=False)
    n: np.ndarray = field(init=False)
    n_valid: np.ndarray = field(init=False)
    first_valid: np.ndarray = field(init=False)

    #: Field -> fill value of a fresh slot; the per-run state is declared here once.
    FIELDS: ClassVar[dict[str, int]] = {
        "first_hit": -1,
        "first_valid_hit": -1,
        "n": 0,
        "n_valid": 0,
        "first_valid": -1,
    }
    MATRIX_FIELDS: ClassVar[tuple[str, ...]] = ("first_hit", "first_valid_hit")

    def __post_init__(self) -> None:
        for name, fill in self.FIELDS.items():
            shape = (0, self.columns) if name in self.MATRIX_FIELDS else (0,)
            setattr(self, name, np.full(shape, fill, dtype=np.int64))

    def grow(self, n_slots: int, n_columns: int | None = None) -> None:
        """Room for ``n_slots`` slots (amortised doubling) and ``n_columns`` columns."""
        if n_columns is not None and n_columns > self.columns:
            for name in self.MATRIX_FIELDS:
                arr = getattr(self, name)
                pad = np.full((arr.shape[0], n_columns - self.columns), self.FIELDS[name], dtype=np.int64)
                setattr(self, name, np.concatenate([arr, pad], axis=1))
            self.columns = n_columns
        have = self.n.shape[0]
        if n_slots > have:
            extra = max(n_slots, 2 * have, 64) - have
            for name, fill in self.FIELDS.items():
                shape = (extra, self.columns) if name in self.MATRIX_FIELDS else (extra,)
                grown = np.full(shape, fill, dtype=np.int64)
                setattr(self, name, np.concatenate([getattr(self, name), grown]))

    def take(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        """Copies of every field at ``slots``."""
        return {name: getattr(self, name)[slots].copy() for name in self.FIELDS}


@dataclass
class InputSums:
    """Per-input sums of per-run contributions (the sufficient statistics of the curves).

    Attributes:
        sums: int array, shape (U, K, N_STATS): for input u and budget k, the sums over runs of
            ``BASE_STATS`` then (risk, event) per tau in ``TAUS``.
        n_runs: int array, shape (U,): runs per input.
    """

    budget: int
    sums: np.ndarray = field(init=False)
    n_runs: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.sums = np.zeros((0, self.budget, N_STATS), dtype=np.int64)
        self.n_runs = np.zeros(0, dtype=np.int64)

    def grow(self, n_inputs: int) -> None:
        """Room for ``n_inputs`` inputs (amortised doubling)."""
        have = self.sums.shape[0]
        if n_inputs > have:
            extra = max(n_inputs, 2 * have, 16) - have
            self.sums = np.concatenate([self.sums, np.zeros((extra, self.budget, N_STATS), dtype=np.int64)])
            self.n_runs = np.concatenate([self.n_runs, np.zeros(extra, dtype=np.int64)])


# -- the streaming update ---------------------------------------------------------------------------------


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
    """``np.add.at(target, index, values)`` for rows, exact in integers and several times faster."""
    if index.size == 0:
        return
    order = np.argsort(index, kind="stable")
    index = index[order]
    starts = np.flatnonzero(_segment_starts(index))
    target[index[starts]] += np.add.reduceat(values[order], starts, axis=0)


def fold(
    runs: RunTable,
    sums: InputSums | None,
    u: np.ndarray,
    slot: np.ndarray,
    k: np.ndarray,
    hits: np.ndarray,
    valid: np.ndarray,
    m: np.ndarray,
    *,
    coverage_only: bool = False,
) -> None:
    """Add samples to the run table and (when given) the per-input sums, in place.

    Samples may come in any order across runs, in order within a run; ``k`` must not exceed
    ``sums.budget``. With ``coverage_only`` only ``runs``/``covered`` and ``first_hit``/``n`` are
    kept (the latent-code diagnostic: about half the work).

    Args:
        runs: The run table (slots must exist: ``runs.grow`` first).
        sums: The per-input sums (inputs must exist), or ``None`` to update the run table only.
        u: int array, shape (N,): input index of each sample.
        slot: int array, shape (N,): run slot.
        k: int array, shape (N,): 1-based position of the sample in its run.
        hits: bool array, shape (N, C): the columns each sample matched.
        valid: bool array, shape (N,): the sample was correct.
        m: int array, shape (U,): M_x of every input.
        coverage_only: Keep only what a coverage curve needs.
    """
    n = u.shape[0]
    if n == 0:
        return
    order = np.lexsort((k, slot))
    u, slot, k, hits, valid = u[order], slot[order], k[order], hits[order], valid[order]
    first = _segment_starts(slot)
    starts = np.flatnonzero(first)
    seg = np.cumsum(first) - 1
    s0 = slot[starts]
    init = runs.first_hit[s0] >= 0
    cov = _cum_or(hits, starts, seg, init)
    before = np.empty_like(cov)
    before[1:] = cov[:-1]
    before[starts] = init
    ends = np.r_[starts[1:], n] - 1
    runs.n[s0] = k[ends]
    i, j = np.nonzero(hits & ~before)
    runs.first_hit[slot[i], j] = k[i] - 1  # each (run, column) is first hit once: plain scatters
    if coverage_only:
        if sums is not None:
            view = sums.sums.reshape(-1, N_STATS)
            flat = u * sums.budget + (k - 1)
            view[:, 0] += np.bincount(flat, minlength=view.shape[0])
            view[:, 1] += np.bincount(flat, weights=cov.sum(axis=1), minlength=view.shape[0]).astype(np.int64)
            sums.n_runs += np.bincount(u[k == 1], minlength=sums.n_runs.shape[0])
        return
    vhits = hits & valid[:, None]
    vinit = runs.first_valid_hit[s0] >= 0
    vcov = _cum_or(vhits, starts, seg, vinit)
    vbefore = np.empty_like(vcov)
    vbefore[1:] = vcov[:-1]
    vbefore[starts] = vinit
    any_valid = _cum_or(valid[:, None], starts, seg, (runs.first_valid[s0] >= 0)[:, None])[:, 0]
    if sums is not None:
        n_after, n_before = cov.sum(axis=1), before.sum(axis=1)
        new = n_after - n_before
        need = _need(m)[u]
        vals = np.empty((n, N_STATS), dtype=np.int64)
        vals[:, :7] = np.column_stack(
            [np.ones(n, dtype=np.int64), n_after, new > 0, new, n_after >= m[u], vcov.sum(axis=1), any_valid]
        )
        risk = n_before[:, None] < need
        vals[:, 7::2] = risk
        vals[:, 8::2] = risk & (n_after[:, None] >= need)
        _add_rows(sums.sums.reshape(-1, N_STATS), u * sums.budget + (k - 1), vals)
        sums.n_runs += np.bincount(u[k == 1], minlength=sums.n_runs.shape[0])
    i, j = np.nonzero(vhits & ~vbefore)
    runs.first_valid_hit[slot[i], j] = k[i] - 1
    cells, times = np.unique(slot[valid], return_counts=True)
    runs.n_valid[cells] += times
    first_valid_now = valid & ~np.r_[False, any_valid[:-1]]
    first_valid_now[starts] = valid[starts] & (runs.first_valid[s0] < 0)
    runs.first_valid[slot[first_valid_now]] = k[first_valid_now] - 1


# -- the same sums from finished runs ---------------------------------------------------------------------


def _first_hit_histogram(
    first_hit: np.ndarray, K: int, bins: np.ndarray | None = None, n_bins: int = 1
) -> np.ndarray:
    """Per run (and per bin), how many columns were first matched at each sample index < K.

    Args:
        first_hit: int array, shape (R, C) (-1 = never).
        K: budget.
        bins: int array, shape (R, C) with values in 0..n_bins-1, or None.
        n_bins: number of bins.

    Returns:
        int array, shape (R, K), or (R, n_bins, K) when ``bins`` is given.
    """
    fh = np.asarray(first_hit, dtype=np.int64)
    R = fh.shape[0]
    col = np.where((fh < 0) | (fh >= K), K, fh)  # column K collects "not within the budget"
    b = np.zeros_like(col) if bins is None else np.asarray(bins, dtype=np.int64)
    flat = (np.arange(R)[:, None] * n_bins + b) * (K + 1) + col
    hist = np.bincount(flat.ravel(), minlength=R * n_bins * (K + 1)).reshape(R, n_bins, K + 1)[:, :, :K]
    return hist[:, 0, :] if bins is None else hist


def sums_from_runs(
    first_hit: np.ndarray,
    lengths: np.ndarray,
    unit: np.ndarray,
    m: np.ndarray,
    K: int,
    *,
    first_valid_hit: np.ndarray | None = None,
    first_valid: np.ndarray | None = None,
    rarity_bin: np.ndarray | None = None,
    n_bins: int = 4,
) -> tuple[InputSums, np.ndarray | None]:
    """The per-input sums :func:`fold` would have added, derived from finished runs, for budget K.

    Args:
        first_hit: int array, shape (R, C): 0-based index of the first sample of run r matching
            column c, or -1.
        lengths: int array, shape (R,): samples in each run.
        unit: int array, shape (R,): input index (0..U-1) of each run.
        m: int array, shape (U,): M_x of each input.
        K: budget.
        first_valid_hit: int array, shape (R, C), or None (valid statistics stay 0).
        first_valid: int array, shape (R,), or None.
        rarity_bin: int array, shape (R, C): base-probability quantile bin of each column, or None.
        n_bins: number of rarity bins.

    Returns:
        (sums, rarity): ``rarity`` is an int array, shape (U, n_bins, K), of covered strategies per
        rarity bin summed per input (None without ``rarity_bin``).
    """
    fh = np.asarray(first_hit, dtype=np.int64)
    unit = np.asarray(unit, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    U = m.shape[0]
    ks = np.arange(1, K + 1)
    avail = np.asarray(lengths, dtype=np.int64)[:, None] >= ks[None, :]  # (R, K)
    new = _first_hit_histogram(fh, K)
    covered = np.cumsum(new, axis=1)
    mr = m[unit][:, None]
    order = np.argsort(unit, kind="stable")
    starts = np.flatnonzero(_segment_starts(unit[order]))
    present = unit[order][starts]
    out = InputSums(K)
    out.grow(U)
    out.sums = np.zeros((U, K, N_STATS), dtype=np.int64)

    def put(stat: int, x: np.ndarray) -> None:
        # Per-input sums of one (R, K) statistic of the runs observed at k (one sort for all).
        out.sums[present, :, stat] = np.add.reduceat((x * avail).astype(np.int64)[order], starts, axis=0)

    put(0, np.ones_like(covered))
    put(1, covered)
    put(2, new > 0)
    put(3, new)
    put(4, covered >= mr)
    if first_valid_hit is not None:
        put(5, np.cumsum(_first_hit_histogram(first_valid_hit, K), axis=1))
    if first_valid is not None:
        fv = np.asarray(first_valid, dtype=np.int64)[:, None]
        put(6, (fv >= 0) & (fv < ks[None, :]))
    before = covered - new
    need = _need(m)[unit]  # (R, T)
    for t in range(len(TAUS)):
        risk = before < need[:, t : t + 1]
        put(7 + 2 * t, risk)
        put(8 + 2 * t, risk & (covered >= need[:, t : t + 1]))
    out.n_runs = np.bincount(unit, minlength=U).astype(np.int64)
    rarity = None
    if rarity_bin is not None:
        by_bin = _first_hit_histogram(fh, K, rarity_bin, n_bins).cumsum(axis=2) * avail[:, None, :]
        rarity = np.zeros((U, n_bins, K), dtype=np.int64)
        rarity[present] = np.add.reduceat(by_bin.astype(np.int64)[order], starts, axis=0)
    return out, rarity


# -- sums -> curves ----------------------------------------------------------------------------------------


def _weighted(sums: np.ndarray, n_runs: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Float array, shape (U, N_STATS, K): each run weighted 1 / (runs of its input); counts / M_x."""
    scale = np.ones((sums.shape[0], N_STATS))
    scale[:, _COVERED_STATS] = 1.0 / np.asarray(m, dtype=np.float64)[:, None]
    w = 1.0 / np.maximum(n_runs, 1)
    return (sums * (scale * w[:, None])[:, None, :]).transpose(0, 2, 1)


def _unpack(s: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Summed blocks, shape (..., N_STATS, K) -> metric curves and Kaplan-Meier survival curves."""
    den = s[..., 0, :]
    pos = den > 0
    safe = np.where(pos, den, 1.0)
    vals = {name: np.where(pos, s[..., j, :] / safe, np.nan) for name, j in METRICS.items()}
    surv = {}
    for t, tau in enumerate(TAUS):
        r, d = s[..., 7 + 2 * t, :], s[..., 8 + 2 * t, :]
        hazard = np.where(r > 0, d / np.where(r > 0, r, 1.0), 0.0)
        surv[tau_key(tau)] = np.cumprod(1.0 - hazard, axis=-1)
    return vals, surv


def _mean_finite(x: np.ndarray) -> Any:
    """Mean over the last axis of the finite entries (``np.nanmean`` without empty-slice warnings)."""
    ok = np.isfinite(x)
    return np.where(ok, x, 0.0).sum(axis=-1) / np.maximum(ok.sum(axis=-1), 1)


def _interval(reps: np.ndarray, reached: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column of replicates (B, K), NaN where no run reached k.

    Columns without NaN replicates take the vectorised ``np.quantile`` (what ``percentile_interval``'s
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


def point_from_sums(sums: InputSums, m: np.ndarray, order: np.ndarray | None = None) -> dict[str, Any]:
    """Point estimates for a log, O(inputs x K): the fields ``seffi.report.keys`` reads.

    Args:
        sums: Per-input sums.
        m: int array, shape (U,): M_x per input.
        order: int array, shape (U,): the order in which inputs are summed (pass a canonical one,
            e.g. sorted ids, for bit-identical numbers however the data was merged).

    Returns:
        ``k``, the metric curves (float arrays, shape (K,), NaN where no run reached k), ``auc``,
        ``valid_auc`` and ``time_to_coverage`` (list of {tau, median, restricted_mean,
        fraction_censored}).
    """
    U = m.shape[0]
    order = np.arange(U) if order is None else order
    vals, surv = _unpack(_weighted(sums.sums[order], sums.n_runs[order], m[order]).sum(axis=0))
    reached = np.isfinite(vals["coverage"])
    out: dict[str, Any] = {"k": list(range(1, sums.budget + 1)), **vals}
    out["auc"] = float(_mean_finite(vals["coverage"])) if reached.any() else None
    out["valid_auc"] = float(_mean_finite(vals["valid_coverage"])) if reached.any() else None
    out["time_to_coverage"] = []
    for key, s in surv.items():
        med, rmean, cens = survival_summary(s)
        out["time_to_coverage"].append(
            {
                "tau": float(key),
                "median": float(med),
                "restricted_mean": float(rmean),
                "fraction_censored": float(cens),
            }
        )
    return out


def curves_from_sums(
    sums: InputSums,
    m: np.ndarray,
    *,
    order: np.ndarray | None = None,
    strata: np.ndarray | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    ci_level: float = 0.95,
    kind: str = "policy",
    input_keys: list[tuple[str | None, str]] | None = None,
    samples: int | None = None,
    valid: bool = True,
    rarity: np.ndarray | None = None,
) -> Curves:
    """Curves for k = 1..K with bootstrap intervals over inputs (stratified by ``strata``).

    Args:
        sums: Per-input sums (U inputs).
        m: int array, shape (U,): M_x per input.
        order: int array, shape (U,): inputs in canonical order (sorted ids), so the bootstrap
            draws the same inputs however the data arrived.
        strata: int array, shape (U,) in ``order``: the task stratum of each input; default one.
        n_boot: Bootstrap replicates over inputs (0: no intervals).
        seed: Bootstrap seed.
        ci_level: Interval level.
        kind: ``Curves.kind``.
        input_keys: (task, input_id) of the inputs in ``order`` (labels the per-input AUC
            contributions for the paired gain bootstrap).
        samples: Samples recorded (``Curves.samples``; default: the samples within K).
        valid: Whether the valid statistics were recorded (else valid curves are ``None``).
        rarity: int array, shape (U, B, K): covered strategies per rarity bin (see
            :func:`sums_from_runs`), or None.
    """
    K = sums.budget
    U = m.shape[0]
    order = np.arange(U) if order is None else np.asarray(order, dtype=np.int64)
    raw, n_runs, m = sums.sums[order], sums.n_runs[order], np.asarray(m)[order]
    stacked = _weighted(raw, n_runs, m)  # (U, N_STATS, K)
    point, surv = _unpack(stacked.sum(axis=0))
    reached = point["coverage"] == point["coverage"]  # not NaN: some run reached k
    reps: dict[str, np.ndarray] = {}
    surv_reps: dict[str, np.ndarray] = {}
    W = None
    if n_boot > 0:
        W = bootstrap_counts(np.zeros(U, dtype=np.int64) if strata is None else strata, n_boot, seed)
        # float32 halves the cost of the one big product; integer counts times values in [0, 1]
        # summed over a few thousand inputs stay accurate to ~1e-6, far below any CI width.
        flat = stacked.reshape(U, -1).astype(np.float32)
        boot = (W.astype(np.float32) @ flat).astype(np.float64)
        reps, surv_reps = _unpack(boot.reshape(n_boot, N_STATS, K))
    runs_at_k = raw[:, :, 0].sum(axis=0)
    R = int(n_runs.sum())
    metrics = [name for name in METRICS if valid or name not in ("valid_coverage", "valid_at_k")]
    c = Curves(
        kind=kind,
        K=K,
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
        samples=int(runs_at_k.sum()) if samples is None else int(samples),
        ci_level=ci_level,
        n_boot=int(n_boot),
        seed=seed if n_boot > 0 else None,
    )
    for name in metrics:
        setattr(c, name, point[name])
        if name in reps:
            lo, hi = _interval(reps[name], reached, ci_level)  # no reductions over empty columns
            setattr(c, f"{name}_lo", lo)
            setattr(c, f"{name}_hi", hi)
    for prefix, name in (("", "coverage"), ("valid_", "valid_coverage")):
        if name not in metrics:
            continue
        setattr(c, f"{prefix}auc", float(_mean_finite(point[name])))
        if name in reps:
            r = _mean_finite(reps[name])
            setattr(c, f"{prefix}auc_reps", r)
            lo, hi = percentile_interval(r, ci_level)
            setattr(c, f"{prefix}auc_lo", float(lo))
            setattr(c, f"{prefix}auc_hi", float(hi))
    # Each input's share of the AUCs, for Curves.gain's paired (inputs jointly) bootstrap.
    c.input_auc = input_auc_contributions(stacked[:, 1, :], stacked[:, 0, :])
    if valid:
        c.input_valid_auc = input_auc_contributions(stacked[:, 5, :], stacked[:, 0, :])
    if input_keys is not None:
        if len(input_keys) != U:
            raise ValueError(f"input_keys has {len(input_keys)} entries for {U} inputs")
        c.input_keys = [(None if t is None else str(t), str(i)) for t, i in input_keys]
    if rarity is not None:
        w = (1.0 / np.maximum(n_runs, 1) / m)[:, None, None]
        by_bin = (rarity[order] * w).sum(axis=0)  # (B, K)
        den = stacked[:, 0, :].sum(axis=0)
        c.coverage_by_rarity = np.where(den > 0, by_bin / np.where(den > 0, den, 1.0), np.nan)
        c.rarity_bins = rarity_labels(rarity.shape[1])
    if (runs_at_k < R).any():
        c.notes.append(
            f"{int(R - runs_at_k[-1])} of {R} runs have fewer than K={K} samples: the estimate at k uses "
            "the runs_at_k runs observed that long; time-to-coverage treats short runs as censored "
            "(Kaplan-Meier)"
        )
    if (runs_at_k == 0).any():
        first = int(np.argmin(runs_at_k)) + 1
        c.notes.append(f"no run reaches k={first}: later values are undefined (NaN)")
    return c


def curves_from_runs(
    first_hit: np.ndarray,
    lengths: np.ndarray,
    m: np.ndarray,
    K: int,
    *,
    unit: np.ndarray | None = None,
    strata: np.ndarray | None = None,
    first_valid: np.ndarray | None = None,
    first_valid_hit: np.ndarray | None = None,
    rarity_bin: np.ndarray | None = None,
    n_bins: int = 4,
    n_boot: int = 1000,
    seed: int = 0,
    ci_level: float = 0.95,
    kind: str = "policy",
    input_keys: list[tuple[str | None, str]] | None = None,
) -> Curves:
    """Curves from per-run first-hit indices: :func:`sums_from_runs` then :func:`curves_from_sums`.

    Args:
        first_hit: int array, shape (R, C): first sample of run r matching column c, or -1.
        lengths: int array, shape (R,): samples in each run.
        m: int array, shape (R,): M_x of each run's input (>= 1; the same for runs of one input).
        K: budget.
        unit: int array, shape (R,): input index (0..U-1) of each run; default one input per run.
        strata: int array, shape (U,): task stratum of each input for the bootstrap; default one.
        first_valid: int array, shape (R,): index of the first correct sample, -1 if none.
        first_valid_hit: int array, shape (R, C): like ``first_hit`` over correct samples only.
        rarity_bin: int array, shape (R, C): base-probability quantile bin of each column, or None.
        n_bins: number of rarity bins.
        n_boot: bootstrap replicates (0 = no intervals).
        seed: bootstrap seed.
        ci_level: interval level.
        kind: ``Curves.kind``.
        input_keys: (task, input_id) of each input 0..U-1 (pairs ``Curves.gain`` with baselines).
    """
    K = check_budget(K)
    fh = np.asarray(first_hit, dtype=np.int64)
    if fh.ndim != 2:
        raise ValueError("first_hit must have shape (R, M)")
    R = fh.shape[0]
    if R == 0:
        raise ValueError("no runs recorded: cannot compute curves")
    lengths = np.asarray(lengths, dtype=np.int64)
    unit = np.arange(R) if unit is None else np.asarray(unit, dtype=np.int64)
    U = int(unit.max()) + 1
    if np.unique(unit).size != U:
        raise ValueError("unit indices must cover 0..U-1")
    m_u = np.zeros(U, dtype=np.int64)
    m_u[unit] = np.asarray(m, dtype=np.int64)
    sums, rarity = sums_from_runs(
        fh,
        lengths,
        unit,
        m_u,
        K,
        first_valid_hit=first_valid_hit,
        first_valid=first_valid,
        rarity_bin=rarity_bin,
        n_bins=n_bins,
    )
    c = curves_from_sums(
        sums,
        m_u,
        strata=strata,
        n_boot=n_boot,
        seed=seed,
        ci_level=ci_level,
        kind=kind,
        input_keys=input_keys,
        samples=int(lengths.sum()),
        valid=first_valid_hit is not None,
        rarity=rarity,
    )
    if first_valid is None:
        c.valid_at_k = c.valid_at_k_lo = c.valid_at_k_hi = None
    return c


def input_auc_contributions(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Each input's share of the AUC of a ratio-of-sums curve C(k) = sum_u num[u, k] / sum_u den[u, k].

    a_u = AUC + (1/|k'|) sum_{k in k'} U (num[u, k] - C(k) den[u, k]) / D(k), with D(k) =
    sum_u den[u, k] and k' the budgets some run reaches (D(k) > 0, where C(k) is defined). The
    mean of a_u is exactly the AUC (the correction terms sum to zero at every k), and when every
    run reaches K (den = 1) a_u is the input's own AUC, mean_k num[u, k]. With shorter runs it is
    the first-order (influence-function) contribution, so the replicate mean of resampled a_u is
    the linearised replicate AUC; a paired gain bootstrap resamples these.

    Args:
        num: float array, shape (U, K): per-input weighted sums of the metric (coverage x available).
        den: float array, shape (U, K): per-input weighted counts of runs available at k.

    Returns:
        float array, shape (U,).
    """
    D = den.sum(axis=0)
    ok = D > 0
    U = num.shape[0]
    if not ok.any():
        return np.full(U, np.nan)
    C = num[:, ok].sum(axis=0) / D[ok]
    infl = U * (num[:, ok] - C[None, :] * den[:, ok]) / D[ok][None, :]
    return C.mean() + infl.mean(axis=1)


def rarity_labels(n_bins: int) -> list[str]:
    """Row labels of ``Curves.coverage_by_rarity``: "q1 (most common)" .. "qB (rarest)"."""
    labels = [f"q{b + 1}" for b in range(n_bins)]
    labels[0] += " (most common)"
    if n_bins > 1:
        labels[-1] += " (rarest)"
    return labels

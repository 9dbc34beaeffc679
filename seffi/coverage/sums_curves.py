"""Per-input sums -> curves: point estimates for logs, curves with bootstrap intervals for snapshots.

Every input weighs the same (its runs are averaged); a run shorter than k does not enter the estimate
at k; time-to-coverage is Kaplan-Meier (short runs are censored). Intervals: the bootstrap over inputs,
stratified by task. The sums come from :mod:`seffi.coverage.sums` (streamed or derived from runs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from seffi.coverage.curves import TAUS, Curves, TimeToCoverage, check_budget, survival_summary, tau_key
from seffi.coverage.resampling import bootstrap_counts, percentile_interval
from seffi.coverage.sums import METRICS, N_STATS, PER_STRATEGY, InputSums, sums_from_runs

__all__ = [
    "curves_from_runs",
    "curves_from_sums",
    "input_auc_contributions",
    "point_from_sums",
    "rarity_labels",
]


def _weighted(sums: np.ndarray, n_runs: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Float array, shape (U, N_STATS, K): each run weighted 1 / (runs of its input); counts / M_x."""
    scale = np.ones((sums.shape[0], N_STATS))
    scale[:, list(PER_STRATEGY)] = 1.0 / np.asarray(m, dtype=np.float64)[:, None]
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

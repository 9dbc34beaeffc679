"""Curves of an adaptive process from its runs: pure array functions plus the run bootstrap.

An adaptive policy's samples are not exchangeable, so C(k) is estimated from the first k samples of
each run (a run = one input's sample sequence in one stream). A run is summarised by the index of
the first sample that matched each strategy, which is all any curve needs: memory is
O(runs x strategies), never O(samples).

Aggregation: every input weighs the same (its runs are averaged), exactly like the per-input
baselines, which average over inputs. Runs shorter than k do not enter the estimate at k
(``runs_at_k``); time-to-coverage uses the Kaplan-Meier estimator so short runs count as censored
instead of being dropped. Intervals come from the bootstrap over inputs, stratified by task.
"""

from __future__ import annotations

import numpy as np

from seffi.coverage.curves import TAUS, Curves, TimeToCoverage, check_budget, tau_key
from seffi.coverage.resampling import bootstrap_counts, percentile_interval

__all__ = ["curves_from_runs", "input_auc_contributions", "rarity_labels"]


def rarity_labels(n_bins: int) -> list[str]:
    """Row labels of ``Curves.coverage_by_rarity``: "q1 (most common)" .. "qB (rarest)"."""
    labels = [f"q{b + 1}" for b in range(n_bins)]
    labels[0] += " (most common)"
    if n_bins > 1:
        labels[-1] += " (rarest)"
    return labels


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
    """Coverage curves (with bootstrap intervals) from per-run first-hit indices.

    Args:
        first_hit: int array, shape (R, M): 0-based index of the first sample of run r matching
            strategy column j, or -1 if none did.
        lengths: int array, shape (R,): number of samples in each run.
        m: int array, shape (R,): the denominator M_x of each run's input (>= 1).
        K: budget.
        unit: int array, shape (R,): input index (0..U-1) of each run; default one input per run.
        strata: int array, shape (U,): task stratum of each input for the bootstrap; default one.
        first_valid: int array, shape (R,): index of the first correct sample, -1 if none.
        first_valid_hit: int array, shape (R, M): like ``first_hit`` counting correct samples only.
        rarity_bin: int array, shape (R, M): base-probability quantile bin of each strategy column
            (0 = most common); None skips the common-vs-rare split.
        n_bins: number of rarity bins.
        n_boot: bootstrap replicates (0 = no intervals).
        seed: bootstrap seed.
        ci_level: interval level.
        kind: ``Curves.kind``.
        input_keys: (task, input_id) of each input 0..U-1, stored as ``Curves.input_keys`` so that
            ``Curves.gain`` can pair the inputs with the baselines'.

    Returns:
        Curves for k = 1..K, with the per-input AUC contributions ``input_auc`` (and
        ``input_valid_auc``), shape (U,).
    """
    K = check_budget(K)
    fh = np.asarray(first_hit, dtype=np.int64)
    if fh.ndim != 2:
        raise ValueError("first_hit must have shape (R, M)")
    R = fh.shape[0]
    if R == 0:
        raise ValueError("no runs recorded: cannot compute curves")
    lengths = np.asarray(lengths, dtype=np.int64)
    m = np.asarray(m, dtype=np.float64)
    unit = np.arange(R) if unit is None else np.asarray(unit, dtype=np.int64)
    U = int(unit.max()) + 1
    strata = np.zeros(U, dtype=np.int64) if strata is None else np.asarray(strata)
    ks = np.arange(1, K + 1)
    avail = (lengths[:, None] >= ks[None, :]).astype(np.float64)

    new_cnt = _first_hit_histogram(fh, K)  # (R, K): strategies first matched at sample k
    covered = np.cumsum(new_cnt, axis=1)
    metrics: dict[str, np.ndarray] = {
        "coverage": covered / m[:, None],
        "novelty": (new_cnt > 0).astype(np.float64),
        "expected_new": new_cnt,
        "full_coverage": (covered >= m[:, None]).astype(np.float64),
    }
    if first_valid_hit is not None:
        metrics["valid_coverage"] = np.cumsum(_first_hit_histogram(first_valid_hit, K), axis=1) / m[:, None]
    if first_valid is not None:
        fv = np.asarray(first_valid, dtype=np.int64)
        metrics["valid_at_k"] = ((fv[:, None] >= 0) & (fv[:, None] < ks[None, :])).astype(np.float64)
    if rarity_bin is not None:
        by_bin = _first_hit_histogram(fh, K, rarity_bin, n_bins).cumsum(axis=2) / m[:, None, None]
        for b in range(n_bins):
            metrics[f"rarity{b}"] = by_bin[:, b, :]
    # Kaplan-Meier pieces per tau: events d and the number at risk, both (R, K).
    km: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    sorted_fh = np.sort(np.where(fh < 0, np.iinfo(np.int64).max // 2, fh), axis=1)
    horizon = np.minimum(lengths, K)
    for tau in TAUS:
        need = np.ceil(tau * m - 1e-9).astype(np.int64)
        padded = np.concatenate([sorted_fh, np.full((R, 1), np.iinfo(np.int64).max // 2)], axis=1)
        t_hit = padded[np.arange(R), np.minimum(need, fh.shape[1]) - 1] + 1
        t_hit = np.where(need > fh.shape[1], np.iinfo(np.int64).max // 2, t_hit)
        event = t_hit <= horizon
        time = np.where(event, t_hit, horizon)
        at_risk = (time[:, None] >= ks[None, :]).astype(np.float64)
        d = (event[:, None] & (t_hit[:, None] == ks[None, :])).astype(np.float64)
        km[tau_key(tau)] = (d, at_risk)

    # Per-input sums with weight 1/(runs of the input), so every input weighs the same.
    order = np.argsort(unit, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(unit[order]) != 0])
    if len(starts) != U:
        raise ValueError("unit indices must cover 0..U-1")
    w = 1.0 / np.bincount(unit, minlength=U)[unit]

    def per_unit(x: np.ndarray) -> np.ndarray:
        return np.add.reduceat((x * w[:, None])[order], starts, axis=0)

    blocks = [per_unit(avail)] + [per_unit(x * avail) for x in metrics.values()]
    for d, r in km.values():
        blocks += [per_unit(d), per_unit(r)]
    stacked = np.concatenate(blocks, axis=1)  # (U, K * n_blocks)

    def unpack(sums: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Sums over inputs, shape (..., K * n_blocks) -> metric curves and KM survival curves."""
        parts = np.split(sums, len(blocks), axis=-1)
        den = parts[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            vals = {
                name: np.where(den > 0, p / np.where(den > 0, den, 1.0), np.nan)
                for name, p in zip(metrics, parts[1 : 1 + len(metrics)], strict=True)
            }
            surv = {}
            for i, key in enumerate(km):
                d, r = parts[1 + len(metrics) + 2 * i], parts[2 + len(metrics) + 2 * i]
                hazard = np.where(r > 0, d / np.where(r > 0, r, 1.0), 0.0)
                surv[key] = np.cumprod(1.0 - hazard, axis=-1)
        return vals, surv

    point, surv = unpack(stacked.sum(axis=0))
    den_u = blocks[0]
    names = list(metrics)
    input_auc = {
        name: input_auc_contributions(blocks[1 + names.index(name)], den_u)
        for name in ("coverage", "valid_coverage")
        if name in metrics
    }
    reps: dict[str, np.ndarray] = {}
    surv_reps: dict[str, np.ndarray] = {}
    if n_boot > 0:
        W = bootstrap_counts(strata, n_boot, seed)
        # float32 halves the cost of the one big product; integer counts times values in [0, 1]
        # summed over a few thousand inputs stay accurate to ~1e-6, far below any CI width.
        sums = (W.astype(np.float32) @ stacked.astype(np.float32)).astype(np.float64)
        reps, surv_reps = unpack(sums)

    def ci(name: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        if name not in reps:
            return None, None
        return percentile_interval(reps[name], ci_level)

    c = Curves(
        kind=kind,
        K=K,
        coverage=point["coverage"],
        novelty=point["novelty"],
        expected_new=point["expected_new"],
        full_coverage=point["full_coverage"],
        auc=float(np.nanmean(point["coverage"])),
        time_to_coverage={
            key: TimeToCoverage.from_survival(float(key), surv[key], surv_reps.get(key), level=ci_level)
            for key in km
        },
        runs_at_k=np.rint(avail.sum(axis=0)).astype(np.int64),
        n_inputs=U,
        n_runs=R,
        samples=int(lengths.sum()),
        ci_level=ci_level,
        n_boot=int(n_boot),
        seed=seed if n_boot > 0 else None,
    )
    for name in ("coverage", "novelty", "expected_new", "full_coverage", "valid_coverage", "valid_at_k"):
        if name in point:
            setattr(c, name, point[name])
            lo, hi = ci(name)
            setattr(c, f"{name}_lo", lo)
            setattr(c, f"{name}_hi", hi)
    for prefix, name in (("", "coverage"), ("valid_", "valid_coverage")):
        if name in point:
            setattr(c, f"{prefix}auc", float(np.nanmean(point[name])))
            if name in reps:
                r = np.nanmean(reps[name], axis=1)
                setattr(c, f"{prefix}auc_reps", r)
                lo, hi = percentile_interval(r, ci_level)
                setattr(c, f"{prefix}auc_lo", float(lo))
                setattr(c, f"{prefix}auc_hi", float(hi))
    c.input_auc = input_auc["coverage"]
    c.input_valid_auc = input_auc.get("valid_coverage")
    if input_keys is not None:
        if len(input_keys) != U:
            raise ValueError(f"input_keys has {len(input_keys)} entries for {U} inputs")
        c.input_keys = [(None if t is None else str(t), str(i)) for t, i in input_keys]
    if rarity_bin is not None:
        c.coverage_by_rarity = np.stack([point[f"rarity{b}"] for b in range(n_bins)])
        c.rarity_bins = rarity_labels(n_bins)
    if (c.runs_at_k < R).any():
        short = int((lengths < K).sum())
        c.notes.append(
            f"{short} of {R} runs have fewer than K={K} samples: the estimate at k uses the runs_at_k "
            "runs observed that long; time-to-coverage treats short runs as censored (Kaplan-Meier)"
        )
    if (c.runs_at_k == 0).any():
        first = int(np.argmin(c.runs_at_k)) + 1
        c.notes.append(f"no run reaches k={first}: later values are undefined (NaN)")
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


def _first_hit_histogram(
    first_hit: np.ndarray, K: int, bins: np.ndarray | None = None, n_bins: int = 1
) -> np.ndarray:
    """Count, per run (and per bin), the strategies first matched at each sample index < K.

    Args:
        first_hit: int array, shape (R, M) (-1 = never).
        K: budget.
        bins: int array, shape (R, M) with values in 0..n_bins-1, or None.
        n_bins: number of bins.

    Returns:
        float array, shape (R, K), or (R, n_bins, K) when ``bins`` is given.
    """
    fh = np.asarray(first_hit, dtype=np.int64)
    R = fh.shape[0]
    col = np.where((fh < 0) | (fh >= K), K, fh)  # column K collects "not within the budget"
    b = np.zeros_like(col) if bins is None else np.asarray(bins, dtype=np.int64)
    flat = (np.arange(R)[:, None] * n_bins + b) * (K + 1) + col
    hist = np.bincount(flat.ravel(), minlength=R * n_bins * (K + 1)).reshape(R, n_bins, K + 1)
    hist = hist[:, :, :K].astype(np.float64)
    return hist[:, 0, :] if bins is None else hist

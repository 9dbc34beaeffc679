"""Unbiased curves of an unknown iid law from n samples: rarefaction, Chao extrapolation, iNEXT intervals."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from seffi.coverage import estimators as est
from seffi.coverage._common import _Samples, _ttc_from_runs, rarity_ranks
from seffi.coverage.curves import Curves, TimeToCoverage, tau_key

# -- estimated from samples ----------------------------------------------------------------------


def _sample_point(X: np.ndarray, m: int, K: int) -> dict[str, np.ndarray]:
    """Unbiased curves for k <= n, Chao extrapolation beyond (coverage, expected_new, novelty, full)."""
    n = X.shape[0]
    covered = _covered_from_counts(X.sum(axis=0), n, m, K)
    expected_new = np.diff(np.r_[0.0, covered])
    novelty = est.novelty_samples(X, K)
    if K > n:
        # Beyond n: expected new strategies times the observed Pr[new]/E[new] ratio at n (= 1 for
        # single-label data). Model-based, flagged as extrapolated.
        ratio = novelty[-1] / expected_new[n - 1] if expected_new[n - 1] > 0 else 1.0
        novelty = np.concatenate([novelty, np.clip(expected_new[n:] * ratio, 0.0, 1.0)])
    full = est.full_coverage_samples(X, m, K)
    if K > n:
        full = np.concatenate([full, np.full(K - n, full[-1] if len(full) else 0.0)])
    return {"coverage": covered / m, "expected_new": expected_new, "novelty": novelty, "full_coverage": full}


def _covered_from_counts(Y: np.ndarray, n: int, m: int, K: int) -> np.ndarray:
    """Estimated E|S_k|, k = 1..K: rarefaction to n, Chao extrapolation beyond, capped at m.

    Args:
        Y: int array, shape (S,) or (B, S): incidence counts (S may exceed m in bootstrap worlds).
        n: samples behind each row.
        m: the denominator M_x.
        K: budget.

    Returns:
        float array, shape (K,) or (B, K).
    """
    covered = est.rarefaction_counts(Y, n, K)
    if K > n:
        covered = np.concatenate([covered, est.chao_extrapolation_counts(Y, n, K, m)], axis=-1)
    return np.minimum(covered, m)


def assemblage(Y: np.ndarray, n: int, single: np.ndarray | bool) -> np.ndarray:
    """The iNEXT bootstrap assemblages of D datasets, from their incidence counts.

    Chao et al. 2014 (Appendix S2; iNEXT's ``EstiBootComm.Ind``/``.Sam``). With y_s the counts out of
    n samples, f1/f2 the singletons/doubletons and f0 = Chao1 (``est.chao_f0``, *uncapped*), the
    undetected mass is 1 - C_hat = (f1/n) n f0 / (n f0 + f1) (the Chao-Jost sample-coverage
    deficit). Detected strategies get y_s/n (1 - w (1 - y_s/n)^n) with
    w = (1 - C_hat) / sum_s y_s/n (1 - y_s/n)^n, which takes that mass from the rare ones, and
    ceil(f0) unseen strategies share it equally.

    f0 is not capped at M_x - S_obs here, exactly as in iNEXT: the assemblage only has to mimic the
    sampling variability of the estimator. Capping it piles the undetected mass onto fewer
    strategies that the bootstrap then finds too reliably; in the calibration study of
    ``benchmarks/coverage.py`` that lowered the coverage of 95 % intervals at k <= n by 0.01-0.04.
    Replicate estimates are still capped at M_x. Single-label data use the abundance assemblage
    (one category per sample) and samples that match nothing form their own category, so n counts
    every sample, as in the point estimate; set-valued data use the incidence assemblage
    (independent inclusion of each strategy in each sample).

    Args:
        Y: int array, shape (D, m) (or (m,)): per-strategy incidence counts out of n samples.
        n: samples per dataset.
        single: bool array, shape (D,) (or a bool): whether each dataset is single-label.

    Returns:
        float array, shape (D, m + U + 1) (or (m + U + 1,)): column j < m is strategy j's
        probability (0 when undetected), the next U columns the unseen strategies (the first
        ceil(f0) of a row share its undetected mass; U is the largest ceil(f0)), and the last the
        "matches nothing" category (abundance) or 0 (incidence). Abundance rows sum to 1.
    """
    Y = np.asarray(Y, dtype=np.int64)
    rows = np.atleast_2d(Y)
    single = np.broadcast_to(np.asarray(single, dtype=bool), rows.shape[:1])
    f1 = (rows == 1).sum(axis=1).astype(np.float64)
    f2 = (rows == 2).sum(axis=1).astype(np.float64)
    f0 = est.chao_f0_array(n, f1, f2)
    unseen = np.ceil(f0 - 1e-9).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where((unseen > 0) & (f1 > 0), f1 / n * (n * f0 / (n * f0 + f1)), 0.0)
    rel = rows / n
    tail = (1.0 - rel) ** n
    b = (rel * tail).sum(axis=1)
    w = np.where((a > 0) & (b > 0), a / np.where(b > 0, b, 1.0), 0.0)
    U = int(unseen.max(initial=0))
    out = np.zeros((rows.shape[0], rows.shape[1] + U + 1))
    out[:, : rows.shape[1]] = rel * (1.0 - w[:, None] * tail)
    slot = np.arange(U)[None, :] < unseen[:, None]
    out[:, rows.shape[1] : -1] = np.where(slot, a[:, None] / np.maximum(unseen, 1)[:, None], 0.0)
    out[:, -1] = np.where(single, np.maximum(1.0 - rel.sum(axis=1), 0.0), 0.0)
    out = np.clip(out, 0.0, 1.0)
    out[single] /= out[single].sum(axis=1, keepdims=True)
    return out if Y.ndim == 2 else out[0]


def _assemblage_counts(
    P: np.ndarray, n: int, single: np.ndarray, rng: np.random.Generator, B: int
) -> np.ndarray:
    """Incidence counts of B datasets of n samples from each of D assemblages.

    Multinomial (abundance) or independent binomials (incidence): the law of the column sums of
    datasets drawn from the assemblage, without drawing the match sets.

    Args:
        P: float array, shape (D, L + 1): assemblages (see ``assemblage``).
        n: samples per dataset.
        single: bool array, shape (D,).
        rng: generator.
        B: replicates per assemblage.

    Returns:
        int array, shape (D, B, L).
    """
    D, L = P.shape[0], P.shape[1] - 1
    out = np.zeros((D, B, L), dtype=np.int64)
    if single.any():
        out[single] = rng.multinomial(n, P[single], size=(B, int(single.sum())))[..., :-1].swapaxes(0, 1)
    if (~single).any():
        q = P[~single, :-1]
        out[~single] = rng.binomial(n, q, size=(B, *q.shape)).swapaxes(0, 1)
    return out


def inext_coverage_replicates(
    X: np.ndarray, m: int, K: int, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap replicates of the estimated coverage curve from the iNEXT assemblage.

    Builds each dataset's assemblage (``assemblage``), draws ``n_boot`` datasets of the same size
    from it and recomputes the estimator (rarefaction to n, Chao extrapolation beyond, capped at m)
    on each, batched over replicates and datasets. ``IidBaseline.from_samples(...).curves`` reports
    estimate +- z * sd of these replicates, as iNEXT does.

    Args:
        X: bool array, shape (n, m) or (D, n, m): incidence matrices of one or D datasets.
        m: the denominator M_x.
        K: budget.
        n_boot: replicates B.
        rng: generator.

    Returns:
        float array, shape (B, K) or (D, B, K): replicate coverage fractions C(k).
    """
    X = np.asarray(X, dtype=bool)
    Xs = X[None] if X.ndim == 2 else X
    n = Xs.shape[1]
    single = Xs.sum(axis=2).max(axis=1, initial=0) <= 1
    P = assemblage(Xs.sum(axis=1), n, single)
    reps = _covered_from_counts(_assemblage_counts(P, n, single, rng, n_boot), n, m, K) / m
    return reps[0] if X.ndim == 2 else reps


def _column_law(P: np.ndarray, detected: np.ndarray) -> np.ndarray:
    """Per-column probabilities of one assemblage mapped onto the input's m columns.

    Unseen strategy i goes to the i-th never-detected column, so bootstrap datasets (and runs
    continued beyond n) cover real columns; unseen strategies beyond the free columns are dropped
    here (they only matter through counts, which keep them).

    Args:
        P: float array, shape (m + U + 1,): one assemblage.
        detected: bool array, shape (m,).

    Returns:
        float array, shape (m,).
    """
    m = detected.size
    q = P[:m].copy()
    free = np.flatnonzero(~detected)
    take = min(free.size, P.size - 1 - m)
    q[free[:take]] = P[m : m + take]
    return q


def _draw_datasets(q: np.ndarray, single: bool, n: int, rng: np.random.Generator, B: int) -> np.ndarray:
    """B datasets of n samples from per-column probabilities q (m,): bool array, shape (B, n, m).

    Single-label: each sample matches column j w.p. q_j and nothing w.p. 1 - sum q. Set-valued:
    each column is matched independently w.p. q_j.
    """
    m = q.size
    if not single:
        return rng.random((B, n, m)) < q
    cats = rng.choice(m + 1, size=(B, n), p=np.r_[q, max(0.0, 1.0 - q.sum())] / max(q.sum(), 1.0))
    return cats[..., None] == np.arange(m)


def _sd_interval(
    point: np.ndarray, reps: np.ndarray, z: float, hi_cap: float
) -> tuple[np.ndarray, np.ndarray]:
    """The iNEXT interval: point +- z * (bootstrap standard deviation), clipped to [0, hi_cap]."""
    sd = np.std(reps, axis=0, ddof=1) if len(reps) > 1 else np.zeros(np.shape(point))
    return np.clip(point - z * sd, 0.0, hi_cap), np.clip(point + z * sd, 0.0, hi_cap)


#: Curve fields with bootstrap intervals for estimated baselines, and their upper bound.
_REP_CAPS = {
    "coverage": 1.0,
    "novelty": 1.0,
    "expected_new": math.inf,
    "full_coverage": 1.0,
    "valid_coverage": 1.0,
}


def _sample_curves(
    part: _Samples, K: int, seq: np.random.SeedSequence, n_boot: int, n_bins: int, ci_level: float
) -> tuple[Curves, dict[str, np.ndarray]]:
    """Estimated curves of one input and its bootstrap replicates centred on the estimates.

    ``seq`` (this input's spawned ``SeedSequence``) spawns four streams: time-to-coverage runs,
    the coverage bootstrap, the match-set bootstrap (novelty, F) and the valid-only bootstrap.

    Returns:
        (curves, reps): reps maps a curve field (and "auc", "valid_auc") to replicates, float
        arrays of shape (B, K) (or (B,)), shifted so their mean is the point estimate: averaged
        index-wise over inputs they give the replicates of the mean over inputs.
    """
    X, m, n = part.X, part.m, part.X.shape[0]
    point = _sample_point(X, m, K)
    notes = []
    if K > n:
        notes.append(
            f"iid (estimated) values beyond k = n = {n} are model-based extrapolations (Chao et al. 2014)"
        )
    # Time to coverage: prefixes of random permutations are uniform k-subsets (the U-statistic by
    # Monte Carlo) for k <= n; beyond n the runs continue with draws from the iNEXT assemblage.
    single = bool(X.sum(axis=1).max(initial=0) <= 1)
    q = _column_law(assemblage(X.sum(axis=0), n, single), X.any(axis=0))
    # Independent child streams, so each bootstrap is reproducible on its own (and testable).
    ttc_rng, boot_rng, sets_rng, valid_rng = (np.random.default_rng(s) for s in seq.spawn(4))
    runs = 256
    order = np.argsort(ttc_rng.random((runs, n)), axis=1)[:, :K]  # uniform random permutations
    seq = X[order]  # (runs, min(K, n), m)
    if K > n:
        seq = np.concatenate([seq, _draw_datasets(q, single, K - n, ttc_rng, runs)], axis=1)
    fh = np.where(seq.any(axis=1), seq.argmax(axis=1), -1)
    ttc = _ttc_from_runs(fh, m, K)
    surv_full = 1.0 - point["full_coverage"]
    ttc[tau_key(1.0)] = TimeToCoverage.from_survival(1.0, np.minimum(surv_full, 1.0))
    notes.append("iid (estimated) time-to-coverage for tau < 1 is Monte Carlo over 256 sample permutations")
    c = Curves(
        kind="iid_estimated",
        K=K,
        coverage=point["coverage"],
        novelty=point["novelty"],
        expected_new=point["expected_new"],
        full_coverage=point["full_coverage"],
        auc=float(point["coverage"].mean()),
        time_to_coverage=ttc,
        extrapolated=np.arange(1, K + 1) > n,
        n_inputs=1,
        n_runs=1,
        samples=n,
        notes=notes,
    )
    # Per-strategy rarefied contributions, binned by incidence frequency (ranking only).
    y = X.sum(axis=0)
    lf = est.log_factorial(n)
    kk = np.arange(1, min(K, n) + 1)
    per_s = 1.0 - np.exp(est._log_binom_ratio(n - y[None, :], n, kk[:, None], lf))
    per_s = np.vstack([per_s, np.repeat(per_s[-1:], K - len(kk), axis=0)]) if K > n else per_s
    bins = rarity_ranks(y / n, m, n_bins)
    c.coverage_by_rarity = np.stack([per_s[:, bins == b].sum(axis=1) / m for b in range(n_bins)])
    Xv = None
    if part.valid is not None:
        Xv = X & part.valid[:, None]
        c.valid_coverage = _covered_from_counts(Xv.sum(axis=0), n, m, K) / m
        c.valid_auc = float(c.valid_coverage.mean())
        nv = int(part.valid.sum())
        va = 1.0 - np.exp(est._log_binom_ratio(np.full(len(kk), n - nv), n, kk, lf))
        c.valid_at_k = np.concatenate([va, np.full(K - len(kk), va[-1])]) if K > n else va
    reps: dict[str, np.ndarray] = {}
    if n_boot > 0:
        # Coverage (and so AUC and expected new) depend on the data only through the counts: one
        # batched product for all replicates. Novelty and F need match sets, drawn from the same law.
        reps["coverage"] = inext_coverage_replicates(X, m, K, n_boot, boot_rng)
        Xb = _draw_datasets(q, single, n, sets_rng, n_boot)
        reps["expected_new"] = np.diff(reps["coverage"] * m, axis=1, prepend=0.0)
        # All replicates at once (a per-replicate loop here was ~0.5 s per set-valued input).
        if not single:
            nov = est.novelty_samples_many(Xb, K)
            if K > n:  # same extension as the point estimate, replicate by replicate
                en = reps["expected_new"]
                at_n = en[:, n - 1]
                ratio = np.where(at_n > 0, nov[:, -1] / np.where(at_n > 0, at_n, 1.0), 1.0)
                nov = np.concatenate([nov, np.clip(en[:, n:] * ratio[:, None], 0.0, 1.0)], axis=1)
        full = est.full_coverage_samples_many(Xb, m, K)
        full = np.concatenate([full, np.repeat(full[:, -1:], K - full.shape[1], axis=1)], axis=1)
        # Single-label: Pr[new] = E[new] sample by sample, and the two U-statistics coincide.
        reps["novelty"] = np.clip(reps["expected_new"], 0.0, 1.0) if single else nov
        reps["full_coverage"] = full
        if Xv is not None:
            reps["valid_coverage"] = inext_coverage_replicates(Xv, m, K, n_boot, valid_rng)
        for name in list(reps):
            pt = getattr(c, name)
            reps[name] = reps[name] - reps[name].mean(axis=0) + pt  # centred: iNEXT is point +- z sd
        reps["auc"] = reps["coverage"].mean(axis=1)
        if "valid_coverage" in reps:
            reps["valid_auc"] = reps["valid_coverage"].mean(axis=1)
        _set_intervals(c, reps, _z(ci_level))
        c.n_boot = n_boot
    return c, reps


def _mean_replicates(parts: list[Curves], reps: list[dict[str, np.ndarray]], B: int) -> dict[str, np.ndarray]:
    """Replicates of the mean over inputs from independent per-input (centred) replicates.

    Inputs are bootstrapped independently, so the index-wise mean of their replicates is a
    replicate of the mean (averaging per-input bounds instead would overstate the width by up to a
    factor sqrt(inputs)). Inputs without replicates (exact laws) contribute their fixed value.
    """
    out = {}
    for name in set().union(*reps):
        values = [getattr(p, name) for p in parts]
        if any(v is None for v in values):
            continue
        stack = [
            r[name] if name in r else np.broadcast_to(np.asarray(v, dtype=np.float64), (B, *np.shape(v)))
            for v, r in zip(values, reps, strict=True)
        ]
        out[name] = np.mean(stack, axis=0)
    return out


def _set_intervals(c: Curves, reps: Mapping[str, np.ndarray], z: float) -> None:
    """Set ``*_lo``/``*_hi`` (and ``auc_reps``) of curves from centred replicates (iNEXT: +- z sd)."""
    for name, cap in _REP_CAPS.items():
        if name in reps:
            lo, hi = _sd_interval(getattr(c, name), reps[name], z, cap)
            setattr(c, f"{name}_lo", lo)
            setattr(c, f"{name}_hi", hi)
    for prefix in ("", "valid_"):
        if f"{prefix}auc" in reps:
            r = reps[f"{prefix}auc"]
            lo, hi = _sd_interval(np.asarray(getattr(c, f"{prefix}auc")), r, z, 1.0)
            setattr(c, f"{prefix}auc_reps", r)
            setattr(c, f"{prefix}auc_lo", float(lo))
            setattr(c, f"{prefix}auc_hi", float(hi))


def _z(level: float) -> float:
    """Standard normal quantile for a two-sided interval (bisection on erf; no scipy)."""
    target = 0.5 + level / 2
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2

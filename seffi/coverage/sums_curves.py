"""Per-input sums -> curves: point estimates for logs, curves with intervals for snapshots.

Every input weighs the same (its runs are averaged); time to coverage is Kaplan-Meier. Intervals over
inputs, stratified by task: a score interval for means of [0, 1] values, the bootstrap elsewhere
(exact below `NORMAL_INPUTS` inputs, from the normal limit of the resampled totals above, where
skewness moves a 97.5 % quantile by < 0.03 sd against ~0.08 sd of Monte Carlo error).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seffi._seeding import as_seed_sequence
from seffi.coverage.curves import (
    TAUS,
    Curves,
    KeyView,
    TimeToCoverage,
    check_budget,
    survival_summary,
    tau_key,
)
from seffi.coverage.resampling import (
    MIN_INPUTS,
    ColumnSum,
    ScoreSums,
    add_rows,
    bootstrap_blocks,
    expanded_level,
    percentile_interval,
    strata_codes,
    t_quantile,
)
from seffi.coverage.sums import (
    METRICS,
    N_STATS,
    PER_STRATEGY,
    GroupTotals,
    InputSums,
    _rebuild,
    sums_from_runs,
)

__all__ = ["curves_from_runs", "curves_from_sums", "point_from_totals"]

INPUT_BLOCK = 4096  # inputs per block from sums to curves (bounds the float copies)
NORMAL_INPUTS = 20_000  # from this many inputs on, replicates come from the normal limit
REPLICATE_BLOCK = 64  # replicates per block of the exact bootstrap
KEEP_CELLS = 1 << 22  # weighted cells (32 MB) up to which a snapshot keeps its blocks for its second pass
_METRIC_ROWS = list(METRICS.values())
_TAU_KEYS = [tau_key(tau) for tau in TAUS]


def unpack_stats(s: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Summed blocks (..., N_STATS, K) -> metric curves and Kaplan-Meier survival curves, in one pass."""
    den = s[..., :1, :]
    pos = den > 0
    ratios = np.where(pos, s[..., _METRIC_ROWS, :] / np.where(pos, den, 1.0), np.nan)
    r, d = s[..., 7 : 7 + 2 * len(TAUS) : 2, :], s[..., 8 : 8 + 2 * len(TAUS) : 2, :]
    hazard = np.where(r > 0, d / np.where(r > 0, r, 1.0), 0.0)
    surv = np.cumprod(1.0 - hazard, axis=-1)
    return (
        {name: ratios[..., i, :] for i, name in enumerate(METRICS)},
        {key: surv[..., t, :] for t, key in enumerate(_TAU_KEYS)},
    )


@dataclass
class Draws:
    """Replicates for the intervals: expected_new (B, K), auc, valid_auc (B,), survival per tau (B, K)."""

    expected_new: np.ndarray
    auc: np.ndarray
    valid_auc: np.ndarray
    survival: dict[str, np.ndarray]


class Replicates:
    """Collects weighted per-input values block by block (``strata`` (U,)), then draws B replicates."""

    def __init__(self, U: int, K: int, strata: np.ndarray, n_boot: int, seed: int) -> None:
        self.U, self.K, self.n_boot, self.seed = U, K, int(n_boot), seed
        self.strata = np.asarray(strata)
        self.normal = U >= NORMAL_INPUTS
        if self.normal:
            P = 3 + (1 + len(TAUS)) * K
            self.groups, self.group_of = strata_codes(self.strata)
            self.xtx = np.zeros((P, P))
            self.total = np.zeros((self.groups.size, P))
            self.count = np.bincount(self.group_of, minlength=self.groups.size).astype(np.float64)
        else:
            # float32 halves the cost of the big product; accurate to ~1e-6, far below any CI width.
            self.flat = np.empty((U, N_STATS * K), dtype=np.float32)

    def _features(self, st: np.ndarray) -> np.ndarray:
        """Per input: runs weight, mean (valid) coverage over k, new per k, events per tau and k."""
        parts = [
            st[:, 0, :1],
            st[:, 1, :].mean(axis=1)[:, None],
            st[:, 5, :].mean(axis=1)[:, None],
            st[:, 3, :],
        ]
        parts += [st[:, 8 + 2 * t, :] for t in range(len(TAUS))]
        return np.concatenate(parts, axis=1)

    def add(self, start: int, st: np.ndarray) -> None:
        """Weighted values of inputs ``start .. start + len(st)`` (canonical order): (B, N_STATS, K)."""
        B = st.shape[0]
        if not self.normal:
            self.flat[start : start + B] = st.reshape(B, -1)
            return
        x = self._features(st)
        self.xtx += x.T @ x
        np.add.at(self.total, self.group_of[start : start + B], x)

    def result(self) -> Draws:
        """The replicates, exact or from the normal limit (see the module docstring)."""
        return self._normal() if self.normal else self._exact()

    def _exact(self) -> Draws:
        K = self.K
        boot = np.zeros((self.n_boot, N_STATS * K))
        part, which = None, None
        for h, idx, rows, W in bootstrap_blocks(self.strata, self.n_boot, self.seed, REPLICATE_BLOCK):
            if which != h:  # the inputs of this stratum, copied once (none with one stratum)
                part, which = (self.flat if idx.size == self.U else self.flat[idx]), h
            boot[rows] += (W.astype(np.float32) @ part).astype(np.float64)
        reps, surv = unpack_stats(boot.reshape(self.n_boot, N_STATS, K))
        return Draws(
            reps["expected_new"], reps["coverage"].mean(axis=1), reps["valid_coverage"].mean(axis=1), surv
        )

    def _normal(self) -> Draws:
        K, B = self.K, self.n_boot
        mean_outer = (self.total.T / np.maximum(self.count, 1.0)) @ self.total  # sum_h n_h mean_h mean_h^T
        scatter = self.xtx - mean_outer
        lam, vec = np.linalg.eigh((scatter + scatter.T) / 2.0)
        root = vec * np.sqrt(np.clip(lam, 0.0, None))[None, :]
        rng = np.random.default_rng(as_seed_sequence(self.seed))
        draws = self.total.sum(axis=0)[None, :] + rng.standard_normal((B, root.shape[0])) @ root.T
        den = np.maximum(draws[:, 0], 1e-300)
        new = np.clip(draws[:, 3 : 3 + K], 0.0, None)
        survival = {}
        for t, tau in enumerate(TAUS):
            d = np.clip(draws[:, 3 + (1 + t) * K : 3 + (2 + t) * K], 0.0, None)
            r = den[:, None] - (np.cumsum(d, axis=1) - d)
            hazard = np.where(r > 0, np.clip(d / np.where(r > 0, r, 1.0), 0.0, 1.0), 0.0)
            survival[tau_key(tau)] = np.cumprod(1.0 - hazard, axis=1)
        return Draws(new / den[:, None], draws[:, 1] / den, draws[:, 2] / den, survival)


def _weighted(sums: np.ndarray, n_runs: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(U, N_STATS, K) floats: each run weighted 1 / (runs of its input); counts / M_x."""
    scale = np.ones((sums.shape[0], N_STATS))
    scale[:, list(PER_STRATEGY)] = 1.0 / np.asarray(m, dtype=np.float64)[:, None]
    w = 1.0 / np.maximum(n_runs, 1)
    return (sums * (scale * w[:, None])[:, None, :]).transpose(0, 2, 1)


def _mean_finite(x: np.ndarray) -> Any:
    """``np.nanmean`` over the last axis without empty-slice warnings."""
    ok = np.isfinite(x)
    return np.where(ok, x, 0.0).sum(axis=-1) / np.maximum(ok.sum(axis=-1), 1)


#: Metrics of [0, 1] per-input values get the score interval; True: a run's value is 0 or 1.
_SCORE_METRICS: dict[str, bool] = {
    "coverage": False,
    "valid_coverage": False,
    "novelty": True,
    "full_coverage": True,
    "valid_at_k": True,
}


def point_from_totals(totals: GroupTotals) -> dict[str, Any]:
    """Point estimates for a log in O(groups x K): ``k``, the curves, AUCs, ``time_to_coverage``."""
    n, m, count, tot = totals.arrays()
    return _point(_weighted(_rebuild(tot, count * n), n, m).sum(axis=0), totals.budget)


def _weighted_blocks(
    sums: InputSums, order: np.ndarray, n_runs: np.ndarray, m: np.ndarray, stats: Sequence[int] = ()
) -> Iterator[tuple[int, np.ndarray]]:
    """``(a, st)``: `_weighted` sums per block of inputs from ``a`` (only ``stats`` if given, others 0)."""
    for a in range(0, order.size, INPUT_BLOCK):
        rows = order[a : a + INPUT_BLOCK]
        if stats:
            full = np.zeros((rows.size, sums.budget, N_STATS), dtype=np.int64)
            for j in stats:
                full[:, :, j] = sums.stat(j, rows)
        else:
            full = sums.full(rows)
        yield a, _weighted(full, n_runs[a : a + INPUT_BLOCK], m[a : a + INPUT_BLOCK])


def _point(total: np.ndarray, K: int) -> dict[str, Any]:
    vals, surv = unpack_stats(total)
    out: dict[str, Any] = {"k": list(range(1, K + 1)), **vals}
    reached = bool(np.isfinite(vals["coverage"]).any())
    out["auc"] = float(_mean_finite(vals["coverage"])) if reached else None
    out["valid_auc"] = float(_mean_finite(vals["valid_coverage"])) if reached else None
    summary = zip(*(a.tolist() for a in survival_summary(np.stack(list(surv.values())))), strict=True)
    out["time_to_coverage"] = [
        {"tau": float(key), "median": med, "restricted_mean": rmean, "fraction_censored": cens}
        for key, (med, rmean, cens) in zip(surv, summary, strict=True)
    ]
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
    input_keys: Sequence[tuple[str | None, str]] | None = None,
    samples: int | None = None,
    valid: bool = True,
    rarity: np.ndarray | None = None,
    incomplete: int = 0,
    absent: int = 0,
) -> Curves:
    """Curves for k = 1..K over the inputs' complete runs (others left out, counted in the notes).

    With at least `MIN_INPUTS` inputs, intervals cover another draw of inputs (stratified by
    ``strata``): score intervals for [0, 1] metrics and AUCs, the expanded percentile bootstrap
    otherwise; with fewer, Student t from the run-to-run variance within each input.

    ``sums`` hold U inputs of M_x ``m``; ``order`` lists them in canonical order (sorted ids: the
    bootstrap draws the same inputs however the data arrived), and ``strata`` and ``input_keys``
    follow it. ``valid``: the valid statistics were recorded; ``rarity``: (U, B, K) covered
    strategies per rarity bin; ``incomplete`` and ``absent``: runs short of K and inputs ``sums``
    does not hold (for the notes).
    """
    K = sums.budget
    order = np.arange(m.shape[0]) if order is None else np.asarray(order, dtype=np.int64)
    if input_keys is not None and len(input_keys) != order.size:
        raise ValueError(f"input_keys has {len(input_keys)} entries for {order.size} inputs")
    n_runs = sums.n_runs[order]
    has_runs = n_runs > 0
    empty = int((~has_runs).sum()) + int(absent)
    if not has_runs.all():  # inputs without a complete run are left out
        order, n_runs = order[has_runs], n_runs[has_runs]
        strata = None if strata is None else np.asarray(strata)[has_runs]
        if input_keys is not None:
            input_keys = [key for key, ok in zip(input_keys, has_runs.tolist(), strict=True) if ok]
    m = np.asarray(m)[order]
    U, R = order.size, int(n_runs.sum())
    if U == 0:
        raise ValueError(f"no run has reached K={K} yet ({incomplete} incomplete runs): no curves")
    metrics = [name for name in METRICS if valid or name not in ("valid_coverage", "valid_at_k")]
    over_inputs = U >= MIN_INPUTS
    level = expanded_level(ci_level, U) if over_inputs else ci_level
    boot = n_boot > 0 and over_inputs
    strata = np.zeros(U, dtype=np.int64) if strata is None else strata
    reps = Replicates(U, K, strata, n_boot, seed) if boot else None
    scored = [name for name in metrics if boot and name in _SCORE_METRICS]
    aucs = [(p, name) for p, name in (("", "coverage"), ("valid_", "valid_coverage")) if name in metrics]
    # Every score interval of the snapshot (curves, then AUCs), from two passes over the inputs.
    floors = [n_runs if _SCORE_METRICS[name] else None for name in scored] + [None] * len(aucs)
    score = ScoreSums(strata, [K] * len(scored) + [1] * len(aucs), floors) if boot else None

    def values(st: np.ndarray) -> list[np.ndarray]:
        # Each input's curves (its runs averaged) and AUCs: one block of inputs at a time.
        with np.errstate(divide="ignore", invalid="ignore"):
            curves = {name: st[:, METRICS[name], :] / st[:, 0, :] for name in scored}
        return [*curves.values(), *(curves[name].mean(axis=1) for _, name in aucs)]

    # First pass over the inputs in blocks (canonical order): the weighted sums summed in order for
    # the point estimates (the additions of one sum over all), the bootstrap's data, the means.
    total: np.ndarray | None = None
    num = ColumnSum(U)  # the AUC shares' C(k) and valid C(k) numerators
    # The blocks are kept for the second pass while they are small, else rebuilt from the sums.
    kept = list(_weighted_blocks(sums, order, n_runs, m)) if U * N_STATS * K <= KEEP_CELLS else None
    for a, st in kept or _weighted_blocks(sums, order, n_runs, m):
        total = add_rows(total, st)
        num.add(np.concatenate([st[:, 1], st[:, 5]], axis=1))
        if reps is not None:
            reps.add(a, st)
        if score is not None:
            score.add(a, values(st))
    # Second pass: the spread about those means, and each input's share of the AUCs (for
    # Curves.gain's paired bootstrap over inputs).
    D = total[0]  # type: ignore[index]
    ok = D > 0
    C = [N[ok] / D[ok] for N in np.split(num.result(), 2)]
    shares = np.full((2, U), np.nan)
    needed = sorted({0, 1, 5, *(METRICS[name] for name in scored)})
    for a, st in kept or _weighted_blocks(sums, order, n_runs, m, needed):
        if score is not None:
            score.add_squares(a, values(st))
        for i, j in enumerate((1, 5) if ok.any() else ()):
            shares[i, a : a + st.shape[0]] = _auc_shares(st[:, j], st[:, 0], C[i], D, ok, U)
    point, surv = unpack_stats(total)  # type: ignore[arg-type]
    draws = reps.result() if reps is not None else None
    ttc = TimeToCoverage.from_survivals(
        [float(key) for key in surv],
        list(surv.values()),
        None if draws is None else [draws.survival[key] for key in surv],
        level=level,
    )
    c = Curves.from_point(
        kind,
        K,
        point,
        time_to_coverage=dict(zip(surv, ttc, strict=True)),
        runs_at_k=np.full(K, R, dtype=np.int64),
        n_inputs=U,
        n_runs=R,
        samples=R * K if samples is None else int(samples),
        ci_level=ci_level,
        n_boot=int(n_boot),
        seed=seed if n_boot > 0 else None,
    )
    got = iter(score.bounds(ci_level) if score is not None else [])
    for name in metrics:
        setattr(c, name, point[name])
        if not boot or (name not in _SCORE_METRICS and name != "expected_new"):
            continue
        lo, hi = next(got) if name in _SCORE_METRICS else percentile_interval(draws.expected_new, level)  # type: ignore[union-attr]
        setattr(c, f"{name}_lo", lo)
        setattr(c, f"{name}_hi", hi)
    for prefix, name in aucs:
        setattr(c, f"{prefix}auc", float(point[name].mean()))
        if boot:
            # The replicates stay: Curves.gain pairs them when per-input contributions are missing.
            setattr(c, f"{prefix}auc_reps", draws.auc if prefix == "" else draws.valid_auc)  # type: ignore[union-attr]
            lo, hi = next(got)
            setattr(c, f"{prefix}auc_lo", float(lo[0]))
            setattr(c, f"{prefix}auc_hi", float(hi[0]))
    if n_boot > 0 and not over_inputs:
        _within_input_intervals(c, sums.take(order), m, metrics, ci_level)
    c.input_auc = shares[0]
    if valid:
        c.input_valid_auc = shares[1]
    if input_keys is not None:
        # A tracker's keys (a `KeyView`, or str pairs) are kept as they are.
        as_str = isinstance(input_keys, KeyView) or all(
            type(t) is str and type(i) is str for t, i in input_keys
        )
        c.input_keys = (
            input_keys if as_str else [(None if t is None else str(t), str(i)) for t, i in input_keys]
        )
    if rarity is not None:
        w = (1.0 / n_runs / m)[:, None, None]
        c.coverage_by_rarity = (rarity[order] * w).sum(axis=0) / U  # (B, K)
        c.rarity_bins = rarity_labels(rarity.shape[1])
    if incomplete or empty:
        c.notes.append(
            f"{incomplete} run(s) have fewer than K={K} samples and are left out (a run counts once it "
            f"reaches K, so every k uses the same runs)"
            + (f"; {empty} input(s) have no complete run and are left out" if empty else "")
        )
    return c


def _within_input_intervals(
    c: Curves, part: InputSums, m: np.ndarray, metrics: list[str], level: float
) -> None:
    """Student-t intervals, Var = sum_u s_u^2 / R_u / U^2 with Welch-Satterthwaite degrees of freedom."""
    U, R = part.n_runs.shape[0], part.n_runs
    full = part.full()
    if (R < 2).any():
        c.notes.append(
            f"no interval: only {U} input(s), too few to resample (fewer than {MIN_INPUTS}), and an input "
            "has a single complete run, so its run-to-run variance is unknown"
        )
        return

    def se(total: np.ndarray, squares: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shape = (-1,) + (1,) * (total.ndim - 1)
        n = R.reshape(shape)
        var = np.maximum((squares - total**2 / n) / (n - 1) * scale.reshape(shape) ** 2, 0.0) / n
        summed = var.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            df = summed**2 / (var**2 / (n - 1)).sum(axis=0)
        return np.sqrt(summed) / U, np.where(np.isfinite(df), df, R.sum() - U)

    def quantile(df: np.ndarray) -> np.ndarray:
        whole = np.maximum(np.floor(df + 1e-9), 1).astype(np.int64)  # 49.0 may arrive as 48.999…
        return np.vectorize(lambda d: t_quantile(level, int(d)), otypes=[np.float64])(whole)

    for name in metrics:
        j = METRICS[name]
        scale = 1.0 / m if j in PER_STRATEGY else np.ones(U)
        err, df = se(full[:, :, j].astype(np.float64), part.squares(j).astype(np.float64), scale)
        half = quantile(df) * err
        value = getattr(c, name)
        top = 1.0 if name != "expected_new" else np.inf
        setattr(c, f"{name}_lo", np.clip(value - half, 0.0, top))
        setattr(c, f"{name}_hi", np.clip(value + half, 0.0, top))
    K = part.budget
    for col, (prefix, name) in enumerate((("", "coverage"), ("valid_", "valid_coverage"))):
        if name not in metrics:
            continue
        total = full[:, :, METRICS[name]].sum(axis=1).astype(np.float64)
        err, df = map(float, se(total, part.auc_sq[:, col].astype(np.float64), 1.0 / (K * m)))
        half, value = float(quantile(np.asarray(df))) * err, getattr(c, f"{prefix}auc")
        lo, hi = (float(np.clip(value + d, 0.0, 1.0)) for d in (-half, half))
        for key, v in (("se", err), ("df", df), ("lo", lo), ("hi", hi)):
            setattr(c, f"{prefix}auc_{key}", v)
    c.notes.append(
        f"only {U} input(s) (fewer than {MIN_INPUTS}): intervals cover run-to-run noise for these inputs "
        "only (Student t, from the variance between each input's complete runs), not what other inputs "
        "would give; time to coverage has none"
    )


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
    """Curves from per-run first hits (R, C), lengths and M_x (R,): `sums_from_runs`, `curves_from_sums`.

    ``unit``: (R,) input 0..U-1 of each run (default one input per run); ``strata`` and ``input_keys``
    are per input; the rest as in `sums_from_runs` and `curves_from_sums`.
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


def _auc_shares(
    num: np.ndarray, den: np.ndarray, C: np.ndarray, D: np.ndarray, ok: np.ndarray, U: int
) -> np.ndarray:
    """Each input's share of the AUC of C(k) = sum_u num[u, k] / sum_u den[u, k]: rows (B, K) of U inputs.

    a_u = AUC + mean over k where ``ok`` of U (num[u, k] - C(k) den[u, k]) / D(k), D = sum_u den: its
    mean is exactly the AUC; with every run reaching K it is the input's own AUC.
    """
    infl = U * (num[:, ok] - C[None, :] * den[:, ok]) / D[ok][None, :]
    # Summed over k column after column, as numpy sums ``num[:, ok]`` (a Fortran-ordered copy).
    return C.mean() + np.asfortranarray(infl).mean(axis=1)


def rarity_labels(n_bins: int) -> list[str]:
    """Row labels of ``Curves.coverage_by_rarity``: "q1 (most common)" .. "qB (rarest)"."""
    labels = [f"q{b + 1}" for b in range(n_bins)]
    labels[0] += " (most common)"
    if n_bins > 1:
        labels[-1] += " (rarest)"
    return labels

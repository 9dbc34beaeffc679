"""Aggregates of the exploration bench over model seeds x pool prompts (rliable style).

The bench's design is two-stage: S model seeds, and within each seed the same P pool prompts on which
every method and the base are measured. A seed's pool gain is a ratio of means over its prompts,
``sum_p (a_p - i_p) / sum_p (o_p - i_p)`` (policy, base-iid and oracle AUCs), so the per-prompt gain

    g_{s,p} = (a_{s,p} - i_{s,p}) / mean_p (o_{s,p} - i_{s,p})

has the seed's pool gain as its mean over the seed's prompts (the seed's room is the unit, as in the
seed's own gain). Every aggregate below is over the S x P values g_{s,p}:

* the **mean** and the **IQM** (interquartile mean: the mean of the middle 50 % of the pooled values,
  Agarwal et al. 2021, "Deep RL at the edge of the statistical precipice") with a **two-stage
  (stratified) bootstrap** 95 % percentile interval: each replicate draws S seeds with replacement,
  then within each drawn seed P of its prompts with replacement. Resampling prompts within the drawn
  seeds counts the within-seed noise a second time (the seeds' means already carry it), so the
  interval errs long when the seeds agree; with few seeds whose effects differ it errs short, as any
  interval resting on S seeds' spread does (tests/experiment/test_bench_stats.py measures both);
* the **probability of improvement** of a method over a baseline. rliable's P(X > Y) compares every
  run of X with every run of Y (Mann-Whitney). Here the runs are paired: the method and the validity
  baseline are measured on the same prompts of the same seed, so the paired form is used,
  ``PoI = mean_{s,p} [1(g_{s,p} > h_{s,p}) + 1/2 1(g_{s,p} = h_{s,p})]``, with h the baseline's
  per-prompt gain (against the base, h = 0: the share of prompts with a positive gain, ties half).
  Its interval is the same two-stage bootstrap of the pairs;
* a **power statement**: the smallest true mean difference the design detects with a two-sided 5 %
  test at 80 % power, ``(z_{0.975} + z_{0.8}) se``, where ``se`` is the standard error of the grand
  mean of the paired differences under the measured variance components (one-way random effects:
  between seeds and between prompts within a seed).

Pure numpy; every array shape is in the docstrings (S seeds, P prompts per seed, B replicates).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from seffi._seeding import SeedLike, as_seed_sequence

#: The trim of the interquartile mean: a quarter of the values off each end.
IQM_TRIM = 0.25


def prompt_gains(auc: Sequence[float], iid_auc: Sequence[float], oracle_auc: Sequence[float]) -> np.ndarray:
    """Per-prompt gains of one seed: (P,) ``(a_p - i_p) / mean_p(o_p - i_p)``; their mean is the pool gain.

    Args:
        auc: (P,) the policy's per-prompt AUCs.
        iid_auc: (P,) the base's iid per-prompt AUCs.
        oracle_auc: (P,) the oracle's per-prompt AUCs.

    Returns:
        float (P,); all NaN when the seed's room ``mean_p(o_p - i_p)`` is not above 0 (no gain).
    """
    a, i, o = (np.asarray(v, dtype=np.float64) for v in (auc, iid_auc, oracle_auc))
    if not (a.shape == i.shape == o.shape) or a.ndim != 1 or a.size == 0:
        raise ValueError(
            f"prompt_gains: three equal non-empty (P,) arrays needed, got {a.shape}, {i.shape}, {o.shape}"
        )
    room = float((o - i).mean())
    if room <= 1e-12:
        return np.full(a.size, np.nan)
    return (a - i) / room


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean along ``axis``: drop ``floor(n / 4)`` values off each end, average the rest.

    The convention of ``scipy.stats.trim_mean(values, 0.25)`` (which rliable uses).

    Args:
        values: (..., n) along ``axis``.
        axis: The axis of the n values.

    Returns:
        The IQM, ``values`` without ``axis``.
    """
    x = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = x.shape[axis]
    cut = int(IQM_TRIM * n)
    return np.take(x, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def _stack(seeds: Sequence[Sequence[float]]) -> np.ndarray:
    """(S, P) from S per-seed (P,) arrays (every seed the same P: the same pool for every seed)."""
    rows = [np.asarray(r, dtype=np.float64) for r in seeds]
    if not rows or any(r.ndim != 1 or r.size == 0 for r in rows) or len({r.size for r in rows}) != 1:
        raise ValueError(f"need S >= 1 seeds of the same P >= 1 prompts, got sizes {[r.size for r in rows]}")
    x = np.stack(rows)
    if not np.isfinite(x).all():
        raise ValueError("the per-prompt values must be finite (a seed without room has no gain)")
    return x


def two_stage_indices(S: int, P: int, n_boot: int, seed: SeedLike = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a two-stage bootstrap: seeds with replacement, then prompts within each drawn seed.

    Returns:
        ``(seed_idx, prompt_idx)``: int (B, S) and int (B, S, P); replicate b holds the values
        ``x[seed_idx[b, j], prompt_idx[b, j, q]]``.
    """
    rng = np.random.default_rng(as_seed_sequence(seed))
    return rng.integers(0, S, size=(n_boot, S)), rng.integers(0, P, size=(n_boot, S, P))


def replicates(
    x: np.ndarray, stat: Callable[[np.ndarray], np.ndarray], n_boot: int, seed: SeedLike = 0
) -> np.ndarray:
    """Two-stage bootstrap replicates of ``stat`` over the pooled seeds x prompts.

    Args:
        x: (S, P) per-prompt values.
        stat: maps (B, S * P) to (B,) (``mean`` or `iqm` along the last axis).
        n_boot: B.
        seed: Bootstrap seed.

    Returns:
        float (B,).
    """
    S, P = x.shape
    si, pi = two_stage_indices(S, P, n_boot, seed)
    drawn = x[si[:, :, None], pi]  # (B, S, P)
    return stat(drawn.reshape(n_boot, S * P))


def _mean(v: np.ndarray) -> np.ndarray:
    return v.mean(axis=-1)


def interval(
    seeds: Sequence[Sequence[float]],
    stat: str = "mean",
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: SeedLike = 0,
) -> dict[str, float]:
    """A statistic of the pooled seeds x prompts with its two-stage bootstrap percentile interval.

    Args:
        seeds: S sequences of P per-prompt values.
        stat: ``"mean"`` or ``"iqm"``.
        n_boot: Bootstrap replicates.
        level: Interval level.
        seed: Bootstrap seed.

    Returns:
        ``{"value", "lo", "hi"}``.
    """
    fn = {"mean": _mean, "iqm": iqm}[stat]
    x = _stack(seeds)
    reps = replicates(x, fn, n_boot, seed)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(reps, [a, 1.0 - a])
    return {"value": float(fn(x.reshape(1, -1))[0]), "lo": float(lo), "hi": float(hi)}


def improvement(
    seeds: Sequence[Sequence[float]],
    baseline: Sequence[Sequence[float]] | None = None,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: SeedLike = 0,
) -> dict[str, float]:
    """Paired probability of improvement over a baseline, with its two-stage bootstrap interval.

    Args:
        seeds: (S, P) per-prompt gains of the method.
        baseline: (S, P) the baseline's on the same seeds and prompts; ``None``: the base (gain 0).
        n_boot: Bootstrap replicates.
        level: Interval level.
        seed: Bootstrap seed.

    Returns:
        ``{"value", "lo", "hi"}``: ``mean_{s,p} [1(g > h) + 1/2 1(g = h)]`` and its interval.
    """
    g = _stack(seeds)
    h = np.zeros_like(g) if baseline is None else _stack(baseline)
    if h.shape != g.shape:
        raise ValueError(
            f"the baseline has shape {h.shape}, the method {g.shape}: pair the same seeds and prompts"
        )
    wins = (g > h).astype(np.float64) + 0.5 * (g == h)
    return interval(wins, "mean", n_boot=n_boot, level=level, seed=seed)


def variance_components(x: np.ndarray) -> dict[str, float]:
    """One-way random-effects components of (S, P) values: seeds, and prompts within a seed.

    ANOVA estimators: ``within = MSW`` (pooled within-seed variance), ``between = max(0, (MSB - MSW) / P)``
    with ``MSB = P var(seed means)``.

    Args:
        x: (S, P).

    Returns:
        ``{"between", "within", "se"}``: the two variances and the standard error of the grand mean,
        ``sqrt(between / S + within / (S P))`` (with one seed: the within-seed part only).
    """
    x = _stack(list(x))
    S, P = x.shape
    within = float(x.var(axis=1, ddof=1).mean()) if P > 1 else 0.0
    between = max(0.0, (P * float(x.mean(axis=1).var(ddof=1)) - within) / P) if S > 1 else 0.0
    return {"between": between, "within": within, "se": float(np.sqrt(between / S + within / (S * P)))}


def detectable(se: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true mean difference a two-sided ``alpha`` z-test detects with ``power``.

    ``(z_{1 - alpha/2} + z_{power}) se`` (the lower tail's rejections neglected, as is usual).
    """
    z = NormalDist().inv_cdf
    return float((z(1.0 - alpha / 2.0) + z(power)) * se)


def aggregate(
    gains: Sequence[Sequence[float]],
    reference: Sequence[Sequence[float]] | None,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: SeedLike = 0,
) -> dict[str, Any]:
    """Every aggregate of one method.

    Args:
        gains: (S, P) the method's per-prompt gains (`prompt_gains` of each seed).
        reference: (S, P) the validity baseline's on the same seeds and prompts, or ``None``.
        n_boot: Bootstrap replicates.
        level: Interval level.
        seed: Bootstrap seed.

    Returns:
        ``{"seeds": S, "prompts": P, "mean", "iqm": {"value", "lo", "hi"}, "poi_base", "poi_reference"
        (None without a reference), "detectable_vs_0", "detectable_vs_reference" (None without),
        "components": variance_components of the gains}``.
    """
    g = _stack(gains)
    kw = {"n_boot": n_boot, "level": level, "seed": seed}
    comp = variance_components(g)
    out: dict[str, Any] = {
        "seeds": int(g.shape[0]),
        "prompts": int(g.shape[1]),
        "mean": interval(g, "mean", **kw),
        "iqm": interval(g, "iqm", **kw),
        "poi_base": improvement(g, None, **kw),
        "poi_reference": None,
        "detectable_vs_0": detectable(comp["se"]),
        "detectable_vs_reference": None,
        "components": comp,
    }
    if reference is not None:
        h = _stack(reference)
        out["poi_reference"] = improvement(g, h, **kw)
        out["detectable_vs_reference"] = detectable(variance_components(g - h)["se"])
    return out

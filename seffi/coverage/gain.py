"""The gain over iid: its formula (`gain_value`, the only place it is written) and its interval.

Method and calibration: docs/statistics.md, "Interval of the gain".
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from seffi._seeding import SeedLike
from seffi.coverage.resampling import (
    bootstrap_counts,
    expanded_level,
    normal_quantile,
    percentile_interval,
    stratified_mean_variance,
    t_quantile,
)
from seffi.coverage.summaries import UNBOUNDED_NOTE, Gain, inputs_holding

if TYPE_CHECKING:  # annotations only: curves.py imports this module
    from seffi.coverage.curves import Curves

_ROLES = ("policy", "iid", "oracle")
_UNPAIRED_NOTE = (
    "interval not paired over inputs (the policy curves carry no per-input AUCs, e.g. an older dict): "
    "independent bootstrap replicates combined by index, which overstates the width"
)


def gain_value(auc_a: np.ndarray, auc_iid: np.ndarray, auc_oracle: np.ndarray) -> np.ndarray:
    """Gain(K) = (AUC_A - AUC_iid) / (AUC_oracle - AUC_iid), broadcast; NaN where the denominator is <= 0."""
    a, i, o = (np.asarray(v, dtype=np.float64) for v in (auc_a, auc_iid, auc_oracle))
    den = o - i
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 1e-12, (a - i) / np.where(den > 1e-12, den, 1.0), np.nan)


def point_gain(auc: float | None, iid_auc: float | None, oracle_auc: float | None) -> float | None:
    """The gain of three AUCs over one set of inputs (None when one is missing or the gain undefined)."""
    if auc is None or iid_auc is None or oracle_auc is None:
        return None
    g = float(gain_value(auc, iid_auc, oracle_auc))
    return g if np.isfinite(g) else None


def paired_gain(
    policy: Curves,
    iid: Curves,
    oracle: Curves,
    *,
    valid: bool = False,
    n_boot: int | None = None,
    seed: SeedLike = None,
) -> Gain:
    """Gain(K) = (AUC - AUC_iid) / (AUC_oracle - AUC_iid), with an interval paired over inputs.

    The AUCs are over the policy's inputs (baselines restricted to them, matched by (task,
    input_id), or by id). Fieller's `ratio_interval` when every curve is per-input or exact, else
    the expanded percentile bootstrap; curves without per-input AUCs are combined unpaired
    (``reason`` says so). The gain carries its room, how many inputs hold it, and a fragility
    caveat first in ``reason`` (`Gain.fragile`).

    Args:
        policy: the policy's curves.
        iid: the iid baseline's curves (same K).
        oracle: the oracle's curves (same K).
        valid: compare the valid-only AUCs instead of the raw ones.
        n_boot: bootstrap replicates; default the policy's ``n_boot``.
        seed: bootstrap seed; default the policy's ``seed`` (or 0).

    Returns:
        A `Gain`; value/lo/hi None with ``reason`` when undefined.

    Raises:
        ValueError: the curves have different K, or the policy saw inputs a baseline lacks.
    """
    for name, other in (("iid", iid), ("oracle", oracle)):
        if not isinstance(other, type(policy)):
            raise ValueError(f"gain: {name} must be Curves, got {type(other).__name__}")
        if other.K != policy.K:
            raise ValueError(f"gain: {name} curves have K={other.K}, these have K={policy.K}")
    prefix = "valid_" if valid else ""
    attr, vec_attr = f"{prefix}auc", f"input_{prefix}auc"
    curves = (policy, iid, oracle)
    reached = []
    for c in curves:  # the largest k such that the curve is defined at every budget 1..k
        ok = np.isfinite(np.asarray(c.coverage, dtype=np.float64))
        if c.runs_at_k is not None:
            ok &= np.asarray(c.runs_at_k) > 0
        reached.append(int(np.argmin(ok)) if not ok.all() else int(ok.size))
    if min(reached) < policy.K:
        # An AUC over fewer than K budgets is an AUC at a smaller budget: no gain at all.
        sides = ", ".join(f"{n} reaches k={r}" for n, r in zip(_ROLES, reached, strict=True))
        return Gain(
            reason=f"not every curve reaches K={policy.K} ({sides}): the AUCs would compare different "
            "budgets, the gain is undefined",
        )
    vals = [getattr(c, attr) for c in curves]
    if any(v is None for v in vals):
        missing = [n for n, v in zip(_ROLES, vals, strict=True) if v is None]
        return Gain(reason=f"{attr} not available for: {', '.join(missing)}")
    design = _paired_design(policy, (iid, oracle), vec_attr)
    if design is not None:
        for i, vec in enumerate(design.vectors):
            if design.restricted[i]:  # compared over the policy's inputs only
                vals[i + 1] = float(vec.mean())
    if vals[2] - vals[1] <= 1e-12:
        return Gain(
            reason=f"oracle AUC ({vals[2]:.6g}) does not exceed iid AUC ({vals[1]:.6g}) at K={policy.K}: "
            "there is no room for improvement, the gain is undefined",
        )
    gain = _gain_interval(curves, vals, design, prefix, n_boot, seed)
    held, n = None, None
    if design is not None and any(v is not None for v in design.vectors):
        n = int(design.strata.size)
        iid, oracle = (
            np.full(n, v) if vec is None else vec for vec, v in zip(design.vectors, vals[1:], strict=True)
        )
        held = inputs_holding(oracle - iid)
    room = vals[2] - vals[1]
    return gain.model_copy(update={"room": float(room), "held_by": held, "n_inputs": n}).flagged()


def _gain_interval(
    curves: tuple[Curves, Curves, Curves],
    vals: list[float],
    design: _Design | None,
    prefix: str,
    n_boot: int | None,
    seed: SeedLike,
) -> Gain:
    """The gain's value and interval (see `paired_gain`; ``prefix`` "valid_" or ""), before its room."""
    policy, vec_attr = curves[0], f"input_{prefix}auc"
    den = vals[2] - vals[1]
    value = point_gain(*vals)
    B = policy.n_boot if n_boot is None else n_boot
    if isinstance(B, bool) or not isinstance(B, int | np.integer) or B < 0:
        raise ValueError(f"gain: n_boot must be a non-negative integer, got {n_boot!r}")
    se = getattr(policy, f"{prefix}auc_se", None)
    if se is not None and B > 0:
        # Too few inputs to resample: the policy's run-to-run noise, the baselines held fixed.
        df = getattr(policy, f"{prefix}auc_df", None)
        level = policy.ci_level
        q = t_quantile(level, max(1, int(df + 1e-9))) if df is not None else normal_quantile(level)
        return Gain(
            value=value,
            lo=value - q * se / den,
            hi=value + q * se / den,
            reason=f"only {policy.n_inputs} input(s): the interval covers run-to-run noise on these inputs",
        )
    reps = [getattr(c, f"{prefix}auc_reps") for c in curves]
    if design is None or B == 0:
        # Independent replicates of the three AUCs combined by index; exact baselines held fixed.
        if all(r is None for r in reps):
            return Gain(value=value)
        B = max(len(r) for r in reps if r is not None)
        cols = [np.resize(r, B) if r is not None else np.full(B, v) for r, v in zip(reps, vals, strict=True)]
        return _interval(
            value, gain_value(*cols), policy.ci_level, None if design is not None else _UNPAIRED_NOTE
        )
    if all(vec is not None or r is None for vec, r in zip(design.vectors, reps[1:], strict=True)):
        # Every side is per-input or exact: the studentized interval of the ratio of means.
        vecs = [np.asarray(getattr(policy, vec_attr), dtype=np.float64)]
        for vec, v in zip(design.vectors, vals[1:], strict=True):
            vecs.append(vec if vec is not None else np.full(vecs[0].size, v))
        bounds = ratio_interval(vecs[0] - vecs[1], vecs[2] - vecs[1], policy.ci_level, design.strata)
        if bounds is None:
            note = UNBOUNDED_NOTE if design.note is None else f"{UNBOUNDED_NOTE}; {design.note}"
            return Gain(value=value, reason=note)
        return Gain(value=value, lo=bounds[0], hi=bounds[1], reason=design.note)
    W = bootstrap_counts(design.strata, int(B), (policy.seed or 0) if seed is None else seed)
    # Each row of W sums to U (strata keep their size): W @ a / U is the replicate mean.
    cols = [W @ (getattr(policy, vec_attr) / W.shape[1])]
    for vec, r, v in zip(design.vectors, reps[1:], vals[1:], strict=True):
        if vec is not None:
            cols.append(W @ (vec / W.shape[1]))
        else:  # one value for every input: fixed, or its own independent replicates
            cols.append(np.resize(r, int(B)) if r is not None else np.full(int(B), v))
    # Few inputs make a percentile bootstrap too narrow: Hesterberg's expanded percentile.
    level = expanded_level(policy.ci_level, int(W.shape[1]))
    return _interval(value, gain_value(*cols), level, design.note)


class _Design(NamedTuple):
    """How a paired gain bootstrap resamples the policy's inputs."""

    strata: np.ndarray  # (U,): the task stratum of each input
    vectors: list[np.ndarray | None]  # per baseline: its AUCs (U,) on those inputs, or None (one value)
    restricted: list[bool]  # per baseline: it covered more inputs than the policy
    note: str | None  # a caveat for Gain.reason


def _paired_design(policy: Curves, baselines: tuple[Curves, Curves], vec_attr: str) -> _Design | None:
    """Match the baselines' per-input AUCs to the policy's inputs (None when the policy has none)."""
    a = getattr(policy, vec_attr)
    keys = policy.input_keys
    if a is None or keys is None:
        return None
    keys = [(None if t is None else str(t), str(i)) for t, i in keys]
    if len(keys) != len(a) or len(set(keys)) != len(keys):
        raise ValueError(f"gain: policy input_keys ({len(keys)}) do not match {vec_attr} ({len(a)})")
    tasks = sorted({str(t) for t, _ in keys})
    strata = np.array([tasks.index(str(t)) for t, _ in keys], dtype=np.int64)
    vectors: list[np.ndarray | None] = []
    restricted: list[bool] = []
    unpaired = []
    for role, b in zip(_ROLES[1:], baselines, strict=True):
        vec = getattr(b, vec_attr)
        if vec is None or b.input_keys is None:
            if b.n_inputs > 1:
                unpaired.append(role)
            vectors.append(None)
            restricted.append(False)
            continue
        index = _match_inputs(keys, list(b.input_keys), role)
        vectors.append(np.asarray(vec, dtype=np.float64)[index])
        restricted.append(len(index) != len(b.input_keys))
    note = None
    if unpaired:
        note = (
            f"interval only partly paired: the {' and '.join(unpaired)} curves have several inputs but no "
            "per-input AUCs (e.g. an older dict); their independent replicates are combined by index"
        )
    return _Design(strata, vectors, restricted, note)


def _match_inputs(keys: list[tuple[str | None, str]], other: list[Any], role: str) -> np.ndarray:
    """Positions in a baseline's input keys ``other`` of the policy's ``keys`` (task None: by a unique id)."""
    pos = dict(zip(map(tuple, other), range(len(other)), strict=True))
    out, missing = [], []
    by_id: dict[str, list[str | None]] = {}
    for t, i in keys:
        by_id.setdefault(i, []).append(t)
    for t, i in keys:
        j = pos.get((t, i))
        if j is None:
            j = pos.get((None, i))
            if j is not None and len(by_id[i]) > 1:
                raise ValueError(
                    f"gain: input id {i!r} appears in tasks {sorted(map(str, by_id[i]))} of the policy "
                    f"but the {role} baseline keys it by id only: give each task its own baseline"
                )
        if j is None:
            missing.append(i if t is None else f"{t}/{i}")
        else:
            out.append(j)
    if missing:
        raise ValueError(
            f"gain: the policy saw {len(missing)} input(s) the {role} baseline does not cover "
            f"(e.g. {missing[:5]}); build the baseline over the policy's inputs"
        )
    return np.asarray(out, dtype=np.int64)


def ratio_interval(
    num: np.ndarray, den: np.ndarray, level: float, strata: np.ndarray | None = None
) -> tuple[float, float] | None:
    """Fieller's interval (lo, hi) of mean(num) / mean(den) over inputs (U,); None when unbounded.

    The set of ratios g with (N̄ − g D̄)² <= t² Var(N̄ − g D̄), the variances stratified by task and
    t Student's on U − H degrees of freedom: unbounded when D̄ is not clearly above 0 (t² Var(D̄) >= D̄²).
    """
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    strata = np.zeros(num.size, dtype=np.int64) if strata is None else np.asarray(strata)
    n_mean, d_mean = float(num.mean()), float(den.mean())
    v_nn, v_dd, v_sum = stratified_mean_variance(np.column_stack([num, den, num + den]), strata)
    v_nd = (v_sum - v_nn - v_dd) / 2.0
    t2 = t_quantile(level, max(num.size - np.unique(strata).size, 1)) ** 2
    # Roots of a g² + b g + c = 0, with a > 0 the interval between them (Fieller 1954).
    a = d_mean * d_mean - t2 * v_dd
    b = -2.0 * (n_mean * d_mean - t2 * v_nd)
    c = n_mean * n_mean - t2 * v_nn
    if a <= 1e-15 * max(d_mean * d_mean, 1e-300):
        return None
    # With a > 0 the discriminant is t² Var(residual mean) a >= 0: clip rounding below 0.
    root = math.sqrt(max(b * b - 4.0 * a * c, 0.0))
    return (-b - root) / (2.0 * a), (-b + root) / (2.0 * a)


def _interval(value: float, reps: np.ndarray, level: float, note: str | None) -> Gain:
    """Gain with the percentile interval of its finite replicates."""
    g = reps[np.isfinite(reps)]
    if g.size == 0:
        return Gain(value=value, reason="every bootstrap replicate had an undefined gain")
    lo, hi = percentile_interval(g, level, skip_nan=False)
    return Gain(value=value, lo=float(lo), hi=float(hi), reason=note)

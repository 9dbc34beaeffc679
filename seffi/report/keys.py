"""The W&B key scheme as functions: no caller spells a key by hand.

``seffi/<stem>[/k=<k>]`` keys of the metric columns ([`seffi.coverage.columns`][seffi.coverage.columns]),
the step keys, and scoping (``seffi/<task>/<policy>/auc`` when a report has several comparisons).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from seffi._convert import finite
from seffi.coverage.columns import COLUMNS, Column, column

PREFIX = "seffi"
STEP_KEY = f"{PREFIX}/step"
GLOB = f"{PREFIX}/*"


def _key(name: str, scope: str | None = None) -> str:
    return f"{PREFIX}/{scope.strip('/')}/{name}" if scope else f"{PREFIX}/{name}"


def step_key(scope: str | None = None) -> str:
    """``seffi/step``, or a scoped stream's own step metric ``seffi/<scope>/step`` (``seffi run``'s tasks)."""
    return _key("step", scope)


def log_spaced_ks(budget: int) -> list[int]:
    """Budgets at which scalars are logged: the powers of two below ``budget``, then ``budget``."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget K must be a positive int, got {budget!r}")
    return [2**e for e in range((budget - 1).bit_length())] + [budget]


@functools.lru_cache(maxsize=4096)  # a log asks for the same keys every ~1 ms
def metric_key(name: str, k: int | None = None, scope: str | None = None) -> str:
    """W&B key of the metric column ``name``, at budget ``k`` if per-k (``seffi/coverage/k=4``).

    Raises:
        KeyError: no such column, or it is not logged to W&B.
        ValueError: a per-k column without ``k``.
    """
    c = column(name)
    if c.wandb is None:
        raise KeyError(f"metric column {name!r} is not logged to W&B")
    if c.shape != "k":
        return _key(c.wandb, scope)
    if k is None:
        raise ValueError(f"{name} is logged per budget: give k")
    return _key(f"{c.wandb}/{c.wandb_index}={int(k)}", scope)


def coverage_key(k: int, scope: str | None = None) -> str:
    """``seffi/coverage/k=<k>``."""
    return metric_key("coverage", k, scope)


def valid_coverage_key(k: int, scope: str | None = None) -> str:
    """``seffi/valid_coverage/k=<k>``."""
    return metric_key("valid_coverage", k, scope)


def auc_key(scope: str | None = None) -> str:
    """``seffi/auc``."""
    return metric_key("auc", scope=scope)


def gain_key(scope: str | None = None, bound: str | None = None) -> str:
    """``seffi/gain_vs_iid``, or its CI bound with ``bound="lo"`` / ``"hi"``."""
    if bound not in (None, "lo", "hi"):
        raise ValueError(f"bound must be None, 'lo' or 'hi', got {bound!r}")
    return metric_key("gain", scope=scope) + (f"_{bound}" if bound else "")


def gain_fragile_key(scope: str | None = None) -> str:
    """``seffi/gain_vs_iid_fragile``: 1 when the gain next to it is fragile, else 0."""
    return metric_key("gain", scope=scope) + "_fragile"


def full_coverage_key(budget: int, scope: str | None = None) -> str:
    """``seffi/full_coverage/k=<K>``."""
    return metric_key("full_coverage", budget, scope)


@functools.lru_cache(maxsize=1024)  # every log asks for the same keys
def time_to_coverage_key(tau: float, scope: str | None = None, stat: str = "median") -> str:
    """``seffi/time_to_coverage/tau=<tau>/<stat>`` (stat: median, restricted_mean, censored)."""
    return f"{metric_key('time_to_coverage', scope=scope)}/tau={float(tau)!r}/{stat}"


def novelty_key(i: int, scope: str | None = None) -> str:
    """``seffi/novelty/i=<i>``."""
    return metric_key("novelty", i, scope)


def valid_rate_key(scope: str | None = None) -> str:
    """``seffi/valid_rate``."""
    return metric_key("valid_rate", scope=scope)


def episodes_key(scope: str | None = None) -> str:
    """``seffi/episodes`` (samples seen so far)."""
    return metric_key("n_samples", scope=scope)


def inputs_key(scope: str | None = None) -> str:
    """``seffi/inputs`` (distinct inputs seen so far)."""
    return metric_key("n_inputs", scope=scope)


def window_key(name: str, scope: str | None = None) -> str:
    """``seffi/window/runs``, ``.../episodes`` or ``.../age``: what a windowed streaming log covers."""
    if name not in ("runs", "episodes", "age"):
        raise ValueError(f"window key name must be 'runs', 'episodes' or 'age', got {name!r}")
    return _key(f"window/{name}", scope)


def baseline_auc_key(role: str, scope: str | None = None) -> str:
    """``seffi/auc_iid`` or ``seffi/auc_oracle``: the baselines' AUC@K a gain compares against."""
    if role not in ("iid", "oracle"):
        raise ValueError(f"role must be 'iid' or 'oracle', got {role!r}")
    return _key(f"auc_{role}", scope)


def gain_denominator_key(scope: str | None = None) -> str:
    """``seffi/gain_denominator``: AUC_oracle - AUC_iid, the room the gain is a fraction of."""
    return _key("gain_denominator", scope)


def curves_key(name: str, scope: str | None = None) -> str:
    """Key of a curve snapshot (``line_series`` table) or image, e.g. ``seffi/curves/coverage``."""
    return _key(f"curves/{name}", scope)


def iid_extrapolated_key(scope: str | None = None) -> str:
    """``seffi/iid_extrapolated_from_k``: the first budget at which the iid curve is an extrapolation."""
    return _key("iid_extrapolated_from_k", scope)


def _get(curves: Any, name: str) -> Any:
    # A dict is told without the ABC check: a log reads ~50 fields.
    is_map = type(curves) is dict or isinstance(curves, Mapping)
    return curves.get(name) if is_map else getattr(curves, name, None)


#: Time-to-coverage statistics logged per tau: (key suffix, ``TimeToCoverage`` field).
_TTC_STATS = (("median", "median"), ("restricted_mean", "restricted_mean"), ("censored", "fraction_censored"))
#: The columns with a W&B key, in table order.
_LOGGED = tuple(c for c in COLUMNS if c.wandb is not None)


@functools.lru_cache(maxsize=256)
def _per_k_keys(name: str, ks: tuple[int, ...], scope: str | None) -> tuple[tuple[str, int], ...]:
    """(key, index into ``ks``) of a per-k column's logged budgets (absent budgets left out)."""
    budget = max(ks)
    at = log_spaced_ks(budget) if column(name).wandb_at == "log_k" else [budget]
    return tuple((metric_key(name, k, scope), ks.index(k)) for k in at if k in ks)


def _put(out: dict[str, float], key: str, value: Any) -> Any:
    """``out[key] = value`` as a float unless it is undefined (None, NaN, inf); returns the float or None."""
    v = finite(value)
    if v is not None:
        out[key] = v
    return v


def _column_scalars(
    c: Column, curves: Any, gain: Any, ks: tuple[int, ...], counts: Mapping[str, Any], scope: str | None,
    out: dict[str, float],
) -> None:  # fmt: skip
    """Add the W&B scalars of one column to ``out`` (its undefined values left out)."""
    if c.shape == "k" and ks:
        values = _get(curves, c.name)
        if values is not None:
            for key, i in _per_k_keys(c.name, ks, scope):
                if i < len(values):
                    _put(out, key, values[i])
    elif c.shape == "scalar":
        _put(out, metric_key(c.name, scope=scope), _get(curves, c.name))
    elif c.shape == "tau":
        items = _get(curves, c.name) or []
        for s in items.values() if isinstance(items, Mapping) else items:
            for stat, field in _TTC_STATS:
                _put(out, time_to_coverage_key(float(_get(s, "tau")), scope, stat), _get(s, field))
    elif c.shape == "gain" and gain is not None:
        value = _put(out, gain_key(scope), _get(gain, "value"))
        for bound in ("lo", "hi"):
            _put(out, gain_key(scope, bound), _get(gain, bound))
        if value is not None:  # every logged gain says whether it is fragile
            out[gain_fragile_key(scope)] = float(bool(_get(gain, "fragile")))
    elif c.shape == "count":
        n = counts.get(c.name)
        n = n if n is not None else _get(curves, c.name)
        if n is not None:
            out[metric_key(c.name, scope=scope)] = float(n)


def scalars_from_curves(
    curves: Any,
    *,
    gain: Any = None,
    episodes: int | None = None,
    inputs: int | None = None,
    scope: str | None = None,
) -> dict[str, float]:
    """Turn one policy's curves (+ its gain vs iid) into the scalar dict of the key scheme.

    Args:
        curves: a `seffi.report.schema.CurveSet`, or any mapping / object with its field names (``k``,
            ``coverage``, ``novelty``, ``auc``, ``time_to_coverage``, ``n_samples``, ...).
        gain: a [`Gain`][seffi.coverage.Gain] or mapping with ``value``, ``lo``, ``hi``; None skips.
        episodes: overrides ``curves.n_samples`` for ``seffi/episodes``.
        inputs: overrides ``curves.n_inputs`` for ``seffi/inputs``.
        scope: optional scope inserted after ``seffi/`` (several comparisons in one run).

    Returns:
        ``{key: float}``; missing or undefined quantities (NaN, no gain) are left out, not logged as NaN.
    """
    ks = tuple(int(k) for k in (_get(curves, "k") or []))
    counts = {"n_samples": episodes, "n_inputs": inputs}
    out: dict[str, float] = {}
    for c in _LOGGED:
        _column_scalars(c, curves, gain, ks, counts, scope, out)
    return out


def comparison_names(comparisons: Any) -> list[str]:
    """The key scope of each comparison: its task, or its slug when two comparisons share the task."""
    comparisons = list(comparisons)
    tasks = [c.task for c in comparisons]
    return [c.task if tasks.count(c.task) == 1 else c.slug for c in comparisons]


def report_scopes(report: Any) -> list[tuple[Any, Any, str | None]]:
    """(comparison, policy result, scope) for every policy in a report.

    The scope is None for one comparison holding one policy (plain ``seffi/auc``); otherwise
    ``<task>`` and/or ``<policy label>``, only as far as needed to tell entries apart.
    """
    comparisons = list(report.comparisons)
    many_tasks = len(comparisons) > 1
    out = []
    for comp, name in zip(comparisons, comparison_names(comparisons), strict=True):
        for pol in comp.policies:
            parts = ([name] if many_tasks else []) + ([pol.label] if len(comp.policies) > 1 else [])
            out.append((comp, pol, "/".join(parts) or None))
    return out


def report_scalars(report: Any) -> dict[str, float]:
    """Final numbers of every policy in a report, keyed by the scheme (for ``run.summary``).

    A comparison whose iid curve is extrapolated also gets `iid_extrapolated_key` in its scopes.
    """
    out: dict[str, float] = {}
    for comp, pol, scope in report_scopes(report):
        out.update(scalars_from_curves(pol.curves, gain=pol.gain, scope=scope))
        out.update(baseline_scalars(comp, scope))
        for name, est in getattr(pol, "metrics", {}).items():
            out.update(estimate_scalars(name, est, scope))
        iid = getattr(comp, "iid", None)  # its first extrapolated budget, if any (None has neither list)
        flagged = zip(_get(iid, "k") or [], _get(iid, "extrapolated") or [], strict=False)
        first = next((int(k) for k, extrapolated in flagged if extrapolated), None)
        if first is not None:
            out[iid_extrapolated_key(scope)] = float(first)
    return out


def baseline_scalars(comparison: Any, scope: str | None = None) -> dict[str, float]:
    """The comparison's iid and oracle AUC@K and the gain's denominator AUC_oracle - AUC_iid."""
    iid, oracle = (finite(_get(_get(comparison, role), "auc")) for role in ("iid", "oracle"))
    out = {baseline_auc_key(r, scope): a for r, a in (("iid", iid), ("oracle", oracle)) if a is not None}
    if iid is not None and oracle is not None:
        out[gain_denominator_key(scope)] = oracle - iid
    return out


def progress_line(
    scalars: Mapping[str, float], scope: str | None, step: int, episodes: int, inputs: int
) -> str:
    """One console line of a log (a monitor's ``verbose=1``)."""
    gain = scalars.get(gain_key(scope))
    auc = scalars.get(auc_key(scope), float("nan"))
    shown = "n/a" if gain is None else f"{gain:.3f}"
    return f"[seffi] step {step}: {episodes} episodes, {inputs} inputs, AUC {auc:.3f}, gain vs iid {shown}"


def estimate_scalars(name: str, estimate: Any, scope: str | None = None) -> dict[str, float]:
    """``seffi/<name>`` and its ``_lo``, ``_hi`` and ``_iid`` of a per-input metric's estimate."""
    values = {"": estimate.value, "_lo": estimate.lo, "_hi": estimate.hi, "_iid": estimate.iid}
    return {_key(name + suffix, scope): float(v) for suffix, v in values.items() if v is not None}

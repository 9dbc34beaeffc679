"""Map a coverage-engine ``Curves.to_dict()`` onto :class:`seffi.report.schema.CurveSet` fields.

Kept in one place so a renamed field in the coverage engine is a one-line change here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

# CurveSet field -> accepted source names (first present wins).
_ALIASES: dict[str, tuple[str, ...]] = {
    "k": ("k", "ks"),
    "coverage": ("coverage", "mean_coverage"),
    "coverage_lo": ("coverage_lo",),
    "coverage_hi": ("coverage_hi",),
    "novelty": ("novelty",),
    "expected_new": ("expected_new", "expected_new_count", "new_count"),
    "full_coverage": ("full_coverage",),
    "valid_coverage": ("valid_coverage",),
    "valid_coverage_lo": ("valid_coverage_lo",),
    "valid_coverage_hi": ("valid_coverage_hi",),
    "auc": ("auc",),
    "auc_lo": ("auc_lo",),
    "auc_hi": ("auc_hi",),
    "valid_auc": ("valid_auc",),
    "valid_auc_lo": ("valid_auc_lo",),
    "valid_auc_hi": ("valid_auc_hi",),
    "valid_at_k": ("valid_at_k",),
    "coverage_by_rarity": ("coverage_by_rarity",),
    "rarity_bins": ("rarity_bins",),
    "extrapolated": ("extrapolated",),
    "notes": ("notes",),
    "valid_rate": ("valid_rate",),
    "n_samples": ("n_samples", "episodes", "samples"),
    "n_inputs": ("n_inputs", "inputs"),
    "n_runs": ("n_runs", "runs"),
    "method": ("method",),
}


# seffi.coverage.Curves.kind -> (CurveSet.role, default method)
_ROLE_OF_KIND: dict[str, tuple[str, str | None]] = {
    "policy": ("policy", "empirical"),
    "iid": ("iid", "exact"),
    "iid_estimated": ("iid", "estimated"),
    "oracle": ("oracle", None),
}


def _plain(value: Any) -> Any:
    """NumPy arrays / scalars -> lists / Python numbers; NaN -> None (the schema refuses NaN)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _ttc(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = data.get("time_to_coverage")
    if not raw:
        return []
    items: list[tuple[Any, Any]]
    if isinstance(raw, Mapping):
        items = list(raw.items())
    else:
        items = [(None, s) for s in raw]
    out = []
    for tau, s in items:
        s = dict(s)
        tau = s.pop("tau", tau)
        entry = {"tau": float(tau)}
        if "censored" in s and "fraction_censored" not in s:  # seffi.coverage's name
            s["fraction_censored"] = s.pop("censored")
        for name in ("median", "restricted_mean", "fraction_censored", "survival", "values"):
            if name in s:
                entry[name] = _plain(s[name])
        out.append(entry)
    return sorted(out, key=lambda e: e["tau"])


def curveset_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """CurveSet keyword arguments from a curves dict (unknown keys are ignored)."""
    fields: dict[str, Any] = {}
    for name, sources in _ALIASES.items():
        for src in sources:
            if src in data and data[src] is not None:
                fields[name] = _plain(data[src])
                break
    if "k" not in fields and "coverage" in fields:
        # seffi.coverage.Curves stores K and positions 0..K-1 for k = 1..K.
        fields["k"] = list(range(1, len(fields["coverage"]) + 1))
    kind = data.get("kind")
    if kind in _ROLE_OF_KIND:
        fields["role"], method = _ROLE_OF_KIND[kind]
        if method and "method" not in fields:
            fields["method"] = method
    if "k" in fields:
        fields["k"] = [int(k) for k in fields["k"]]
    for name in ("n_samples", "n_inputs", "n_runs"):
        if name in fields:
            fields[name] = int(fields[name])
    fields["time_to_coverage"] = _ttc(data)
    return fields

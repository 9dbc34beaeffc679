"""Read a coverage ``Curves`` (or its ``to_dict()``) into the fields of a report ``CurveSet``.

Driven by the column table ([`seffi.coverage.columns`][seffi.coverage.columns]): each column names its
``Curves`` attribute and its report.json field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seffi._convert import jsonable
from seffi.coverage.columns import COLUMNS
from seffi.coverage.summaries import TimeToCoverage

# seffi.coverage.Curves.kind -> (CurveSet.role, default method)
_ROLE_OF_KIND: dict[str, tuple[str, str | None]] = {
    "policy": ("policy", "empirical"),
    "iid": ("iid", "exact"),
    "iid_estimated": ("iid", "estimated"),
    "oracle": ("oracle", None),
}


def _ttc(raw: Any) -> list[TimeToCoverage]:
    """Point summaries (no intervals: report.json keeps its v1 keys) sorted by tau.

    Args:
        raw: ``{tau key: TimeToCoverage or its dict}`` as ``Curves`` holds it, or a list of them.
    """
    items = list(raw.items()) if isinstance(raw, Mapping) else [(None, t) for t in raw or []]
    out = []
    for key, t in items:
        if not isinstance(t, TimeToCoverage):
            data = dict(t)
            data.setdefault("tau", None if key is None else float(key))
            t = TimeToCoverage.from_dict(data)
        out.append(t.point())
    return sorted(out, key=lambda t: t.tau)


def curveset_fields(curves: Any) -> dict[str, Any]:
    """``CurveSet`` keyword arguments from a ``Curves`` or its dict (missing metrics are left out)."""
    if not isinstance(curves, Mapping) and not hasattr(curves, "coverage") and hasattr(curves, "to_dict"):
        curves = curves.to_dict()  # another result object in the Curves.to_dict form
    if isinstance(curves, Mapping):
        get = curves.get
    else:

        def get(name: str) -> Any:
            return getattr(curves, name, None)

    fields: dict[str, Any] = {}
    for c in COLUMNS:
        if not c.curves_name:  # not held by Curves (the gain, the caller's valid rate)
            continue
        sources = [c.curves_name] + ([f"{c.curves_name}_lo", f"{c.curves_name}_hi"] if c.report_ci else [])
        targets = [c.name] + ([f"{c.name}_lo", f"{c.name}_hi"] if c.report_ci else [])
        for src, dst in zip(sources, targets, strict=True):
            value = get(src)
            if value is None:
                continue
            if c.shape == "tau":
                fields[dst] = _ttc(value)
            elif c.dtype == "int":
                fields[dst] = int(value)
            else:
                fields[dst] = jsonable(value)
    # Curves holds k = 1..K in positions 0..K-1.
    fields["k"] = list(range(1, len(fields.get("coverage") or []) + 1))
    for name in ("rarity_bins", "notes", "method"):
        if get(name) is not None:
            fields[name] = jsonable(get(name))
    kind = get("kind")
    if kind in _ROLE_OF_KIND:
        fields["role"], method = _ROLE_OF_KIND[kind]
        if method and "method" not in fields:
            fields["method"] = method
    return fields

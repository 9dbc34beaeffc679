"""The report.json models (pydantic): everything needed to re-render report.md and the plots.

``CurveSet``'s metric fields come from the column table (`seffi.coverage.columns`). No timestamps or
absolute paths, NaN refused (a missing value is null): the same run gives the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, create_model, field_validator, model_validator

from seffi._convert import jsonable
from seffi.coverage.columns import COLUMNS, Column
from seffi.coverage.input_metrics import Estimate
from seffi.coverage.summaries import MAX_BUDGET, FloatList, Gain, TimeToCoverage, check_unit

SCHEMA_VERSION = 1
MAX_INPUTS = 1_000_000_000
_COUNT_RANGES: dict[str, tuple[int, int]] = {"budget": (1, MAX_BUDGET), "n_inputs": (0, MAX_INPUTS)}

# seffi.coverage.Curves.kind -> (CurveSet.role, default method)
_ROLE_OF_KIND: dict[str, tuple[str, str | None]] = {
    "policy": ("policy", "empirical"),
    "iid": ("iid", "exact"),
    "iid_estimated": ("iid", "estimated"),
    "oracle": ("oracle", None),
}


def _ttc(raw: Any) -> list[TimeToCoverage]:
    """Point summaries (report.json keeps its v1 keys) sorted by tau, from ``{tau: summary}`` or a list."""
    items = list(raw.items()) if isinstance(raw, Mapping) else [(None, t) for t in raw or []]
    out = []
    for key, t in items:
        if not isinstance(t, TimeToCoverage):
            data = dict(t)
            data.setdefault("tau", None if key is None else float(key))
            t = TimeToCoverage.from_dict(data)
        out.append(t.point())
    return sorted(out, key=lambda t: t.tau)


def _curveset_fields(curves: Any) -> dict[str, Any]:
    """``CurveSet`` keyword arguments from a ``Curves`` or its dict (missing metrics are left out)."""
    get = curves.get if isinstance(curves, Mapping) else lambda name: getattr(curves, name, None)

    fields: dict[str, Any] = {}
    for c in COLUMNS:
        if not c.curves_name:  # not held by Curves (the gain, the caller's valid rate)
            continue
        for dst in _names(c):
            value = get(c.curves_name + dst[len(c.name) :])
            if value is None:
                continue
            if c.shape == "tau":
                fields[dst] = _ttc(value)
            elif c.dtype == "int":
                fields[dst] = int(value)
            else:
                fields[dst] = jsonable(value)
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


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def _check_len(name: str, values: Sequence[Any] | None, n: int) -> None:
    if values is not None and len(values) != n:
        raise ValueError(f"{name} has length {len(values)}, expected {n} (one value per k)")


def _check_band(name: str, lo: Sequence[float | None] | None, hi: Sequence[float | None] | None) -> None:
    if (lo is None) != (hi is None):
        raise ValueError(f"{name}_lo and {name}_hi must be given together")
    pairs = zip(lo or [], hi or [], strict=True)
    if any(a is not None and b is not None and a > b + 1e-12 for a, b in pairs):
        raise ValueError(f"{name}_lo exceeds {name}_hi somewhere")


#: The metric columns a curve set holds (the gain belongs to a policy result).
_SET_COLUMNS: tuple[Column, ...] = tuple(c for c in COLUMNS if c.shape != "gain")


def _names(c: Column) -> list[str]:
    """The report.json fields of a column: its values, then its interval bounds when it has them."""
    return [c.name] + ([f"{c.name}_lo", f"{c.name}_hi"] if c.report_ci else [])


class _CurveSetBase(_Model):
    label: str
    role: Literal["policy", "iid", "oracle"] = "policy"
    method: str | None = None
    k: list[int]
    rarity_bins: list[str] | None = None
    notes: list[str] = []

    @model_validator(mode="after")
    def _shapes(self) -> _CurveSetBase:
        where = f"curve set {self.label!r}"
        if not self.k:
            raise ValueError(f"{where}: k is empty")
        if self.k[0] < 1 or any(b <= a for a, b in zip(self.k, self.k[1:], strict=False)):
            raise ValueError(f"{where}: k must be increasing and >= 1")
        if self.k[-1] > MAX_BUDGET:
            raise ValueError(f"{where}: k must not exceed {MAX_BUDGET:,}")
        n = len(self.k)
        for c in _SET_COLUMNS:
            values = {name: getattr(self, name) for name in _names(c)}
            if c.shape == "k":
                for name, v in values.items():
                    _check_len(f"{where}: {name}", v, n)
                if c.report_ci:
                    _check_band(c.name, values[f"{c.name}_lo"], values[f"{c.name}_hi"])
            elif c.shape == "bins_k":
                for row in values[c.name] or []:
                    _check_len(f"{where}: {c.name} row", row, n)
            elif c.shape == "tau":
                for t in values[c.name]:
                    _check_len(f"{where}: survival(tau={t.tau})", t.survival, n)
            elif c.shape == "count" and (values[c.name] or 0) < 0:
                raise ValueError(f"{where}: {c.name} must be >= 0")
            if c.dtype == "float" and c.shape != "tau":
                # Probabilities lie in [0, 1]; other metrics (counts of new strategies) are >= 0.
                for name, v in values.items():
                    for row in (v or []) if c.shape == "bins_k" else [v]:
                        if c.unit:
                            check_unit(f"{where}: {name}", row)
                        elif any(
                            x is not None and x < 0 for x in (row if isinstance(row, Sequence) else [row])
                        ):
                            raise ValueError(f"{where}: {name} must be >= 0")
        bins, rows = self.rarity_bins, getattr(self, "coverage_by_rarity", None)
        if rows is not None and bins is not None and len(bins) != len(rows):
            raise ValueError(f"{where}: rarity_bins and coverage_by_rarity rows differ")
        return self

    @property
    def budget(self) -> int:
        return self.k[-1]

    def ttc(self, tau: float) -> TimeToCoverage | None:
        """The time-to-coverage summary for ``tau`` (None if not reported)."""
        return next((t for t in getattr(self, "time_to_coverage", []) if math.isclose(t.tau, tau)), None)

    @classmethod
    def from_curves(cls, curves: Any, label: str, role: str | None = None, **extra: Any) -> CurveSet:
        """A curve set of a [`seffi.coverage.Curves`][seffi.coverage.Curves] (or its ``to_dict()``).

        ``role`` None derives it from the curves' ``kind``; ``extra`` sets or overrides fields.
        """
        fields = _curveset_fields(curves)
        return cls(label=label, **{**fields, **({} if role is None else {"role": role}), **extra})


def _field(c: Column, bound: bool) -> tuple[Any, Any]:
    if c.shape == "tau":
        return list[TimeToCoverage], []
    kind: Any = {
        "k": list[bool] if c.dtype == "bool" else FloatList,
        "bins_k": list[FloatList],
        "scalar": float,
        "count": int,
    }[c.shape]
    if c.required and not bound:
        return kind, ...
    return kind | None, None


CurveSet = create_model(
    "CurveSet",
    __base__=_CurveSetBase,
    __module__=__name__,
    __doc__="""One sampler's curves over budgets k (policy, iid baseline or oracle).

    Besides ``label``, ``role``, ``method`` ("exact", "empirical", "estimated", ...), ``k`` (increasing,
    >= 1), ``rarity_bins`` and ``notes``, its metric fields (``coverage`` with ``coverage_lo``/``_hi``,
    ``novelty``, ``auc``, ...) are declared by `seffi.coverage.columns.COLUMNS`: per-k lists have the
    length of ``k`` (null where undefined), and a band's ``_lo`` never exceeds its ``_hi``.
    """,
    **{name: _field(c, name != c.name) for c in _SET_COLUMNS for name in _names(c)},
)


class Barcode(_Model):
    """Which strategy each sample of each input matched (-1: none), ``new`` where it was new to its row."""

    strategies: list[str]
    input_ids: list[str]
    matrix: list[list[int]]
    new: list[list[bool]] | None = None

    @classmethod
    def from_tracker(cls, data: Mapping[str, Any]) -> Barcode:
        """A barcode from ``CoverageTracker.barcode()``, ``Curves.barcode`` or this model's fields."""
        if "matrix" in data:
            return cls(**dict(data))
        # Curves files written before barcodes held ``lengths``, ``input_ids`` and ``new`` lack them.
        lengths = data.get("lengths") or [len(r) for r in data["first_strategy"]]
        cut = [min(int(n), len(r)) for n, r in zip(lengths, data["first_strategy"], strict=True)]
        new = data.get("new")
        return cls(
            strategies=list(data["strategies"]),
            input_ids=list(data.get("input_ids") or data["rows"]),
            matrix=[list(r[:n]) for r, n in zip(data["first_strategy"], cut, strict=True)],
            new=None if new is None else [list(r[:n]) for r, n in zip(new, cut, strict=True)],
        )

    @model_validator(mode="after")
    def _cells(self) -> Barcode:
        if len(self.matrix) != len(self.input_ids):
            raise ValueError(f"barcode has {len(self.matrix)} rows but {len(self.input_ids)} input ids")
        m = len(self.strategies)
        for row in self.matrix:
            if any(not -1 <= v < m for v in row):
                raise ValueError(f"barcode cells must be -1 or a strategy index in [0, {m})")
        if self.new is not None and [len(r) for r in self.new] != [len(r) for r in self.matrix]:
            raise ValueError("barcode 'new' must have the shape of 'matrix'")
        return self


class LatentCurve(_Model):
    """Coverage of the router's latent codes (a method diagnostic)."""

    label: str
    k: list[int]
    coverage: FloatList
    coverage_lo: FloatList | None = None
    coverage_hi: FloatList | None = None
    num_codes: int | None = None

    @model_validator(mode="after")
    def _shapes(self) -> LatentCurve:
        for name in ("coverage", "coverage_lo", "coverage_hi"):
            _check_len(f"latent curve {self.label!r}: {name}", getattr(self, name), len(self.k))
        _check_band("coverage", self.coverage_lo, self.coverage_hi)
        for name in ("coverage", "coverage_lo", "coverage_hi"):
            check_unit(f"latent curve {self.label!r}: {name}", getattr(self, name))
        return self


class PolicyResult(_Model):
    """One policy's results within a comparison."""

    curves: CurveSet
    gain: Gain | None = None
    barcode: Barcode | None = None
    latent: LatentCurve | None = None
    #: Per-input metrics (`seffi.coverage.metrics`) by name: estimate, interval and iid figure.
    metrics: dict[str, Estimate] = {}

    @property
    def label(self) -> str:
        """The policy's legend name."""
        return self.curves.label


class Comparison(_Model):
    """Policies vs the iid baseline and the oracle on one task, env, budget and input pool."""

    task: str
    env_id: str | None = None
    budget: int
    n_inputs: int
    num_strategies: int | None = None
    iid: CurveSet | None = None
    oracle: CurveSet | None = None
    policies: list[PolicyResult] = []
    notes: list[str] = []
    #: Exploration-ladder rung (``seffi ladder``).
    rung: int | None = None
    #: Where the iid curves come from: the env's exact law, or estimated from base-model samples.
    iid_source: Literal["exact", "samples"] | None = None

    @field_validator(*_COUNT_RANGES)
    @classmethod
    def _count_in_range(cls, v: int, info: ValidationInfo) -> int:
        lo, hi = _COUNT_RANGES[str(info.field_name)]
        if not lo <= v <= hi:
            raise ValueError(f"must lie in [{lo}, {hi:,}], got {v}")
        return v

    @field_validator("num_strategies")
    @classmethod
    def _strategies(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"must be >= 1, got {v}")
        return v

    @property
    def slug(self) -> str:
        """A file-name-safe name: the env id without its namespace, else the task."""
        raw = self.env_id.rsplit("/", 1)[-1] if self.env_id else self.task
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in raw).strip("_") or "comparison"

    @classmethod
    def from_curves(
        cls,
        *,
        task: str,
        policies: Mapping[str, Any],
        iid: Any = None,
        oracle: Any = None,
        env_id: str | None = None,
        num_strategies: int | None = None,
        barcodes: Mapping[str, Barcode | Mapping[str, Any]] | None = None,
        latents: Mapping[str, LatentCurve] | None = None,
        notes: Sequence[str] = (),
    ) -> Comparison:
        """Build a comparison from ``{label: Curves}`` and the baselines' [`Curves`][seffi.coverage.Curves].

        Each policy's gain is ``curves.gain(iid, oracle)`` when both baselines are given; ``barcodes``
        (``{label: Barcode or its dict}``) replace a policy's ``Curves.barcode``.
        """
        results = []
        for label, curves in policies.items():
            gain = None
            if hasattr(curves, "gain") and hasattr(iid, "to_dict") and hasattr(oracle, "to_dict"):
                gain = curves.gain(iid, oracle)
            bar = (barcodes or {}).get(label)
            bar = getattr(curves, "barcode", None) if bar is None else bar
            results.append(
                PolicyResult(
                    curves=CurveSet.from_curves(curves, label, "policy"),
                    gain=gain,
                    barcode=bar if bar is None or isinstance(bar, Barcode) else Barcode.from_tracker(bar),
                    latent=(latents or {}).get(label),
                )
            )
        iid_set = CurveSet.from_curves(iid, "iid", "iid") if iid is not None else None
        oracle_set = CurveSet.from_curves(oracle, "oracle", "oracle") if oracle is not None else None
        ref = results[0].curves if results else iid_set or oracle_set
        if ref is None:
            raise ValueError("Comparison.from_curves needs at least one policy or baseline")
        return cls(
            task=task,
            env_id=env_id,
            budget=ref.budget,
            n_inputs=int(ref.n_inputs or 0),
            num_strategies=num_strategies,
            iid=iid_set,
            oracle=oracle_set,
            policies=results,
            notes=list(notes),
        )

    def curve_sets(self) -> list[CurveSet]:
        """Policies first, then iid and oracle: the order of every legend."""
        sets = [p.curves for p in self.policies]
        sets += [c for c in (self.iid, self.oracle) if c is not None]
        return sets


class Report(_Model):
    """The whole report.json."""

    schema_version: int = SCHEMA_VERSION
    title: str = "seffi coverage report"
    seed: int | None = None
    config: dict[str, Any] | None = None
    meta: dict[str, str | int | float | bool | None] = {}
    comparisons: list[Comparison]  # required: a report.json without it is not a report

    def slugs(self) -> list[str]:
        """One file-name slug per comparison: its `Comparison.slug`, ``_<index>`` added on a repeat."""
        used: list[str] = []
        for index, comp in enumerate(self.comparisons):
            used.append(comp.slug if comp.slug not in used else f"{comp.slug}_{index}")
        return used

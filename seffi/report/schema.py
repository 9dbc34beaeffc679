"""The report.json schema: everything needed to re-render report.md and the plots without recomputing.

Determinism contract: the same inputs give a byte-identical report.json. So the schema holds no
timestamps and no absolute paths (callers must not put them in ``config`` / ``meta`` either), keys are
sorted, floats are written with Python's shortest round-trip ``repr``, and curves refuse NaN/inf (a
missing value is ``null``; a non-finite number inside free-form ``config`` is written as ``null``).

Layout::

    Report
      comparisons: [Comparison]          one per (task, env, budget K, input pool)
        iid: CurveSet | None             the iid base-sampler baseline (exact or estimated)
        oracle: CurveSet | None          the no-repeat oracle
        policies: [PolicyResult]
          curves: CurveSet               the policy's measured curves
          gain: Gain | None              gain vs iid with CI (or a reason it is undefined)
          barcode: Barcode | None        strategy per (input, sample index); -1 = no match
          latent: LatentCurve | None     router latent-code coverage; a diagnostic, never mixed in

All curves are indexed by budget ``k`` (1-based, increasing); every per-k list has the length of ``k``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


# Per-k values; null marks a value that is undefined at that k (e.g. no run reached k samples).
FloatList = list[float | None]


def _check_len(name: str, values: Sequence[Any] | None, n: int) -> None:
    if values is not None and len(values) != n:
        raise ValueError(f"{name} has length {len(values)}, expected {n} (one value per k)")


#: Largest budget K a report may hold: far above any real run, far below what would exhaust memory
#: when a plot or a table allocates per k.
MAX_BUDGET = 10_000_000
#: Largest input pool a report may name.
MAX_INPUTS = 1_000_000_000
#: Rounding slack for values that are probabilities (means of fractions may land a few ulps past 1).
_EPS = 1e-9


def _check_unit(name: str, values: Sequence[Any] | float | None) -> None:
    """Every value (None skipped) is a probability in [0, 1]."""
    if values is None:
        return
    items = values if isinstance(values, Sequence) else [values]
    for v in items:
        if v is not None and not -_EPS <= v <= 1.0 + _EPS:
            raise ValueError(f"{name} must lie in [0, 1], got {v}")


def _check_band(name: str, lo: Sequence[float | None] | None, hi: Sequence[float | None] | None) -> None:
    if (lo is None) != (hi is None):
        raise ValueError(f"{name}_lo and {name}_hi must be given together")
    pairs = zip(lo or [], hi or [], strict=True)
    if any(a is not None and b is not None and a > b + 1e-12 for a, b in pairs):
        raise ValueError(f"{name}_lo exceeds {name}_hi somewhere")


class TimeToCoverage(_Model):
    """Summary of T(tau) = min{k : |S_k|/M >= tau}, censored at the budget K.

    Attributes:
        tau: coverage threshold in (0, 1].
        median: median of T (None when more than half the runs are censored).
        restricted_mean: E[min(T, K)].
        fraction_censored: share of runs that never reached tau within K.
        survival: Pr[T > k] for each k of the curve set, shape (K,).
        values: per run T, None where censored; feeds the box/violin panel.
    """

    tau: float
    median: float | None = None
    restricted_mean: float | None = None
    fraction_censored: float | None = None
    survival: FloatList | None = None
    values: list[int | None] | None = None

    @field_validator("tau")
    @classmethod
    def _tau_range(cls, v: float) -> float:
        if not 0.0 < v <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {v}")
        return v

    @model_validator(mode="after")
    def _ranges(self) -> TimeToCoverage:
        _check_unit(f"time_to_coverage(tau={self.tau}): fraction_censored", self.fraction_censored)
        _check_unit(f"time_to_coverage(tau={self.tau}): survival", self.survival)
        for name in ("median", "restricted_mean"):
            v = getattr(self, name)
            if v is not None and not 0.0 <= v <= MAX_BUDGET:
                raise ValueError(f"time_to_coverage(tau={self.tau}): {name} must lie in [0, {MAX_BUDGET}]")
        if any(v is not None and not 1 <= v <= MAX_BUDGET for v in self.values or []):
            raise ValueError(f"time_to_coverage(tau={self.tau}): values must lie in [1, {MAX_BUDGET}]")
        return self


class CurveSet(_Model):
    """One sampler's curves over budgets k (policy, iid baseline or oracle).

    Attributes:
        label: legend name, e.g. "learned", "iid", "oracle".
        role: "policy", "iid" or "oracle".
        method: how the numbers were obtained, e.g. "exact", "empirical", "rarefaction",
            "extrapolated", "monte_carlo" (shown in report.md so estimates are labelled as such).
        k: budgets, int list, shape (K,), increasing, >= 1.
        coverage: C(k), shape (K,); coverage_lo / coverage_hi: CI band, shape (K,).
        novelty: N(i) = Pr[sample i reveals a new strategy], shape (K,).
        expected_new: expected number of new strategies at sample i, shape (K,).
        full_coverage: F(k) = Pr[|S_k| = M], shape (K,).
        valid_coverage: coverage counting only valid samples, shape (K,) (+ optional band).
        valid_at_k: best-of-k correctness Pr[some sample <= k is valid], shape (K,).
        coverage_by_rarity: coverage contributed by strategies per base-probability bin, shape
            (n_bins, K), row 0 = most common; ``rarity_bins`` names the rows. Shows whether gains come
            from avoiding repeats of common strategies or from finding rare ones.
        extrapolated: bool per k, True where the value is a model-based extrapolation.
        auc, auc_lo, auc_hi: AUC(K) = mean_k C(k) with CI; valid_auc*: the same for valid coverage.
        time_to_coverage: one summary per tau.
        valid_rate: share of samples that were valid solutions.
        n_samples, n_inputs, n_runs: how much data stands behind the curves.
    """

    label: str
    role: Literal["policy", "iid", "oracle"] = "policy"
    method: str | None = None
    k: list[int]
    coverage: FloatList
    coverage_lo: FloatList | None = None
    coverage_hi: FloatList | None = None
    novelty: FloatList | None = None
    expected_new: FloatList | None = None
    full_coverage: FloatList | None = None
    valid_coverage: FloatList | None = None
    valid_coverage_lo: FloatList | None = None
    valid_coverage_hi: FloatList | None = None
    valid_at_k: FloatList | None = None
    coverage_by_rarity: list[FloatList] | None = None
    rarity_bins: list[str] | None = None
    extrapolated: list[bool] | None = None
    auc: float | None = None
    auc_lo: float | None = None
    auc_hi: float | None = None
    valid_auc: float | None = None
    valid_auc_lo: float | None = None
    valid_auc_hi: float | None = None
    time_to_coverage: list[TimeToCoverage] = []
    valid_rate: float | None = None
    n_samples: int | None = None
    n_inputs: int | None = None
    n_runs: int | None = None
    notes: list[str] = []

    @model_validator(mode="after")
    def _shapes(self) -> CurveSet:
        if not self.k:
            raise ValueError(f"curve set {self.label!r}: k is empty")
        if self.k[0] < 1 or any(b <= a for a, b in zip(self.k, self.k[1:], strict=False)):
            raise ValueError(f"curve set {self.label!r}: k must be increasing and >= 1")
        if self.k[-1] > MAX_BUDGET:
            raise ValueError(f"curve set {self.label!r}: k must not exceed {MAX_BUDGET:,}")
        n = len(self.k)
        for name in (
            "coverage",
            "coverage_lo",
            "coverage_hi",
            "novelty",
            "expected_new",
            "full_coverage",
            "valid_coverage",
            "valid_coverage_lo",
            "valid_coverage_hi",
            "valid_at_k",
            "extrapolated",
        ):
            _check_len(f"curve set {self.label!r}: {name}", getattr(self, name), n)
        for row in self.coverage_by_rarity or []:
            _check_len(f"curve set {self.label!r}: coverage_by_rarity row", row, n)
        if self.coverage_by_rarity is not None and self.rarity_bins is not None:
            if len(self.rarity_bins) != len(self.coverage_by_rarity):
                raise ValueError(f"curve set {self.label!r}: rarity_bins and coverage_by_rarity rows differ")
        for t in self.time_to_coverage:
            _check_len(f"curve set {self.label!r}: survival(tau={t.tau})", t.survival, n)
        _check_band("coverage", self.coverage_lo, self.coverage_hi)
        _check_band("valid_coverage", self.valid_coverage_lo, self.valid_coverage_hi)
        for name in (
            "coverage",
            "coverage_lo",
            "coverage_hi",
            "novelty",
            "full_coverage",
            "valid_coverage",
            "valid_coverage_lo",
            "valid_coverage_hi",
            "valid_at_k",
            "auc",
            "auc_lo",
            "auc_hi",
            "valid_auc",
            "valid_auc_lo",
            "valid_auc_hi",
            "valid_rate",
        ):
            _check_unit(f"curve set {self.label!r}: {name}", getattr(self, name))
        for row in self.coverage_by_rarity or []:
            _check_unit(f"curve set {self.label!r}: coverage_by_rarity", row)
        if any(v is not None and v < 0 for v in self.expected_new or []):
            raise ValueError(f"curve set {self.label!r}: expected_new must be >= 0")
        for name in ("n_samples", "n_inputs", "n_runs"):
            if (getattr(self, name) or 0) < 0:
                raise ValueError(f"curve set {self.label!r}: {name} must be >= 0")
        return self

    @property
    def budget(self) -> int:
        """The largest k (the budget K)."""
        return self.k[-1]

    def ttc(self, tau: float) -> TimeToCoverage | None:
        """The time-to-coverage summary for ``tau`` (None if not reported)."""
        for t in self.time_to_coverage:
            if math.isclose(t.tau, tau):
                return t
        return None

    @classmethod
    def from_curves(cls, curves: Any, label: str, role: str | None = None, **extra: Any) -> CurveSet:
        """Adapt a :class:`seffi.coverage.Curves` (or its ``to_dict()``) into a curve set.

        Args:
            curves: an object with ``to_dict()``, or the dict itself.
            label: legend name.
            role: "policy", "iid" or "oracle"; None derives it from the curves' ``kind``
                ("iid_estimated" -> "iid" with method "estimated").
            **extra: fields to set or override (e.g. ``method="exact"``).
        """
        from seffi.report._adapt import curveset_fields

        data = curves.to_dict() if hasattr(curves, "to_dict") else dict(curves)
        fields = curveset_fields(data)
        if role is not None:
            fields["role"] = role
        fields.update(extra)
        return cls(label=label, **fields)


class Gain(_Model):
    """Gain vs iid: (AUC - AUC_iid) / (AUC_oracle - AUC_iid), with a CI; ``reason`` when undefined."""

    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _reason_when_missing(self) -> Gain:
        if self.value is None and not self.reason:
            raise ValueError("a gain without a value must carry a reason")
        return self


class Barcode(_Model):
    """Which strategy each sample of each input matched (the qualitative redundancy picture).

    Attributes:
        strategies: strategy names; cell value j means ``strategies[j]``.
        input_ids: one per row.
        matrix: int rows (inputs) x columns (sample index); -1 = matched no strategy. Rows may be
            shorter than the budget (an input that got fewer samples). A sample matching several
            strategies shows one of them (callers pick the first *new* one, else the first).
        new: optional bool rows like ``matrix``: the sample added a strategy not seen before in its
            row (drawn as the first-appearance marker); derived from ``matrix`` when absent.
    """

    strategies: list[str]
    input_ids: list[str]
    matrix: list[list[int]]
    new: list[list[bool]] | None = None

    @classmethod
    def from_tracker(cls, data: Mapping[str, Any]) -> Barcode:
        """Adapt ``CoverageTracker.barcode()`` / ``Curves.barcode`` into a barcode.

        Args:
            data: a dict with ``rows``, ``strategies``, ``first_strategy``, ``new`` and ``lengths``
                (rows are cut to their recorded length), or this model's own fields.
        """
        if "matrix" in data:
            return cls(**dict(data))
        lengths = data.get("lengths") or [len(r) for r in data["first_strategy"]]
        cut = [min(int(n), len(r)) for n, r in zip(lengths, data["first_strategy"], strict=True)]
        new = data.get("new")
        return cls(
            strategies=list(data["strategies"]),
            input_ids=list(data["rows"]),
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
    """Coverage of the router's latent codes (a method diagnostic, kept apart from strategy coverage)."""

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
            _check_unit(f"latent curve {self.label!r}: {name}", getattr(self, name))
        return self


class PolicyResult(_Model):
    """One policy's results within a comparison."""

    curves: CurveSet
    gain: Gain | None = None
    barcode: Barcode | None = None
    latent: LatentCurve | None = None

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
    #: Exploration-ladder rung (``seffi ladder``): 1 = hand-written router env, 2 = learned generators.
    rung: int | None = None
    #: Where the iid curves come from: the env's exact law, or estimated from base-model samples.
    iid_source: Literal["exact", "samples"] | None = None

    @field_validator("budget")
    @classmethod
    def _budget(cls, v: int) -> int:
        if not 1 <= v <= MAX_BUDGET:
            raise ValueError(f"must lie in [1, {MAX_BUDGET:,}], got {v}")
        return v

    @field_validator("n_inputs")
    @classmethod
    def _inputs(cls, v: int) -> int:
        if not 0 <= v <= MAX_INPUTS:
            raise ValueError(f"must lie in [0, {MAX_INPUTS:,}], got {v}")
        return v

    @field_validator("num_strategies")
    @classmethod
    def _strategies(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"must be >= 1, got {v}")
        return v

    @property
    def slug(self) -> str:
        """A filesystem-safe name for this comparison's plot files."""
        # The env id names the comparison best (token vs router env of one task); drop the namespace.
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
        """Build a comparison straight from :class:`seffi.coverage.Curves` objects.

        The gain of each policy comes from ``policy_curves.gain(iid, oracle)`` when both baselines
        are ``Curves`` objects (else it is left out). Budget and input count come from the curves.

        Args:
            task: task name.
            policies: ``{label: Curves}``.
            iid: the iid baseline ``Curves`` (or None).
            oracle: the oracle ``Curves`` (or None).
            env_id: env id (names the plot files).
            num_strategies: M, shown in report.md.
            notes: caveats shown in report.md.
            barcodes: ``{label: Barcode or its dict}``; a policy's ``Curves.barcode`` is used otherwise.
            latents: ``{label: LatentCurve}`` for router policies.
        """

        def _set(curves: Any, label: str, role: str) -> CurveSet:
            return CurveSet.from_curves(curves, label, role)

        results = []
        for label, curves in policies.items():
            gain = None
            if hasattr(curves, "gain") and hasattr(iid, "to_dict") and hasattr(oracle, "to_dict"):
                g = curves.gain(iid, oracle)
                gain = Gain(**(g.to_dict() if hasattr(g, "to_dict") else dict(g)))
            raw_bar = (barcodes or {}).get(label)
            if raw_bar is None:
                raw_bar = getattr(curves, "barcode", None)
            bar = (
                raw_bar if isinstance(raw_bar, Barcode) or raw_bar is None else Barcode.from_tracker(raw_bar)
            )
            results.append(
                PolicyResult(
                    curves=_set(curves, label, "policy"),
                    gain=gain,
                    barcode=bar,
                    latent=(latents or {}).get(label),
                )
            )
        iid_set = _set(iid, "iid", "iid") if iid is not None else None
        oracle_set = _set(oracle, "oracle", "oracle") if oracle is not None else None
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
        """Policies first, then iid and oracle (those present): the order of every legend."""
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

"""`Gain` and `TimeToCoverage`: the summary models coverage results and report.json share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from seffi._convert import finite
from seffi.coverage.resampling import percentile_interval

#: Largest budget K a result may hold (a plot or table allocates per k).
MAX_BUDGET = 10_000_000
#: Smallest room AUC_oracle − AUC_iid at which a gain is read without a flag. At 0.05, a policy AUC
#: 0.01 above iid (about one more strategy found in one of 20 runs of M = 4, K = 8) reads as 0.2.
GAIN_ROOM_THRESHOLD = 0.05
#: Smallest share of the inputs that must hold the room for a gain to be read without a flag.
GAIN_HELD_SHARE = 0.25
#: The reason's note of a gain whose interval is unbounded (`Gain.unbounded`).
UNBOUNDED_NOTE = (
    "interval unbounded: over these inputs the room AUC_oracle − AUC_iid is not clearly above 0, so the "
    "gain could be arbitrarily large or small (Fieller)"
)


def _plain_floats(value: Any) -> Any:
    """A float array becomes a list with NaN as None; anything else is left to the field's own check."""
    return [finite(x) for x in value.astype(np.float64).tolist()] if isinstance(value, np.ndarray) else value


#: Per-k values; None marks a value undefined at that k. Arrays are accepted (NaN -> None); a NaN
#: inside a plain list is refused.
FloatList = Annotated[list[float | None], BeforeValidator(_plain_floats)]


def check_unit(name: str, values: Sequence[Any] | float | None) -> None:
    """Raise ValueError unless every value (None skipped) is a probability in [0, 1] (up to rounding)."""
    for v in values if isinstance(values, Sequence) else [values]:  # None: [None], skipped
        if v is not None and not -1e-9 <= v <= 1.0 + 1e-9:
            raise ValueError(f"{name} must lie in [0, 1], got {v}")


def survival_summary(survival: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(median, restricted mean, censored fraction) of survival curves S(k) = Pr[T > k], (..., K).

    Median: the smallest k with S(k) <= 1/2 (NaN if censored); restricted mean E[min(T, K)] =
    sum_{k=0}^{K-1} S(k) with S(0) = 1; censored fraction S(K).
    """
    s = np.asarray(survival, dtype=np.float64)
    K = s.shape[-1]
    reached = s <= 0.5 + 1e-12
    median = np.where(reached.any(axis=-1), np.argmax(reached, axis=-1) + 1.0, np.nan)
    return median, 1.0 + s[..., : K - 1].sum(axis=-1), s[..., K - 1].copy()


def inputs_holding(rooms: Any) -> float | None:
    """How many inputs hold the room: (Σ r)² / Σ r² of the per-input rooms r = max(o − i, 0) (None: no room).

    Every input holding an equal room counts fully (U of U); a room held by 3 of 16 inputs counts 3.
    """
    r = np.clip(np.asarray(rooms, dtype=np.float64), 0.0, None)
    sq = float((r * r).sum())
    return float(r.sum()) ** 2 / sq if sq > 0 else None


def gain_fragility(room: float | None, held_by: float | None, n_inputs: int | None) -> str | None:
    """Why a gain with this room is fragile (None when it is not): the one place the rule lives.

    Fragile: the room AUC_oracle − AUC_iid is below `GAIN_ROOM_THRESHOLD` (small AUC differences,
    noise included, become large gains), or fewer than `GAIN_HELD_SHARE` of the ``n_inputs`` inputs
    hold it (``held_by``, `inputs_holding`). None arguments are not flagged.
    """
    notes = []
    if room is not None and room < GAIN_ROOM_THRESHOLD:
        notes.append(
            f"the room AUC_oracle − AUC_iid = {room:.3f} is below {GAIN_ROOM_THRESHOLD:g}: iid already "
            "covers nearly everything the oracle does, so small AUC differences become large gains"
        )
    if held_by is not None and n_inputs and held_by < GAIN_HELD_SHARE * n_inputs:
        notes.append(
            f"the room is held by about {held_by:.1f} of {n_inputs} inputs (fewer than "
            f"{GAIN_HELD_SHARE:.0%}): those few inputs decide the gain and its interval"
        )
    return "fragile gain: " + "; ".join(notes) if notes else None


class Gain(BaseModel):
    """Gain(K) = (AUC - AUC_iid) / (AUC_oracle - AUC_iid) with an interval, or why it is undefined.

    The gain may exceed 1 when traces match several strategies at once.

    Attributes:
        value, lo, hi: The gain and its interval (lo/hi None: no interval, or an unbounded one).
        reason: Why the value is undefined, or caveats (a fragile gain's first).
        room: AUC_oracle − AUC_iid over the gain's inputs (None when unknown).
        held_by: How many inputs hold the room (`inputs_holding`; None when unknown).
        n_inputs: The inputs the gain is over (None when unknown).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    reason: str | None = None
    room: float | None = None
    held_by: float | None = None
    n_inputs: int | None = None

    @model_validator(mode="after")
    def _reason_when_missing(self) -> Gain:
        if self.value is None and not self.reason:
            raise ValueError("a gain without a value must carry a reason")
        return self

    @property
    def fragility(self) -> str | None:
        """Why this gain is fragile (`gain_fragility` of its room), None when it is not or undefined."""
        return None if self.value is None else gain_fragility(self.room, self.held_by, self.n_inputs)

    @property
    def unbounded(self) -> bool:
        """Whether the gain has a value but its interval is unbounded (lo/hi None, `UNBOUNDED_NOTE`)."""
        return self.value is not None and self.lo is None and UNBOUNDED_NOTE in (self.reason or "")

    @property
    def fragile(self) -> bool:
        """Whether a defined gain is fragile: room below 0.05 or held by fewer than 25% of its inputs."""
        return self.fragility is not None

    def flagged(self) -> Gain:
        """This gain with its fragility note first in ``reason``; itself when not fragile."""
        note = self.fragility
        if note is None or note in (self.reason or ""):
            return self
        return self.model_copy(update={"reason": f"{note}; {self.reason}" if self.reason else note})

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (the report.json form)."""
        return self.model_dump()


#: Fields of `TimeToCoverage` written only when set (report.json keeps its six keys).
_SPARSE = (
    *(
        f"{n}_{b}"
        for n in ("survival", "median", "restricted_mean", "fraction_censored")
        for b in ("lo", "hi")
    ),
    "mean",
)


def _alias(name: str) -> Any:
    """A field that also reads its earlier name (``censored`` for ``fraction_censored``)."""
    return Field(
        default=None, validation_alias=AliasChoices(name, name.replace("fraction_censored", "censored"))
    )


class TimeToCoverage(BaseModel):
    """Time to reach coverage tau, T(tau) = min{k : |S_k|/M >= tau}, censored at the budget K.

    Attributes:
        tau: the threshold, in (0, 1].
        survival: Pr[T > k] for k = 1..K, shape (K,).
        median: smallest k with Pr[T > k] <= 1/2; None when not reached by K (censored).
        restricted_mean: E[min(T, K)].
        fraction_censored: share of runs not reaching tau by K, Pr[T > K].
        values: per run T, None where censored (feeds the report's box panel).
        mean: the unrestricted E[T] when known exactly (iid with a known law, tau = 1), else None.
        *_lo, *_hi: bootstrap interval bounds (None for exact baselines or when undefined).
    """

    # Not frozen: a baseline averaged over inputs sets its survival band after construction.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)

    tau: float
    median: float | None = None
    restricted_mean: float | None = None
    fraction_censored: float | None = _alias("fraction_censored")
    survival: FloatList | None = None
    values: list[int | None] | None = None
    survival_lo: FloatList | None = None
    survival_hi: FloatList | None = None
    median_lo: float | None = None
    median_hi: float | None = None
    restricted_mean_lo: float | None = None
    restricted_mean_hi: float | None = None
    fraction_censored_lo: float | None = _alias("fraction_censored_lo")
    fraction_censored_hi: float | None = _alias("fraction_censored_hi")
    mean: float | None = None

    @field_validator("tau")
    @classmethod
    def _tau_range(cls, v: float) -> float:
        if not 0.0 < v <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {v}")
        return v

    @model_validator(mode="after")
    def _ranges(self) -> TimeToCoverage:
        where = f"time_to_coverage(tau={self.tau})"
        for name in ("fraction_censored", "survival", "survival_lo", "survival_hi"):
            check_unit(f"{where}: {name}", getattr(self, name))
        for name in ("median", "restricted_mean"):
            v = getattr(self, name)
            if v is not None and not 0.0 <= v <= MAX_BUDGET:
                raise ValueError(f"{where}: {name} must lie in [0, {MAX_BUDGET}]")
        if any(v is not None and not 1 <= v <= MAX_BUDGET for v in self.values or []):
            raise ValueError(f"{where}: values must lie in [1, {MAX_BUDGET}]")
        return self

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        for name in _SPARSE:
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @classmethod
    def from_survival(
        cls,
        tau: float,
        survival: np.ndarray,
        reps: np.ndarray | None = None,
        *,
        level: float = 0.95,
        mean: float | None = None,
    ) -> TimeToCoverage:
        """Summaries of a survival curve (K,), percentile intervals from replicates (B, K), exact ``mean``."""
        many = cls.from_survivals([tau], [survival], None if reps is None else [reps], level=level, mean=mean)
        return many[0]

    @classmethod
    def from_survivals(
        cls,
        taus: Sequence[float],
        survivals: Sequence[np.ndarray],
        reps: Sequence[np.ndarray] | None = None,
        *,
        level: float = 0.95,
        mean: float | None = None,
    ) -> list[TimeToCoverage]:
        """`from_survival` of each tau (``mean`` for each), the replicates' percentiles in one pass.

        Quantiles are taken column by column: one pass over every tau's columns gives each tau's own.
        """
        kws: list[dict[str, Any]] = []
        for tau, survival in zip(taus, survivals, strict=True):
            s = np.clip(np.asarray(survival, dtype=np.float64), 0.0, 1.0)
            med, rmean, cens = survival_summary(s)
            kws.append(
                {
                    "tau": float(tau),
                    "survival": s,
                    "median": finite(med),
                    "restricted_mean": float(rmean),
                    "fraction_censored": float(cens),
                    "mean": None if mean is None else finite(mean),
                }
            )
        have = [] if reps is None else [i for i, r in enumerate(reps) if len(r)]
        if have:
            cols, medians = [], []
            for i in have:
                r = np.clip(reps[i], 0.0, 1.0)  # type: ignore[index]
                rmed, rrm, rc = survival_summary(r)
                cols += [r, rrm[:, None], rc[:, None]]
                # A censored replicate median counts as +inf; medians are integers: order statistics.
                medians.append(np.where(np.isnan(rmed), np.inf, rmed))
            # One quantile pass over the survival columns, restricted means and censored fractions.
            lo, hi = percentile_interval(np.concatenate(cols, axis=1), level, skip_nan=False)
            mlo, mhi = percentile_interval(np.column_stack(medians), level, "nearest", skip_nan=False)
            a = 0
            for j, i in enumerate(have):
                kw, b = kws[i], a + cols[3 * j].shape[1] + 2
                kw["survival_lo"], kw["survival_hi"] = lo[a : b - 2], hi[a : b - 2]
                kw["restricted_mean_lo"], kw["restricted_mean_hi"] = float(lo[b - 2]), float(hi[b - 2])
                kw["fraction_censored_lo"], kw["fraction_censored_hi"] = float(lo[b - 1]), float(hi[b - 1])
                kw["median_lo"], kw["median_hi"] = finite(mlo[j]), finite(mhi[j])
                a = b
        return [cls(**kw) for kw in kws]

    def point(self) -> TimeToCoverage:
        """These summaries without intervals or the exact mean (what report.json stores)."""
        return self.model_copy(update=dict.fromkeys(_SPARSE))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (unset intervals left out); `from_dict` inverts it."""
        return self.model_dump()

    @classmethod
    def from_dict(cls, d: Any) -> TimeToCoverage:
        """Inverse of `to_dict`; also reads the earlier ``censored`` key names."""
        return cls.model_validate(d)

"""Coverage curves: the `Curves` result container (k = 1..K of one sampler).

Conventions in every docstring of ``seffi.coverage``: ``K`` is the budget and arrays indexed by
budget hold k = 1..K in positions 0..K-1; ``R`` counts runs, ``U`` inputs, ``M`` strategy columns,
``B`` bootstrap replicates; a shape such as (U, K) is that of an array.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from seffi._convert import jsonable
from seffi.coverage.columns import curves_arrays
from seffi.coverage.gain import gain_value, paired_gain
from seffi.coverage.summaries import Gain, TimeToCoverage, survival_summary

#: The coverage thresholds tau reported for time-to-coverage, as the string keys used in ``Curves``.
TAUS: tuple[float, ...] = (0.5, 0.8, 1.0)
#: Format tag of ``Curves.to_dict``; ``from_dict`` refuses anything else.
CURVES_FORMAT = "seffi.coverage.curves/1"
__all__ = ["TAUS", "Curves", "Gain", "KeyView", "TimeToCoverage", "gain_value", "survival_summary"]


def tau_key(tau: float) -> str:
    """The dictionary key of a threshold in ``Curves.time_to_coverage`` (``0.5 -> "0.5"``)."""
    return f"{float(tau):g}" if float(tau) != 1.0 else "1.0"


def check_budget(K: Any) -> int:
    """Validate a sample budget ``K`` (a positive int) and return it as ``int``."""
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or int(K) <= 0:
        raise ValueError(f"budget K must be a positive integer, got {K!r}")
    return int(K)


#: Array-valued fields of ``Curves``: the metric columns', run counts, per-input and bootstrap arrays.
_ARRAY_FIELDS = (*curves_arrays(), "runs_at_k", "auc_reps", "valid_auc_reps", "input_auc", "input_valid_auc")


@dataclass
class Curves:
    """Coverage curves for k = 1..K of one method (a policy, the iid baseline or the oracle).

    The per-k metrics are described in `seffi.coverage.columns.COLUMNS`. ``*_lo`` / ``*_hi`` bound a
    ``ci_level`` interval; None for exact baselines and for quantities not measured.

    Attributes:
        kind: "policy", "iid" (exact law), "iid_estimated" (from base samples) or "oracle".
        auc, valid_auc: AUC(K) of ``coverage`` / ``valid_coverage``.
        time_to_coverage: {"0.5" | "0.8" | "1.0": TimeToCoverage}.
        coverage_by_rarity: (n_bins, K): coverage per within-input base-probability quantile (row 0
            most common; rows sum to coverage), labelled by ``rarity_bins``.
        extrapolated: (K,) bool: True where the value is a model-based extrapolation.
        runs_at_k: (K,): runs observed for at least k samples (policy).
        auc_reps, valid_auc_reps: (B,): bootstrap replicates of the AUCs (for unpaired gains).
        input_keys: (task, input_id) of the U inputs of ``input_auc`` (task None for baselines).
        input_auc, input_valid_auc: (U,): each input's share of the AUC (their mean is the AUC).
        notes: human-readable caveats (Monte Carlo error, extrapolation, undefined quantities).
    """

    kind: str
    K: int
    coverage: np.ndarray
    novelty: np.ndarray
    expected_new: np.ndarray
    full_coverage: np.ndarray
    auc: float
    time_to_coverage: dict[str, TimeToCoverage]
    coverage_lo: np.ndarray | None = None
    coverage_hi: np.ndarray | None = None
    novelty_lo: np.ndarray | None = None
    novelty_hi: np.ndarray | None = None
    expected_new_lo: np.ndarray | None = None
    expected_new_hi: np.ndarray | None = None
    full_coverage_lo: np.ndarray | None = None
    full_coverage_hi: np.ndarray | None = None
    auc_lo: float | None = None
    auc_hi: float | None = None
    #: Standard errors of the AUCs when intervals cover run-to-run noise only (few inputs), with
    #: their Welch-Satterthwaite degrees of freedom: ``gain`` uses them instead of resampling inputs.
    auc_se: float | None = None
    valid_auc_se: float | None = None
    auc_df: float | None = None
    valid_auc_df: float | None = None
    valid_coverage: np.ndarray | None = None
    valid_coverage_lo: np.ndarray | None = None
    valid_coverage_hi: np.ndarray | None = None
    valid_auc: float | None = None
    valid_auc_lo: float | None = None
    valid_auc_hi: float | None = None
    valid_at_k: np.ndarray | None = None
    valid_at_k_lo: np.ndarray | None = None
    valid_at_k_hi: np.ndarray | None = None
    coverage_by_rarity: np.ndarray | None = None
    rarity_bins: list[str] | None = None
    extrapolated: np.ndarray | None = None
    runs_at_k: np.ndarray | None = None
    n_inputs: int = 0
    n_runs: int = 0
    samples: int = 0
    ci_level: float = 0.95
    n_boot: int = 0
    seed: int | None = None
    auc_reps: np.ndarray | None = None
    valid_auc_reps: np.ndarray | None = None
    input_keys: Sequence[tuple[str | None, str]] | None = None
    input_auc: np.ndarray | None = None
    input_valid_auc: np.ndarray | None = None
    barcode: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def k(self) -> np.ndarray:
        """The budgets 1..K: int array, shape (K,)."""
        return np.arange(1, self.K + 1)

    def gain(self, iid: Curves, oracle: Curves, **kwargs: Any) -> Gain:
        """Gain(K) with an interval paired over inputs (`seffi.coverage.gain.paired_gain`, its ``kwargs``)."""
        g = paired_gain(self, iid, oracle, **kwargs)
        if iid.extrapolated is None or not np.any(iid.extrapolated) or g.value is None:
            return g
        note = (
            f"the iid AUC is extrapolated beyond its samples from k = {int(np.argmax(iid.extrapolated)) + 1} "
            f"to K = {iid.K} (model-based, Chao et al. 2014): the gain depends on that model"
        )
        return g.model_copy(update={"reason": note if not g.reason else f"{g.reason}; {note}"})

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: arrays become lists, NaN becomes None; ``from_dict`` inverts it."""
        out: dict[str, Any] = {"format": CURVES_FORMAT}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "time_to_coverage":
                out[f.name] = {k: t.to_dict() for k, t in v.items()}
            elif f.name == "input_keys" and v is not None:
                out[f.name] = [list(k) for k in v]
            else:
                out[f.name] = jsonable(v)
        return out

    @classmethod
    def from_point(
        cls,
        kind: str,
        K: int,
        point: Mapping[str, np.ndarray],
        time_to_coverage: dict[str, TimeToCoverage],
        **other: Any,
    ) -> Curves:
        """Curves from point estimates (``coverage``, ``novelty``, ``expected_new``, ``full_coverage``)."""
        curves = {n: point[n] for n in ("coverage", "novelty", "expected_new", "full_coverage")}
        auc = float(point["coverage"].mean())
        return cls(kind=kind, K=K, auc=auc, time_to_coverage=time_to_coverage, **curves, **other)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Curves:
        """Rebuild curves from `to_dict` output (missing per-input fields: None); ValueError if foreign."""
        if not isinstance(d, Mapping) or d.get("format") != CURVES_FORMAT:
            raise ValueError(f"not a seffi Curves dict (expected format {CURVES_FORMAT!r})")
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names - {"format"}
        if unknown:
            raise ValueError(f"Curves dict has unknown fields: {sorted(unknown)}")
        kw: dict[str, Any] = {k: v for k, v in d.items() if k != "format"}
        try:
            kw["time_to_coverage"] = {
                k: TimeToCoverage.from_dict(t) for k, t in kw.get("time_to_coverage", {}).items()
            }
            for name in _ARRAY_FIELDS:
                if kw.get(name) is not None:
                    dtype = {"extrapolated": bool, "runs_at_k": np.int64}.get(name, np.float64)
                    arr = np.array(kw[name], dtype=object)
                    kw[name] = np.where(arr == None, np.nan, arr).astype(dtype)  # noqa: E711
            if kw.get("input_keys") is not None:
                kw["input_keys"] = [_input_key(k) for k in kw["input_keys"]]
                for name in ("input_auc", "input_valid_auc"):
                    if kw.get(name) is not None and kw[name].shape != (len(kw["input_keys"]),):
                        raise ValueError(f"{name} has shape {kw[name].shape}, not one value per input key")
            return cls(**kw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"corrupted Curves dict: {exc}") from exc


class KeyView(Sequence[tuple[str, str]]):
    """The (task, input_id) keys of input ``codes`` of a tracker's `InputKeys`, built only when read."""

    def __init__(self, keys: Any, codes: np.ndarray) -> None:
        self._keys, self._codes = keys, np.asarray(codes, dtype=np.int64)

    def __len__(self) -> int:
        return int(self._codes.size)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self._keys.take(self._codes[i])
        return self._keys[int(self._codes[i])]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for a in range(0, self._codes.size, 4096):  # in blocks: never every tuple at once
            yield from self._keys.take(self._codes[a : a + 4096])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        return all(tuple(a) == tuple(b) for a, b in zip(self, other, strict=True))

    def __repr__(self) -> str:
        return f"KeyView({len(self)} input keys)"


def _input_key(k: Any) -> tuple[str | None, str]:
    """A (task, input_id) pair from its JSON form [task or null, input_id]."""
    ok = (
        isinstance(k, list | tuple) and len(k) == 2 and isinstance(k[0], str | None) and isinstance(k[1], str)
    )
    if not ok:
        raise ValueError(f"bad input key {k!r}: expected [task (str) or null, input_id (str)]")
    return (k[0], k[1])

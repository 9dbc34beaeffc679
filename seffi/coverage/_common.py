"""Helpers shared by the baselines: input formats, per-input laws, rarity bins, curve averaging."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seffi._convert import brief, clip
from seffi.coverage.columns import curves_arrays
from seffi.coverage.curves import Curves, TimeToCoverage
from seffi.coverage.sums_curves import rarity_labels


def _columns(
    used: Iterable[str], strategies: Sequence[str] | None, m: int | None, where: str
) -> tuple[list[str], int]:
    """Strategy columns of one input and its denominator M_x; unknown ids raise."""
    used = set(used)
    bad = [s for s in used if not isinstance(s, str)]
    if bad:
        raise ValueError(f"{where}: strategy ids must be str, got {bad!r}")
    if strategies is not None:
        unknown = sorted(used.difference(strategies))
        if unknown:
            raise ValueError(f"{where}: unknown strategy ids {unknown}; declared: {list(strategies)}")
        cols = list(strategies)
    else:
        cols = sorted(used)
    m = len(cols) if m is None else m
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
        raise ValueError(f"{where}: num_strategies must be a positive int, got {m!r}")
    if m < len(cols) and strategies is None:
        raise ValueError(f"{where}: {len(cols)} distinct strategies seen but num_strategies={m}")
    if strategies is not None and m != len(cols):
        raise ValueError(f"{where}: num_strategies={m} but {len(cols)} strategies are declared")
    # Strategies never seen still count in M_x: pad with columns that are never hit.
    cols += [f"<unseen {i}>" for i in range(m - len(cols))]
    return cols, int(m)


def named(cols: Sequence[str]) -> tuple[str, ...]:
    """The strategy ids among an input's columns (without the padding of unseen ones)."""
    return tuple(s for s in cols if not s.startswith("<unseen"))


def _check_strategies(strategies: Sequence[str] | None) -> tuple[str, ...] | None:
    if strategies is None:
        return None
    if isinstance(strategies, str) or not all(isinstance(s, str) for s in strategies):
        raise ValueError(f"strategies must be a sequence of str ids, got {clip(repr(strategies))}")
    ids = tuple(strategies)
    if not ids or len(set(ids)) != len(ids):
        raise ValueError(f"strategies must be non-empty and unique, got {len(ids)}: {brief(ids)}")
    return ids


def _per_input_m(num_strategies: int | Mapping[Any, int] | None, key: Any) -> int | None:
    if isinstance(num_strategies, Mapping):
        if key not in num_strategies and str(key) not in num_strategies:
            raise ValueError(f"num_strategies has no entry for input {key!r}")
        return num_strategies.get(key, num_strategies.get(str(key)))
    return num_strategies


def rarity_ranks(pi: np.ndarray, m: int, n_bins: int) -> np.ndarray:
    """Quantile bin (0 = most common) of each column by base probability ``pi`` (..., M) within an input."""
    order = np.argsort(-np.asarray(pi, dtype=np.float64), axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(order.shape[-1]), axis=-1)
    return np.minimum(rank * n_bins // max(m, 1), n_bins - 1)


def rarity_bin_matrix(
    rarity: Any, input_ids: Sequence[str], columns: Sequence[str], m: np.ndarray, n_bins: int
) -> np.ndarray:
    """Rarity bins (R, M) of ``columns`` for the input of each run, from a base law.

    ``rarity``: an ``IidBaseline`` or ``{input_id: {strategy: pi}}`` (or one ``{strategy: pi}``).
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"rarity_bins must be a positive int, got {n_bins!r}")
    table = rarity.marginals() if callable(getattr(rarity, "marginals", None)) else rarity  # an IidBaseline
    if not isinstance(table, Mapping):
        raise ValueError("rarity must be an IidBaseline or a {input_id: {strategy: probability}} mapping")
    # Keys (input ids, strategy ids) are both strings: the values tell a per-input table from a law.
    per_input = bool(table) and all(isinstance(v, Mapping) for v in table.values())
    single = table.get(None) if None in table else (None if per_input else table)
    out = np.empty((len(input_ids), len(columns)), dtype=np.int64)
    for r, iid in enumerate(input_ids):
        pis = single if single is not None else table.get(iid)
        if pis is None:
            raise ValueError(f"rarity: no base probabilities for input {iid!r}")
        out[r] = rarity_ranks(np.array([float(pis.get(s, 0.0)) for s in columns]), int(m[r]), n_bins)
    return out


def _mean_curves(
    parts: list[Curves], kind: str, K: int, n_bins: int, keys: Sequence[str | None] = ()
) -> Curves:
    """Mean over inputs of per-input curves; with input ids ``keys``, each input's AUC for the paired gain."""

    def mean_of(values: Iterable[Any]) -> Any:
        vals = list(values)
        return None if any(v is None for v in vals) else np.mean(vals, axis=0)

    ttc = {}
    for key in parts[0].time_to_coverage:
        tt = [c.time_to_coverage[key] for c in parts]
        mean = mean_of(t.mean for t in tt)
        ttc[key] = TimeToCoverage.from_survival(
            float(key), mean_of(t.survival for t in tt), mean=None if mean is None else float(mean)
        )
        ttc[key].survival_lo = mean_of(t.survival_lo for t in tt)
        ttc[key].survival_hi = mean_of(t.survival_hi for t in tt)
    names = [n for n in (*curves_arrays(), "auc_reps", "valid_auc_reps") if n != "extrapolated"]
    arrays = {n: mean_of(getattr(c, n) for c in parts) for n in names}
    rest = {
        n: v for n, v in arrays.items() if n not in ("coverage", "novelty", "expected_new", "full_coverage")
    }
    out = Curves.from_point(kind, K, arrays, ttc, n_inputs=len(parts), **rest)
    out.n_runs, out.samples = sum(c.n_runs for c in parts), sum(c.samples for c in parts)
    out.auc = float(np.mean([c.auc for c in parts]))
    if out.valid_coverage is not None:
        out.valid_auc = float(out.valid_coverage.mean())
    if out.coverage_by_rarity is not None:
        out.rarity_bins = rarity_labels(n_bins)
    ext = [c.extrapolated for c in parts if c.extrapolated is not None]
    out.extrapolated = np.any(ext, axis=0) if ext else None
    out.notes = sorted({note for c in parts for note in c.notes})
    if keys and all(k is not None for k in keys):
        # Baselines do not know the task: their inputs are matched to a policy's by id.
        out.input_keys = [(None, str(k)) for k in keys]
        out.input_auc = np.array([c.auc for c in parts], dtype=np.float64)
        if all(c.valid_auc is not None for c in parts):
            out.input_valid_auc = np.array([c.valid_auc for c in parts], dtype=np.float64)
    return out


@dataclass
class _Samples:
    cols: list[str]
    m: int
    X: np.ndarray  # (n, M) bool
    valid: np.ndarray | None = None  # (n,) bool


def _input_id(input_id: Any) -> str:
    """Input ids are strings; ints are accepted and turned into their decimal string."""
    if isinstance(input_id, bool) or not isinstance(input_id, str | int | np.integer):
        raise ValueError(f"input_id must be a str (or int), got {type(input_id).__name__}: {input_id!r}")
    return str(input_id)


def _match_set(matches: Any) -> frozenset[str]:
    """One sample's strategy ids as a frozenset; a bare string or non-str ids raise."""
    if isinstance(matches, str):
        raise ValueError(f"matches must be an iterable of strategy ids, not the string {matches!r}")
    ms = frozenset(matches)
    bad = [s for s in ms if not isinstance(s, str)]
    if bad:
        raise ValueError(f"strategy ids must be str, got {bad!r}")
    return ms


def _int_array(value: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if (
        not np.issubdtype(arr.dtype, np.integer)
        or arr.ndim > 1
        or (arr.ndim == 1 and arr.shape[0] != n)
        or (arr.size and arr.min() < 0)
    ):
        raise ValueError(f"{name} must be a non-negative int or an int array of shape ({n},)")
    return np.broadcast_to(arr.astype(np.int64), (n,))

"""``IidBaseline``: the iid base sampler's curves — exact from a known law, estimated from samples."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seffi._seeding import SeedLike, spawn
from seffi.coverage import estimators as est
from seffi.coverage._common import (
    _check_strategies,
    _columns,
    _input_id,
    _mean_curves,
    _per_input_m,
    _Samples,
    named,
    rarity_ranks,
)
from seffi.coverage.curves import TAUS, Curves, TimeToCoverage, check_budget, tau_key
from seffi.coverage.estimators import used_masks
from seffi.coverage.samples import SamplePlan, _covered_from_counts

#: Total Monte Carlo runs (split over inputs) used where no exact formula exists.
MC_RUNS = 20000


@dataclass
class _Law:
    cols: list[str]
    m: int
    atoms: np.ndarray  # (J, M) bool
    p: np.ndarray  # (J,)
    valid_atoms: np.ndarray | None = None
    valid_p: np.ndarray | None = None
    valid_probability: float | None = None


class IidBaseline:
    """The iid base sampler's curves, per input, averaged over inputs.

    Build it with `from_probabilities` (single-label law), `from_match_distribution` (law over
    match sets) or `from_samples` (unknown law, estimated); each takes one law or ``{input_id: law}``.
    """

    def __init__(self, parts: Mapping[str | None, _Law | _Samples]) -> None:
        if not parts:
            raise ValueError("IidBaseline needs at least one input")
        self._parts = dict(parts)

    @property
    def estimated(self) -> bool:
        """True when built from samples (curves are estimates with intervals)."""
        return any(isinstance(v, _Samples) for v in self._parts.values())

    def strategy_sets(self) -> dict[str | None, tuple[tuple[str, ...], int]]:
        """Per input key (``None`` for a single law): (the strategy ids named, M_x >= their number)."""
        return {key: (named(part.cols), int(part.m)) for key, part in self._parts.items()}

    @classmethod
    def from_probabilities(
        cls,
        probabilities: Mapping[str, float] | Mapping[str, Mapping[str, float]],
        *,
        strategies: Sequence[str] | None = None,
        num_strategies: int | Mapping[str, int] | None = None,
        valid_probability: float | Mapping[str, float] | None = None,
    ) -> IidBaseline:
        """Exact single-label baseline: each base sample matches exactly one strategy.

        Args:
            probabilities: ``{strategy: p}`` summing to 1, or ``{input_id: {strategy: p}}``.
            strategies: declared strategy ids (M_x = their number). Without them (and without
                ``num_strategies``) M_x is the number of keys, with a UserWarning: a declared strategy
                the base model never uses still counts in a monitor's M.
            num_strategies: M_x when strategies are not declared (int or per input).
            valid_probability: probability that a base sample is correct (for valid@k).
        """
        if not isinstance(probabilities, Mapping) or not probabilities:
            raise ValueError("probabilities must be a non-empty {strategy: probability} dict")
        laws: dict[Any, Any]
        if all(isinstance(v, Mapping) for v in probabilities.values()):
            laws = {k: {frozenset([s]): p for s, p in v.items()} for k, v in probabilities.items()}
        else:
            laws = {frozenset([s]): p for s, p in probabilities.items()}
        baseline = cls.from_match_distribution(
            laws, strategies=strategies, num_strategies=num_strategies, valid_probability=valid_probability
        )
        if strategies is None and num_strategies is None:
            _warn_inferred_m(baseline, "from_probabilities")
        return baseline

    @classmethod
    def from_match_distribution(
        cls,
        distribution: Mapping[Any, Any],
        *,
        strategies: Sequence[str] | None = None,
        num_strategies: int | Mapping[str, int] | None = None,
        valid_distribution: Mapping[Any, Any] | None = None,
        valid_probability: float | Mapping[str, float] | None = None,
    ) -> IidBaseline:
        """Exact baseline from the law of a base sample's match set.

        Args:
            distribution: ``{frozenset(strategy ids): probability}`` summing to 1 (e.g.
                ``task.base_match_distribution(x)``), or ``{input_id: that}``.
            strategies: declared strategy ids (M_x = their number); default: those in the law.
            num_strategies: M_x when strategies are not declared (int or per input).
            valid_distribution: the same law counting only correct samples' matches (e.g.
                ``task.base_match_distribution(x, valid_only=True)``), for valid-only coverage. It may
                leave out the incorrect samples (total below 1): their mass matches nothing.
            valid_probability: probability that a base sample is correct, for valid@k.
        """
        strategies = _check_strategies(strategies)
        # Keyed by input id: no key is a match set, every value a law.
        per_input = bool(distribution) and all(
            not isinstance(k, frozenset | set | tuple) for k in distribution
        )
        per_input = per_input and all(isinstance(v, Mapping) for v in distribution.values())
        laws = distribution if per_input else {None: distribution}
        if valid_distribution is not None:
            valid_distribution = valid_distribution if per_input else {None: valid_distribution}
            if set(valid_distribution) != set(laws):
                raise ValueError("valid_distribution must cover exactly the inputs of distribution")
        parts: dict[str | None, _Law] = {}
        for key, law in laws.items():
            iid = None if key is None else _input_id(key)
            where = "match distribution" + ("" if iid is None else f" of input {iid!r}")
            if not isinstance(law, Mapping):
                raise ValueError(f"{where}: expected a {{frozenset: probability}} dict")
            used = {s for ms in law for s in (ms if not isinstance(ms, str) else [ms])}
            if valid_distribution is not None:
                used |= {s for ms in valid_distribution[key] for s in ms}
            cols, m = _columns(used, strategies, _per_input_m(num_strategies, key), where)
            atoms, p = _law_arrays(law, cols, where)
            part = _Law(cols, m, atoms, p)
            if valid_distribution is not None:
                valid_law = _with_invalid_mass(valid_distribution[key])
                part.valid_atoms, part.valid_p = _law_arrays(valid_law, cols, "valid " + where)
            if valid_probability is not None:
                v = valid_probability[key] if isinstance(valid_probability, Mapping) else valid_probability
                if not isinstance(v, float | int) or not 0.0 <= float(v) <= 1.0 or math.isnan(v):
                    raise ValueError(f"{where}: valid_probability must be in [0, 1], got {v!r}")
                part.valid_probability = float(v)
            parts[iid] = part
        return cls(parts)

    @classmethod
    def from_samples(
        cls,
        samples: Sequence[Iterable[str]] | Mapping[str, Sequence[Iterable[str]]],
        *,
        strategies: Sequence[str] | None = None,
        num_strategies: int | Mapping[str, int] | None = None,
        valid: Sequence[bool] | Mapping[str, Sequence[bool]] | None = None,
    ) -> IidBaseline:
        """Estimated baseline from n iid base samples' match sets (the law is unknown).

        Unbiased U-statistics for k <= n, model-based extrapolations beyond (``Curves.extrapolated``);
        any M, but set-valued match sets may name at most 62 strategies within one input (else a
        ValueError). Details:
        [The iid baseline from samples](../statistics.md#the-iid-baseline-from-samples).

        Args:
            samples: list of match sets (each an iterable of strategy ids), or ``{input_id: list}``.
            strategies: declared strategy ids (M_x = their number). Without them (and without
                ``num_strategies``) M_x is the number of strategies seen, with a UserWarning.
            num_strategies: M_x when strategies are not declared (int or per input).
            valid: per-sample correctness (same shape as ``samples``), for valid-only curves.
        """
        strategies = _check_strategies(strategies)
        per_input = isinstance(samples, Mapping)
        data = samples if per_input else {None: samples}
        valids = (valid if per_input else {None: valid}) if valid is not None else None
        declared = None if strategies is None else frozenset(strategies)
        indexes: dict[int | None, dict[str, int]] = {}  # declared strategies: one index per M
        parts: dict[str | None, _Samples] = {}
        for key, rows in data.items():
            iid = None if key is None else _input_id(key)
            where = "samples" + ("" if iid is None else f" of input {iid!r}")
            if isinstance(rows, str | bytes) or not isinstance(rows, Sequence) or len(rows) == 0:
                raise ValueError(f"{where}: need a non-empty list of match sets")
            if any(issubclass(t, str) for t in set(map(type, rows))):  # a type check per sample, in C
                bad = next(r for r in rows if isinstance(r, str))
                raise ValueError(f"{where}: each sample must be an iterable of ids, not the string {bad!r}")
            sets = list(map(frozenset, rows))
            used, m_x = frozenset().union(*sets), _per_input_m(num_strategies, key)
            index = indexes.get(m_x) if declared is not None and used <= declared else None
            if index is None:
                index = {s: j for j, s in enumerate(_columns(used, strategies, m_x, where)[0])}
                if declared is not None:
                    indexes[m_x] = index
            lens = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
            X = np.zeros((len(sets), len(index)), dtype=bool)
            cols = np.asarray([index[s] for ms in sets for s in ms], dtype=np.int64)
            X[np.repeat(np.arange(len(sets)), lens), cols] = True
            if lens.max() > 1:
                try:
                    used_masks(X)  # set-valued: at most 62 strategies named in an input (the bitmasks)
                except ValueError as exc:
                    raise ValueError(f"{where}: {exc}") from None
            v = None
            if valids is not None:
                if key not in valids or len(valids[key]) != len(sets):
                    raise ValueError(f"{where}: valid must give one bool per sample")
                v = np.asarray(valids[key], dtype=bool)
            parts[iid] = _Samples(list(index), len(index), X, v)
        baseline = cls(parts)
        if strategies is None and num_strategies is None:
            _warn_inferred_m(baseline, "from_samples")
        return baseline

    def marginals(self) -> dict[str | None, dict[str, float]]:
        """Base probability pi_s = Pr[s in A] per input (incidence frequencies for samples; ranking only)."""
        out = {}
        for key, part in self._parts.items():
            pi = est.marginals(part.atoms, part.p) if isinstance(part, _Law) else part.X.mean(axis=0)
            out[key] = {
                s: float(v) for s, v in zip(part.cols, pi, strict=True) if not s.startswith("<unseen")
            }
        return out

    def aucs(self, K: int) -> dict[str | None, float]:
        """``{input key: AUC@K}``: the coverage of `curves` at a fraction of its cost (what a log needs)."""
        K = check_budget(K)
        out: dict[str | None, float] = {}
        groups: dict[tuple[int, int], list[str | None]] = {}
        for key, part in self._parts.items():
            if isinstance(part, _Law):
                pi = est.marginals(part.atoms, part.p)
                out[key] = float((est.expected_covered_exact(pi, K) / part.m).mean())
            else:
                groups.setdefault((part.X.shape[0], part.m), []).append(key)
        for (n, m), keys in groups.items():
            step = max(1, (64 << 20) // (n * m * 8 + 1))  # bounded working memory
            for a in range(0, len(keys), step):
                chunk = keys[a : a + step]
                Y = np.stack([self._parts[k].X.sum(axis=0) for k in chunk])
                cov = _covered_from_counts(Y, n, m, K).mean(axis=1) / m
                out.update(zip(chunk, cov.tolist(), strict=True))
        return {key: out[key] for key in self._parts}

    def curves(
        self, K: int, *, n_boot: int = 200, seed: SeedLike = 0, rarity_bins: int = 4, ci_level: float = 0.95
    ) -> Curves:
        """Curves for k = 1..K, averaged over inputs.

        Args:
            K: budget.
            n_boot: bootstrap replicates of a baseline from samples, per input, averaged index-wise.
            seed: seed for Monte Carlo parts and the bootstrap.
            rarity_bins: number of within-input quantile bins for ``coverage_by_rarity``.
            ci_level: interval level.
        """
        K = check_budget(K)
        if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 0:
            raise ValueError(f"n_boot must be a non-negative integer, got {n_boot!r}")
        if not 0.0 < ci_level < 1.0:
            raise ValueError(f"ci_level must be in (0, 1), got {ci_level!r}")
        items = sorted(self._parts.items(), key=lambda kv: str(kv[0]))
        if self.estimated:
            plan = self._plan(K, n_boot=n_boot, seed=seed, rarity_bins=rarity_bins, ci_level=ci_level)
            c = plan.curves(self._blocks(plan))
        else:
            seqs = spawn(seed, len(self._parts))
            mc_runs = max(64, MC_RUNS // len(self._parts))
            parts = [
                _law_curves(part, K, np.random.default_rng(seq), mc_runs, rarity_bins)
                for (_, part), seq in zip(items, seqs, strict=True)
            ]
            c = _mean_curves(parts, "iid", K, rarity_bins, [key for key, _ in items])
        c.ci_level, c.n_boot = ci_level, (n_boot if self.estimated else 0)
        c.seed = seed if isinstance(seed, int) else None
        return c

    def _plan(self, K: int, *, n_boot: int, seed: SeedLike, rarity_bins: int, ci_level: float) -> SamplePlan:
        """The work of `curves` of an estimated baseline (its arguments checked there)."""
        items = sorted(self._parts.items(), key=lambda kv: str(kv[0]))
        parts = [part for _, part in items]
        keys = [key for key, _ in items]
        return SamplePlan(parts, keys, K, spawn(seed, 1)[0], int(n_boot), rarity_bins, ci_level)

    def _blocks(self, plan: SamplePlan) -> Iterable[Any]:
        """The sums of each block of an estimated baseline's ``plan``, in block order (computed here)."""
        return map(plan.block, range(plan.blocks))


def _with_invalid_mass(law: Any) -> Any:
    """A valid-only law with total below 1, completed by the empty match set."""
    if not isinstance(law, Mapping):
        return law
    try:
        total = math.fsum(float(v) for v in law.values())
    except (TypeError, ValueError):
        return law  # _law_arrays names the bad value
    if not math.isfinite(total) or not 0.0 <= total < 1.0 - 1e-9:
        return law
    padded = dict(law)
    padded[frozenset()] = float(padded.get(frozenset(), 0.0)) + (1.0 - total)
    return padded


def _warn_inferred_m(baseline: IidBaseline, constructor: str) -> None:
    """One warning that M comes from the ids a constructor saw (not from declared strategies)."""
    sets = baseline.strategy_sets()
    ms = sorted({m for _, m in sets.values()})
    ids = sorted({s for names, _ in sets.values() for s in names})
    warnings.warn(
        f"IidBaseline.{constructor} without strategies= infers M from the ids it was given "
        f"(M = {', '.join(map(str, ms))}: {ids}); a declared strategy the base model never uses still "
        "counts in a monitor's M, so pass strategies=<every declared id> (or num_strategies=M)",
        UserWarning,
        stacklevel=3,
    )


def _law_curves(part: _Law, K: int, rng: np.random.Generator, mc_runs: int, n_bins: int) -> Curves:
    pi = est.marginals(part.atoms, part.p)
    ks = np.arange(1, K + 1)
    per_s = est.covered_by_strategy(pi, K)
    coverage = per_s.sum(axis=1) / part.m
    notes = []
    try:
        full = est.full_coverage_exact(part.atoms, part.p, part.m, K)
        mean_t = est.time_to_full_mean(part.atoms, part.p, part.m)
    except ValueError:  # set-valued with too many strategies: Monte Carlo below
        full, mean_t = None, None
    draws = rng.choice(len(part.p), size=(mc_runs, K), p=part.p / part.p.sum())  # first hits of iid runs
    first_atom = np.full((mc_runs, len(part.p)), K, dtype=np.int64)
    for j in range(len(part.p)):
        hit = draws == j
        first_atom[:, j] = np.where(hit.any(axis=1), hit.argmax(axis=1), K)
    fh = np.where(part.atoms[None, :, :], first_atom[:, :, None], K).min(axis=1)  # (runs, M), K: never
    # Time-to-coverage of these full-length runs: Kaplan-Meier, no censoring before K.
    never = np.iinfo(np.int64).max // 2
    sorted_fh = np.sort(np.where(fh >= K, never, fh), axis=1)
    ttc = {}
    for tau in TAUS:
        need = math.ceil(tau * part.m - 1e-9)
        t_hit = sorted_fh[:, need - 1] + 1 if need <= fh.shape[1] else np.full(mc_runs, never)  # need >= 1
        event = t_hit <= K
        time = np.where(event, t_hit, K)
        d = np.bincount(t_hit[event] - 1, minlength=K)[:K].astype(np.float64)
        at_risk = (time[:, None] >= ks[None, :]).sum(axis=0).astype(np.float64)
        hazard = np.where(at_risk > 0, d / np.where(at_risk > 0, at_risk, 1.0), 0.0)
        ttc[tau_key(tau)] = TimeToCoverage.from_survival(float(tau), np.cumprod(1.0 - hazard))
    notes.append(
        f"iid time-to-coverage for tau < 1 is Monte Carlo ({mc_runs} runs per input, standard error "
        f"<= {0.5 / math.sqrt(mc_runs):.4f} per point)"
    )
    if full is not None:
        ttc[tau_key(1.0)] = TimeToCoverage.from_survival(
            1.0, 1.0 - full, mean=None if not math.isfinite(mean_t) else mean_t
        )
    else:
        full = 1.0 - np.asarray(ttc[tau_key(1.0)].survival)
        notes.append("iid full coverage is Monte Carlo (set-valued law with more than 20 strategies)")
    novelty = est.novelty_exact(part.atoms, part.p, K)
    new = (pi[None, :] * est.pow1m(pi[None, :], (ks - 1)[:, None])).sum(axis=1)
    point = {"coverage": coverage, "novelty": novelty, "expected_new": new, "full_coverage": full}
    c = Curves.from_point("iid", K, point, ttc, n_inputs=1, notes=notes)
    bins = rarity_ranks(pi, part.m, n_bins)
    c.coverage_by_rarity = np.stack([per_s[:, bins == b].sum(axis=1) / part.m for b in range(n_bins)])
    if part.valid_atoms is not None:
        c.valid_coverage = (
            est.expected_covered_exact(est.marginals(part.valid_atoms, part.valid_p), K) / part.m
        )
        c.valid_auc = float(c.valid_coverage.mean())
    if part.valid_probability is not None:
        c.valid_at_k = 1.0 - est.pow1m(part.valid_probability, ks)
    return c


def _law_arrays(law: Mapping[Any, float], cols: list[str], where: str) -> tuple[np.ndarray, np.ndarray]:
    """Validated (atoms (J, M) bool, p (J,)) of a ``{frozenset: probability}`` law."""
    if not isinstance(law, Mapping) or not law:
        raise ValueError(f"{where}: a match distribution must be a non-empty {{frozenset: probability}} dict")
    bad = [k for k in law if isinstance(k, str) or not isinstance(k, frozenset | set | tuple)]
    if bad:
        raise ValueError(
            f"{where}: match-distribution keys must be frozensets of strategy ids, got {bad[0]!r}"
        )
    p = np.asarray(list(law.values()), dtype=np.float64)
    if p.ndim != 1 or not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(
            f"{where}: probabilities must be non-negative numbers, not NaN or infinity, got {p.tolist()}"
        )
    if abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(f"{where}: probabilities must sum to 1, they sum to {p.sum():.12g}")
    index = {s: j for j, s in enumerate(cols)}
    atoms = np.zeros((len(law), len(cols)), dtype=bool)
    for r, key in enumerate(law):
        atoms[r, [index[x] for x in frozenset(key)]] = True
    return atoms, p

"""The iid curves of an unknown law from n samples per input: U-statistics, model beyond n, intervals.

Methods, sizes and calibration: docs/statistics.md, "The iid baseline from samples".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from seffi.coverage import estimators as est
from seffi.coverage._common import _Samples, rarity_ranks
from seffi.coverage.curves import TAUS, Curves, TimeToCoverage, tau_key
from seffi.coverage.estimators import MAX_SET_STRATEGIES, pair_ids
from seffi.coverage.resampling import normal_quantile, percentile_interval, t_quantile
from seffi.coverage.sums_curves import rarity_labels


def _novelty_beyond_n(novelty: np.ndarray, expected_new: np.ndarray, n: int) -> np.ndarray:
    """Novelty (..., n) extended to (..., K): expected new strategies times the Pr[new] / E[new] at n."""
    at_n = expected_new[..., n - 1]
    ratio = np.where(at_n > 0, novelty[..., -1] / np.where(at_n > 0, at_n, 1.0), 1.0)
    return np.concatenate([novelty, np.clip(expected_new[..., n:] * ratio[..., None], 0.0, 1.0)], axis=-1)


def _covered_from_counts(Y: np.ndarray, n: int, m: int, K: int) -> np.ndarray:
    """Estimated E|S_k|, k = 1..K, from counts Y (..., m): rarefaction to n, Chao beyond, <= m."""
    covered = est.rarefaction_counts(Y, n, K)
    if K > n:
        covered = np.concatenate([covered, est.chao_extrapolation_counts(Y, n, K, m)], axis=-1)
    return np.minimum(covered, m)


def _chao(rows: np.ndarray, n: int, unseen: np.ndarray | None = None) -> tuple:
    """(f0, undetected mass (D,), detected probabilities (D, m)) of counts ``rows`` (D, m) out of n."""
    f1 = (rows == 1).sum(axis=1).astype(np.float64)
    f2 = (rows == 2).sum(axis=1).astype(np.float64)
    f0 = est.chao_f0_array(n, f1, f2)
    # (D,): the datasets with an undetected mass (default: those where Chao1 expects unseen strategies)
    unseen = (np.ceil(f0 - 1e-9) > 0 if unseen is None else unseen) & (f0 > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(unseen & (f1 > 0), f1 / n * (n * f0 / (n * f0 + f1)), 0.0)
    rel = rows / n
    tail = (1.0 - rel) ** n
    b = (rel * tail).sum(axis=1)
    w = np.where((a > 0) & (b > 0), a / np.where(b > 0, b, 1.0), 0.0)
    return f0, a, rel * (1.0 - w[:, None] * tail)


def assemblage(Y: np.ndarray, n: int, single: np.ndarray | bool) -> np.ndarray:
    """The iNEXT bootstrap assemblages of datasets from their incidence counts (Chao et al. 2014, App. S2).

    Args:
        Y: (D, m) or (m,): per-strategy incidence counts out of n samples.
        n: samples per dataset.
        single: (D,) bool (or a bool): single-label (abundance: "matches nothing" is a category) or
            set-valued (incidence).

    Returns:
        (D, m + U + 1) (or (m + U + 1,)): strategy j's probability (j < m), U unseen strategies
        sharing the undetected mass (U the largest ceil(f0)), then "matches nothing" (abundance) or 0.
    """
    Y = np.asarray(Y, dtype=np.int64)
    rows = np.atleast_2d(Y)
    single = np.broadcast_to(np.asarray(single, dtype=bool), rows.shape[:1])
    f0, a, detected = _chao(rows, n)
    unseen = np.ceil(f0 - 1e-9).astype(np.int64)
    U = int(unseen.max(initial=0))
    out = np.zeros((rows.shape[0], rows.shape[1] + U + 1))
    out[:, : rows.shape[1]] = detected
    slot = np.arange(U)[None, :] < unseen[:, None]
    out[:, rows.shape[1] : -1] = np.where(slot, a[:, None] / np.maximum(unseen, 1)[:, None], 0.0)
    out[:, -1] = np.where(single, np.maximum(1.0 - (rows / n).sum(axis=1), 0.0), 0.0)
    out = np.clip(out, 0.0, 1.0)
    out[single] /= out[single].sum(axis=1, keepdims=True)
    return out if Y.ndim == 2 else out[0]


def model_law(Y: np.ndarray, n: int, m: int, single: np.ndarray | bool) -> np.ndarray:
    """q_s (..., m), the probability that a sample matches column s, fitted to incidence counts Y (..., m).

    ``single`` (broadcast to Y's leading shape): a categorical law (remainder: "matches nothing").
    """
    Y = np.asarray(Y, dtype=np.int64)
    rows = Y.reshape(-1, Y.shape[-1])
    single = np.broadcast_to(np.asarray(single, dtype=bool), Y.shape[:-1]).reshape(-1)
    u = (rows == 0).sum(axis=1)
    _, a, detected = _chao(rows, n, u > 0)
    prior = np.where(single, 1.0 / (n + m), 1.0 / (n + 2))  # uniform-prior posterior mean of an unseen one
    r = np.where(u > 0, np.where(a > 0, a / np.maximum(u, 1), prior), 0.0)
    q = np.clip(np.where(rows > 0, detected, r[:, None]), 0.0, 1.0)
    tot = q.sum(axis=1)
    over = single & (tot > 1.0)
    q[over] /= tot[over, None]
    return q.reshape(Y.shape)


def _missing_found(
    u: np.ndarray, r: np.ndarray, J: int, single: np.ndarray, short: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(Pr[all u found] (D, J), Pr[fewer than short[i] found] (len(short), D, J)) after j = 1..J draws."""
    D, N = u.shape[0], short.shape[0]
    full, surv = np.zeros((D, J)), np.ones((N, D, J))
    with np.errstate(divide="ignore"):  # r = 1: log1p(-1) = -inf
        log_miss = np.log1p(-np.minimum(r, 1.0))
    mu = u * -np.expm1(J * log_miss)
    bound = np.ceil(mu + 50.0 / 3.0 + np.sqrt((50.0 / 3.0) ** 2 + 100.0 * mu))  # t^2 = 100 (mu + t / 3)
    reach = u <= bound  # finding all u has a chance above e^-50
    needed = reach | (N > 0)
    U = int(np.where(needed, np.minimum(u, bound), 0).max(initial=0))
    f = np.arange(U + 1)
    below = f[None, None, :] < short[:, :, None]  # (N, D, U + 1)
    j = np.arange(1, J + 1, dtype=np.float64)
    s = np.flatnonzero(~single & needed)
    if s.size:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # f > u: masked below
            pj = -np.expm1(j[None, :] * log_miss[s][:, None])  # (Ds, J)
            full[s] = np.where(pj >= 1.0, 1.0, np.exp(u[s][:, None] * np.log(pj)))
            if N:
                lf = est.log_factorial(int(u.max(initial=0)))
                uu = u[s][:, None, None]
                ok = f[None, None, :] <= uu
                ff = np.where(ok, f[None, None, :], 0)
                logp = (
                    lf[uu]
                    - lf[ff]
                    - lf[np.where(ok, uu - ff, 0)]
                    + ff * np.log(pj[:, :, None])
                    + (uu - ff) * np.log1p(-pj[:, :, None])
                )
                pmf = np.where(ok, np.exp(np.where(np.isnan(logp), -np.inf, logp)), 0.0)
                pmf = np.where(ok & (pj[:, :, None] >= 1.0), (ff == uu).astype(np.float64), pmf)
                surv[:, s] = np.einsum("djf,ndf->ndj", pmf, below[:, s])
    s = np.flatnonzero(single & needed)
    if s.size:
        P = np.zeros((s.size, U + 1))
        P[:, 0] = 1.0
        step = np.clip((u[s][:, None] - f[None, :]) * r[s][:, None], 0.0, 1.0)  # Pr[new | f found]
        at = np.minimum(u[s], U)
        mask = below[:, s].transpose(1, 2, 0).astype(np.float64)  # (Ds, U + 1, N)
        rows = np.arange(s.size)
        for i in range(J):
            moved = P * step
            P = P - moved
            P[:, 1:] += moved[:, :-1]
            full[s, i] = P[rows, at]
            if N:
                surv[:, s, i] = np.einsum("df,dfn->nd", P, mask)
        full[s] = np.where(reach[s, None], full[s], 0.0)
    return full, surv


def _beyond_n(Y: np.ndarray, n: int, m: int, single: np.ndarray, J: int, needs: list[int]) -> tuple:
    """(full (D, J), survival (len(needs), D, J)) at k = n + 1..n + J: the unseen found under `model_law`."""
    Y = np.asarray(Y, dtype=np.int64)
    s_obs = (Y > 0).sum(axis=1)
    u = m - s_obs
    q = model_law(Y, n, m, single)
    r = np.where(u > 0, np.where(Y == 0, q, 0.0).max(axis=1), 0.0)
    short = np.array([need - s_obs for need in needs], dtype=np.int64).reshape(len(needs), len(u))
    full, surv = _missing_found(u, r, J, single, short)
    full = np.where(u[:, None] == 0, 1.0, full)
    return np.clip(full, 0.0, 1.0), np.clip(surv, 0.0, 1.0)


def _assemblage_counts(
    P: np.ndarray, n: int, single: np.ndarray, rng: np.random.Generator, B: int
) -> np.ndarray:
    """Incidence counts (D, B, L) of B datasets of n samples from each law P (D, L + 1), "nothing" last."""
    D, L = P.shape[0], P.shape[1] - 1
    out = np.zeros((D, B, L), dtype=np.int64)
    if single.any():
        out[single] = rng.multinomial(n, P[single], size=(B, int(single.sum())))[..., :-1].swapaxes(0, 1)
    if (~single).any():
        out[~single] = _binomial(n, P[~single, :-1], rng, B).swapaxes(0, 1)
    return out


def _draw_counts(q: np.ndarray, single: np.ndarray, n: int, rng: np.random.Generator, B: int) -> np.ndarray:
    """Incidence counts (D, B, m) of B datasets of n samples from each per-column law q (D, m)."""
    P = np.column_stack([q, np.maximum(0.0, 1.0 - q.sum(axis=1))])  # "matches nothing" last
    P[single] /= P[single].sum(axis=1, keepdims=True)
    return _assemblage_counts(P, n, single, rng, B)


#: Largest n drawn by ``_binomial``'s table (one pass over the draws per count 0..n-1).
TABLE_BINOMIAL_N = 64


def _binomial(n: int, p: np.ndarray, rng: np.random.Generator, B: int) -> np.ndarray:
    """B draws (B, *p.shape) of Binomial(n, p) per p, by inversion of the cdf (3x ``rng.binomial``)."""
    if n > TABLE_BINOMIAL_N:
        return rng.binomial(n, p, size=(B, *p.shape))
    j, lf = np.arange(n + 1), est.log_factorial(n)
    log_binom = lf[n] - lf[j] - lf[n - j]
    with np.errstate(divide="ignore", invalid="ignore"):  # p = 0 or 1: log 0 = -inf, and 0 * -inf is 0
        log_p, log_q = np.log(p)[..., None], np.log1p(-p)[..., None]
        log_pmf = log_binom + np.where(j == 0, 0.0, j * log_p) + np.where(j == n, 0.0, (n - j) * log_q)
    cdf = np.cumsum(np.exp(log_pmf[..., :-1]), axis=-1)  # P[X <= j], j = 0..n-1
    u = rng.random((B, *p.shape))
    count = np.zeros(u.shape, dtype=np.uint8)
    below = np.empty(u.shape, dtype=bool)
    for k in range(n):
        np.greater(u, cdf[..., k], out=below)
        count += below.view(np.uint8)
    return count.astype(np.int64)


def inext_coverage_replicates(
    X: np.ndarray, m: int, K: int, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap replicates C(k) (B, K) or (D, B, K) of the estimated coverage of X (n, m) or (D, n, m).

    ``n_boot`` datasets drawn from each dataset's iNEXT ``assemblage``, the estimator recomputed on each.
    """
    X = np.asarray(X, dtype=bool)
    Xs = X[None] if X.ndim == 2 else X
    n = Xs.shape[1]
    Y, single = est.incidence(Xs)
    P = assemblage(Y, n, single)
    # Without singletons the unseen strategies get a uniform prior's posterior mean (as ``model_law``),
    # not a zero-width interval: that removed the worst calibration misses (5-30 sd at k = n).
    empty = (P[:, m:-1].sum(axis=1) == 0) & (Y == 0).any(axis=1)
    if empty.any():
        prior = np.where(single[empty], 1.0 / (n + m), 1.0 / (n + 2))[:, None]
        P[empty, :m] = np.where(Y[empty] == 0, prior, P[empty, :m])
        fix = empty & single
        P[fix] /= np.maximum(P[fix].sum(axis=1, keepdims=True), 1.0)
    reps = _covered_from_counts(_assemblage_counts(P, n, single, rng, n_boot), n, m, K) / m
    return reps[0] if X.ndim == 2 else reps


def _set_datasets(X: np.ndarray, unseen: np.ndarray, rng: np.random.Generator, B: int) -> np.ndarray:
    """B datasets (D, B, n, c) from the abundance assemblage of the distinct match sets of X (D, n, c)."""
    D, n, c = X.shape
    # Distinct match sets in np.unique(X[d], axis=0)'s order: column 0 the most significant bit.
    key = X.astype(np.int64) @ np.left_shift(np.int64(1), np.arange(c - 1, -1, -1, dtype=np.int64))
    _, set_d, set_key, mult = est.distinct_sets(key)
    sizes = np.bincount(set_d, minlength=D)
    slot = np.arange(set_d.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    counts = np.zeros((D, int(sizes.max())), dtype=np.int64)
    counts[set_d, slot] = mult
    P = assemblage(counts, n, True)
    atoms = np.zeros((D, P.shape[1], c), dtype=bool)
    atoms[set_d, slot] = (set_key[:, None] >> np.arange(c - 1, -1, -1)) & 1
    U = P.shape[1] - counts.shape[1] - 1
    n_unseen = unseen.sum(axis=1)
    if U and n_unseen.any():
        order = np.argsort(~unseen, axis=1, kind="stable")  # unseen columns first, in column order
        col = np.take_along_axis(order, np.arange(U)[None, :] % np.maximum(n_unseen, 1)[:, None], axis=1)
        d, t = np.nonzero(np.broadcast_to(n_unseen[:, None] > 0, (D, U)))
        atoms[d, counts.shape[1] + t, col[d, t]] = True
    cdf = np.cumsum(P / P.sum(axis=1, keepdims=True), axis=1)
    cdf /= cdf[:, -1:]
    # One sorted search for all inputs: input d's cdf and uniforms shifted by 2d.
    shift = 2.0 * np.arange(D)
    idx = np.searchsorted(
        (cdf + shift[:, None]).ravel(), rng.random((D, B, n)) + shift[:, None, None], "right"
    )
    idx = np.clip(idx - (np.arange(D) * P.shape[1])[:, None, None], 0, P.shape[1] - 1)
    return atoms[np.arange(D)[:, None, None], idx]


#: Replicates behind the sd of set-valued novelty (tiled to ``n_boot``).
NOVELTY_REPLICATES = 32
#: Curve fields whose interval is estimate +- z sd of centred replicates (iNEXT), with their upper bound.
_SD_CAPS = {"coverage": 1.0, "novelty": 1.0, "expected_new": math.inf, "valid_coverage": 1.0}
#: Bytes of working arrays per chunk of inputs: the bootstrap's memory does not grow with the inputs.
CHUNK_BYTES = 64 << 20
#: Sample orders per input behind time to coverage at tau < 1 (20,000 in all, 16 to 256 each).
TTC_RUNS, TTC_TOTAL_RUNS, TTC_MIN_RUNS = 256, 20_000, 16
#: Chunks per block of `SamplePlan`: each block draws from its own streams, so the curves are the
#: same whichever process computes which block.
BLOCK_CHUNKS = 8


class SamplePlan:
    """The mean curves over inputs estimated from samples (``IidBaseline.curves``), as blocks of work.

    ``plan.curves(map(plan.block, range(plan.blocks)))``; any block may be computed in another process.
    Inputs go in chunks of equal (n, m), keeping sums over inputs: memory is bounded by `CHUNK_BYTES`.
    Block 0 draws from ``seed.spawn(4)``, block b > 0 from the b-th child of each.
    """

    def __init__(
        self,
        parts: list[_Samples],
        keys: list[str | None],
        K: int,
        seed: np.random.SeedSequence,
        n_boot: int,
        n_bins: int,
        ci_level: float,
    ) -> None:
        self.parts, self.keys, self.K, self.n_boot, self.n_bins = parts, keys, K, n_boot, n_bins
        self.ci_level = ci_level
        self.seeds = seed.spawn(4)
        self.runs = max(TTC_MIN_RUNS, min(TTC_RUNS, TTC_TOTAL_RUNS // len(parts)))
        self.k_wilson = min(p.X.shape[0] for p in parts)
        groups: dict[tuple[int, int, bool], list[int]] = {}
        for i, part in enumerate(parts):
            groups.setdefault((part.X.shape[0], part.m, part.valid is not None), []).append(i)
        #: Each chunk's inputs (one (n, m, valid) group), in order.
        self.chunks: list[list[int]] = []
        for (n, m, _), members in groups.items():
            kn = min(K, n)
            # Bytes per input of the largest working arrays.
            per_input = 8 * (
                max(n_boot, 1) * (m * (kn + 12) + 24 * K)
                + self.runs * (n + 3 * kn + 8)
                + 3 * K * m
                + n * m
                + 6 * (kn + 1) * min(kn + 1, 256)
            )
            step = int(max(1, CHUNK_BYTES // per_input))
            self.chunks.extend(members[a : a + step] for a in range(0, len(members), step))
        self.blocks = -(-len(self.chunks) // BLOCK_CHUNKS)

    def block(self, b: int) -> _Sums:
        """The sums of block ``b``'s chunks."""
        seeds = (
            self.seeds
            if b == 0
            else [np.random.SeedSequence(s.entropy, spawn_key=(*s.spawn_key, b)) for s in self.seeds]
        )
        streams = [np.random.default_rng(s) for s in seeds]
        acc = _Sums(len(self.parts), self.K)
        for idx in self.chunks[b * BLOCK_CHUNKS : (b + 1) * BLOCK_CHUNKS]:
            parts = [self.parts[i] for i in idx]
            X = np.stack([p.X for p in parts])
            valid = np.stack([p.valid for p in parts]) if parts[0].valid is not None else None
            self._chunk(acc, idx, X, valid, parts[0].m, streams)
        return acc

    def curves(self, blocks: Iterable[_Sums]) -> Curves:
        """The curves from every block's sums, given in block order."""
        acc = _Sums(len(self.parts), self.K)
        for part in blocks:
            acc.merge(part)
        trials = full_trials(np.array([p.X.shape[0] for p in self.parts]), self.K)
        mean = {name: v / acc.U for name, v in acc.arrays.items()}
        auc, valid_auc = np.zeros(acc.U), np.full(acc.U, np.nan)
        for into, parts in ((auc, acc.aucs), (valid_auc, acc.valid_aucs)):
            for idx, values in parts:
                into[idx] = values
        ttc = {key: TimeToCoverage.from_survival(float(key), s / acc.U) for key, s in acc.survival.items()}
        c = Curves.from_point(
            "iid_estimated",
            self.K,
            mean,
            ttc,
            n_inputs=acc.U,
            n_runs=acc.U,
            samples=acc.samples,
            coverage_by_rarity=mean["coverage_by_rarity"],
            rarity_bins=rarity_labels(self.n_bins),
            extrapolated=np.arange(1, self.K + 1) > acc.n_min,
            notes=sorted(acc.notes),
        )
        c.auc = float(auc.mean())
        if "valid_coverage" in mean and not np.isnan(valid_auc).any():
            c.valid_coverage, c.valid_at_k = mean["valid_coverage"], mean["valid_at_k"]
            c.valid_auc = float(c.valid_coverage.mean())
            c.input_valid_auc = valid_auc
        if all(k is not None for k in self.keys):
            # Baselines do not know the task: their inputs are matched to a policy's by id.
            c.input_keys = [(None, str(k)) for k in self.keys]
            c.input_auc = auc
        if acc.reps:
            reps = {name: v / acc.U for name, v in acc.reps.items()}
            if "valid_auc" in reps and c.valid_auc is None:
                reps = {k: v for k, v in reps.items() if not k.startswith("valid_")}
            _set_intervals(c, reps, self.ci_level, trials)
            c.n_boot = self.n_boot
        return c

    def _chunk(
        self, acc: _Sums, idx: list[int], X: np.ndarray, valid: np.ndarray | None, m: int, streams: list
    ) -> None:
        """Add the curves and replicates of D inputs X (D, n, m) (and their ``valid`` (D, n)) to ``acc``."""
        K, runs, n_bins = self.K, self.runs, self.n_bins
        D, n = X.shape[:2]
        kn = min(K, n)
        Y, single = est.incidence(X)
        # Curves (D, K): unbiased to n, model-based beyond (flagged as extrapolated).
        count = _covered_from_counts(Y, n, m, K)
        expected_new = np.diff(count, axis=1, prepend=0.0)
        novelty = est.novelty_samples_many(X, K)
        full = est.full_coverage_samples_many(X, m, K)
        acc.n_min, acc.samples = min(acc.n_min, n), acc.samples + D * n
        if K > n:
            novelty = _novelty_beyond_n(novelty, expected_new, n)
            full = np.concatenate([full, _beyond_n(Y, n, m, single, K - n, [])[0]], axis=1)
            acc.notes.add(
                f"iid (estimated) values beyond k = n = {n} are model-based extrapolations: coverage by "
                "Chao et al. 2014, full coverage and time to coverage from the estimated law of the unseen "
                "strategies"
            )
        if not single.all() and m > est.EXACT_SET_STRATEGIES:
            acc.notes.add(
                f"iid (estimated) full coverage at k <= n is Monte Carlo over {est.PERMUTATIONS} random "
                f"orders of the samples (set-valued, more than {est.EXACT_SET_STRATEGIES} strategies; "
                f"standard error <= {0.5 / math.sqrt(est.PERMUTATIONS):.3f})"
            )
        acc.notes.add(
            f"iid (estimated) time-to-coverage for tau < 1 and k <= n is Monte Carlo over {runs} sample "
            f"permutations per input ({runs * acc.U} in all)"
        )
        point = dict(coverage=count / m, expected_new=expected_new, novelty=novelty, full_coverage=full)
        for name, v in point.items():
            acc.add(name, v.sum(axis=0))
        acc.aucs.append((idx, point["coverage"].mean(axis=1)))
        # Time to coverage at k <= n by random orders (tau < 1) or F (tau = 1); beyond n by the model.
        needs = [math.ceil(tau * m - 1e-9) for tau in TAUS]
        covered = _covered_by_prefixes(X, Y > 0, runs, kn, streams[0])  # (D, runs, kn)
        beyond = _beyond_n(Y, n, m, single, K - n, needs)[1] if K > n else None
        for i, tau in enumerate(TAUS):
            surv = 1.0 - point["full_coverage"][:, :kn] if tau == 1.0 else (covered < needs[i]).mean(axis=1)
            if beyond is not None:
                surv = np.concatenate([surv, beyond[i]], axis=1)
            acc.survival[tau_key(tau)] += np.clip(surv, 0.0, 1.0).sum(axis=0)
        # Per-strategy rarefied contributions, binned by incidence frequency (ranking only).
        lf = est.log_factorial(n)
        kk = np.arange(1, kn + 1)
        per_s = -np.expm1(est._log_binom_ratio(n - Y[:, None, :], n, kk[None, :, None], lf))  # (D, kn, m)
        if K > n:
            per_s = np.concatenate([per_s, np.repeat(per_s[:, -1:], K - n, axis=1)], axis=1)
        bins = rarity_ranks(Y / n, m, n_bins)
        by_rarity = np.stack([(per_s * (bins == b)[:, None, :]).sum(axis=2) / m for b in range(n_bins)], 1)
        if K > n:
            # Beyond n only unseen strategies are found, and they rank rarest: the gain goes to the last bin.
            by_rarity[:, -1, n:] += point["coverage"][:, n:] - by_rarity[:, :, n:].sum(axis=1)
        acc.add("coverage_by_rarity", by_rarity.sum(axis=0))
        Xv = None
        if valid is not None:
            Xv = X & valid[:, :, None]
            vcov = _covered_from_counts(Xv.sum(axis=1), n, m, K) / m
            acc.add("valid_coverage", vcov.sum(axis=0))
            acc.valid_aucs.append((idx, vcov.mean(axis=1)))
            nv = valid.sum(axis=1)
            va = -np.expm1(est._log_binom_ratio(n - nv[:, None], n, kk[None, :], lf))
            if K > n:  # given the data: 1 if a sample was correct, else a correct one in the next j draws
                rate = 1.0 / (n + 2)  # uniform-prior posterior mean of a rate never seen in n samples
                more = -np.expm1(np.arange(1, K - n + 1) * math.log1p(-rate))
                va = np.concatenate([va, np.where(nv[:, None] > 0, 1.0, more[None, :])], axis=1)
            acc.add("valid_at_k", va.sum(axis=0))
            point["valid_coverage"] = vcov
        if self.n_boot > 0:
            self._replicates(acc, X, Xv, point, m, streams[1:])

    def _replicates(
        self, acc: _Sums, X: np.ndarray, Xv: np.ndarray | None, point: dict, m: int, streams: list
    ) -> None:
        """Add the bootstrap replicates (B, K) of D inputs, summed over inputs, to ``acc.reps``."""
        K, B, k_wilson = self.K, self.n_boot, self.k_wilson
        boot_rng, model_rng, valid_rng = streams
        Y, single = est.incidence(X)
        D, n = X.shape[:2]
        kn = min(K, n)
        reps: dict[str, np.ndarray] = {}
        cov = inext_coverage_replicates(X, m, K, B, boot_rng)  # (D, B, K)
        # F (and set-valued novelty's second world) from the model law refitted to its own datasets.
        q = model_law(Y, n, m, single)
        Yb = _draw_counts(q, single, n, model_rng, B)
        # The coverage sd is the larger of the two models of the unseen strategies (the assemblage
        # alone covered C(n) of a Zipf(1.5) law, M = 20, n = 40, 0.90 instead of 0.93).
        cov_model = _covered_from_counts(Yb, n, m, K) / m
        reps["coverage"] = _widen(cov, cov_model, axis=1)
        reps["expected_new"] = np.diff(reps["coverage"] * m, axis=2, prepend=0.0)
        # Pr[new] = E[new] sample by sample for single-label data: the two U-statistics coincide.
        reps["novelty"] = np.clip(reps["expected_new"], 0.0, 1.0)
        sv = np.flatnonzero(~single)
        if sv.size:
            reps["novelty"][sv] = _set_novelty_replicates(
                X[sv], q[sv], reps["expected_new"][sv], K, B, model_rng, self.ci_level
            )
        # At k <= the smallest n F(k)'s interval is Wilson's: there the replicates hold the estimate.
        full = np.broadcast_to(point["full_coverage"][:, None, :kn], (D, B, kn)).copy()
        if kn > k_wilson:
            # F(k) ~ prod_s 1 - (1 - q_s)^k under the refitted laws q (exact if the columns are independent).
            qb = model_law(Yb, n, m, np.repeat(single[:, None], B, axis=1))
            ks = np.arange(k_wilson + 1, kn + 1, dtype=np.float64)
            with np.errstate(divide="ignore"):  # q = 1: log1p(-1) = -inf, and the factor is 1 as it should be
                miss = np.log1p(-np.minimum(qb, 1.0))[..., None]
            full[:, :, k_wilson:] = np.clip(np.prod(-np.expm1(ks * miss), axis=2), 0.0, 1.0)
        if K > n:
            extra = _beyond_n(Yb.reshape(D * B, m), n, m, np.repeat(single, B), K - n, [])[0]
            full = np.concatenate([full, extra.reshape(D, B, K - n)], axis=2)
        reps["full_coverage"] = full
        if Xv is not None:
            reps["valid_coverage"] = inext_coverage_replicates(Xv, m, K, B, valid_rng)
        for name in list(reps):
            if name in _SD_CAPS:  # centred: iNEXT is point +- z sd
                centred = reps[name] - reps[name].mean(axis=1, keepdims=True)
                centred += point[name][:, None, :]
                reps[name] = centred
        reps["auc"] = _widen(reps["coverage"].mean(axis=2), cov_model.mean(axis=2), axis=1)
        if "valid_coverage" in reps:
            reps["valid_auc"] = reps["valid_coverage"].mean(axis=2)
        for name, r in reps.items():
            acc.add(name, r.sum(axis=0), acc.reps)


class _Sums:
    """Sums over inputs of per-input curves and replicates; each input's AUC in input order."""

    def __init__(self, U: int, K: int) -> None:
        self.U = U
        self.arrays: dict[str, np.ndarray] = {}
        self.reps: dict[str, np.ndarray] = {}
        self.survival = {tau_key(t): np.zeros(K) for t in TAUS}
        #: (input indices, their AUCs) and (input indices, their valid AUCs) of each chunk.
        self.aucs: list[tuple[list[int], np.ndarray]] = []
        self.valid_aucs: list[tuple[list[int], np.ndarray]] = []
        self.n_min, self.samples, self.notes = K + 1, 0, set()

    def add(self, name: str, total: np.ndarray, into: dict[str, np.ndarray] | None = None) -> None:
        """Add ``total`` (a sum over inputs) to the sum of ``name`` in ``into`` (default: the curves)."""
        into = self.arrays if into is None else into
        into[name] = into[name] + total if name in into else total

    def merge(self, other: _Sums) -> None:
        """Add another block's sums (after this one's)."""
        for mine, theirs in ((self.arrays, other.arrays), (self.reps, other.reps)):
            for name, total in theirs.items():
                self.add(name, total, mine)
        for key, s in other.survival.items():
            self.survival[key] += s
        self.aucs += other.aucs
        self.valid_aucs += other.valid_aucs
        self.n_min, self.samples = min(self.n_min, other.n_min), self.samples + other.samples
        self.notes |= other.notes


def _set_novelty_replicates(
    X: np.ndarray,
    q: np.ndarray,
    expected_new: np.ndarray,
    K: int,
    B: int,
    rng: np.random.Generator,
    ci_level: float,
) -> np.ndarray:
    """Set-valued novelty replicates (D, B, K) of D inputs X (D, n, m) with model laws q (D, m)."""
    D, n, _ = X.shape
    b_nov = min(B, NOVELTY_REPLICATES)
    # The columns drawn (D, c): the seen ones, then unseen ones in column order, at most 62 in all.
    used = X.any(axis=1)
    s_obs = used.sum(axis=1)
    room = np.minimum(X.shape[2] - s_obs, MAX_SET_STRATEGIES - s_obs)
    keep = used | (np.cumsum(~used, axis=1) <= room[:, None])
    c = int(keep.sum(axis=1).max(initial=1))
    cols = np.argsort(~keep, axis=1, kind="stable")[:, :c]
    kept = np.take_along_axis(keep, cols, axis=1)
    unseen = kept & ~np.take_along_axis(used, cols, axis=1)
    qc = np.where(kept, np.take_along_axis(q, cols, axis=1), 0.0)
    Xc = np.take_along_axis(X, cols[:, None, :], axis=2)

    def novelty(worlds: np.ndarray) -> np.ndarray:
        return est.novelty_samples_many(worlds.reshape(D * b_nov, n, c), K).reshape(D, b_nov, -1)

    nov = novelty(_set_datasets(Xc, unseen, rng, b_nov))
    other = novelty(rng.random((D, b_nov, n, c)) < qc[:, None, None, :])
    nov = _rescale(nov, other, 1, lambda a, b: np.sqrt((a**2 + b**2) / 2))  # the pooled sd
    if b_nov > 1:
        z = normal_quantile(ci_level)
        mean = nov.mean(axis=1, keepdims=True)
        nov = mean + (nov - mean) * (t_quantile(ci_level, b_nov - 1) / z)
    nov = jackknife_novelty_sd(Xc, np.take(nov, np.arange(B) % b_nov, axis=1), ci_level, rng)
    return _novelty_beyond_n(nov, expected_new, n) if K > n else nov


def _covered_by_prefixes(
    X: np.ndarray, used: np.ndarray, runs: int, kn: int, rng: np.random.Generator
) -> np.ndarray:
    """Strategies covered (D, runs, kn) by the first 1..kn samples of ``runs`` random orders of each input."""
    D, n = X.shape[:2]
    pos = np.cumsum(used, axis=1) - 1  # each used column's bit among its input's used columns
    W = max((int(pos[:, -1].max(initial=0)) + 64) // 64, 1)
    bit = np.left_shift(np.uint64(1), (pos % 64).astype(np.uint64))
    Xu = X.astype(np.uint64)
    # Distinct bits: a sample's sum over its columns is their OR.
    words = np.stack(
        [
            np.einsum("dnm,dm->dn", Xu, np.where(used & (pos // 64 == w), bit, np.uint64(0))).ravel()
            for w in range(W)
        ]
    )
    R = D * runs
    small = np.int16 if n <= np.iinfo(np.int16).max else np.int64
    perm = np.tile(np.arange(n, dtype=small), R)
    base = np.arange(R, dtype=np.int64) * n
    owner = np.repeat(np.arange(D, dtype=np.int64) * n, runs)
    t = np.arange(kn)
    swap = base[None, :] + t[:, None] + (rng.random((kn, R)) * (n - t)[:, None]).astype(np.int64)
    union = np.zeros((W, R), dtype=np.uint64)
    out = np.empty((kn, R), dtype=np.int64)
    for t in range(kn):
        j = swap[t]
        here, there = perm[base + t], perm[j]
        perm[j] = here
        rows = owner + there
        for w in range(W):
            union[w] |= words[w, rows]
        out[t] = np.bitwise_count(union[0]) if W == 1 else np.bitwise_count(union).sum(axis=0)
    return out.T.reshape(D, runs, kn)


def _rescale(reps: np.ndarray, other: np.ndarray, axis: int, target: Any) -> np.ndarray:
    """Replicates scaled about their mean over ``axis`` to sd ``target(sd, other's sd)`` (flat: other's)."""
    sd, sd_other = reps.std(axis=axis, keepdims=True), other.std(axis=axis, keepdims=True)
    want, mean = target(sd, sd_other), reps.mean(axis=axis, keepdims=True)
    scaled = mean + (reps - mean) * (want / np.where(sd > 0, sd, 1.0))
    alt = mean + (other - other.mean(axis=axis, keepdims=True)) * (
        want / np.where(sd_other > 0, sd_other, 1.0)
    )
    return np.where(sd > 0, scaled, alt)


def _widen(reps: np.ndarray, other: np.ndarray, axis: int = 0) -> np.ndarray:
    """Replicates scaled about their mean over ``axis`` to at least the sd of ``other``."""
    return _rescale(reps, other, axis, np.maximum)


def wilson_interval(p: np.ndarray, trials: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of p from ``trials`` Bernoulli trials, Clopper-Pearson at p = 0 and 1."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    t = np.maximum(np.asarray(trials, dtype=np.float64), 1.0)
    den = 1.0 + z * z / t
    centre = (p + z * z / (2 * t)) / den
    half = z / den * np.sqrt(p * (1 - p) / t + z * z / (4 * t * t))
    lo, hi = centre - half, centre + half
    tail = (1.0 - math.erf(z / math.sqrt(2))) / 2  # alpha / 2
    edge = tail ** (1.0 / t)
    lo = np.where(p <= 0.0, 0.0, np.where(p >= 1.0, edge, lo))
    hi = np.where(p >= 1.0, 1.0, np.where(p <= 0.0, 1.0 - edge, hi))
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def full_trials(n: int | np.ndarray, K: int) -> np.ndarray:
    """Hoeffding's effective trials behind F(k), floor(n / k) summed over inputs (0 beyond n): (K,)."""
    ns = np.atleast_1d(np.asarray(n, dtype=np.int64))
    k = np.arange(1, K + 1)
    per = ns[:, None] // k[None, :]
    return np.where((per > 0).all(axis=0), per.sum(axis=0), 0).astype(np.float64)


def _set_intervals(c: Curves, reps: Mapping[str, np.ndarray], level: float, trials: np.ndarray) -> None:
    """Set ``*_lo``/``*_hi`` (and ``auc_reps``) from replicates; F(k) Wilson where ``trials`` (K,) >= 1."""
    z = normal_quantile(level)

    def sd_interval(point: np.ndarray, r: np.ndarray, hi_cap: float) -> tuple[np.ndarray, np.ndarray]:
        sd = np.std(r, axis=0, ddof=1) if len(r) > 1 else np.zeros(np.shape(point))
        return np.clip(point - z * sd, 0.0, hi_cap), np.clip(point + z * sd, 0.0, hi_cap)

    for name, cap in _SD_CAPS.items():
        if name in reps:
            lo, hi = sd_interval(getattr(c, name), reps[name], cap)
            setattr(c, f"{name}_lo", lo)
            setattr(c, f"{name}_hi", hi)
    if "full_coverage" in reps:  # percentile interval of uncentred model replicates, holding the estimate
        pt = np.asarray(c.full_coverage, dtype=np.float64)
        lo, hi = percentile_interval(reps["full_coverage"], level, skip_nan=False)
        lo, hi = np.minimum(lo, pt), np.maximum(hi, pt)
        wlo, whi = wilson_interval(pt, trials, z)
        lo, hi = np.where(trials >= 1, wlo, lo), np.where(trials >= 1, whi, hi)
        c.full_coverage_lo, c.full_coverage_hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    for prefix in ("", "valid_"):
        if f"{prefix}auc" in reps:
            r = reps[f"{prefix}auc"]
            lo, hi = sd_interval(np.asarray(getattr(c, f"{prefix}auc")), r, 1.0)
            setattr(c, f"{prefix}auc_reps", r)
            setattr(c, f"{prefix}auc_lo", float(lo))
            setattr(c, f"{prefix}auc_hi", float(hi))


def jackknife_novelty_sd(
    X: np.ndarray, reps: np.ndarray, level: float, rng: np.random.Generator
) -> np.ndarray:
    """Set-valued novelty replicates (D, B, min(K, n)) rescaled to the delete-one jackknife sd at i <= n / 2.

    The jackknife sd of each input X[d] is widened by t_{n-1} / z; ``rng`` draws signs where the
    replicates do not vary.
    """
    n = X.shape[1]
    half = min(n // 2, reps.shape[2])
    if n < 3 or half < 1 or reps.shape[1] < 2:
        return reps
    jack = delete_one_novelty(X, half)
    sd = np.sqrt((n - 1) / n * ((jack - jack.mean(axis=1, keepdims=True)) ** 2).sum(axis=1))
    sd *= t_quantile(level, n - 1) / normal_quantile(level)
    cols = reps[:, :, :half]
    mean = cols.mean(axis=1, keepdims=True)
    dev = cols - mean
    # Replicates that do not move (rare): random signs, independent across inputs.
    flat = dev.std(axis=1, ddof=1) <= 0
    if flat.any():
        signs = rng.choice([-1.0, 1.0], size=(reps.shape[1], int(flat.sum())))
        d, j = np.nonzero(flat)
        dev[d, :, j] = (signs - signs.mean(axis=0)).T
    scale = sd / np.maximum(dev.std(axis=1, ddof=1), 1e-300)
    out = reps.copy()
    out[:, :, :half] = mean + dev * scale[:, None, :]
    return out


def delete_one_novelty(X: np.ndarray, kmax: int) -> np.ndarray:
    """[d, l]: the novelty U-statistic N(1..kmax) of X[d] without sample l, for X (D, n, m), in one pass.

    Not n recomputations (n^2 work): removing sample l lowers Y_B by d = [A_l meets B] in {0, 1}, moving
    rho(Y_B, i) = C(n - 1 - Y_B, i - 1) / C(n - 2, i - 1) by d (rho(Y_B) - rho(Y_B - 1)), so
    (n - 1) N_(-l) is one total minus a (samples x subsets) product minus sample l's own terms.
    """
    D, n, _ = X.shape
    masks, bits = est.used_masks(X)
    inverse, d_of, sets, mult = est.distinct_sets(masks)  # each sample's (input, set)
    left = np.maximum(n - 1 - np.arange(n + 1), 0)  # samples not meeting B, y = 0..n
    rho = np.exp(est._log_binom_ratio(left[:, None], n - 2, np.arange(kmax)[None, :], est.log_factorial(n)))
    rho[n] = 0.0  # Y_B = n: then every sample meets B and the value cancels exactly
    groups = list(est.nonempty_subsets(sets, bits))  # an empty match set brings nothing new
    if not groups:
        return np.zeros((D, n, kmax))
    S, width = sets.size, n + 1  # tables indexed by y = Y_B
    # The meets sum_B [A_l meets B] w_B by inclusion-exclusion over T subset of A_l of c(T, y): linear in n.
    total, own = np.zeros(D * width), np.zeros(S * width)
    pair_d, pair_t, pair_y, pair_w, ask_set, ask_t, ask_sign = [], [], [], [], [], [], []
    for (g, sub, sign), Y in zip(groups, est.meet_counts(d_of, mult, groups), strict=True):
        w = mult[g][:, None] * sign[None, :]  # every sample j holding the set carries the term
        total += np.bincount((d_of[g][:, None] * width + Y).ravel(), weights=w.ravel(), minlength=D * width)
        rows = np.repeat(g, sign.size) * width + (Y - 1).ravel()
        own += np.bincount(rows, weights=np.tile(sign, g.size), minlength=S * width)
        pattern = np.arange(1, sub.shape[1] + 1)  # column c of ``sub`` is subset pattern c + 1
        q, t = np.nonzero((pattern[None, :] & ~pattern[:, None]) == 0)  # pattern t within pattern q
        pair_d.append(np.repeat(d_of[g], q.size))
        pair_t.append(sub[:, t].ravel())
        pair_y.append(Y[:, q].ravel())
        pair_w.append(w[:, q].ravel())
        ask_set.append(np.repeat(g, sign.size))
        ask_t.append(sub.ravel())
        ask_sign.append(np.tile(sign, g.size))
    y, w = np.concatenate(pair_y), np.concatenate(pair_w)
    q_set, q_sign = np.concatenate(ask_set), np.concatenate(ask_sign)
    # T within its input: one id per distinct (input, T), shared by the pairs and the queries.
    tids = pair_ids(np.concatenate([*pair_d, d_of[q_set]]), np.concatenate([*pair_t, *ask_t]))[0]
    tid, q_tid = tids[: y.size], tids[y.size :]
    keys, kinv = np.unique(tid * width + y, return_inverse=True)
    c = np.bincount(kinv.reshape(-1), weights=w)  # c(T, y) per distinct (T, y), sorted by T then y
    c_tid = keys // width
    lo = np.searchsorted(c_tid, np.arange(tids.max() + 1), side="left")
    hi = np.searchsorted(c_tid, np.arange(tids.max() + 1), side="right")
    size = hi[q_tid] - lo[q_tid]
    which = np.repeat(np.arange(q_tid.size), size)
    idx = lo[q_tid][which] + (np.arange(which.size) - np.repeat(np.cumsum(size) - size, size))
    meet = np.bincount(
        q_set[which] * width + keys[idx] % width, weights=q_sign[which] * c[idx], minlength=S * width
    ).reshape(S, width)
    step = np.zeros((width, kmax))
    step[1:] = rho[1:] - rho[:-1]  # rho(y) - rho(y - 1)
    totals = (total.reshape(D, width) @ rho)[np.repeat(np.arange(D), n)]
    out = totals - (meet @ step)[inverse] - (own.reshape(S, width) @ rho)[inverse]
    return out.reshape(D, n, kmax) / (n - 1)

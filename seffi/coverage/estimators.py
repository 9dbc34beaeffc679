"""Exact iid curves of a known match-set law, and unbiased estimators from n iid base samples.

Numpy functions over one input: a *law* is atoms (J, M) bool (the possible match sets) with
probabilities p (J,); *samples* are an incidence matrix X (n, M) bool. Curves are arrays over
k = 1..K. The plug-in sum_s 1 - (1 - p_hat_s)^k is biased low (it inflates every gain) and unused:
k <= n uses U-statistics (averages over all k-subsets), with binomial ratios from log-factorials.
"""

from __future__ import annotations

import math

import numpy as np

from seffi.coverage.subsets import distinct_sets, meet_counts, nonempty_subsets, used_masks

__all__ = [
    "chao_extrapolation",
    "chao_extrapolation_counts",
    "chao_f0_array",
    "expected_covered_exact",
    "full_coverage_exact",
    "full_coverage_samples",
    "full_coverage_samples_many",
    "incidence",
    "log_factorial",
    "marginals",
    "nonempty_subsets",
    "novelty_exact",
    "novelty_samples",
    "novelty_samples_many",
    "pow1m",
    "rarefaction",
    "rarefaction_counts",
    "time_to_full_mean",
]

_NEG = -np.inf


def log_factorial(n: int) -> np.ndarray:
    """Log-factorials log(i!) for i = 0..n: float array, shape (n + 1,)."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _log_binom_ratio(a: np.ndarray, n: int, k: np.ndarray, lf: np.ndarray) -> np.ndarray:
    """Log of C(a, k) / C(n, k) (broadcast over a and k); -inf where a < k."""
    a, k = np.broadcast_arrays(np.asarray(a, dtype=np.int64), np.asarray(k, dtype=np.int64))
    ok = a >= k
    ak = np.where(ok, a - k, 0)
    out = lf[np.where(ok, a, 0)] - lf[ak] - lf[n] + lf[n - k]
    return np.where(ok, out, _NEG)


def _masks(atoms: np.ndarray) -> np.ndarray:
    """Bit masks of boolean rows (M <= 62 columns)."""
    atoms = np.asarray(atoms, dtype=bool)
    if atoms.shape[1] > 62:
        raise ValueError(
            f"set-valued inclusion-exclusion supports at most 62 strategies, got {atoms.shape[1]}"
        )
    return (atoms.astype(np.int64) << np.arange(atoms.shape[1], dtype=np.int64)).sum(axis=1)


def _submasks(mask: int) -> list[int]:
    out, b = [], mask
    while b:
        out.append(b)
        b = (b - 1) & mask
    return out


# -- known law (exact) ---------------------------------------------------------------------------


def pow1m(pi: np.ndarray, e: np.ndarray) -> np.ndarray:
    """(1 - pi)^e, accurate for tiny pi and exact (0^0 = 1) for pi = 1; broadcasts."""
    pi = np.minimum(np.asarray(pi, dtype=np.float64), 1.0)
    e = np.asarray(e, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.exp(e * np.log1p(-pi))
    return np.where(pi >= 1.0, (e == 0).astype(np.float64), out)


def marginals(atoms: np.ndarray, p: np.ndarray) -> np.ndarray:
    """pi_s = Pr[s in A]: float array, shape (M,), from atoms (J, M) bool and p (J,)."""
    return np.asarray(p, dtype=np.float64) @ np.asarray(atoms, dtype=np.float64)


def expected_covered_exact(pi: np.ndarray, K: int) -> np.ndarray:
    """E|S_k| = sum_s 1 - (1 - pi_s)^k (exact also for set-valued A): float array, shape (K,)."""
    ks = np.arange(1, K + 1)[:, None]
    return (1.0 - pow1m(np.asarray(pi)[None, :], ks)).sum(axis=1)


def novelty_exact(atoms: np.ndarray, p: np.ndarray, K: int) -> np.ndarray:
    """Pr[A_i not a subset of S_{i-1}] for i = 1..K: float array, shape (K,).

    Pr[A subset of S] = sum_{B subset of A} (-1)^|B| q_B^(i-1), q_B = Pr[A' and B disjoint]; for
    single-label laws this is sum_s p_s (1 - p_s)^(i-1).
    """
    atoms = np.asarray(atoms, dtype=bool)
    p = np.asarray(p, dtype=np.float64)
    i1 = np.arange(K, dtype=np.float64)  # i - 1
    if atoms.sum(axis=1).max(initial=0) <= 1:
        pi = marginals(atoms, p)
        keep = pi > 0
        return (pi[keep][None, :] * pow1m(pi[keep][None, :], i1[:, None])).sum(axis=1)
    masks = used_masks(atoms)[0]
    out = np.zeros(K)
    for mask, pj in zip(masks, p, strict=True):
        if mask == 0 or pj == 0:
            continue
        for b in _submasks(int(mask)):
            q = p[(masks & b) == 0].sum()
            sign = -((-1) ** bin(b).count("1"))  # 1 - Pr[A subset S] drops the B = {} term
            out += pj * sign * (q**i1 if q > 0 else (i1 == 0).astype(float))
    return np.clip(out, 0.0, 1.0)


def _cover_all_dp(sizes: list[float], K: int, log_weight, mean_var, h0: np.ndarray) -> np.ndarray:
    """H_m(k) = sum_{j>=1} w_m(k, j) H_{m-1}(k - j) for k = 0..K, from ``h0`` (K + 1,): non-negative terms.

    Each step adds one strategy; ``w_m(k, .)`` is a law over j (binomial for a known law,
    hypergeometric for samples), given as ``log_weight(m, k (K+1, 1), j (K+1, W))`` with
    ``mean_var(m, k)``. Weights below e^-60 of the mode are skipped, keeping each step banded.
    """
    h = h0
    ks = np.arange(K + 1)
    for m in range(len(sizes)):
        mu, var = mean_var(m, ks)
        # e^-60 is ~11 sd for a Gaussian; Poisson-like (small r) tails need the additive slack.
        half = np.ceil(1.25 * np.sqrt(120.0 * np.maximum(var, 0.0)) + 45.0).astype(np.int64)
        lo = np.clip(np.floor(mu).astype(np.int64) - half, 1, None)
        hi = np.minimum(np.ceil(mu).astype(np.int64) + half, ks)
        width = int(max((hi - lo).max(initial=0) + 1, 1))
        j = lo[:, None] + np.arange(width)[None, :]
        ok = (j <= hi[:, None]) & (j >= 1)
        jj = np.where(ok, j, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lw = log_weight(m, ks[:, None], jj)
        w = np.where(ok & np.isfinite(lw), np.exp(np.where(ok, lw, _NEG)), 0.0)
        u = np.clip(ks[:, None] - jj, 0, K)
        h = (w * h[u]).sum(axis=1)
    return h


def full_coverage_exact(atoms: np.ndarray, p: np.ndarray, m: int, K: int) -> np.ndarray:
    """F(k) = Pr[|S_k| = m], k = 1..K, under iid draws from a known law (atoms (J, M), p (J,)).

    Single-label: k! [x^k] e^{p_0 x} prod_s (e^{p_s x} - 1) as the normalised binomial DP.
    Set-valued: inclusion-exclusion sum_B (-1)^|B| q_B^k over M <= 20 columns.
    """
    atoms = np.asarray(atoms, dtype=bool)
    p = np.asarray(p, dtype=np.float64)
    pi = marginals(atoms, p)
    if atoms.shape[1] != m:
        raise ValueError(f"law has {atoms.shape[1]} strategy columns but M_x = {m}")
    if (pi <= 0).any():
        return np.zeros(K)  # some strategy can never be drawn
    if atoms.sum(axis=1).max(initial=0) <= 1:
        return _full_single_label_exact(pi, K)
    if m > 20:
        raise ValueError(f"exact full coverage of set-valued laws needs M <= 20 strategies, got {m}")
    q, sign = _subset_table(_masks(atoms[:, :m]), p, m)
    ks = np.arange(1, K + 1)
    return np.clip((sign[None, :] * q[None, :] ** ks[:, None]).sum(axis=1), 0.0, 1.0)


def _full_single_label_exact(pi: np.ndarray, K: int) -> np.ndarray:
    """Single-label F(k), k = 1..K, via the normalised binomial DP (see ``full_coverage_exact``)."""
    pi = np.sort(pi)[::-1]  # large first: the normaliser P_m grows quickly, keeping bands narrow
    p0 = max(0.0, 1.0 - pi.sum())
    cum = p0 + np.cumsum(pi)
    r = np.minimum(pi / cum, 1.0)
    lf = log_factorial(K)

    def log_weight(mi: int, k: np.ndarray, j: np.ndarray) -> np.ndarray:
        rr = r[mi]
        if rr >= 1.0:  # the first strategy when p_0 = 0: all k draws are this strategy
            return np.where(j == k, 0.0, _NEG)
        return lf[k] - lf[j] - lf[np.maximum(k - j, 0)] + j * math.log(rr) + (k - j) * math.log1p(-rr)

    def mean_var(mi: int, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return k * r[mi], k * r[mi] * (1 - r[mi])

    h0 = np.ones(K + 1)
    return np.clip(_cover_all_dp(list(pi), K, log_weight, mean_var, h0)[1:], 0.0, 1.0)


def _subset_table(masks: np.ndarray, w: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct weights of atoms disjoint from each B subset of [m] (zeta transform), summed (-1)^|B|."""
    table = np.zeros(1 << m)
    np.add.at(table, masks, w)
    for b in range(m):  # zeta transform: table[S] = sum of weights of masks subset of S
        idx = np.arange(1 << m)
        has = (idx >> b) & 1 == 1
        table[has] += table[idx[has] ^ (1 << b)]
    full = (1 << m) - 1
    all_b = np.arange(1 << m)
    vals = table[full ^ all_b]
    signs = np.where(np.bitwise_count(all_b) % 2 == 0, 1.0, -1.0)
    uniq, inv = np.unique(vals, return_inverse=True)
    summed = np.bincount(inv, weights=signs, minlength=uniq.size)
    keep = summed != 0
    return uniq[keep], summed[keep]


def time_to_full_mean(atoms: np.ndarray, p: np.ndarray, m: int) -> float:
    """E[T(1)], the expected number of iid draws to cover all m strategies (inf if impossible).

    Single-label: the integral of 1 - prod_s (1 - e^{-p_s t}) over t >= 0 (Flajolet, Gardy and
    Thimonier 1992), by Simpson's rule on a log-spaced grid. Set-valued (M <= 20):
    sum_{B != {}} (-1)^(|B|+1) / (1 - q_B).
    """
    atoms = np.asarray(atoms, dtype=bool)
    p = np.asarray(p, dtype=np.float64)
    pi = marginals(atoms, p)
    if m > atoms.shape[1] or (pi[:m] <= 0).any():
        return math.inf
    pi = pi[:m]
    if atoms.sum(axis=1).max(initial=0) <= 1:
        # t = e^u, dt = t du; the integrand is ~1 below t ~ 1e-3/max p and ~0 beyond ~45/min p.
        lo, hi = math.log(1e-9 / pi.max()), math.log(80.0 / pi.min())
        u = np.linspace(lo, hi, 20001)
        t = np.exp(u)
        g = -np.expm1(np.log(-np.expm1(-np.outer(t, pi))).sum(axis=1)) * t
        step = u[1] - u[0]
        simpson = step / 3 * (g[0] + g[-1] + 4 * g[1:-1:2].sum() + 2 * g[2:-1:2].sum())
        return float(simpson + math.exp(lo))  # + integral over [0, e^lo] where the integrand is 1
    if m > 20:
        raise ValueError(f"E[T(1)] for set-valued laws needs M <= 20 strategies, got {m}")
    q, sign = _subset_table(_masks(atoms[:, :m]), p, m)
    nonempty = q < 1.0 - 1e-15  # B = {} has q = 1 and is the only term with q == 1
    return float((-sign[nonempty] / (1.0 - q[nonempty])).sum())


# -- estimated from samples (unbiased for k <= n) -------------------------------------------------


def incidence(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Incidence counts Y (D, m) and whether each dataset is single-label (D,) of X bool (D, n, m).

    Integer sums by ``einsum``: under half the time of ``X.sum`` over a middle or short last axis.
    """
    Y = np.einsum("dnm->dm", X, dtype=np.int64, casting="unsafe")
    per_sample = np.einsum("dnm->dn", X, dtype=np.int64, casting="unsafe")
    return Y, per_sample.max(axis=1, initial=0) <= 1


def rarefaction(X: np.ndarray, K: int) -> np.ndarray:
    """Unbiased E|S_k| for k = 1..min(K, n) from X (n, M): sum_s [1 - C(n - Y_s, k) / C(n, k)]."""
    X = np.asarray(X, dtype=bool)
    return rarefaction_counts(X.sum(axis=0), X.shape[0], K)


def rarefaction_counts(Y: np.ndarray, n: int, K: int) -> np.ndarray:
    """``rarefaction`` from incidence counts Y (..., M) in 0..n: (..., min(K, n)).

    Each count's term is taken once per distinct count. With fewer columns M than distinct counts a
    batch adds each column's term; otherwise it is one product (rows x distinct counts) @ (distinct
    counts x k), equal counts sharing a term.
    """
    Y = np.asarray(Y, dtype=np.int64)
    rows = Y.reshape(-1, Y.shape[-1])
    if rows.size and (rows.min() < 0 or rows.max() > n):
        raise ValueError(f"incidence counts must lie in 0..n = {n}")
    kmax = min(K, n)
    # Distinct non-zero counts by a presence table (linear time; no sort of B x M values).
    vals = np.flatnonzero(np.bincount(rows.ravel(), minlength=n + 1)[1:]) + 1
    V = vals.size + 1  # histogram column V - 1 collects the zero counts and is dropped
    index = np.full(n + 1, V - 1, dtype=np.int64)
    index[vals] = np.arange(vals.size)
    ks = np.arange(1, kmax + 1)
    seen_k = -np.expm1(_log_binom_ratio(n - vals[:, None], n, ks[None, :], log_factorial(n)))
    table = np.vstack([seen_k, np.zeros((1, kmax))])  # row V - 1: a zero count adds nothing
    by_column = rows.shape[1] < V
    out = np.empty((rows.shape[0], kmax))
    step = max(1, 4_000_000 // max(V, rows.shape[1]))  # bounds the (rows x distinct counts) histogram
    for a in range(0, rows.shape[0], step):
        chunk = index[rows[a : a + step]]
        if by_column:
            out[a : a + step] = _column_sums(table, chunk)
            continue
        flat = (chunk + V * np.arange(chunk.shape[0])[:, None]).ravel()
        H = np.bincount(flat, minlength=chunk.shape[0] * V).reshape(chunk.shape[0], V)
        out[a : a + step] = H[:, :-1] @ seen_k
    return out.reshape(*Y.shape[:-1], kmax)


def _column_sums(table: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """sum_s table[chunk[:, s]] (R, k), the columns added in order, for chunk (R, M) of table rows.

    A block of rows at a time, so that the sums and each column's terms stay in cache while every
    column is added (2.5x faster than whole columns over the bootstrap's 10^4 rows).
    """
    R, M = chunk.shape
    total = np.zeros((R, table.shape[1]))
    term = np.empty((min(COLUMN_SUM_ROWS, R), table.shape[1]))
    for a in range(0, R, COLUMN_SUM_ROWS):
        rows, part = chunk[a : a + COLUMN_SUM_ROWS], total[a : a + COLUMN_SUM_ROWS]
        for s in range(M):
            part += np.take(table, rows[:, s], axis=0, out=term[: rows.shape[0]])
    return total


#: Rows of `_column_sums` summed at a time (a few hundred KB of sums and terms).
COLUMN_SUM_ROWS = 2048


def novelty_samples(X: np.ndarray, K: int) -> np.ndarray:
    """Unbiased Pr[A_i not a subset of S_{i-1}], i = 1..min(K, n), by the U-statistic.

    (1/n) sum_j -sum_{{} != B subset A_j} (-1)^|B| C(n - Y_B, i-1) / C(n-1, i-1), Y_B samples meeting B.
    """
    X = np.asarray(X, dtype=bool)
    return novelty_samples_many(X[None], K)[0]


def novelty_samples_many(X: np.ndarray, K: int) -> np.ndarray:
    """``novelty_samples`` of D datasets at once: X bool (D, n, m) -> (D, min(K, n)).

    The signed terms are summed into coefficients per (dataset, Y_B) first, then multiplied by one
    (n, K) table of binomial ratios; set-valued data take Y_B from superset counts (``subsets``).
    """
    X = np.asarray(X, dtype=bool)
    D, n, m = X.shape
    kmax = min(K, n)
    if D == 0 or n == 0:
        return np.zeros((D, kmax))
    i1 = np.arange(kmax)  # i - 1
    lf = log_factorial(n)
    # ratio[y, i-1] = C(n - y, i-1) / C(n - 1, i-1) for y = 0..n
    ratio = np.exp(_log_binom_ratio(n - np.arange(n + 1)[:, None], n - 1, i1[None, :], lf))
    coef = np.zeros((D, n + 1))
    Y, single = incidence(X)
    if single.any():  # one term per strategy seen: Y_s samples, each with Y_B = Y_s
        Y = Y[single]  # (Ds, m)
        rows = np.repeat(np.flatnonzero(single), m) * (n + 1) + Y.ravel()
        coef += np.bincount(rows, weights=Y.ravel().astype(np.float64), minlength=D * (n + 1)).reshape(
            D, n + 1
        )
    sv = np.flatnonzero(~single)
    if sv.size and m <= DENSE_SUBSET_COLUMNS:
        coef[sv] += _dense_novelty_coefficients(X[sv])
    elif sv.size:
        masks, bits = used_masks(X[sv])  # each dataset's own columns: any m
        d_of, u, mult = distinct_sets(masks)
        groups = list(nonempty_subsets(u, bits))
        for (g, _, sign), y in zip(groups, meet_counts(d_of, mult, groups), strict=True):
            w = mult[g][:, None] * sign[None, :]
            coef[sv] += np.bincount(
                (d_of[g][:, None] * (n + 1) + y).ravel(), weights=w.ravel(), minlength=sv.size * (n + 1)
            ).reshape(sv.size, n + 1)
    return np.clip(coef @ ratio / n, 0.0, 1.0)


#: Columns up to which set-valued novelty counts every non-empty subset of the columns at once
#: (2^m - 1 of them, one array operation) instead of the subsets of each distinct match set.
DENSE_SUBSET_COLUMNS = 6


def _dense_novelty_coefficients(X: np.ndarray) -> np.ndarray:
    """``novelty_samples_many``'s coefficients (S, n + 1) of S datasets X (S, n, m <= DENSE_SUBSET_COLUMNS).

    coef[s, y] = sum over non-empty column sets B with Y_B = y (samples meeting B) of -(-1)^|B| times
    the samples whose match set contains B: integer-valued, so equal to the per-set sums exactly.
    """
    S, n, m = X.shape
    masks = X.astype(np.uint8) @ np.left_shift(np.uint8(1), np.arange(m, dtype=np.uint8))  # (S, n)
    B = np.arange(1, 1 << m, dtype=np.uint8)
    common = masks[:, :, None] & B  # (S, n, 2^m - 1)
    meets = np.count_nonzero(common, axis=1)
    holds = (common == B).sum(axis=1)
    sign = np.where(np.bitwise_count(B) % 2 == 1, 1.0, -1.0)
    rows = np.arange(S)[:, None] * (n + 1) + meets
    return np.bincount(rows.ravel(), weights=(holds * sign).ravel(), minlength=S * (n + 1)).reshape(S, n + 1)


def full_coverage_samples(X: np.ndarray, m: int, K: int) -> np.ndarray:
    """Unbiased F(k), k = 1..min(K, n): the fraction of k-subsets of the samples covering all m.

    Single-label: [x^k] prod_s ((1 + x)^{N_s} - 1) / C(n, k) as a hypergeometric DP. Set-valued:
    inclusion-exclusion up to `EXACT_SET_STRATEGIES`, random orders beyond (``_full_by_permutations``).
    One dataset of `full_coverage_samples_many`.
    """
    return full_coverage_samples_many(np.asarray(X, dtype=bool)[None], m, K)[0]


def full_coverage_samples_many(X: np.ndarray, m: int, K: int) -> np.ndarray:
    """``full_coverage_samples`` of D datasets: X bool (D, n, >= m) -> (D, min(K, n))."""
    X = np.asarray(X, dtype=bool)
    D, n = X.shape[:2]
    out = np.zeros((D, min(K, n)))
    if m > X.shape[2] or D == 0:
        return out
    X = X[:, :, :m]
    Y, single = incidence(X)
    full = (Y > 0).all(axis=1)
    sl = np.flatnonzero(full & single)
    if sl.size:
        out[sl] = _full_single_label_many(Y[sl], n, min(K, n))
    sv = np.flatnonzero(full & ~single)
    if sv.size:
        out[sv] = _full_set_valued(X[sv], m, K)
    return out


#: Largest k of the single-label F(k) DP from samples that uses whole (k + 1) x (k + 1) transition
#: matrices; beyond it the weights are banded (``_cover_all_dp``), as e^-60 tails dominate the work.
DENSE_DP_K = 64


def _full_single_label_many(Y: np.ndarray, n: int, kmax: int) -> np.ndarray:
    """Single-label F(k), k = 1..kmax, of D datasets from their counts Y (D, m), every count >= 1.

    A hypergeometric DP, one strategy at a time for all datasets at once:
    [x^k] prod_s ((1 + x)^{N_s} - 1) (1 + x)^{n_0} / C(n, k). The weights depend on (N_m, T_m) only,
    so they are computed once per distinct pair; up to `DENSE_DP_K` each step is one batched
    matrix-vector product, beyond it the bands of ``_cover_all_dp``.
    """
    Y = np.asarray(Y, dtype=np.int64)
    D, m = Y.shape
    N = -np.sort(-Y, axis=1)  # large first, as in the one-dataset DP
    n0 = n - N.sum(axis=1)
    T = n0[:, None] + np.cumsum(N, axis=1)
    lf = log_factorial(n)
    ks = np.arange(kmax + 1)
    h = (ks[None, :] <= np.minimum(n0, kmax)[:, None]).astype(np.float64)
    dense = kmax <= DENSE_DP_K
    for mi in range(m):
        pairs, inv = np.unique(N[:, mi] * (n + 1) + T[:, mi], return_inverse=True)
        Nm, Tm = pairs // (n + 1), pairs % (n + 1)
        if dense:
            # W[p, k, u]: weight of k - u draws of strategy m among k; the band holds every j then.
            j = ks[:, None] - ks[None, :]
            W = _hypergeometric_weights(Nm[:, None, None], Tm[:, None, None], j, ks[:, None], lf)
            h = np.einsum("dku,du->dk", W[inv], h)
            continue
        r = (Nm / Tm)[:, None]
        mu, var = ks[None, :] * r, ks[None, :] * r * (1 - r)
        half = np.ceil(1.25 * np.sqrt(120.0 * np.maximum(var, 0.0)) + 45.0).astype(np.int64)
        lo = np.clip(np.floor(mu).astype(np.int64) - half, 1, None)
        hi = np.minimum(np.ceil(mu).astype(np.int64) + half, ks[None, :])
        width = int(max((hi - lo).max(initial=0) + 1, 1))
        j = lo[:, :, None] + np.arange(width)[None, None, :]  # (pairs, kmax + 1, width)
        j = np.where(j <= hi[:, :, None], j, 0)  # outside the band: weight 0
        w = _hypergeometric_weights(Nm[:, None, None], Tm[:, None, None], j, ks[None, :, None], lf)
        u = np.clip(ks[None, :, None] - j, 0, kmax)
        h = (w[inv] * h[np.arange(D)[:, None, None], u[inv]]).sum(axis=2)
    return np.clip(h[:, 1:], 0.0, 1.0)


def _hypergeometric_weights(
    Nm: np.ndarray, Tm: np.ndarray, j: np.ndarray, k: np.ndarray, lf: np.ndarray
) -> np.ndarray:
    """C(N_m, j) C(T_m - N_m, k - j) / C(T_m, k) (broadcast), 0 where j < 1 or a binomial is empty."""
    Tp = Tm - Nm
    u = k - j
    fit = (j >= 1) & (j <= Nm) & (u >= 0) & (u <= Tp) & (k <= Tm)
    j0, u0, k0 = np.where(fit, j, 0), np.where(fit, u, 0), np.where(fit, k, 0)
    lw = (
        lf[Nm]
        - lf[j0]
        - lf[Nm - j0]
        + lf[Tp]
        - lf[u0]
        - lf[np.maximum(Tp - u0, 0)]
        - (lf[Tm] - lf[k0] - lf[np.maximum(Tm - k0, 0)])
    )
    return np.where(fit, np.exp(np.where(fit, lw, 0.0)), 0.0)


#: Strategies up to which set-valued F(k) from samples is the exact U-statistic (a 2^M transform).
EXACT_SET_STRATEGIES = 20
#: Random orders of the samples behind set-valued F(k) beyond `EXACT_SET_STRATEGIES` strategies.
PERMUTATIONS = 4000


def _full_by_permutations(X: np.ndarray, K: int) -> np.ndarray:
    """Set-valued F(k) of X bool (D, n, m): the share of `PERMUTATIONS` random orders covering all by k.

    Unbiased for the U-statistic (standard error <= 0.008); seeded from the data, so deterministic.
    """
    D, n, m = X.shape
    kmax = min(K, n)
    out = np.zeros((D, kmax))
    for d in range(D):
        Xd = np.ascontiguousarray(X[d])
        if not Xd.any(axis=0).all():
            continue  # a strategy no sample holds: F = 0
        rng = np.random.default_rng(
            np.frombuffer(np.packbits(Xd).tobytes(), dtype=np.uint8).astype(np.uint32)
        )
        done = np.zeros(PERMUTATIONS, dtype=np.int64)  # position (1-based) where the order covers all
        for a in range(0, PERMUTATIONS, 512):
            rank = np.argsort(rng.random((min(512, PERMUTATIONS - a), n)), axis=1).argsort(axis=1)
            first = np.stack([rank[:, Xd[:, s]].min(axis=1) for s in range(m)], axis=1)
            done[a : a + rank.shape[0]] = first.max(axis=1) + 1
        out[d] = np.searchsorted(np.sort(done), np.arange(1, kmax + 1), side="right") / PERMUTATIONS
    return out


def _full_set_valued(X: np.ndarray, m: int, K: int) -> np.ndarray:
    """Set-valued F(k) = sum_B (-1)^|B| C(n - Y_B, k) / C(n, k) of X bool (D, n, m).

    n - Y_B (samples inside the complement S of B) for every S by a zeta transform over the 2^m
    bitmasks; the signs are summed per value first, so binomial ratios are taken n + 1 times.
    """
    D, n, _ = X.shape
    if m > EXACT_SET_STRATEGIES:
        return _full_by_permutations(X, K)
    kmax = min(K, n)
    lf = log_factorial(n)
    ks = np.arange(1, kmax + 1)
    # ratio[v, k-1] = C(v, k) / C(n, k) for v = 0..n
    ratio = np.exp(_log_binom_ratio(np.arange(n + 1)[:, None], n, ks[None, :], lf))
    size = 1 << m
    # key = 2 x count + parity of |S| <= 2n + 1: the smallest integer type keeps the 2^m sweeps cheap.
    dtype = next(t for t in (np.int8, np.int16, np.int64) if 2 * n + 1 <= np.iinfo(t).max)
    parity = np.zeros(size, dtype=dtype)
    for b in range(m):
        parity ^= ((np.arange(size) >> b) & 1).astype(dtype)
    masks = _masks(X.reshape(D * n, m)).reshape(D, n)
    coef = np.zeros((D, n + 1))
    width = 2 * n + 2
    # Datasets on the last (contiguous) axis, so even the low-bit passes of the zeta transform
    # move whole rows; chunks keep a table near cache size.
    step = int(min(D, max(1, (1 << 21) // size)))
    for c0 in range(0, D, step):
        mc = masks[c0 : c0 + step]
        dc = mc.shape[0]
        table = np.zeros((size, dc), dtype=dtype)
        np.add.at(table, (mc.ravel(), np.repeat(np.arange(dc), n)), 2)
        for b in range(m):  # zeta: table[S] = 2 x (number of samples whose mask is a subset of S)
            t = table.reshape(-1, 2, (1 << b) * dc)
            t[:, 1, :] += t[:, 0, :]
        table += parity[:, None]
        keys = table.astype(np.int64) + np.arange(dc, dtype=np.int64)[None, :] * width
        cnt = np.bincount(keys.ravel(), minlength=dc * width).reshape(dc, width)
        # (-1)^(m - |S|): even |S| counts positively when m is even
        even, odd = cnt[:, 0::2], cnt[:, 1::2]
        coef[c0 : c0 + dc] = even - odd if m % 2 == 0 else odd - even
    return np.clip(coef @ ratio, 0.0, 1.0)


def chao_extrapolation(X: np.ndarray, K: int, m: int) -> np.ndarray:
    """Model-based E|S_{n+j}|, j = 1..K-n (Chao et al. 2014, iNEXT): (max(K - n, 0),).

    S(n+j) = S_obs + f0 [1 - (1 - f1 / (n f0 + f1))^j], f0 the Chao1 estimate capped at m - S_obs.
    """
    X = np.asarray(X, dtype=bool)
    return chao_extrapolation_counts(X.sum(axis=0), X.shape[0], K, m)


def chao_extrapolation_counts(Y: np.ndarray, n: int, K: int, m: int) -> np.ndarray:
    """``chao_extrapolation`` from incidence counts Y (..., M) out of n: (..., max(K - n, 0))."""
    Y = np.asarray(Y, dtype=np.int64)
    j = np.arange(1, max(K - n, 0) + 1, dtype=np.float64)
    s_obs = (Y > 0).sum(axis=-1).astype(np.float64)
    f1 = (Y == 1).sum(axis=-1).astype(np.float64)
    f2 = (Y == 2).sum(axis=-1).astype(np.float64)
    f0 = chao_f0_array(n, f1, f2, cap=m - s_obs)
    live = (f0 > 0) & (f1 > 0)
    rate = np.where(live, f1 / np.where(live, n * f0 + f1, 1.0), 0.0)
    return s_obs[..., None] + f0[..., None] * -np.expm1(j * np.log1p(-rate[..., None]))


def chao_f0_array(
    n: int, f1: np.ndarray, f2: np.ndarray, *, cap: np.ndarray | float = math.inf
) -> np.ndarray:
    """Chao1 estimates of the unseen strategies (bias-corrected when f2 = 0) from arrays f1, f2, capped."""
    f1, f2 = np.asarray(f1, dtype=np.float64), np.asarray(f2, dtype=np.float64)
    if n <= 0:
        return np.zeros(f1.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        f0 = np.where(f2 > 0, (n - 1) / n * f1 * f1 / (2 * f2), (n - 1) / n * f1 * (f1 - 1) / 2)
    return np.minimum(np.maximum(f0, 0.0), np.maximum(cap, 0.0))

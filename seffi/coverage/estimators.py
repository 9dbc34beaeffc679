"""Exact iid curves of a known match-set law, and unbiased U-statistics from n iid base samples.

A *law* is atoms (J, M) bool (the possible match sets) with probabilities p (J,); *samples* are an
incidence matrix X (n, M) bool; curves are arrays over k = 1..K.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

#: Distinct strategies set-valued match sets may name within one input (bitmasks are int64).
MAX_SET_STRATEGIES = 62


def log_factorial(n: int) -> np.ndarray:
    """Log-factorials log(i!) for i = 0..n: float array, shape (n + 1,)."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _log_binom_ratio(a: np.ndarray, n: int, k: np.ndarray, lf: np.ndarray) -> np.ndarray:
    """Log of C(a, k) / C(n, k) (broadcast over a and k); -inf where a < k."""
    a, k = np.broadcast_arrays(np.asarray(a, dtype=np.int64), np.asarray(k, dtype=np.int64))
    ok = a >= k
    ak = np.where(ok, a - k, 0)
    out = lf[np.where(ok, a, 0)] - lf[ak] - lf[n] + lf[n - k]
    return np.where(ok, out, -np.inf)


def _masks(rows: np.ndarray) -> np.ndarray:
    """Bit masks of boolean rows (N, m <= 20)."""
    return (rows.astype(np.int64) << np.arange(rows.shape[1], dtype=np.int64)).sum(axis=1)


def _band(mu: np.ndarray, var: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(j, inside) of a DP step's weights above e^-60 of the mode: ~11 sd, with slack for Poisson tails."""
    half = np.ceil(1.25 * np.sqrt(120.0 * np.maximum(var, 0.0)) + 45.0).astype(np.int64)
    lo = np.clip(np.floor(mu).astype(np.int64) - half, 1, None)
    hi = np.minimum(np.ceil(mu).astype(np.int64) + half, ks)
    width = int(max((hi - lo).max(initial=0) + 1, 1))
    j = lo[..., None] + np.arange(width)
    return j, j <= hi[..., None]


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


def covered_by_strategy(pi: np.ndarray, K: int) -> np.ndarray:
    """Pr[s in S_k] = 1 - (1 - pi_s)^k, (K, M): exact also for set-valued laws."""
    return 1.0 - pow1m(np.asarray(pi)[None, :], np.arange(1, K + 1)[:, None])


def expected_covered_exact(pi: np.ndarray, K: int) -> np.ndarray:
    """E|S_k| = sum_s 1 - (1 - pi_s)^k: float array, shape (K,)."""
    return covered_by_strategy(pi, K).sum(axis=1)


def novelty_exact(atoms: np.ndarray, p: np.ndarray, K: int) -> np.ndarray:
    """Pr[A_i not a subset of S_{i-1}] for i = 1..K: float array, shape (K,).

    Pr[A subset of S] = sum_{B subset of A} (-1)^|B| q_B^(i-1), q_B = Pr[A' and B disjoint].
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
    for mask, pj in zip(masks.tolist(), p, strict=True):
        b = mask
        while b and pj:  # every non-empty submask b of mask
            q = p[(masks & b) == 0].sum()
            sign = -((-1) ** bin(b).count("1"))  # 1 - Pr[A subset S] drops the B = {} term
            out += pj * sign * (q**i1 if q > 0 else (i1 == 0).astype(float))
            b = (b - 1) & mask
    return np.clip(out, 0.0, 1.0)


def full_coverage_exact(atoms: np.ndarray, p: np.ndarray, m: int, K: int) -> np.ndarray:
    """F(k) = Pr[|S_k| = m], k = 1..K, under iid draws from a known law (atoms (J, M), p (J,)).

    Single-label: k! [x^k] e^{p_0 x} prod_s (e^{p_s x} - 1) as a normalised binomial DP, large
    strategies first (narrow bands). Set-valued: sum_B (-1)^|B| q_B^k over M <= 20 columns.
    """
    atoms = np.asarray(atoms, dtype=bool)
    p = np.asarray(p, dtype=np.float64)
    pi = marginals(atoms, p)
    if atoms.shape[1] != m:
        raise ValueError(f"law has {atoms.shape[1]} strategy columns but M_x = {m}")
    if (pi <= 0).any():
        return np.zeros(K)  # some strategy can never be drawn
    ks = np.arange(K + 1)
    if atoms.sum(axis=1).max(initial=0) > 1:
        if m > 20:
            raise ValueError(f"exact full coverage of set-valued laws needs M <= 20 strategies, got {m}")
        q, sign = _subset_table(_masks(atoms[:, :m]), p, m)
        return np.clip((sign[None, :] * q[None, :] ** ks[1:, None]).sum(axis=1), 0.0, 1.0)
    pi = np.sort(pi)[::-1]
    r = np.minimum(pi / (max(0.0, 1.0 - pi.sum()) + np.cumsum(pi)), 1.0)
    lf = log_factorial(K)
    h = np.ones(K + 1)  # H_m(k) = sum_{j>=1} Binomial(k, r_m)(j) H_{m-1}(k - j)
    for rr in r:
        j, ok = _band(ks * rr, ks * rr * (1 - rr), ks)
        jj = np.where(ok, j, 1)
        k = ks[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            if rr >= 1.0:  # the first strategy when p_0 = 0: all k draws are this strategy
                lw = np.where(jj == k, 0.0, -np.inf)
            else:
                lw = (
                    lf[k]
                    - lf[jj]
                    - lf[np.maximum(k - jj, 0)]
                    + jj * math.log(rr)
                    + (k - jj) * math.log1p(-rr)
                )
        w = np.where(ok & np.isfinite(lw), np.exp(np.where(ok, lw, -np.inf)), 0.0)
        h = (w * h[np.clip(k - jj, 0, K)]).sum(axis=1)
    return np.clip(h[1:], 0.0, 1.0)


def _subset_table(masks: np.ndarray, w: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct weights of atoms disjoint from each B subset of [m] (zeta transform), summed (-1)^|B|."""
    table = np.zeros(1 << m)
    np.add.at(table, masks, w)
    for b in range(m):  # zeta transform: table[S] = sum of weights of masks subset of S
        t = table.reshape(-1, 2, 1 << b)
        t[:, 1, :] += t[:, 0, :]
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
    Thimonier 1992) by Simpson's rule; set-valued (M <= 20): sum_{B != {}} (-1)^(|B|+1) / (1 - q_B).
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


def incidence(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Incidence counts Y (D, m) and whether each dataset is single-label (D,) of X bool (D, n, m)."""
    # einsum: under half the time of X.sum over a middle or short last axis.
    Y = np.einsum("dnm->dm", X, dtype=np.int64, casting="unsafe")
    per_sample = np.einsum("dnm->dn", X, dtype=np.int64, casting="unsafe")
    return Y, per_sample.max(axis=1, initial=0) <= 1


def rarefaction(X: np.ndarray, K: int) -> np.ndarray:
    """Unbiased E|S_k| for k = 1..min(K, n) from X (n, M): sum_s [1 - C(n - Y_s, k) / C(n, k)]."""
    X = np.asarray(X, dtype=bool)
    return rarefaction_counts(X.sum(axis=0), X.shape[0], K)


#: Rows of a column-by-column rarefaction summed at a time (a few hundred KB of sums and terms).
COLUMN_SUM_ROWS = 2048


def rarefaction_counts(Y: np.ndarray, n: int, K: int) -> np.ndarray:
    """``rarefaction`` from incidence counts Y (..., M) in 0..n: (..., min(K, n)).

    Each distinct count's term is computed once; rows then add their columns' terms (few columns) or
    take one product (rows x distinct counts) @ (distinct counts x k).
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
    term = np.empty((min(COLUMN_SUM_ROWS, rows.shape[0]), kmax))
    step = max(1, 4_000_000 // max(V, rows.shape[1]))  # bounds the (rows x distinct counts) histogram
    for a in range(0, rows.shape[0], step):
        chunk = index[rows[a : a + step]]
        if not by_column:
            flat = (chunk + V * np.arange(chunk.shape[0])[:, None]).ravel()
            H = np.bincount(flat, minlength=chunk.shape[0] * V).reshape(chunk.shape[0], V)
            out[a : a + step] = H[:, :-1] @ seen_k
            continue
        for b in range(0, chunk.shape[0], COLUMN_SUM_ROWS):
            sub = chunk[b : b + COLUMN_SUM_ROWS]
            part = out[a + b : a + b + sub.shape[0]]
            part[:] = 0.0
            for s in range(sub.shape[1]):
                part += np.take(table, sub[:, s], axis=0, out=term[: sub.shape[0]])
    return out.reshape(*Y.shape[:-1], kmax)


#: Columns up to which set-valued novelty counts every non-empty subset of the columns at once.
DENSE_SUBSET_COLUMNS = 6


def novelty_samples_many(X: np.ndarray, K: int) -> np.ndarray:
    """Novelty U-statistics of D datasets X bool (D, n, m): (D, min(K, n)).

    (1/n) sum_j -sum_{{} != B subset A_j} (-1)^|B| C(n - Y_B, i-1) / C(n-1, i-1), its signed terms
    summed per (dataset, Y_B) first.
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
        # Every non-empty column set B at once: -(-1)^|B| times the samples containing B, at Y_B
        # (integer-valued: equal to the per-set sums exactly).
        S = sv.size
        masks = X[sv].astype(np.uint8) @ np.left_shift(np.uint8(1), np.arange(m, dtype=np.uint8))
        B = np.arange(1, 1 << m, dtype=np.uint8)
        common = masks[:, :, None] & B  # (S, n, 2^m - 1)
        meets = np.count_nonzero(common, axis=1)
        holds = (common == B).sum(axis=1)
        sign = np.where(np.bitwise_count(B) % 2 == 1, 1.0, -1.0)
        at = np.arange(S)[:, None] * (n + 1) + meets
        coef[sv] += np.bincount(at.ravel(), weights=(holds * sign).ravel(), minlength=S * (n + 1)).reshape(
            S, n + 1
        )
    elif sv.size:
        masks, bits = used_masks(X[sv])  # each dataset's own columns: any m
        _, d_of, u, mult = distinct_sets(masks)
        groups = list(nonempty_subsets(u, bits))
        for (g, _, sign), y in zip(groups, meet_counts(d_of, mult, groups), strict=True):
            w = mult[g][:, None] * sign[None, :]
            coef[sv] += np.bincount(
                (d_of[g][:, None] * (n + 1) + y).ravel(), weights=w.ravel(), minlength=sv.size * (n + 1)
            ).reshape(sv.size, n + 1)
    return np.clip(coef @ ratio / n, 0.0, 1.0)


def full_coverage_samples_many(X: np.ndarray, m: int, K: int) -> np.ndarray:
    """F(k) U-statistics of D datasets X bool (D, n, >= m): (D, min(K, n)).

    Single-label: [x^k] prod_s ((1 + x)^{N_s} - 1) / C(n, k) as a hypergeometric DP; set-valued:
    inclusion-exclusion up to `EXACT_SET_STRATEGIES` strategies, random orders beyond.
    """
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
        out[sv] = (
            _full_by_permutations(X[sv], K) if m > EXACT_SET_STRATEGIES else _full_set_valued(X[sv], m, K)
        )
    return out


#: Largest k of the single-label F(k) DP from samples by whole (k + 1) x (k + 1) matrices; banded beyond.
DENSE_DP_K = 64


def _full_single_label_many(Y: np.ndarray, n: int, kmax: int) -> np.ndarray:
    """Single-label F(k), k = 1..kmax, of D datasets from their counts Y (D, m), every count >= 1."""
    Y = np.asarray(Y, dtype=np.int64)
    D, m = Y.shape
    N = -np.sort(-Y, axis=1)  # large first, as in the known-law DP
    n0 = n - N.sum(axis=1)
    T = n0[:, None] + np.cumsum(N, axis=1)
    lf = log_factorial(n)
    ks = np.arange(kmax + 1)
    h = (ks[None, :] <= np.minimum(n0, kmax)[:, None]).astype(np.float64)
    for mi in range(m):
        pairs, inv = np.unique(N[:, mi] * (n + 1) + T[:, mi], return_inverse=True)
        Nm, Tm = pairs // (n + 1), pairs % (n + 1)
        if kmax <= DENSE_DP_K:
            # W[p, k, u]: weight of k - u draws of strategy m among k.
            j = ks[:, None] - ks[None, :]
            W = _hypergeometric_weights(Nm[:, None, None], Tm[:, None, None], j, ks[:, None], lf)
            h = np.einsum("dku,du->dk", W[inv], h)
            continue
        r = (Nm / Tm)[:, None]
        j, inside = _band(ks[None, :] * r, ks[None, :] * r * (1 - r), ks[None, :])
        j = np.where(inside, j, 0)  # outside the band: weight 0
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
    """Set-valued F(k) of X (D, n, m): the share of random orders covering all by k (seeded by the data)."""
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
    """Set-valued F(k) = sum_B (-1)^|B| C(n - Y_B, k) / C(n, k) of X bool (D, n, m <= 20)."""
    D, n, _ = X.shape
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


def chao_extrapolation_counts(Y: np.ndarray, n: int, K: int, m: int) -> np.ndarray:
    """Model-based E|S_{n+j}|, j = 1..K-n, from incidence counts Y (..., M) out of n (Chao et al. 2014).

    S(n+j) = S_obs + f0 [1 - (1 - f1 / (n f0 + f1))^j], f0 the Chao1 estimate capped at m - S_obs.
    """
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


def used_masks(X: np.ndarray) -> tuple[np.ndarray, int]:
    """(bitmasks, bits used) of boolean rows (..., n, m) over each dataset's own used columns."""
    X = np.asarray(X, dtype=bool)
    used = X.any(axis=-2)
    top = int(used.sum(axis=-1).max(initial=0))
    if top > MAX_SET_STRATEGIES:
        raise ValueError(
            f"set-valued match sets name {top} distinct strategies; set-valued novelty and its "
            f"intervals handle at most {MAX_SET_STRATEGIES} per input: record single-label samples "
            "(one strategy each, any M), or merge strategies that are always matched together"
        )
    bit = np.where(used, np.left_shift(np.int64(1), np.maximum(np.cumsum(used, axis=-1) - 1, 0)), 0)
    return (X.astype(np.int64) @ bit[..., :, None])[..., 0], top


def pair_ids(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of the pairs (a, b) in sorted order, and the position of each id's first pair."""
    order = np.lexsort((b, a))
    new = np.r_[True, (a[order][1:] != a[order][:-1]) | (b[order][1:] != b[order][:-1])]
    ids = np.empty(a.size, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids, order[new]


def distinct_sets(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (dataset, mask) pairs of masks (D, n): (pair id of each mask, dataset, mask, multiplicity)."""
    ids, first = pair_ids(np.repeat(np.arange(masks.shape[0]), masks.shape[1]), masks.ravel())
    return ids, first // masks.shape[1], masks.ravel()[first], np.bincount(ids)


def nonempty_subsets(sets: np.ndarray, m: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every non-empty subset B of each distinct match set (masks ``sets`` (S,) over m bits), by size.

    Yields ``(g, sub, sign)`` per set size r >= 1: the sets ``g`` (G,) of size r, their subsets'
    masks ``sub`` (G, 2^r - 1) (subset q takes the bits where q has ones), ``sign`` = ``-(-1)^|B|``.
    """
    bits = ((sets[:, None] >> np.arange(m, dtype=np.int64)) & 1).astype(bool)
    size = bits.sum(axis=1)
    for r in np.unique(size[size > 0]).tolist():
        g = np.flatnonzero(size == r)
        pos = np.nonzero(bits[g])[1].reshape(g.size, r)  # bit positions, ascending per row
        q = np.arange(1, 1 << r, dtype=np.int64)
        pattern = (q[None, :] >> np.arange(r, dtype=np.int64)[:, None]) & 1  # (r, 2^r - 1)
        yield g, (np.int64(1) << pos) @ pattern, np.where(pattern.sum(axis=0) % 2 == 1, 1.0, -1.0)


def meet_counts(
    d_of: np.ndarray, mult: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> list[np.ndarray]:
    """Y_B = sum_{{} != T subset B} (-1)^(|T|+1) c(T), c(T) the samples containing T, per subset group.

    ``groups``: of ``nonempty_subsets``; ``d_of``, ``mult`` (S,): each set's dataset and multiplicity.
    """
    if not groups:
        return []
    T = np.concatenate([sub.ravel() for _, sub, _ in groups])
    d = np.concatenate([np.repeat(d_of[g], sub.shape[1]) for g, sub, _ in groups])
    w = np.concatenate([np.repeat(mult[g], sub.shape[1]) for g, sub, _ in groups])
    values, tid = np.unique(T, return_inverse=True)
    kinv = np.unique(d * values.size + tid.reshape(-1), return_inverse=True)[1]
    count = np.bincount(kinv.reshape(-1), weights=w).astype(np.int64)
    out, at = [], 0
    for _, sub, sign in groups:
        G, P = sub.shape
        r = int(P + 1).bit_length() - 1
        c = count[kinv.reshape(-1)[at : at + G * P]].reshape(G, P)
        at += G * P
        F = np.zeros((G, P + 1), dtype=np.int64)
        F[:, 1:] = np.where(sign > 0, c, -c)  # (-1)^(|T|+1) c(T): sign is +1 for odd |T|
        for b in range(r):  # in place: F[q] <- sum of F[t] over t subset of q
            t = F.reshape(G, -1, 2, 1 << b)
            t[:, :, 1, :] += t[:, :, 0, :]
        out.append(F[:, 1:])
    return out

"""Delete-one jackknife of the set-valued novelty U-statistic: the sd of N(i) from samples at i <= n / 2."""

from __future__ import annotations

import numpy as np

from seffi.coverage import estimators as est
from seffi.coverage.resampling import normal_quantile, t_quantile
from seffi.coverage.subsets import meet_counts, nonempty_subsets, used_masks

__all__ = ["delete_one_novelty", "jackknife_novelty_sd"]


def jackknife_novelty_sd(
    X: np.ndarray, reps: np.ndarray, level: float, rng: np.random.Generator
) -> np.ndarray:
    """Set-valued novelty replicates (B, min(K, n)) rescaled to the delete-one jackknife sd at i <= n / 2.

    The jackknife sd, widened by t_{n-1} / z; beyond n / 2 the pooled bootstrap replicates are kept
    (there the delete-one spread is mostly noise). Calibration: docs/statistics.md, "The iid
    baseline from samples". ``rng`` draws signs where the replicates do not vary.
    """
    n = X.shape[0]
    half = min(n // 2, reps.shape[1])
    if n < 3 or half < 1 or reps.shape[0] < 2:
        return reps
    jack = delete_one_novelty(X, half)
    sd = np.sqrt((n - 1) / n * ((jack - jack.mean(axis=0)) ** 2).sum(axis=0))
    sd *= t_quantile(level, n - 1) / normal_quantile(level)
    cols = reps[:, :half]
    mean = cols.mean(axis=0)
    dev = cols - mean
    # Replicates that do not move at all (rare): random signs, independent across inputs, so the
    # index-wise mean over inputs stays a mean of independent terms.
    flat = dev.std(axis=0, ddof=1) <= 0
    if flat.any():
        signs = rng.choice([-1.0, 1.0], size=(reps.shape[0], int(flat.sum())))
        dev[:, flat] = signs - signs.mean(axis=0)
    scale = sd / np.maximum(dev.std(axis=0, ddof=1), 1e-300)
    out = reps.copy()
    out[:, :half] = mean + dev * scale
    return out


def delete_one_novelty(X: np.ndarray, kmax: int) -> np.ndarray:
    """Row l: the novelty U-statistic N(1..kmax) of X (n, m) without sample l, all rows in one pass.

    With s_B = -(-1)^|B| and rho(y, i) = C(n - 1 - y, i - 1) / C(n - 2, i - 1), removing sample l
    lowers Y_B by d_lB = [A_l meets B]:
    (n - 1) N_(-l)(i) = sum_(j, B subset A_j) s_B rho(Y_B - d_lB, i) - sum_(B subset A_l) s_B rho(Y_B - 1, i),
    and rho(Y_B - d) = rho(Y_B) - d (rho(Y_B) - rho(Y_B - 1)) makes the first sum one total minus a
    (samples x subsets) product.
    """
    n, _ = X.shape
    masks, bits = used_masks(X)
    sets, inverse, mult = np.unique(masks, return_inverse=True, return_counts=True)
    lf = est.log_factorial(n)
    i1 = np.arange(kmax)
    left = np.maximum(n - 1 - np.arange(n + 1), 0)  # samples not meeting B, y = 0..n
    rho = np.exp(est._log_binom_ratio(left[:, None], n - 2, i1[None, :], lf))
    rho[n] = 0.0  # Y_B = n: then every sample meets B and the value cancels exactly
    out = np.zeros((n, kmax))
    groups = list(nonempty_subsets(sets, bits))  # an empty match set brings nothing new
    if not groups:
        return out
    S, width = sets.size, n + 1
    # Integer coefficients times tables indexed by y = Y_B: the total sum_B w_B rho(Y_B), each sample's
    # own terms, and sum_B [A_l meets B] w_B (rho(Y_B) - rho(Y_B - 1)) by inclusion-exclusion over
    # T subset of A_l of c(T, y) = sum of w_B over B containing T with Y_B = y (linear in n).
    total, own = np.zeros(width), np.zeros((S, width))
    pair_t, pair_y, pair_w, ask_set, ask_t, ask_sign = [], [], [], [], [], []
    for (g, sub, sign), Y in zip(
        groups, meet_counts(np.zeros(S, dtype=np.int64), masks[None], mult, groups), strict=True
    ):
        w = mult[g][:, None] * sign[None, :]  # every sample j holding the set carries the term
        total += np.bincount(Y.ravel(), weights=w.ravel(), minlength=width)
        rows = np.repeat(g, sign.size) * width + (Y - 1).ravel()
        own += np.bincount(rows, weights=np.tile(sign, g.size), minlength=S * width).reshape(S, width)
        q, t = _pairs(sub.shape[1])
        pair_t.append(sub[:, t].ravel())
        pair_y.append(Y[:, q].ravel())
        pair_w.append(w[:, q].ravel())
        ask_set.append(np.repeat(g, sign.size))
        ask_t.append(sub.ravel())
        ask_sign.append(np.tile(sign, g.size))
    T, y, w = np.concatenate(pair_t), np.concatenate(pair_y), np.concatenate(pair_w)
    values, tid = np.unique(T, return_inverse=True)
    keys, kinv = np.unique(tid.reshape(-1) * width + y, return_inverse=True)
    c = np.bincount(kinv.reshape(-1), weights=w)  # c(T, y) per distinct (T, y), sorted by T then y
    c_tid = keys // width
    lo = np.searchsorted(c_tid, np.arange(values.size), side="left")
    hi = np.searchsorted(c_tid, np.arange(values.size), side="right")
    q_tid = np.searchsorted(values, np.concatenate(ask_t))
    q_set, q_sign = np.concatenate(ask_set), np.concatenate(ask_sign)
    size = hi[q_tid] - lo[q_tid]
    which = np.repeat(np.arange(q_tid.size), size)
    idx = lo[q_tid][which] + (np.arange(which.size) - np.repeat(np.cumsum(size) - size, size))
    meet = np.bincount(
        q_set[which] * width + keys[idx] % width, weights=q_sign[which] * c[idx], minlength=S * width
    ).reshape(S, width)
    step = np.zeros((width, kmax))
    step[1:] = rho[1:] - rho[:-1]  # rho(y) - rho(y - 1)
    out = (total @ rho)[None, :] - (meet @ step)[inverse] - (own @ rho)[inverse]
    return out / (n - 1)


def _pairs(P: int) -> tuple[np.ndarray, np.ndarray]:
    """(q, t) column pairs of a set's subsets (columns 0..P-1 are patterns 1..P) with pattern t inside q."""
    pat = np.arange(1, P + 1)
    q, t = np.nonzero((pat[None, :] & ~pat[:, None]) == 0)  # t's bits within q's
    return q, t

"""Beyond n samples: F(k) and time to coverage from the law of finding the strategies not yet seen."""

from __future__ import annotations

import numpy as np

from seffi.coverage import estimators as est


def chao_f0(rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(f1, Chao1's f0) of each row of incidence counts ``rows`` (D, m) out of n samples: (D,) each."""
    f1 = (rows == 1).sum(axis=1).astype(np.float64)
    f2 = (rows == 2).sum(axis=1).astype(np.float64)
    return f1, est.chao_f0_array(n, f1, f2)


def detected_law(rows: np.ndarray, n: int, f1: np.ndarray, f0: np.ndarray, unseen: np.ndarray) -> tuple:
    """(undetected mass (D,), detected probabilities (D, m)) of ``assemblage``; no mass unless ``unseen``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(unseen & (f1 > 0), f1 / n * (n * f0 / (n * f0 + f1)), 0.0)
    rel = rows / n
    tail = (1.0 - rel) ** n
    b = (rel * tail).sum(axis=1)
    w = np.where((a > 0) & (b > 0), a / np.where(b > 0, b, 1.0), 0.0)
    return a, rel * (1.0 - w[:, None] * tail)


def model_law(Y: np.ndarray, n: int, m: int, single: np.ndarray | bool) -> np.ndarray:
    """q_s (..., m), the probability that a sample matches column s, fitted to incidence counts Y (..., m).

    Detected columns get the iNEXT assemblage probabilities; the m - S_obs unseen ones share the
    Chao-Jost undetected mass, or without singletons each get a uniform prior's posterior mean.
    ``single`` (broadcast to Y's leading shape): a categorical law (remainder: "matches nothing").
    """
    Y = np.asarray(Y, dtype=np.int64)
    rows = Y.reshape(-1, Y.shape[-1])
    single = np.broadcast_to(np.asarray(single, dtype=bool), Y.shape[:-1]).reshape(-1)
    f1, f0 = chao_f0(rows, n)
    u = (rows == 0).sum(axis=1)
    a, detected = detected_law(rows, n, f1, f0, (u > 0) & (f0 > 0))
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
    """(Pr[all u found] (D, J), Pr[fewer than short[i] found] (len(short), D, J)) after j = 1..J draws.

    u missing columns of D datasets, each found with probability r per draw; ``short`` (N, D).
    Single-label: a Markov chain over the number found f; set-valued: each found w.p. 1 - (1 - r)^j
    independently. The f that carry less than e^-50 after J draws are left out (Chernoff's bound
    for the negatively associated indicators "column s found", mean mu): the chain only moves up,
    so the f it keeps are exact, and the work is J x (the f kept), not J x M.
    """
    D, N = u.shape[0], short.shape[0]
    full, surv = np.zeros((D, J)), np.ones((N, D, J))
    if J == 0:
        return full, surv
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


def _full_law(q: np.ndarray, K: int) -> np.ndarray:
    """F(k) ~ prod_s 1 - (1 - q_s)^k (D, K) under per-column laws q (D, m): exact for independent inclusion.

    Single-label: an upper approximation, used only for the spread of F replicates.
    """
    ks = np.arange(1, K + 1, dtype=np.float64)
    with np.errstate(divide="ignore"):  # q = 1: log1p(-1) = -inf, and the factor is 1 as it should be
        miss = np.log1p(-np.minimum(q, 1.0))[:, :, None]
    return np.clip(np.prod(-np.expm1(ks[None, None, :] * miss), axis=1), 0.0, 1.0)


def _beyond_n(Y: np.ndarray, n: int, m: int, single: np.ndarray, J: int, needs: list[int]) -> tuple:
    """(full (D, J), survival (len(needs), D, J)) at k = n + 1..n + J, given n observed samples.

    The future given the data: finding the u = m - S_obs missing strategies, their per-draw
    probabilities from ``model_law`` (model-based: ``Curves.extrapolated``).
    """
    Y = np.asarray(Y, dtype=np.int64)
    s_obs = (Y > 0).sum(axis=1)
    u = m - s_obs
    q = model_law(Y, n, m, single)
    r = np.where(u > 0, np.where(Y == 0, q, 0.0).max(axis=1), 0.0)
    short = np.array([need - s_obs for need in needs], dtype=np.int64).reshape(len(needs), len(u))
    full, surv = _missing_found(u, r, J, single, short)
    full = np.where(u[:, None] == 0, 1.0, full)
    return np.clip(full, 0.0, 1.0), np.clip(surv, 0.0, 1.0)

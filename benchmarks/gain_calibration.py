"""Calibration of the gain's interval where the room to gain is small or held by a few inputs.

``Curves.gain`` treats the policy's inputs as a sample from a population and gives the 95 % interval
of Gain(K) = (AUC − AUC_iid) / (AUC_oracle − AUC_iid). This script simulates datasets whose truth is
known exactly and prints, side by side, how often the interval contains the true gain:

- **t (before)**: the delta-method interval of the ratio of means with Student's t on U − 1 degrees
  of freedom (the residuals num − g·den of the inputs; written out below as the reference);
- **Fieller (library)**: what ``Curves.gain`` returns; an unbounded interval (lo/hi None, the room
  not clearly above 0 over the inputs) counts as covering, and its share is printed with the
  coverage of the bounded intervals alone;

with the median width of the bounded intervals, and the share of datasets whose gain is flagged
fragile (``Gain.fragile``: room < 0.05 or held by fewer than 25 % of the inputs).

Design. A pool of P = 2,000 inputs. An input *with room* has M_x in 3..8 strategies and a base law
p_x ~ Dirichlet(alpha) (``alpha`` per case: small is skewed, so the oracle has much room over iid;
large is near uniform, so it has little); an input *without room* has one strategy that every
sample matches (iid, oracle and policy all cover it at once). The policy runs K samples per run,
``runs`` runs per input: each run is, with probability lambda_x ~ U(0, 1), a no-repeat run (the
strategies in a random order), else iid from p_x, so its exact per-input AUC is
lambda_x AUC_oracle + (1 − lambda_x) AUC_iid and the pool's gain is about 0.5 (printed: the exact
pool value from the per-input AUCs). Baselines are exact per input. A dataset draws U inputs without
replacement; datasets with no room at all (every drawn input without room) have no gain and are
counted apart.

Run ``python benchmarks/gain_calibration.py`` (about a minute; ``--datasets N`` per case, default
1,000; ``--quick`` for 400).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from seffi.coverage import Curves
from seffi.coverage.resampling import t_quantile
from seffi.coverage.sums_curves import curves_from_runs

P, MMAX = 2000, 8


@dataclass(frozen=True)
class Case:
    """One row.

    Attributes:
        name: Row label.
        inputs: U, inputs per dataset.
        share: Share of the pool's inputs with room.
        alpha: Dirichlet concentrations of the base laws of inputs with room (each input draws one).
        K: Budget.
        runs: Policy runs per input.
    """

    name: str
    inputs: int
    share: float
    alpha: tuple[float, ...] = (0.7,)
    K: int = 8
    runs: int = 4


CASES = (
    Case("room held by 20% of 16 inputs", 16, 0.2),
    Case("room held by 20% of 32 inputs", 32, 0.2),
    Case("room held by 20% of 64 inputs", 64, 0.2),
    Case("room held by 10% of 64 inputs", 64, 0.1),
    Case("small room: near-uniform laws, 16 inputs", 16, 1.0, (30.0,), K=64),
    Case("small room: near-uniform laws, 32 inputs", 32, 1.0, (30.0,), K=64),
    Case("room mostly in 1/8 of inputs, 16 inputs", 16, 1.0, (30.0,) * 7 + (0.2,), K=64),
    Case("room mostly in 1/8 of inputs, 32 inputs", 32, 1.0, (30.0,) * 7 + (0.2,), K=64),
    Case("room mostly in 1/8 of inputs, 64 inputs", 64, 1.0, (30.0,) * 7 + (0.2,), K=64),
    Case("control: every input has room, 16 inputs", 16, 1.0),
)


def pool(case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The pool's laws, mixing weights and exact per-input AUCs."""
    room = rng.random(P) < case.share
    m = np.where(room, rng.integers(3, MMAX + 1, size=P), 1)
    alpha = rng.choice(np.asarray(case.alpha), size=P)
    g = rng.gamma(alpha[:, None], size=(P, MMAX)) * (np.arange(MMAX)[None, :] < m[:, None])
    p = g / g.sum(1, keepdims=True)
    ks = np.arange(1, case.K + 1)
    iid = ((1.0 - (1.0 - p[:, None, :]) ** ks[None, :, None]).sum(-1) / m[:, None]).mean(1)
    oracle = (np.minimum(ks[None, :], m[:, None]) / m[:, None]).mean(1)
    lam = rng.uniform(size=P)
    return {"m": m, "p": p, "lam": lam, "I": iid, "O": oracle, "A": lam * oracle + (1 - lam) * iid}


def first_hits(pl: dict[str, np.ndarray], x: np.ndarray, K: int, rng: np.random.Generator) -> np.ndarray:
    """First-hit indices (R, MMAX) of one run per entry of ``x`` (input indices)."""
    R = x.size
    cdf = pl["p"][x].cumsum(1)
    draws = (rng.random((R, K))[:, :, None] > cdf[:, None, :]).sum(-1)
    hit = draws[:, :, None] == np.arange(MMAX)
    iid = np.where(hit.any(1), hit.argmax(1), -1)
    # A no-repeat run: the input's strategies in a random order (positions beyond K never hit).
    keys = np.where(np.arange(MMAX)[None, :] < pl["m"][x][:, None], rng.random((R, MMAX)), np.inf)
    pos = keys.argsort(1).argsort(1)
    norep = np.where((pos < K) & np.isfinite(keys), pos, -1)
    return np.where((rng.random(R) < pl["lam"][x])[:, None], norep, iid)


def exact_baseline(kind: str, ids: list[str], values: np.ndarray, K: int) -> Curves:
    """Exact per-input baseline curves carrying what the gain reads."""
    z = np.zeros(K)
    return Curves(
        kind=kind, K=K, coverage=z, novelty=z, expected_new=z, full_coverage=z, auc=float(values.mean()),
        time_to_coverage={}, n_inputs=len(ids), input_keys=[(None, i) for i in ids], input_auc=values,
    )  # fmt: skip


def t_interval(num: np.ndarray, den: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The delta-method ratio interval with t on U − 1 degrees of freedom (the reference 'before')."""
    g = num.mean() / den.mean()
    se = math.sqrt((num - g * den).var(ddof=1) / num.size) / den.mean()
    half = t_quantile(level, num.size - 1) * se
    return g - half, g + half


def run_case(case: Case, datasets: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    pl = pool(case, rng)
    room = float(pl["O"].mean() - pl["I"].mean())
    truth = float((pl["A"].mean() - pl["I"].mean()) / room)
    ids = [f"x{i}" for i in range(P)]
    iid, oracle = (exact_baseline(k, ids, pl[v], case.K) for k, v in (("iid", "I"), ("oracle", "O")))
    U, R = case.inputs, case.runs
    subs = np.sort(np.argsort(rng.random((datasets, P)), axis=1)[:, :U], axis=1)
    x = np.repeat(subs.ravel(), R)
    fh = first_hits(pl, x, case.K, rng)
    stacked = curves_from_runs(
        fh, np.full(x.size, case.K), pl["m"][x], case.K, unit=np.repeat(np.arange(datasets * U), R), n_boot=0
    )
    a = stacked.input_auc.reshape(datasets, U)
    out = {"truth": truth, "no_room": 0, "fragile": 0, "unbounded": 0, "old": 0, "new": 0, "bounded": 0}
    widths: dict[str, list[float]] = {"old": [], "new": []}
    for d in range(datasets):
        sub = subs[d]
        if pl["O"][sub].mean() - pl["I"][sub].mean() <= 1e-12:
            out["no_room"] += 1
            continue
        policy = dataclasses.replace(
            stacked, auc=float(a[d].mean()), input_auc=a[d], input_valid_auc=None, n_inputs=U,
            input_keys=[(None, ids[i]) for i in sub], n_boot=200, seed=d,
        )  # fmt: skip
        g = policy.gain(iid, oracle)
        out["fragile"] += g.fragile
        if g.lo is None:
            out["unbounded"] += 1
            out["new"] += 1
        else:
            out["new"] += g.lo <= truth <= g.hi
            out["bounded"] += g.lo <= truth <= g.hi
            widths["new"].append(g.hi - g.lo)
        lo, hi = t_interval(a[d] - pl["I"][sub], pl["O"][sub] - pl["I"][sub])
        out["old"] += lo <= truth <= hi
        widths["old"].append(hi - lo)
    n = datasets - out["no_room"]
    result = {"truth": truth, "room": room, "n": n, "no_room": out["no_room"] / datasets}
    for k in ("fragile", "unbounded", "old", "new"):
        result[k] = out[k] / max(n, 1)
    result["bounded"] = out["bounded"] / max(n - out["unbounded"], 1)
    for k in ("old", "new"):
        result[f"{k}_width"] = float(np.median(widths[k])) if widths[k] else math.nan
    return result


def _se(rate: float, n: int) -> float:
    """Binomial standard error of a rate over n datasets."""
    return math.sqrt(max(rate * (1 - rate), 1e-12) / max(n, 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=1000, help="simulated datasets per case")
    ap.add_argument("--quick", action="store_true", help="400 datasets per case")
    ap.add_argument("--seed", type=int, default=39)
    args = ap.parse_args(argv)
    D = 400 if args.quick else args.datasets
    print(f"{D} datasets per case; 95% intervals; cover = share containing the truth (target 0.93-0.97)")
    print(
        f"{'case':42s} {'room':>5s} {'truth':>6s} {'fragile':>7s} | {'t (before): cover  width':>25s} | "
        f"{'Fieller: cover  width  unbounded  bounded cover':>47s}"
    )
    for i, case in enumerate(CASES):
        started = time.perf_counter()
        r = run_case(case, D, args.seed + i)
        old = f"{r['old']:.3f} ± {_se(r['old'], r['n']):.3f}  {r['old_width']:.2f}"
        new = f"{r['new']:.3f} ± {_se(r['new'], r['n']):.3f}  {r['new_width']:.2f}  {r['unbounded']:9.1%}"
        extra = f"  ({r['no_room']:.1%} without room)" if r["no_room"] else ""
        head = f"{case.name:42s} {r['room']:5.3f} {r['truth']:+6.3f} {r['fragile']:7.1%}"
        print(
            f"{head} | {old:>25s} | {new:>33s}  {r['bounded']:13.3f}"
            f"  ({time.perf_counter() - started:.0f} s){extra}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How far a streaming window's gain trails a policy that keeps changing, and how old its data is.

A simulated training stream goes through ``CoverageMonitor`` (its public API: ``update`` of episode
batches, ``log``): E env rows, U inputs, M strategies, budget K. The policy changes linearly over the
T episodes: at episode t it plays strategy 0 with probability 1 - t/T and otherwise a uniform
strategy; the base (iid) law is Zipf(1) over the M strategies, the oracle covers one new strategy per
sample. The true gain of the policy of episode t is exact (per strategy, C(k) = 1 - (1 - q_s)^k).

Two ways of feeding inputs, each a row of the output:

- ``short runs``: each env row runs its K samples of one input, then the next input: a run spans
  K x E episodes, far less than the window;
- ``long runs``: each env row draws one of U inputs per episode, so a run (an input's K samples in
  one row) spans about U x K x E episodes, more than the window.

For every log from the first full window on, over ``--seeds`` streams: the mean of the windowed gain
minus the current policy's true gain ("lag"), the change of the true gain over the last half window
("half window": the lag of an average over the window, roughly), the sd of one log's windowed gain
across streams at the last log, the mean ``seffi/window/runs``, the range of
``seffi/window/episodes`` and of ``seffi/window/age`` ("-" when the monitor does not log it), the
range of the true age of the oldest sample, from the stream itself, of a window that dates runs by
their last sample (the runs completed in it: "age if by last") or by their first (the runs that
started and completed in it: "age if by first"), and the share of logs whose window holds no run.

Run ``python benchmarks/window_lag.py`` (about a minute; ``--seeds N``, default 10).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from seffi.callbacks.core import CoverageMonitor
from seffi.coverage.env_baselines import EnvBaselines
from seffi.episodes import EpisodeBatch


class _Null:
    def log(self, data: Any, step: int) -> None:
        pass

    def log_snapshot(self, *args: Any, **kwargs: Any) -> None:
        pass

    def finish(self, *args: Any, **kwargs: Any) -> None:
        pass


def _auc(q: np.ndarray, K: int) -> float:
    """AUC@K of iid sampling with per-strategy match probabilities ``q`` (single-label)."""
    ks = np.arange(1, K + 1)
    return float((1 - (1 - q[None, :]) ** ks[:, None]).mean())


def _stream(
    rng: np.random.Generator, T: int, E: int, U: int, M: int, K: int, long_runs: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(input, env row, strategy, sample index) of each of the T episodes."""
    t = np.arange(T)
    row = t % E
    if long_runs:
        x = rng.integers(0, U, T)
    else:  # each row: K samples of one input, then the next (rows start on different inputs)
        x = (row + E * ((t // E) // K)) % U
    explore = rng.random(T) < t / T
    s = np.where(explore, rng.integers(0, M, T), 0)
    # sample index within each (input, row) run: 1..K, then a new run
    key = x * E + row
    count = np.zeros(U * E, dtype=np.int64)
    k = np.empty(T, dtype=np.int64)
    for i in range(T):  # sequential by nature; T is small
        k[i] = count[key[i]] % K + 1
        count[key[i]] += 1
    return x, row, s, k


def _runs(x: np.ndarray, row: np.ndarray, k: np.ndarray, E: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """(first episode, last episode) of every complete run, 1-based episode counts."""
    first: dict[int, int] = {}
    out = []
    for i in range(x.size):
        key = int(x[i]) * E + int(row[i])
        if k[i] == 1:
            first[key] = i + 1
        if k[i] == K:
            out.append((first.pop(key), i + 1))
    a = np.array(out, dtype=np.int64).reshape(-1, 2)
    return a[:, 0], a[:, 1]


def simulate(seed: int, T: int, E: int, U: int, M: int, K: int, L: int, W: int, long_runs: bool) -> dict:
    rng = np.random.default_rng(seed)
    strategies = tuple(f"s{j}" for j in range(M))
    base = 1.0 / np.arange(1, M + 1)
    base /= base.sum()
    law = {frozenset([s]): float(p) for s, p in zip(strategies, base, strict=True)}
    baselines = EnvBaselines(
        strategies,
        K,
        base_law=lambda x, valid_only=False: law,
        references=lambda x: {s: frozenset([s]) for s in strategies},
    )
    monitor = CoverageMonitor(
        K,
        strategies,
        baselines=baselines,
        sinks=_Null(),
        window=W,
        log_every=L,
        n_boot=0,
        log_curves_every=10**9,
    )
    auc_iid, auc_oracle = _auc(base, K), float(np.mean(np.minimum(np.arange(1, K + 1), M) / M))
    x, row, s, k = _stream(rng, T, E, U, M, K, long_runs)
    first, last = _runs(x, row, k, E, K)
    hits = np.eye(M, dtype=bool)[s]
    ids = np.array([f"x{i}" for i in range(U)], dtype=object)[x]
    keys = ("t", "gain", "truth", "half", "runs", "episodes", "age", "age_done", "age_both")
    out: dict[str, list] = {key: [] for key in keys}
    for a in range(0, T, L):
        b = min(a + L, T)
        monitor.update(
            EpisodeBatch.of(strategies, ids[a:b], hits[a:b], env_index=row[a:b], sample_index=k[a:b])
        )
        scalars = monitor.log(b)
        if scalars is None or b < W:
            continue
        rhos = ((b - 1) / T, (b - 1 - W / 2) / T)
        truth = [(_auc((1 - r) * np.eye(M)[0] + r / M, K) - auc_iid) / (auc_oracle - auc_iid) for r in rhos]
        out["t"].append(b)
        out["truth"].append(truth[0])  # the policy of the last episode
        out["half"].append(truth[1] - truth[0])  # the lag of an average over the window, roughly
        out["runs"].append(scalars.get("seffi/window/runs", np.nan))
        out["gain"].append(scalars.get("seffi/window/gain_vs_iid", np.nan))
        out["episodes"].append(scalars.get("seffi/window/episodes", np.nan))
        out["age"].append(scalars.get("seffi/window/age", np.nan))
        done = (last > b - W) & (last <= b)  # completed in the window
        both = done & (first > b - W)  # started and completed in it
        out["age_done"].append(b - first[done].min() + 1 if done.any() else np.nan)
        out["age_both"].append(b - first[both].min() + 1 if both.any() else np.nan)
    return {key: np.asarray(v, dtype=np.float64) for key, v in out.items()}


def _range(v: np.ndarray) -> str:
    v = v[np.isfinite(v)]
    return "-" if v.size == 0 else f"{v.min():,.0f}-{v.max():,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="simulated training streams per row")
    ap.add_argument("--episodes", type=int, default=65536)
    ap.add_argument("--window", type=int, default=4096)
    ap.add_argument("--log-every", type=int, default=1024)
    args = ap.parse_args(argv)
    E, U, M, K = 16, 64, 8, 8
    T, W, L = args.episodes, args.window, args.log_every
    print(f"T = {T:,} episodes, window {W:,}, a log every {L:,}; {E} env rows, {U} inputs, M = {M}, K = {K}")
    head = ["stream", "lag", "half window", "sd of a log", "window/runs", "window/episodes"]
    head += ["window/age", "age if by last", "age if by first", "empty"]
    widths = [max(len(h), 11) for h in head]
    print(" | ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    for name, long_runs in (("short runs", False), ("long runs", True)):
        t0 = time.perf_counter()
        sims = [simulate(seed, T, E, U, M, K, L, W, long_runs) for seed in range(args.seeds)]
        diff = np.concatenate([r["gain"] - r["truth"] for r in sims])
        lag = float(np.nanmean(diff))
        last = np.array([r["gain"][-1] for r in sims])
        sd = float(np.nanstd(last, ddof=1)) if np.isfinite(last).sum() > 1 else float("nan")
        empty = float(np.mean(np.concatenate([~np.isfinite(r["gain"]) for r in sims])))
        cat = {key: np.concatenate([r[key] for r in sims]) for key in sims[0]}
        half, runs = float(np.mean(cat["half"])), float(np.nanmean(cat["runs"]))
        cells = [name, f"{lag:+.3f}", f"{half:+.3f}", f"{sd:.3f}", f"{runs:.0f}", _range(cat["episodes"])]
        cells += [_range(cat["age"]), _range(cat["age_done"]), _range(cat["age_both"]), f"{empty:.2f}"]
        line = " | ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))
        print(f"{line}   ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

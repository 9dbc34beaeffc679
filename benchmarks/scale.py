"""Cost of the tracker as the number of distinct inputs U grows: ingest, ``point()``, ``curves()``, memory.

Prints, side by side in one run, for U = 10^2, 10^4 and 10^5 distinct inputs (10^6 episodes, K = 16,
M = 32 declared strategies, batches of 4,096 episodes through ``CoverageTracker.record``, the
monitor's path):

* **ingest us/ep** — CPU microseconds per episode inside ``record()`` (run assignment, run table,
  per-input sums, barcode);
* **point ms** — CPU milliseconds of one ``point()`` after a batch (mean over the batches; a
  streaming log's cost);
* **curves s** — CPU seconds of one ``curves()`` at the end (``n_boot`` replicates, default 1,000);
* **curves MB** — the peak of memory allocated during that ``curves()`` call (``tracemalloc``);
* **max RSS MB** — the process's peak resident memory (every U runs in its own process);
* **state B/ep** — bytes of ``json.dumps(tracker.state_dict())`` per episode.

The last column is the growth exponent between the smallest and the largest U: the slope of
log(cost) against log(U) (0: flat in U, 1: linear). The stream: ``--envs`` env rows (64), each
running runs of K consecutive samples of one input drawn uniformly from the U ids, rows out of phase
so runs straddle batches; each sample matches one strategy (a Zipf law shifted per input) nine times
in ten, and is correct half the time. ``--no-index`` leaves out ``sample_index``/``run_index`` (runs
then end after K samples: the assigner's fallback path). CPU times come from one shared, loaded
machine: read the ratios between columns and between runs of this script, not the absolute values.

``--monitor`` feeds a Gymnasium-style stream instead (64 rows, K = 8, M = 32, one run per input, the
inputs cycling through the U ids) to ``CoverageMonitor`` with its default logging (no W&B, no plots)
and prints its CPU microseconds per episode (ingest and logs) and peak RSS.

    python benchmarks/scale.py                                  # ~1 minute on 2 shared cores
    python benchmarks/scale.py --episodes 200000 --inputs 100,10000 --n-boot 200
    python benchmarks/scale.py --monitor --episodes 400000 --inputs 100,100000
    cd /other/checkout && python /path/to/benchmarks/scale.py   # the same stream on another checkout

The script imports whichever ``seffi`` the interpreter finds (run it from another checkout's venv for
a before/after comparison; ``--barcode-rows`` sets the tracker's barcode rows, 64 by default, the
monitor's setting).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

K, M, BATCH = 16, 32, 4096


def stream(n_inputs: int, episodes: int, envs: int, seed: int, index: bool):
    """Yield (input_ids, env_index, sample_index, run_index, hits, valid) batches of BATCH episodes."""
    rng = np.random.default_rng(seed)
    steps = episodes // envs + 1
    per = BATCH // envs
    runs_per_row = (steps + per + K) // K + 1
    run_input = rng.integers(0, n_inputs, size=(envs, runs_per_row))
    ids = np.array([f"x{i:07d}" for i in range(n_inputs)], dtype=object)
    phase = (np.arange(envs) * 5) % K
    zipf = 1.0 / np.arange(1, M + 1) ** 1.1
    zipf /= zipf.sum()
    done = 0
    for t0 in range(0, steps, per):
        t = np.arange(t0, t0 + per)
        g = t[:, None] + phase[None, :]  # (steps, envs): position in the row's sequence
        run, k = g // K, g % K
        row = np.broadcast_to(np.arange(envs)[None, :], g.shape)
        u = run_input[row, run].ravel()
        n = u.size
        strat = (rng.choice(M, size=n, p=zipf) + u) % M
        hits = np.zeros((n, M), dtype=bool)
        matched = rng.random(n) < 0.9
        hits[np.flatnonzero(matched), strat[matched]] = True
        valid = rng.random(n) < 0.5
        si = k.ravel().astype(np.int64) if index else np.full(n, -1, dtype=np.int64)
        ri = run.ravel().astype(np.int64) if index else np.full(n, -1, dtype=np.int64)
        take = min(n, episodes - done)
        if take <= 0:
            return
        yield (
            ids[u[:take]],
            row.ravel()[:take].astype(np.int64),
            si[:take],
            ri[:take],
            hits[:take],
            valid[:take],
        )
        done += take


def measure(n_inputs: int, episodes: int, envs: int, n_boot: int, barcode_rows: int, index: bool) -> dict:
    """One U in this process: the figures of the table."""
    from seffi.coverage import CoverageTracker

    strategies = [f"s{j}" for j in range(M)]
    tracker = CoverageTracker(strategies, budget=K, barcode_rows=barcode_rows, barcode_cols=K)
    ingest = point = 0.0
    logs = 0
    for batch in stream(n_inputs, episodes, envs, seed=n_inputs, index=index):
        t = time.process_time()
        tracker.record(*batch)
        ingest += time.process_time() - t
        if tracker.complete_runs():
            t = time.process_time()
            tracker.point()
            point += time.process_time() - t
            logs += 1
    t = time.process_time()
    c = tracker.curves(n_boot=n_boot, seed=0)
    curves_s = time.process_time() - t
    tracemalloc.start()
    tracker.curves(n_boot=n_boot, seed=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    state = json.dumps(tracker.state_dict())
    return {
        "ingest us/ep": 1e6 * ingest / episodes,
        "point ms": 1e3 * point / max(logs, 1),
        "curves s": curves_s,
        "curves MB": peak / 2**20,
        "max RSS MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "state B/ep": len(state) / episodes,
        "_auc": c.auc,
        "_runs": c.n_runs,
    }


def monitor_stream(n_inputs: int, episodes: int, seed: int):
    """Yield 64-row steps of episode ends (Gymnasium-style: K = 8, one run per input, inputs cycling)."""
    from seffi.callbacks import EpisodeEnd

    rng = np.random.default_rng(seed)
    envs, K8 = 64, 8
    strategies = [f"s{j}" for j in range(M)]
    zipf = 1.0 / np.arange(1, M + 1) ** 1.1
    zipf /= zipf.sum()
    phase = (np.arange(envs) * 3) % K8
    for step in range(episodes // envs):
        g = step + phase
        run = g // K8 * envs + np.arange(envs)  # a run per (row, block of K samples)
        strat = rng.choice(M, size=envs, p=zipf)
        yield step, [
            EpisodeEnd(f"x{int(r) % n_inputs:07d}", (strategies[(s + r) % M],), bool(v), env_index=e,
                       sample_index=int(k) + 1, run_index=int(r))
            for e, (r, k, s, v) in enumerate(zip(run, g % K8, strat, rng.random(envs) < 0.5, strict=True))
        ]  # fmt: skip


def measure_monitor(n_inputs: int, episodes: int) -> dict:
    """CoverageMonitor with its default logging (no W&B, no plots) fed ``episodes`` ends."""
    from seffi.callbacks import CoverageMonitor

    class Null:
        def log(self, *a, **k): ...
        def log_snapshot(self, *a, **k): ...
        def finish(self, *a, **k): ...

    m = CoverageMonitor(8, [f"s{j}" for j in range(M)], sinks=Null())
    total = 0.0
    for step, ends in monitor_stream(n_inputs, episodes, seed=n_inputs):
        t = time.process_time()
        m.ingest_ends(ends)
        m.maybe_log((step + 1) * 64)
        total += time.process_time() - t
    return {
        "monitor us/ep": 1e6 * total / episodes,
        "logs": m.n_logs,
        "max RSS MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", default="100,10000,100000", help="comma-separated U values")
    ap.add_argument("--episodes", type=int, default=1_000_000)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--barcode-rows", type=int, default=64)
    ap.add_argument("--no-index", action="store_true", help="episodes without sample_index/run_index")
    ap.add_argument("--monitor", action="store_true", help="CoverageMonitor, default logging, K = 8")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None and args.monitor:
        print(json.dumps(measure_monitor(args.child, args.episodes)))
        return
    if args.child is not None:
        got = measure(args.child, args.episodes, args.envs, args.n_boot, args.barcode_rows, not args.no_index)
        print(json.dumps(got))
        return
    us = [int(x) for x in args.inputs.split(",")]
    import seffi

    what = "CoverageMonitor, default logging, K = 8" if args.monitor else f"K = {K}"
    print(
        f"seffi from {os.path.dirname(seffi.__file__)}; {args.episodes} episodes, {what}, M = {M}, "
        f"{args.envs} env rows, batches of {BATCH}, n_boot = {args.n_boot}, barcode_rows = "
        f"{args.barcode_rows}, {'no indices' if args.no_index else 'sample_index and run_index'}"
    )
    rows = {}
    for u in us:
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            str(u),
            "--episodes",
            str(args.episodes),
            "--envs",
            str(args.envs),
            "--n-boot",
            str(args.n_boot),
            "--barcode-rows",
            str(args.barcode_rows),
        ]
        cmd += ["--no-index"] if args.no_index else []
        cmd += ["--monitor"] if args.monitor else []
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if out.returncode != 0:
            sys.exit(f"U = {u} failed:\n{out.stderr}")
        rows[u] = json.loads(out.stdout.strip().splitlines()[-1])
        got = (
            f" (AUC {rows[u]['_auc']:.4f} over {rows[u]['_runs']} complete runs)" if "_auc" in rows[u] else ""
        )
        print(f"  U = {u}: done{got}", flush=True)
    names = [k for k in rows[us[0]] if not k.startswith("_")]
    head = "| U | " + " | ".join(names) + " |"
    print(head)
    print("|" + "---|" * (len(names) + 1))
    for u in us:
        print(f"| {u:,} | " + " | ".join(f"{rows[u][n]:.3g}" for n in names) + " |")
    if len(us) > 1:
        lo, hi = us[0], us[-1]
        slope = [math.log(max(rows[hi][n], 1e-9) / max(rows[lo][n], 1e-9)) / math.log(hi / lo) for n in names]
        print(f"| exponent {lo:,}->{hi:,} | " + " | ".join(f"{s:.2f}" for s in slope) + " |")


if __name__ == "__main__":
    main()

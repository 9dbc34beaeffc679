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

The last two rows are the ratio of each column between the smallest and the largest U and its growth
exponent: the slope of log(cost) against log(U) (0: flat in U, 1: linear). Yardsticks from 100 to
20,000 inputs (``--inputs 100,20000``): ingest under 2.5x and point under 3x (per-batch work over
every input, and every input's sums re-weighted at each log, would cost 6x and about 90x). A last
line shows the ingest of the smallest U without ``sample_index``/``run_index`` beside the indexed one
(yardstick: under 2.5x; a Python loop over each episode costs 5-7x). The stream: ``--envs`` env rows
(64), each running runs of K consecutive samples of one input drawn uniformly from the U ids, rows
out of phase so runs straddle batches; each sample matches one strategy (a Zipf law shifted per
input) nine times in ten, and is correct half the time. ``--no-index`` leaves out
``sample_index``/``run_index`` (runs then end after K samples: the assigner's fallback path). CPU
times come from one shared, loaded machine: read the ratios between columns and between runs of this
script, not the absolute values.

``--strategies M1,M2,...`` times a ``CoverageMonitor`` as the number of declared strategies M grows
instead, each M in its own process: 40 episodes of 10 inputs, K = 4, each matching one strategy drawn
from the M, one ``log()`` and ``finalize()`` (W&B disabled, default plots, ``n_boot=20``). It prints the
CPU seconds of the constructor, the ingest, the log and the finalize, their total, and the peak RSS,
then the largest M's total beside a budget of 20 s at M = 10^5. The cost should follow the
strategies seen, not M.

``--monitor`` feeds a Gymnasium-style stream instead (64 rows, K = 8, M = 32, one run per input, the
inputs cycling through the U ids) to ``CoverageMonitor`` with its default logging (no W&B, no plots)
and prints its CPU microseconds per episode (ingest and logs), the peak RSS after the stream, the
peak of memory allocated by one ``tracker.curves(n_boot=200)`` (``tracemalloc``), the CPU seconds of
``close()`` (the final report and the state's text, built as ``LocalSink`` builds tracker_state.json
and dropped) and the peak RSS after it.

    python benchmarks/scale.py                                  # ~1 minute on 2 shared cores
    python benchmarks/scale.py --episodes 200000 --inputs 100,10000 --n-boot 200
    python benchmarks/scale.py --monitor --episodes 400000 --inputs 100,100000
    python benchmarks/scale.py --strategies 32,1000,100000      # a few seconds
    cd /other/checkout && python /path/to/benchmarks/scale.py   # the same stream on another checkout

``--from-samples`` times the iid baseline from samples instead: ``IidBaseline.from_samples`` plus
``curves(16)`` over P prompts x 64 single-label samples (M = 8 declared strategies, a Zipf(1) law
shuffled per prompt, one sample in ten matching nothing), at ``n_boot`` 0 and 200, for each P of
``--prompts`` (default 1,000 and 10,000), each in its own process: CPU seconds, the peak RSS above the
process's RSS before the call, the peak of memory allocated by the same call repeated under
``tracemalloc``, and the ratio to a floor: the rarefaction C(k) by numpy from the
same input lists (one pass to column indices, then counts), the same numbers as the point estimate;
the numpy part alone (from a label array) is shown beside it; a last line compares the largest P's
ratio at ``n_boot`` 0 with its yardstick (at most 5x the floor). The bootstrap works on chunks of
inputs of a bounded size (``CHUNK_BYTES``), so its memory stays flat in P. ``--old DIR`` runs the
same rows with the ``seffi`` package found in DIR (another checkout) beside them.

    python benchmarks/scale.py --from-samples --old /path/to/other/checkout

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
    """Yield `EpisodeBatch`es of BATCH episodes."""
    from seffi.episodes import EpisodeBatch

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
        yield EpisodeBatch.of(
            [f"s{j}" for j in range(M)],
            ids[u[:take]],
            hits[:take],
            valid=valid[:take],
            env_index=row.ravel()[:take],
            sample_index=si[:take],
            run_index=ri[:take],
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
        tracker.record(batch)
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
    """Yield 64-row steps of finished episodes as batches (K = 8, one run per input, inputs cycling)."""
    from seffi.episodes import EpisodeBatch

    rng = np.random.default_rng(seed)
    envs, K8 = 64, 8
    strategies = tuple(f"s{j}" for j in range(M))
    zipf = 1.0 / np.arange(1, M + 1) ** 1.1
    zipf /= zipf.sum()
    phase = (np.arange(envs) * 3) % K8
    rows = np.arange(envs)
    for step in range(episodes // envs):
        g = step + phase
        run = g // K8 * envs + rows  # a run per (row, block of K samples)
        strat = rng.choice(M, size=envs, p=zipf)
        hits = np.zeros((envs, M), dtype=bool)
        hits[rows, (strat + run) % M] = True
        ids = np.array([f"x{int(r) % n_inputs:07d}" for r in run], dtype=object)
        valid = rng.random(envs) < 0.5
        yield step, EpisodeBatch(strategies, ids, hits, valid, rows, g % K8 + 1, run, np.full(envs, -1))


def measure_monitor(n_inputs: int, episodes: int) -> dict:
    """CoverageMonitor with its default logging (no W&B, no plots) fed ``episodes`` ends, then closed."""
    from seffi.callbacks import CoverageMonitor

    class Null:
        takes_tracker = True  # as seffi's own sinks: the tracker, written as it is read

        def log(self, *a, **k): ...
        def log_snapshot(self, *a, **k): ...
        def finish(self, report=None, tracker_state=None):
            # The state is built as a LocalSink builds tracker_state.json, then dropped.
            if isinstance(tracker_state, dict):  # a checkout whose sinks get the state as a dict
                json.dumps(tracker_state)
            elif tracker_state is not None:
                from seffi.coverage.state import text

                for _ in text(tracker_state):
                    ...

    m = CoverageMonitor(8, [f"s{j}" for j in range(M)], sinks=Null())
    total = 0.0
    for step, batch in monitor_stream(n_inputs, episodes, seed=n_inputs):
        t = time.process_time()
        m.update(batch)
        m.maybe_log((step + 1) * 64)
        total += time.process_time() - t
    ingest_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    m.tracker.curves(n_boot=200, seed=0)
    curves_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    t = time.process_time()
    m.close()
    return {
        "monitor us/ep": 1e6 * total / episodes,
        "logs": m.n_logs,
        "max RSS MB": ingest_rss,
        "curves(200) MB": curves_peak / 2**20,
        "close s": time.process_time() - t,
        "RSS after close MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


#: CPU seconds a monitor over 10^5 declared strategies may take for the ``--strategies`` workload.
STRATEGIES_BUDGET = 20.0


def measure_strategies(n_strategies: int) -> dict:
    """CoverageMonitor over ``n_strategies`` declared strategies: 40 episodes (K = 4), one log, finalize.

    The monitor writes its default plots (the barcode among them), as a user's monitor does.
    """
    import tempfile

    from seffi.callbacks import CoverageMonitor

    K4 = 4
    strategies = [f"s{i}" for i in range(n_strategies)]
    picks = np.random.default_rng(0).integers(n_strategies, size=40)
    infos = [
        {"input_id": f"x{i // K4}", "strategy_matches": (strategies[j],), "sample_index": i % K4 + 1}
        for i, j in enumerate(picks)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        monitor = CoverageMonitor(K4, strategies, out_dir=tmp, wandb="disabled", n_boot=20)
        t1 = time.process_time()
        for info in infos:
            monitor.update_infos(info, True)
        t2 = time.process_time()
        monitor.log(len(infos))
        t3 = time.process_time()
        monitor.finalize(len(infos) + 1)
        t4 = time.process_time()
    return {
        "init s": t1 - t0,
        "ingest s": t2 - t1,
        "log s": t3 - t2,
        "finalize s": t4 - t3,
        "total s": t4 - t0,
        "max RSS MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


#: The --from-samples set-up: samples per prompt, declared strategies, budget.
SAMPLES_N, SAMPLES_M, SAMPLES_K = 64, 8, 16
#: The --from-samples yardstick: CPU of from_samples + curves at n_boot = 0 over the numpy floor.
FLOOR_YARDSTICK = 5.0


def sample_labels(n_prompts: int, seed: int = 0) -> np.ndarray:
    """Labels (P, n) in -1..M-1 (-1: matches nothing) of P prompts, each a Zipf(1) law shuffled per prompt."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, SAMPLES_M + 1)
    p = np.r_[0.9 * w / w.sum(), 0.1]
    lab = rng.choice(SAMPLES_M + 1, size=(n_prompts, SAMPLES_N), p=p)
    perm = np.argsort(rng.random((n_prompts, SAMPLES_M)), axis=1)
    out = np.where(lab < SAMPLES_M, np.take_along_axis(perm, np.minimum(lab, SAMPLES_M - 1), axis=1), -1)
    return out


def rarefaction_floor(labels: np.ndarray, K: int) -> np.ndarray:
    """Mean C(k), k = 1..K, of the prompts by plain numpy: sum_s 1 - C(n - Y_s, k) / C(n, k), over M."""
    P, n = labels.shape
    Y = np.zeros((P, SAMPLES_M + 1), dtype=np.int64)
    np.add.at(Y, (np.repeat(np.arange(P), n), labels.ravel()), 1)
    Y = Y[:, :SAMPLES_M]
    lf = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])
    k = np.arange(1, K + 1)
    a = n - Y[:, :, None]
    ok = a >= k
    ratio = np.where(ok, np.exp(lf[np.where(ok, a, 0)] - lf[np.where(ok, a - k, 0)] - lf[n] + lf[n - k]), 0.0)
    return (1.0 - ratio).sum(axis=1).mean(axis=0) / SAMPLES_M


def measure_from_samples(n_prompts: int, n_boot: int) -> dict:
    """CPU seconds and peak RSS above the start of from_samples + curves(16), and the numpy floor."""
    from seffi.coverage import IidBaseline

    labels = sample_labels(n_prompts)
    ids = [f"s{j}" for j in range(SAMPLES_M)]
    samples = {f"p{i}": [[ids[v]] if v >= 0 else [] for v in row] for i, row in enumerate(labels.tolist())}
    t0 = time.process_time()
    floor = rarefaction_floor(labels, SAMPLES_K)
    numpy_s = time.process_time() - t0
    # The same from the input lists: one pass to column indices (what any reader of them pays).
    t0 = time.process_time()
    index = {s: j for j, s in enumerate(ids)}
    read = np.array(
        [[index[s] if s else -1 for ms in rows for s in (ms or [None])] for rows in samples.values()]
    )
    floor_read = rarefaction_floor(read, SAMPLES_K)
    floor_s = time.process_time() - t0
    assert np.array_equal(floor, floor_read)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.process_time()
    c = IidBaseline.from_samples(samples, strategies=ids).curves(SAMPLES_K, n_boot=n_boot, seed=0)
    secs = time.process_time() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()  # the same call again, its peak of allocated memory (freed memory reused by RSS)
    IidBaseline.from_samples(samples, strategies=ids).curves(SAMPLES_K, n_boot=n_boot, seed=0)
    alloc = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "alloc MB": alloc / 2**20,
        "s": secs,
        "floor s": floor_s,
        "numpy s": numpy_s,
        "peak MB": max(rss1 - rss0, 0) / 1024,
        "_diff": float(np.abs(c.coverage - floor).max()),
        "_auc": float(c.auc),
        "_auc_lo": None if c.auc_lo is None else float(c.auc_lo),
    }


def from_samples_rows(args: argparse.Namespace) -> None:
    """The --from-samples table: each (P, n_boot) in its own process, new beside --old when given."""
    prompts = [int(x) for x in args.prompts.split(",")]
    print(
        f"IidBaseline.from_samples + curves({SAMPLES_K}): P prompts x {SAMPLES_N} single-label samples, "
        f"M = {SAMPLES_M}; CPU s, peak RSS MB above the start, x = CPU / floor (numpy rarefaction from the "
        "input lists; numpy s: from a label array)"
    )
    head = "| P | n_boot | numpy s | floor s | new s | new x | new MB | new alloc MB |"
    if args.old:
        head += " old s | old x | old MB | old alloc MB | old / new |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for p in prompts:
        for b in (0, 200):
            new = child(p, args, "--from-samples", "--n-boot-samples", str(b))
            line = f"| {p:,} | {b} | {new['numpy s']:.3f} | {new['floor s']:.3f} | {new['s']:.2f} | "
            line += f"{new['s'] / new['floor s']:.1f} | "
            line += f"{new['peak MB']:.0f} | {new['alloc MB']:.0f} |"
            if new["_diff"] > 1e-12:
                sys.exit(f"C(k) differs from the numpy floor by {new['_diff']:.2e}")
            if args.old:
                old = child(p, args, "--from-samples", "--n-boot-samples", str(b), path=args.old)
                line += f" {old['s']:.2f} | {old['s'] / old['floor s']:.1f} | {old['peak MB']:.0f} | "
                line += f"{old['alloc MB']:.0f} | "
                line += f"{old['s'] / new['s']:.1f} |"
                for key in ("_auc", "_auc_lo"):  # the point and, with replicates, the interval's end
                    if old[key] is not None and abs(old[key] - new[key]) > 1e-12:
                        sys.exit(f"{key[1:]} differs between old and new: {old[key]} vs {new[key]}")
            print(line, flush=True)
            if b == 0:
                ratio = new["s"] / new["floor s"]
    verdict = "met" if ratio <= FLOOR_YARDSTICK else "not met"
    print(
        f"x at P = {prompts[-1]:,}, n_boot = 0: {ratio:.1f} (yardstick <= {FLOOR_YARDSTICK:.0f}: {verdict})",
    )


def child(value: int, args: argparse.Namespace, *flags: str, path: str | None = None) -> dict:
    """The figures of one U (or one M, or P) measured in a fresh process running this script.

    ``path``: a checkout whose ``seffi`` package the process imports instead of the installed one.
    """
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(value), "--episodes", str(args.episodes)]
    cmd += ["--envs", str(args.envs), "--n-boot", str(args.n_boot), "--barcode-rows", str(args.barcode_rows)]
    cmd += list(flags)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if path is not None:
        env["PYTHONPATH"] = os.path.abspath(path)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        sys.exit(f"{' '.join(flags)} {value} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(label: str, rows: dict[int, dict]) -> None:
    """Print ``rows`` (one per U or M) as a table, with the ratio and exponent rows between the ends."""
    keys = list(rows)
    names = [k for k in rows[keys[0]] if not k.startswith("_")]
    print(f"| {label} | " + " | ".join(names) + " |")
    print("|" + "---|" * (len(names) + 1))
    for key in keys:
        print(f"| {key:,} | " + " | ".join(f"{rows[key][n]:.3g}" for n in names) + " |")
    if len(keys) > 1:
        lo, hi = keys[0], keys[-1]
        ratio = [max(rows[hi][n], 1e-9) / max(rows[lo][n], 1e-9) for n in names]
        print(f"| ratio {lo:,}->{hi:,} | " + " | ".join(f"{r:.2f}" for r in ratio) + " |")
        slope = [math.log(r) / math.log(hi / lo) for r in ratio]
        print(f"| exponent {lo:,}->{hi:,} | " + " | ".join(f"{e:.2f}" for e in slope) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", default="100,10000,100000", help="comma-separated U values")
    ap.add_argument("--episodes", type=int, default=1_000_000)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--barcode-rows", type=int, default=64)
    ap.add_argument("--no-index", action="store_true", help="episodes without sample_index/run_index")
    ap.add_argument("--monitor", action="store_true", help="CoverageMonitor, default logging, K = 8")
    ap.add_argument("--strategies", default=None, help="comma-separated M values: a monitor over M")
    ap.add_argument("--from-samples", action="store_true", help="IidBaseline.from_samples + curves(16)")
    ap.add_argument("--prompts", default="1000,10000", help="comma-separated P values (--from-samples)")
    ap.add_argument("--old", default=None, help="a checkout to time beside this one (--from-samples)")
    ap.add_argument("--n-boot-samples", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None and args.from_samples:
        print(json.dumps(measure_from_samples(args.child, args.n_boot_samples)))
        return
    if args.from_samples:
        from_samples_rows(args)
        return
    if args.child is not None and args.strategies:
        print(json.dumps(measure_strategies(args.child)))
        return
    if args.strategies:
        ms = [int(x) for x in args.strategies.split(",")]
        print(
            "CoverageMonitor over M declared strategies: 40 episodes of 10 inputs, K = 4, one log, finalize"
        )
        rows = {m: child(m, args, "--strategies", args.strategies) for m in ms}
        table("M", rows)
        top = ms[-1]
        print(f"total CPU at M = {top:,}: {rows[top]['total s']:.2f} s (budget {STRATEGIES_BUDGET:.0f} s)")
        return
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
    flags = (["--no-index"] if args.no_index else []) + (["--monitor"] if args.monitor else [])
    rows = {}
    for u in us:
        rows[u] = child(u, args, *flags)
        got = (
            f" (AUC {rows[u]['_auc']:.4f} over {rows[u]['_runs']} complete runs)" if "_auc" in rows[u] else ""
        )
        print(f"  U = {u}: done{got}", flush=True)
    plain = None if args.no_index or args.monitor else child(us[0], args, "--no-index")
    table("U", rows)
    if plain is not None:
        indexed = rows[us[0]]["ingest us/ep"]
        print(
            f"ingest at U = {us[0]:,} without sample_index/run_index: {plain['ingest us/ep']:.3g} us/ep, "
            f"{plain['ingest us/ep'] / indexed:.2f}x the indexed {indexed:.3g} us/ep"
        )


if __name__ == "__main__":
    main()

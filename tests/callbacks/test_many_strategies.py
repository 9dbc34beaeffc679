"""A monitor over 10^5 declared strategies stays cheap: its cost follows the strategies seen, not M."""

from __future__ import annotations

import time

import numpy as np

from seffi.callbacks import CoverageMonitor


def test_a_monitor_with_100_000_declared_strategies_logs_and_finalizes_in_seconds_of_cpu(tmp_path):
    M, K = 100_000, 4
    strategies = [f"s{i}" for i in range(M)]
    rng = np.random.default_rng(0)
    start = time.process_time()  # CPU time: a loaded machine cannot make it flake
    options = {"wandb": "disabled", "plots": False, "n_boot": 20}
    monitor = CoverageMonitor(K, strategies, out_dir=tmp_path / "run", **options)
    picks = rng.integers(M, size=40)
    for i, j in enumerate(picks):
        info = {"input_id": f"x{i // K}", "strategy_matches": (strategies[j],), "sample_index": i % K + 1}
        monitor.ingest_episode(info)
    assert monitor.log(40) is not None
    report = monitor.finalize(41)
    assert time.process_time() - start < 20.0
    # Every run matched K distinct strategies or fewer: C(K) by hand over the 10 runs.
    runs = picks.reshape(10, K)
    want = np.mean([len(set(r.tolist())) for r in runs]) / M
    assert np.isclose(report.comparisons[0].policies[0].curves.coverage[-1], want)

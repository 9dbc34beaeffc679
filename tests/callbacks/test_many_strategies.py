"""A monitor over 10^5 declared strategies logs, finalizes and reports C(K) over all M of them."""

from __future__ import annotations

import numpy as np

from seffi.callbacks import CoverageMonitor


def test_a_monitor_with_100_000_declared_strategies_logs_finalizes_and_counts_coverage(tmp_path):
    M, K = 100_000, 4
    strategies = [f"s{i}" for i in range(M)]
    rng = np.random.default_rng(0)
    options = {"wandb": "disabled", "plots": False, "n_boot": 20}
    monitor = CoverageMonitor(K, strategies, out_dir=tmp_path / "run", **options)
    picks = rng.integers(M, size=40)
    for i, j in enumerate(picks):
        info = {"input_id": f"x{i // K}", "strategy_matches": (strategies[j],), "sample_index": i % K + 1}
        monitor.update_infos(info, True)
    assert monitor.log(40) is not None
    report = monitor.finalize(41)
    # Every run matched K distinct strategies or fewer: C(K) by hand over the 10 runs.
    runs = picks.reshape(10, K)
    want = np.mean([len(set(r.tolist())) for r in runs]) / M
    assert np.isclose(report.comparisons[0].policies[0].curves.coverage[-1], want)

"""The monitor's read API: ``metrics()``, ``curves()`` and ``to_dataframe()`` against hand counts."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from seffi.callbacks import CoverageMonitor
from seffi.coverage import IidBaseline, OracleBaseline
from seffi.errors import SeffiError

STRATEGIES = ("a", "b", "c")
PROBS = {"a": 0.8, "b": 0.15, "c": 0.05}
# Two runs of K = 4 samples on input x0; "c" is an incorrect sample.
RUNS = [("a", "a", "b", "c"), ("b", "c", "c", "a")]


def _monitor(tmp_path: Path, **options: object) -> CoverageMonitor:
    kwargs = {"n_boot": 0, "log_every": 1, "wandb": "disabled", "plots": False, **options}
    return CoverageMonitor(
        4,
        STRATEGIES,
        iid=IidBaseline.from_probabilities({"x0": PROBS}, strategies=STRATEGIES),
        oracle=OracleBaseline(strategies=STRATEGIES),
        out_dir=tmp_path / "run",
        **kwargs,
    )


def _feed(monitor: CoverageMonitor) -> None:
    for run, sequence in enumerate(RUNS):
        for s in sequence:
            monitor.update_infos(
                {"input_id": "x0", "strategy_matches": (s,), "valid": s != "c"}, True, env_offset=run
            )


def _hand_coverage(valid_only: bool = False) -> np.ndarray:
    """Mean over runs of |distinct strategies in the first k samples| / M, k = 1..4."""
    out = []
    for k in range(1, 5):
        sets = [{s for s in seq[:k] if not (valid_only and s == "c")} for seq in RUNS]
        out.append(np.mean([len(x) / 3 for x in sets]))
    return np.array(out)


def test_metrics_is_empty_before_the_first_log_then_a_copy_of_the_logged_scalars(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path)
    assert monitor.metrics() == {}
    _feed(monitor)
    assert monitor.metrics() == {}  # episodes in, nothing logged yet
    logged = monitor.log(7)
    got = monitor.metrics()
    assert got == logged and got is not monitor.metrics()
    got["seffi/auc"] = -1.0  # a copy: the caller cannot change the monitor's record
    assert monitor.metrics()["seffi/auc"] == pytest.approx(np.mean(_hand_coverage()))
    cov = _hand_coverage()
    assert monitor.metrics()["seffi/coverage/k=1"] == pytest.approx(cov[0])
    assert monitor.metrics()["seffi/coverage/k=2"] == pytest.approx(cov[1])
    assert monitor.metrics()["seffi/coverage/k=4"] == pytest.approx(cov[3])
    assert monitor.metrics()["seffi/step"] == 7.0
    assert monitor.metrics()["seffi/episodes"] == 8.0


def test_to_dataframe_rows_equal_hand_policy_exact_iid_and_oracle_curves(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    monitor = _monitor(tmp_path)
    empty = monitor.to_dataframe()
    assert len(empty) == 0 and {"method", "k", "coverage"} <= set(empty.columns)
    _feed(monitor)
    frame = monitor.to_dataframe()
    assert {
        "method", "k", "coverage", "coverage_lo", "coverage_hi", "novelty", "full_coverage",
        "valid_coverage", "valid_at_k",
    } <= set(frame.columns)  # fmt: skip
    assert list(frame["method"]) == ["policy"] * 4 + ["iid"] * 4 + ["oracle"] * 4
    assert list(frame["k"]) == [1, 2, 3, 4] * 3

    policy = frame[frame["method"] == "policy"]
    np.testing.assert_allclose(policy["coverage"], _hand_coverage())
    np.testing.assert_allclose(policy["valid_coverage"], _hand_coverage(valid_only=True))
    # Sample i adds a new strategy: run 1 a,a,b,c -> 1,0,1,1; run 2 b,c,c,a -> 1,1,0,1.
    np.testing.assert_allclose(policy["novelty"], [1.0, 0.5, 0.5, 1.0])
    np.testing.assert_allclose(policy["full_coverage"], [0, 0, 0, 1])
    np.testing.assert_allclose(policy["valid_at_k"], [1, 1, 1, 1])  # every run starts correct
    assert policy["coverage_lo"].isna().all()  # n_boot=0: no interval

    # Exact iid: C(k) = (1/M) sum_s 1 - (1 - p_s)^k.
    iid = frame[frame["method"] == "iid"]
    want = [np.mean([1 - (1 - p) ** k for p in PROBS.values()]) for k in range(1, 5)]
    np.testing.assert_allclose(iid["coverage"], want, rtol=1e-12)
    assert iid["coverage_lo"].isna().all()  # an exact law has no interval
    # Oracle: one new strategy per sample until all M are found.
    oracle = frame[frame["method"] == "oracle"]
    np.testing.assert_allclose(oracle["coverage"], [1 / 3, 2 / 3, 1, 1])
    np.testing.assert_allclose(oracle["full_coverage"], [0, 0, 1, 1])


def test_to_dataframe_carries_bootstrap_bounds_and_the_curves_method_agrees(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    monitor = _monitor(tmp_path, n_boot=50)
    _feed(monitor)
    curves = monitor.curves()
    np.testing.assert_allclose(curves.coverage, _hand_coverage())
    policy = monitor.to_dataframe().query("method == 'policy'")
    np.testing.assert_allclose(policy["coverage_lo"], curves.coverage_lo)
    np.testing.assert_allclose(policy["coverage_hi"], curves.coverage_hi)
    assert (policy["coverage_lo"] <= policy["coverage"] + 1e-12).all()
    assert (policy["coverage"] <= policy["coverage_hi"] + 1e-12).all()


def test_to_dataframe_without_baselines_holds_the_policy_rows_only(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    monitor = CoverageMonitor(4, STRATEGIES, out_dir=tmp_path / "r", wandb="disabled", plots=False, n_boot=0)
    _feed(monitor)
    frame = monitor.to_dataframe()
    assert set(frame["method"]) == {"policy"} and len(frame) == 4


def test_to_dataframe_without_pandas_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monitor = _monitor(tmp_path)
    _feed(monitor)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(SeffiError, match="pip install pandas"):
        monitor.to_dataframe()
    assert monitor.curves().K == 4  # the other readers need no pandas

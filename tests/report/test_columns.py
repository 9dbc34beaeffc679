"""The metric column table reaches every sink (one table of columns).

A tiny tracker run end to end (valid flags, a base law for the rarity split, an estimated iid
baseline that extrapolates past its samples) goes through ``CurveSet.from_curves`` into report.json
and through ``keys.scalars_from_curves`` into W&B keys; every declared column must arrive.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from seffi.coverage import CoverageTracker, Curves, IidBaseline, OracleBaseline
from seffi.coverage.columns import COLUMNS, PER_K, SUM_STATS, column, curves_arrays
from seffi.report import Comparison, CurveSet, PolicyResult, Report, keys, write_report

STRATEGIES = ("a", "b", "c")
K = 4
SEQS = {  # input -> (match set, valid) of its samples, one run each
    "x0": [({"a"}, True), ({"a"}, False), ({"b"}, True), ({"c"}, True)],
    "x1": [({"b"}, True), ({"a", "c"}, True), ({"b"}, True), (set(), False)],
    "x2": [(set(), False), ({"c"}, True), ({"a"}, True), ({"b"}, True)],
}
LAW = {"a": 0.6, "b": 0.3, "c": 0.1}


def _report(tmp_path: Path) -> tuple[dict, dict[str, float], Curves]:
    t = CoverageTracker(strategies=STRATEGIES, task="toy")
    for input_id, seq in SEQS.items():
        for stream in (0, 1):  # two runs per input: few inputs get within-input intervals
            for matches, valid in seq[stream:] + seq[:stream]:
                t.update(input_id, matches, valid=valid, stream=stream)
    iid_exact = IidBaseline.from_probabilities({x: LAW for x in SEQS})
    curves = t.curves(K, n_boot=20, seed=0, rarity=iid_exact)
    # Two base samples per input: every k > 2 is an extrapolation.
    base_samples = {x: [{"a"}, {"b"}] for x in SEQS}
    iid = IidBaseline.from_samples(base_samples, strategies=STRATEGIES).curves(K, n_boot=5)
    oracle = OracleBaseline(strategies=STRATEGIES).curves(K)
    valid_rate = float(np.mean([v for seq in SEQS.values() for _, v in seq]))
    policy = CurveSet.from_curves(curves, "learned", "policy", valid_rate=valid_rate)
    gain = curves.gain(iid_exact.curves(K), oracle)
    comp = Comparison(
        task="toy",
        budget=K,
        n_inputs=len(SEQS),
        iid=CurveSet.from_curves(iid, "iid"),
        oracle=CurveSet.from_curves(oracle, "oracle"),
        policies=[PolicyResult(curves=policy, gain=gain)],
    )
    write_report(tmp_path, Report(comparisons=[comp]), plots=False, markdown=False)
    data = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    return data["comparisons"][0], keys.scalars_from_curves(policy, gain=gain), curves


def test_every_column_reaches_report_json_and_wandb(tmp_path: Path) -> None:
    """Every declared column is filled in report.json and, when it has a
    W&B stem, logged under ``seffi/<stem>``."""
    comp, scalars, curves = _report(tmp_path)
    policy = comp["policies"][0]
    sets = {"policy": policy["curves"], "iid": comp["iid"], "oracle": comp["oracle"]}
    for c in COLUMNS:
        if c.shape == "gain":
            assert policy["gain"]["value"] is not None, c.name
            continue
        filled = [role for role, s in sets.items() if s.get(c.name) not in (None, [])]
        assert filled, f"column {c.name} reaches no curve set of report.json"
        if c.report_ci:
            assert sets["policy"][f"{c.name}_lo"] is not None, c.name
        if c.wandb is not None:
            stem = f"{keys.PREFIX}/{c.wandb}"
            assert any(k == stem or k.startswith((stem + "/", stem + "_")) for k in scalars), c.name
    # The values are the tracker's, not merely present.
    np.testing.assert_allclose(policy["curves"]["coverage"], curves.coverage)
    np.testing.assert_allclose(policy["curves"]["valid_at_k"], curves.valid_at_k)
    assert sets["iid"]["extrapolated"] == [False, False, True, True]
    assert scalars[keys.metric_key("full_coverage", K)] == pytest.approx(curves.full_coverage[-1])
    assert scalars[keys.metric_key("novelty", 2)] == pytest.approx(curves.novelty[1])
    assert scalars["seffi/valid_rate"] == pytest.approx(9 / 12)


def test_table_matches_curves_and_curveset() -> None:
    """Each column names real ``Curves`` / ``CurveSet`` fields, and the
    estimator's per-k list (with the statistic each is the ratio of) and the ``Curves`` array list are
    read off the table."""
    curve_fields = set(Curves.__dataclass_fields__)
    for c in COLUMNS:
        if c.curves_name:
            assert c.curves_name in curve_fields, c.name
            if c.ci:
                assert {f"{c.curves_name}_lo", f"{c.curves_name}_hi"} <= curve_fields, c.name
        if c.shape != "gain":
            assert c.name in CurveSet.model_fields, c.name
    # The estimator's order: that of the summed statistics.
    assert PER_K == ("coverage", "novelty", "expected_new", "full_coverage", "valid_coverage", "valid_at_k")
    assert all(c.stat in SUM_STATS for c in COLUMNS if c.stat) and SUM_STATS[0] == "runs"
    assert "full_coverage_hi" in curves_arrays() and "coverage_by_rarity" in curves_arrays()
    with pytest.raises(KeyError, match="known"):
        column("nope")
    with pytest.raises(KeyError, match="not logged"):
        keys.metric_key("expected_new", 1)

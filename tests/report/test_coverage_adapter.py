"""The report adapts the coverage engine's real Curves / barcode (not a hand-written imitation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import seffi.coverage as coverage
from seffi.report import Barcode, Comparison, CurveSet, Report, keys, load_report, write_report

SEQS = {  # input -> match sets of its samples (one stream each)
    "x0": [{"a"}, {"a"}, {"b"}, set(), {"c"}],
    "x1": [{"b"}, {"a", "c"}, {"b"}, {"b"}, {"a"}],
    "x2": [set(), {"c"}, {"c"}, {"a"}, {"b"}],
}


def _tracker() -> coverage.CoverageTracker:
    t = coverage.CoverageTracker(strategies=("a", "b", "c"), task="toy", barcode_rows=3, barcode_cols=8)
    for input_id, seq in SEQS.items():
        for matches in seq:
            t.update(input_id, matches, valid=True)
    return t


def test_curveset_from_real_curves_matches_hand_count(tmp_path: Path) -> None:
    K = 5
    curves = _tracker().curves(K, n_boot=20, seed=0)
    cs = CurveSet.from_curves(curves, "ppo")
    # C(k) by hand: mean over runs of |S_k| / M with M = 3
    hand = []
    for k in range(1, K + 1):
        sizes = [len(set().union(*seq[:k])) for seq in SEQS.values()]
        hand.append(np.mean(sizes) / 3)
    assert cs.k == list(range(1, K + 1)) and cs.role == "policy"
    assert cs.coverage == pytest.approx(hand)
    assert cs.auc == pytest.approx(np.mean(hand))
    assert cs.n_samples == 15 and cs.n_inputs == 3
    assert keys.scalars_from_curves(cs)["seffi/coverage/k=4"] == pytest.approx(hand[3])

    comp = Comparison.from_curves(task="toy", policies={"ppo": curves}, num_strategies=3)
    bar = comp.policies[0].barcode
    assert isinstance(bar, Barcode) and len(bar.input_ids) == 3
    # x1's second sample matched {a, c}: it is new; the shown colour is one of them
    row = bar.input_ids.index(next(r for r in bar.input_ids if "x1" in r))
    assert bar.new[row][:3] == [True, True, False]
    assert bar.matrix[row][1] in (0, 2)
    rep = Report(comparisons=[comp])
    write_report(tmp_path, rep)
    assert load_report(tmp_path) == rep
    assert (tmp_path / "plots" / "toy_barcode.png").stat().st_size > 0

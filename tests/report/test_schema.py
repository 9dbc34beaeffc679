from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from seffi.errors import SeffiError
from seffi.report import Comparison, CurveSet, Gain, Report, dumps_report, load_report, write_report
from seffi.report.markdown import render_markdown
from tests.report import _fixtures as fx


def test_report_json_byte_identical_and_round_trips(tmp_path: Path) -> None:
    a = write_report(tmp_path / "a", fx.report(), plots=False)
    b = write_report(tmp_path / "b", fx.report(), plots=False)
    bytes_a = a["report.json"].read_bytes()
    assert bytes_a == b["report.json"].read_bytes()
    assert a["report.md"].read_bytes() == b["report.md"].read_bytes()
    text = bytes_a.decode()
    assert str(tmp_path) not in text  # no absolute paths inside
    data = json.loads(text)
    assert list(data) == sorted(data)  # sorted keys
    # floats as-is: shortest round-trip repr, so the values reload exactly
    assert data["comparisons"][0]["iid"]["coverage"] == fx.IID.tolist()
    loaded = load_report(tmp_path / "a")
    assert loaded == fx.report()
    assert dumps_report(loaded) == text


def test_load_report_errors(tmp_path: Path) -> None:
    with pytest.raises(SeffiError, match=r"no report\.json"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SeffiError, match="is not valid JSON"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(SeffiError, match="JSON object"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text('{"schema_version": 99}', encoding="utf-8")
    with pytest.raises(SeffiError, match="schema_version 99"):
        load_report(tmp_path)
    data = json.loads(dumps_report(fx.report()))
    data["comparisons"][0]["iid"]["coverage"] = data["comparisons"][0]["iid"]["coverage"][:3]
    (tmp_path / "report.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SeffiError, match=r"comparisons\.0\.iid.*length 3, expected 16"):
        load_report(tmp_path / "report.json")


def test_validation_rejects_bad_curves() -> None:
    with pytest.raises(ValidationError, match="length 2"):
        CurveSet(label="x", k=[1, 2, 3], coverage=[0.1, 0.2])
    with pytest.raises(ValidationError, match="increasing"):
        CurveSet(label="x", k=[2, 1], coverage=[0.1, 0.2])
    with pytest.raises(ValidationError):
        CurveSet(label="x", k=[1], coverage=[math.nan])
    with pytest.raises(ValidationError, match="exceeds"):
        CurveSet(label="x", k=[1], coverage=[0.5], coverage_lo=[0.6], coverage_hi=[0.4])
    with pytest.raises(ValidationError, match="reason"):
        Gain(value=None)
    # curves refuse NaN outright; free-form config values that are not finite become null
    assert json.loads(dumps_report(Report(config={"x": math.inf}, comparisons=[])))["config"] == {"x": None}


def _coverage_dict(kind: str, cov: list[float | None], auc: float, **extra: object) -> dict:
    """The shape of seffi.coverage.Curves.to_dict() (K, arrays as lists, NaN as None, ttc by key)."""
    surv = [1.0, 0.5, 0.0]
    d = {
        "format": "seffi.coverage.curves/1",
        "kind": kind,
        "K": len(cov),
        "coverage": cov,
        "novelty": [1.0, 0.5, 0.25],
        "expected_new": [1.0, 0.6, 0.3],
        "full_coverage": [0.0, 0.2, 0.5],
        "auc": auc,
        "time_to_coverage": {
            "0.8": {"tau": 0.8, "survival": surv, "median": 2.0, "restricted_mean": 2.5, "censored": 0.0},
            "1.0": {
                "tau": 1.0,
                "survival": [1.0, 1.0, 0.75],
                "median": None,
                "restricted_mean": 3.0,
                "censored": 0.75,
            },
        },
        "n_inputs": 4,
        "n_runs": 4,
        "samples": 12,
        "notes": ["a note"],
    }
    d.update(extra)
    return d


def test_curveset_from_coverage_dict() -> None:
    d = _coverage_dict(
        "iid_estimated",
        [0.3, None, 0.9],
        0.6,
        coverage_lo=[0.2, None, 0.8],
        coverage_hi=[0.4, None, 1.0],
        extrapolated=[False, False, True],
    )
    cs = CurveSet.from_curves(d, "iid")
    assert cs.k == [1, 2, 3] and cs.role == "iid" and cs.method == "estimated"
    assert cs.coverage == [0.3, None, 0.9]
    assert cs.n_samples == 12 and cs.n_inputs == 4
    assert cs.ttc(0.8).fraction_censored == 0.0 and cs.ttc(1.0).median is None
    assert cs.extrapolated == [False, False, True]
    assert CurveSet.from_curves(d, "p", role="policy", method="x").method == "x"


def test_comparison_from_curves_uses_gain_method() -> None:
    class FakeCurves:
        def __init__(self, d: dict) -> None:
            self.d = d
            self.barcode = None

        def __getattr__(self, name: str) -> Any:  # the fields of Curves, as attributes
            return self.d.get(name)

        def to_dict(self) -> dict:
            return self.d

        def gain(self, iid: FakeCurves, oracle: FakeCurves) -> Gain:
            a, i, o = self.d["auc"], iid.d["auc"], oracle.d["auc"]
            return Gain(value=(a - i) / (o - i), lo=None, hi=None)

    pol = FakeCurves(_coverage_dict("policy", [0.4, 0.7, 0.9], 0.666))
    iid = FakeCurves(_coverage_dict("iid", [0.3, 0.5, 0.6], 0.466))
    ora = FakeCurves(_coverage_dict("oracle", [0.5, 1.0, 1.0], 0.833))
    comp = Comparison.from_curves(task="t", policies={"ppo": pol}, iid=iid, oracle=ora, num_strategies=2)
    assert comp.budget == 3 and comp.n_inputs == 4
    assert comp.policies[0].gain.value == pytest.approx((0.666 - 0.466) / (0.833 - 0.466))
    assert [c.label for c in comp.curve_sets()] == ["ppo", "iid", "oracle"]
    assert [c.role for c in comp.curve_sets()] == ["policy", "iid", "oracle"]


def test_markdown_table() -> None:
    rep = fx.report()
    md = render_markdown(rep, {"HanoiRouter-v0/coverage": "plots/HanoiRouter-v0_coverage.png"})
    pol = rep.comparisons[0].policies[0]
    g = pol.gain
    assert f"| {pol.curves.auc:.3f} [{pol.curves.auc_lo:.3f}, {pol.curves.auc_hi:.3f}] |" in md
    assert f"{g.value:.3f} [{g.lo:.3f}, {g.hi:.3f}]" in md
    assert "![coverage](plots/HanoiRouter-v0_coverage.png)" in md
    assert "_How to read:_ Coverage C(k)" in md
    undefined = Report(
        comparisons=[
            rep.comparisons[0].model_copy(
                update={
                    "policies": [
                        pol.model_copy(update={"gain": Gain(reason="oracle AUC does not exceed iid")})
                    ]
                }
            )
        ]
    )
    assert "undefined (oracle AUC does not exceed iid)" in render_markdown(undefined)


def test_barcode_from_a_curves_file_without_lengths_ids_or_new_marks() -> None:
    """A barcode in the tracker's older dict form (rows, first_strategy only) reads: rows name its rows."""
    from seffi.coverage import CoverageTracker
    from seffi.report.schema import Barcode

    tracker = CoverageTracker(strategies=("a", "b"), budget=2, barcode_rows=3)
    for x in "pq":
        tracker.update_many([x, x], [["a"], ["b"]])
    full = tracker.curves(2, n_boot=0).to_dict()["barcode"]
    older = {k: v for k, v in full.items() if k not in ("new", "input_ids", "lengths")}
    got, want = Barcode.from_tracker(older), Barcode.from_tracker(full)
    assert got.input_ids == older["rows"] == ["p/0", "q/0"] and want.input_ids == ["p", "q"]
    assert got.matrix == want.matrix == [[0, 1], [0, 1]]
    assert got.new is None and want.new == [[True, True], [True, True]]

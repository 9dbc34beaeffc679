from __future__ import annotations

import math

import pytest

from seffi.report import Gain, Report, keys
from tests.report import _fixtures as fx


def test_log_spaced_ks() -> None:
    assert keys.log_spaced_ks(1) == [1]
    assert keys.log_spaced_ks(8) == [1, 2, 4, 8]
    assert keys.log_spaced_ks(10) == [1, 2, 4, 8, 10]
    assert keys.log_spaced_ks(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    for bad in (0, -3, 2.0, True):
        with pytest.raises(ValueError, match="budget K"):
            keys.log_spaced_ks(bad)  # type: ignore[arg-type]


def test_key_strings() -> None:
    assert keys.STEP_KEY == "seffi/step"
    assert keys.coverage_key(4) == "seffi/coverage/k=4"
    assert keys.auc_key() == "seffi/auc"
    assert keys.gain_key() == "seffi/gain_vs_iid"
    assert keys.gain_key(bound="lo") == "seffi/gain_vs_iid_lo"
    assert keys.gain_key(bound="hi") == "seffi/gain_vs_iid_hi"
    assert keys.full_coverage_key(16) == "seffi/full_coverage/k=16"
    assert keys.time_to_coverage_key(0.8) == "seffi/time_to_coverage/tau=0.8/median"
    assert keys.time_to_coverage_key(1) == "seffi/time_to_coverage/tau=1.0/median"
    assert keys.novelty_key(2) == "seffi/novelty/i=2"
    assert keys.valid_rate_key() == "seffi/valid_rate"
    assert keys.episodes_key() == "seffi/episodes"
    assert keys.inputs_key() == "seffi/inputs"
    assert keys.auc_key("hanoi/learned") == "seffi/hanoi/learned/auc"
    with pytest.raises(ValueError):
        keys.gain_key(bound="mid")


def test_scalars_from_curves_values() -> None:
    cs = fx.curve_set("learned", "policy", fx.POLICY)
    g = fx.gain_value()
    out = keys.scalars_from_curves(cs, gain=Gain(value=g, lo=g - 0.1, hi=g + 0.1))
    expected_ks = [1, 2, 4, 8, 16]
    assert sorted(k for k in out if k.startswith("seffi/coverage/")) == sorted(
        f"seffi/coverage/k={k}" for k in expected_ks
    )
    for k in expected_ks:
        assert out[f"seffi/coverage/k={k}"] == pytest.approx(fx.POLICY[k - 1])
        assert out[f"seffi/novelty/i={k}"] == pytest.approx(cs.novelty[k - 1])
    assert out["seffi/auc"] == pytest.approx(fx.POLICY.mean())
    assert out["seffi/gain_vs_iid"] == pytest.approx(g)
    assert out["seffi/gain_vs_iid_lo"] == pytest.approx(g - 0.1)
    assert out["seffi/full_coverage/k=16"] == pytest.approx(fx.POLICY[-1] ** 5)
    assert out["seffi/time_to_coverage/tau=0.8/median"] == cs.ttc(0.8).median
    assert out["seffi/valid_rate"] == 0.8
    assert out["seffi/episodes"] == 320.0
    assert out["seffi/inputs"] == 20.0
    assert all(isinstance(v, float) and math.isfinite(v) for v in out.values())


def test_scalars_skip_undefined_and_accept_mappings() -> None:
    curves = {"k": [1, 2, 3], "coverage": [0.2, None, 0.5], "auc": float("nan")}
    out = keys.scalars_from_curves(curves, gain={"value": None, "reason": "no room"}, episodes=9, scope="t")
    # k=2 is undefined, NaN AUC and an undefined gain are left out rather than logged as NaN.
    assert out == {"seffi/t/coverage/k=1": 0.2, "seffi/t/coverage/k=3": 0.5, "seffi/t/episodes": 9.0}


def test_report_scalars_scoping() -> None:
    single = keys.report_scalars(fx.report())
    assert "seffi/auc" in single and "seffi/gain_vs_iid" in single
    multi = Report(comparisons=[fx.comparison("hanoi", None, 2), fx.comparison("sort", None, 1)])
    scoped = keys.report_scalars(multi)
    assert scoped["seffi/hanoi/learned/auc"] == pytest.approx(fx.POLICY.mean())
    assert "seffi/hanoi/learned1/auc" in scoped
    assert "seffi/sort/auc" in scoped
    assert "seffi/auc" not in scoped


def test_report_scalars_hold_the_baseline_aucs_and_the_gain_denominator() -> None:
    iid_auc, oracle_auc = float(fx.IID.mean()), float(fx.ORACLE.mean())
    single = keys.report_scalars(fx.report())
    assert single["seffi/auc_iid"] == pytest.approx(iid_auc)
    assert single["seffi/auc_oracle"] == pytest.approx(oracle_auc)
    assert single["seffi/gain_denominator"] == pytest.approx(oracle_auc - iid_auc)
    # The gain is the fraction of that room the policy takes.
    room = (single["seffi/auc"] - single["seffi/auc_iid"]) / single["seffi/gain_denominator"]
    assert room == pytest.approx(single["seffi/gain_vs_iid"])
    two = [fx.comparison("hanoi", None, 2), fx.comparison("sort", None)]
    multi = keys.report_scalars(Report(comparisons=two))
    for scope in ("hanoi/learned", "hanoi/learned1", "sort"):
        assert multi[f"seffi/{scope}/auc_iid"] == pytest.approx(iid_auc)
        assert multi[f"seffi/{scope}/gain_denominator"] == pytest.approx(oracle_auc - iid_auc)
    no_oracle = fx.comparison().model_copy(update={"oracle": None})
    alone = keys.report_scalars(Report(comparisons=[no_oracle]))
    assert "seffi/auc_iid" in alone
    assert "seffi/auc_oracle" not in alone and "seffi/gain_denominator" not in alone
    assert keys.baseline_auc_key("oracle", "eval") == "seffi/eval/auc_oracle"
    assert keys.window_key("runs") == "seffi/window/runs"
    with pytest.raises(ValueError, match="iid"):
        keys.baseline_auc_key("policy")

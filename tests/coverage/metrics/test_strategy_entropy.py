"""Strategy entropy against hand counts, exact enumeration and simulation.

References: plain-Python entropy of hand-made counts; the exact expectation of the estimator by
enumerating every multinomial outcome of a small law; Monte Carlo datasets for its bias at
n = 8..64; one tracker fed everything for merged trackers; a monitor's log and report.json.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from seffi.callbacks.core import CoverageMonitor
from seffi.coverage import CoverageTracker
from seffi.coverage.metrics.strategy_entropy import effective_strategies

STRATS = ("a", "b", "c")


def _hand_effective(counts: dict[str, int], corrected: bool = True) -> float:
    n = sum(counts.values())
    h = -sum(c / n * math.log(c / n) for c in counts.values() if c)
    if corrected:
        h += (sum(1 for c in counts.values() if c) - 1) / (2 * n)
    return math.exp(h)


def _fed(samples: list[tuple[str, set[str]]], stream: int = 0) -> CoverageTracker:
    t = CoverageTracker(strategies=STRATS, budget=64)
    for x, matched in samples:
        t.update(x, matched, stream=stream)
    return t


def test_tracker_estimate_equals_the_hand_count_of_every_input() -> None:
    samples = [("x1", {"a"})] * 5 + [("x1", {"b"})] * 2 + [("x1", {"a", "c"})]  # a: 6, b: 2, c: 1
    samples += [("x2", {"c"})] * 3 + [("x2", set())]  # only c: exp(H) = 1; the junk sample adds nothing
    samples += [("x3", set())] * 2  # no match: left out
    est = _fed(samples).metric_estimates()["strategy_entropy"]
    per_input = [_hand_effective({"a": 6, "b": 2, "c": 1}), _hand_effective({"c": 3})]
    assert est.value == pytest.approx(np.mean(per_input), abs=1e-12)
    assert est.n_inputs == 2
    # The t interval over the two inputs (one stratum: df = 1), its lower end clipped at 1.
    half = 12.706204736 * np.std(per_input, ddof=1) / math.sqrt(2)
    assert est.hi == pytest.approx(est.value + half, rel=1e-6)
    assert est.lo == 1.0


def _exact_expectation(p: tuple[float, ...], n: int, corrected: bool) -> float:
    """E[exp(H_hat)] over every multinomial outcome of n single-strategy samples (plain Python)."""
    total = 0.0
    for a in range(n + 1):
        for b in range(n - a + 1):
            c = n - a - b
            prob = math.factorial(n) / (math.factorial(a) * math.factorial(b) * math.factorial(c))
            prob *= p[0] ** a * p[1] ** b * p[2] ** c
            total += prob * _hand_effective(dict(zip(STRATS, (a, b, c), strict=True)), corrected)
    return total


@pytest.mark.parametrize("p", [(0.6, 0.3, 0.1), (1 / 3, 1 / 3, 1 / 3), (0.9, 0.05, 0.05)])
def test_the_correction_shrinks_the_bias_of_the_plug_in_at_every_sample_size(p) -> None:
    truth = math.exp(-sum(q * math.log(q) for q in p))
    for n in (8, 16, 32, 64):
        plug_in = _exact_expectation(p, n, corrected=False) - truth
        corrected = _exact_expectation(p, n, corrected=True) - truth
        assert plug_in < 0  # the plug-in undercounts strategies
        assert abs(corrected) < abs(plug_in), (p, n)


def test_simulated_bias_matches_the_exact_expectation() -> None:
    """The estimator the tracker runs, on simulated datasets, has the enumerated expectation."""
    rng = np.random.default_rng(0)
    p = (0.6, 0.3, 0.1)
    for n in (8, 64):
        counts = rng.multinomial(n, p, size=20_000)
        simulated = effective_strategies(counts).mean()
        exact = _exact_expectation(p, n, corrected=True)
        se = effective_strategies(counts).std() / math.sqrt(len(counts))
        assert abs(simulated - exact) < 4 * se, (n, simulated, exact)


def test_merged_trackers_hold_the_counts_of_one_tracker_fed_everything() -> None:
    rng = np.random.default_rng(1)
    data = [(f"x{rng.integers(4)}", {STRATS[rng.integers(3)]}) for _ in range(200)]
    a, b = _fed(data[:120], stream=0), _fed(data[120:], stream=1)
    ref = _fed(data[:120], stream=0)
    for x, matched in data[120:]:
        ref.update(x, matched, stream=1)
    a.merge(b)
    assert a.metric_estimates() == ref.metric_estimates()
    assert a.state_dict()["metrics"] == ref.state_dict()["metrics"]
    loaded = CoverageTracker.from_state_dict(json.loads(json.dumps(a.state_dict())))
    assert loaded.metric_estimates() == ref.metric_estimates()


def test_a_state_without_the_metric_loads_partial_and_says_so() -> None:
    t = _fed([("x1", {"a"}), ("x1", {"b"})])
    state = t.state_dict()
    del state["metrics"]
    old = CoverageTracker.from_state_dict(state)
    assert old.state_dict() == state  # written back as it was
    assert old.metric_estimates()["strategy_entropy"].value is None
    old.update("x1", {"c"})
    est = old.metric_estimates()["strategy_entropy"]
    assert est.value == pytest.approx(1.0) and "after loading a state" in est.reason
    again = CoverageTracker.from_state_dict(old.state_dict())
    assert again.metric_estimates() == old.metric_estimates()


def test_a_monitor_logs_it_and_the_report_holds_it_beside_the_iid_figure(tmp_path) -> None:
    law = {frozenset("a"): 0.5, frozenset("b"): 0.25, frozenset("bc"): 0.25}  # P(a)=.5, P(b)=.5, P(c)=.25

    class Laws:
        def base_match_distribution(self, x, valid_only=False):
            return law

    from seffi.coverage.env_baselines import EnvBaselines

    baselines = EnvBaselines(STRATS, 2, base_law=Laws().base_match_distribution)
    monitor = CoverageMonitor(2, STRATS, baselines=baselines, out_dir=tmp_path, wandb="disabled", plots=False)
    for x, s in [("x1", "a"), ("x1", "b"), ("x2", "a"), ("x2", "a")]:
        monitor.update_infos({"input_id": x, "strategy_matches": (s,)})
    scalars = monitor.log(4)
    per_input = [_hand_effective({"a": 1, "b": 1}), _hand_effective({"a": 2})]
    assert scalars["seffi/strategy_entropy"] == pytest.approx(np.mean(per_input))
    q = np.array([0.5, 0.5, 0.25]) / 1.25
    assert scalars["seffi/strategy_entropy_iid"] == pytest.approx(math.exp(-(q * np.log(q)).sum()))
    report = monitor.close()
    saved = json.loads((tmp_path / "report.json").read_text())
    entry = saved["comparisons"][0]["policies"][0]["metrics"]["strategy_entropy"]
    assert entry["value"] == pytest.approx(np.mean(per_input))
    assert report.comparisons[0].policies[0].metrics["strategy_entropy"].iid == pytest.approx(
        math.exp(-(q * np.log(q)).sum())
    )


def test_estimates_between_batches_equal_a_fresh_computation() -> None:
    """Values kept between logs (only touched inputs recomputed) equal those of a fresh tracker."""
    rng = np.random.default_rng(2)
    data = [
        (f"x{rng.integers(6)}", {STRATS[j] for j in rng.choice(3, rng.integers(0, 3), False)})
        for _ in range(300)
    ]
    t = CoverageTracker(strategies=STRATS, budget=64)
    for i, (x, matched) in enumerate(data, start=1):
        t.update(x, matched)
        if i % 37 == 0:
            assert t.metric_estimates() == _fed(data[:i]).metric_estimates()

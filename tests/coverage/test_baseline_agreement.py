"""A user baseline counts coverage over the monitor's strategies, or it is refused with both sets named."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from seffi.callbacks import CoverageMonitor
from seffi.coverage import IidBaseline, OracleBaseline
from seffi.coverage.env_baselines import EnvBaselines
from seffi.errors import SeffiError

STRATEGIES = ("astar", "bfs", "dfs", "greedy")  # the monitor's M = 4
INPUTS = ("maze-a", "maze-b")
#: A base law that never uses "greedy": a baseline built from it alone sees only M = 3.
LAW = {"bfs": 0.6, "dfs": 0.25, "astar": 0.15}
K = 4
#: One run of K samples per input: bfs, dfs, astar, bfs -> C = 1/4, 2/4, 3/4, 3/4.
POLICY_RUN = (("bfs",), ("dfs",), ("astar",), ("bfs",))


def _oracle() -> OracleBaseline:
    return OracleBaseline({x: {s: {s} for s in STRATEGIES} for x in INPUTS}, strategies=STRATEGIES)


def _monitor(tmp_path: Path, iid: object, oracle: object) -> CoverageMonitor:
    return CoverageMonitor(
        K,
        STRATEGIES,
        iid=iid,
        oracle=oracle,
        out_dir=tmp_path / "run",
        wandb="disabled",
        plots=False,
        n_boot=0,
    )


def _run_policy(monitor: CoverageMonitor) -> object:
    for x in INPUTS:
        for k, matches in enumerate(POLICY_RUN, start=1):
            monitor.update_infos({"input_id": x, "strategy_matches": matches, "sample_index": k}, True)
    return monitor.finalize(step=len(INPUTS) * K)


def _hand_iid_auc(law: dict[str, float], m: int) -> float:
    ks = np.arange(1, K + 1)
    return float(np.mean([sum(1 - (1 - p) ** k for p in law.values()) / m for k in ks]))


def test_iid_from_probabilities_without_strategies_warns_and_the_monitor_refuses_its_m(
    tmp_path: Path,
) -> None:
    with pytest.warns(UserWarning, match=r"infers M .*M = 3"):
        iid = IidBaseline.from_probabilities({x: LAW for x in INPUTS})
    with pytest.raises(SeffiError) as err:
        _monitor(tmp_path, iid, _oracle())
    message = str(err.value)
    assert "M = 3" in message and "M = 4" in message
    assert "['astar', 'bfs', 'dfs']" in message  # the baseline's set
    assert "['astar', 'bfs', 'dfs', 'greedy']" in message  # the monitor's set
    assert "strategies=" in message and "from_match_distribution" in message
    assert not (tmp_path / "run").exists()  # refused before any output folder is made


def test_iid_from_samples_without_strategies_warns_that_m_is_what_it_saw(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match=r"from_samples without strategies= infers M .*M = 1: \['bfs'\]"):
        iid = IidBaseline.from_samples({x: [["bfs"], ["bfs"], ["bfs"]] for x in INPUTS})
    with pytest.raises(SeffiError, match=r"M = 1 strategies \['bfs'\].*M = 4"):
        _monitor(tmp_path, iid, _oracle())


def test_oracle_with_an_inferred_m_is_refused(tmp_path: Path) -> None:
    # "greedy" has no reference trace; without strategies= the oracle infers M = 3.
    oracle = OracleBaseline({x: {s: {s} for s in ("astar", "bfs", "dfs")} for x in INPUTS})
    iid = IidBaseline.from_probabilities({x: LAW for x in INPUTS}, strategies=STRATEGIES)
    with pytest.raises(SeffiError, match=r"oracle baseline \(input 'maze-a'\) counts coverage over M = 3"):
        _monitor(tmp_path, iid, oracle)


def test_baseline_naming_an_undeclared_strategy_is_refused() -> None:
    iid = IidBaseline.from_probabilities({"bfs": 0.5, "ucs": 0.5}, strategies=("astar", "bfs", "dfs", "ucs"))
    with pytest.raises(SeffiError, match=r"names \['ucs'\], which the monitor does not declare"):
        EnvBaselines(STRATEGIES, K, iid=iid)


def test_baselines_declared_with_the_monitor_strategies_give_the_hand_computed_gain(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # declared strategies: nothing to warn about
        iid = IidBaseline.from_probabilities({x: LAW for x in INPUTS}, strategies=STRATEGIES)
        oracle = OracleBaseline(
            {x: {s: {s} for s in ("astar", "bfs", "dfs")} for x in INPUTS}, strategies=STRATEGIES
        )
    report = _run_policy(_monitor(tmp_path, iid, oracle))
    comparison = report.comparisons[0]
    policy = comparison.policies[0]
    assert np.allclose(policy.curves.coverage, [0.25, 0.5, 0.75, 0.75], atol=1e-12)
    iid_auc = _hand_iid_auc(LAW, 4)
    oracle_auc = float(np.mean([min(k, 3) / 4 for k in range(1, K + 1)]))  # 3 feasible of M = 4
    assert comparison.iid.auc == pytest.approx(iid_auc, abs=1e-12)
    assert comparison.oracle.auc == pytest.approx(oracle_auc, abs=1e-12)
    policy_auc = float(np.mean([0.25, 0.5, 0.75, 0.75]))
    assert policy.gain.value == pytest.approx((policy_auc - iid_auc) / (oracle_auc - iid_auc), abs=1e-9)


def test_num_strategies_counts_the_unnamed_strategies_and_is_accepted() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # M is given, not inferred
        padded = IidBaseline.from_probabilities(LAW, num_strategies=4)
    named = IidBaseline.from_probabilities(LAW, strategies=STRATEGIES)
    baselines = EnvBaselines(STRATEGIES, K, iid=padded, oracle=_oracle())
    assert baselines.curves(INPUTS)[0].auc == pytest.approx(named.curves(K).auc, abs=1e-12)
    assert padded.strategy_sets() == {None: (("astar", "bfs", "dfs"), 4)}
    assert _oracle().strategy_sets()["maze-a"] == (STRATEGIES, 4)


def test_valid_law_that_leaves_out_invalid_samples_puts_their_mass_on_no_match() -> None:
    law = {frozenset({"bfs"}): 0.55, frozenset({"dfs"}): 0.25, frozenset({"astar", "greedy"}): 0.12,
           frozenset(): 0.08}  # fmt: skip
    valid_only = {s: p for s, p in law.items() if s}  # sums to 0.92: the junk samples are left out
    short = IidBaseline.from_match_distribution(law, strategies=STRATEGIES, valid_distribution=valid_only)
    full = IidBaseline.from_match_distribution(law, strategies=STRATEGIES, valid_distribution=law)
    ks = np.arange(1, K + 1)
    pi = {"astar": 0.12, "bfs": 0.55, "dfs": 0.25, "greedy": 0.12}
    hand = [sum(1 - (1 - p) ** k for p in pi.values()) / 4 for k in ks]
    assert np.allclose(short.curves(K).valid_coverage, hand, atol=1e-12)
    assert np.allclose(full.curves(K).valid_coverage, hand, atol=1e-12)
    with pytest.raises(ValueError, match="sum to 1"):  # a raw law must still be a full law
        IidBaseline.from_match_distribution(valid_only, strategies=STRATEGIES)

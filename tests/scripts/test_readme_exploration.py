"""docs/exploration-bench.md's verdict and aggregate parts, rendered from a hand-made bench summary."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from seffi.experiment.bench_report import aggregates

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def x():
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    return importlib.import_module("readme_exploration")


#: Per method: (lead of each prompt's AUC over iid, per seed), held-out valid@1, distinct-2, C(8).
METHODS = {
    "validity": ([-0.05, -0.04, -0.06], 0.95, 0.10, 0.50),
    "wide": ([0.04, 0.05, 0.03], 0.92, 0.13, 0.62),
    "lr0": ([0.003, -0.002, 0.0], 0.90, 0.12, 0.60),
    "surface": ([-0.03, -0.02, -0.04], 0.90, 0.20, 0.55),
}


def _summary(per_prompt: bool = True) -> dict:
    rng = np.random.default_rng(0)
    rows = []
    for m, (leads, v1, d2, c8) in METHODS.items():
        for seed, lead in enumerate(leads):
            auc = 0.5 + lead + rng.normal(0.0, 0.01, 16)
            pp = {"input_ids": [f"p{i}" for i in range(16)], "auc": auc.tolist(), "iid_auc": [0.5] * 16,
                  "oracle_auc": [0.6] * 16}  # fmt: skip
            row = {"method": m, "label": m, "seed": seed, "pool_gain": float(auc.mean() - 0.5) / 0.1,
                   "pool_gain_lo": None, "pool_gain_hi": None, "valid_at_1": v1, "base_valid_at_1": 0.9,
                   "distinct_2": d2, "edit_distance": d2, "coverage_k": c8}  # fmt: skip
            if per_prompt:
                row["pool_prompts"] = {"validator": pp}
            rows.append(row)
    base = [{"seed": s, "valid_at_1": 0.9, "distinct_2": 0.12, "edit_distance": 0.12, "coverage_k": 0.6}
            for s in range(3)]  # fmt: skip
    config = {"seeds": [0, 1, 2], "methods": list(METHODS), "budget": 8, "grpo": {"eval_samples": 64}}
    return {"config": config, "rows": rows, "base": base, "aggregates": aggregates(rows, n_boot=500)}


def test_verdict_names_the_method_that_widens_with_its_aggregate(x) -> None:
    b = x.Bench(_summary())
    agg = b.agg()
    assert [m for m in METHODS if agg[m]["widens"]] == ["wide"]
    text = x.verdict_block({"default": b})
    assert text.startswith("**Does any RL exploration method widen exact strategy coverage")
    assert f"**wide** widens it, mean pool gain {x.ival(agg['wide']['mean'])}" in text
    assert "validity; wide; surface" in text  # every method but lr = 0 was tried
    assert f"Every lr = 0 aggregate interval contains 0: {x.ival(agg['lr0']['mean'])} (default)." in text
    table = x.aggregates_block(b)
    assert table.count("**yes**") == 1 and "| wide | 3 × 16 |" in table


def test_lr0_aggregate_contains_0_and_the_surface_reward_sentence_has_its_numbers(x) -> None:
    b = x.Bench(_summary())
    assert x.aggregate_sanity(b).endswith("which contains 0.")
    (sentence,) = x.surface_method_finding(b)
    assert "distinct-2 0.200 (above validity's 0.100, above the base's 0.120)" in sentence
    assert "held-out C(8) 0.550 (above validity's 0.500, below the base's 0.600)" in sentence
    assert f"mean pool gain {x.ival(b.agg()['surface']['mean'])}" in sentence


def test_results_without_per_prompt_data_say_what_they_need(x) -> None:
    s = _summary(per_prompt=False)
    b = x.Bench(s)
    assert b.agg() is None and x.aggregate_sanity(b) == ""
    assert x.aggregates_block(b) == f"Aggregates over seeds × prompts: {x.NEEDS}.\n"
    text = x.verdict_block({"default": b})
    assert "Seed by seed, no method in the default setting keeps" in text and x.NEEDS in text
    # the detectable mean gain from the seeds' spread: (1.959964 + 0.841621) sd(seed gains) / sqrt(3)
    from statistics import stdev

    gains = {
        m: [r["pool_gain"] for r in s["rows"] if r["method"] == m] for m in ("validity", "wide", "surface")
    }
    vs0 = [2.801585 * stdev(g) / 3**0.5 for g in gains.values()]
    assert f"a mean pool gain of {x.num(min(vs0), 2)}-{x.num(max(vs0), 2)} against 0" in text

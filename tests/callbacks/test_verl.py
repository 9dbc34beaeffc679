"""verl's batch reward function: the user's scores pass through, each step's groups are recorded.

Called exactly as verl's ``BatchRewardManager.verify`` calls it: ``data_sources`` a numpy object
array, ``extra_infos`` the dataset's ``extra_info`` dicts with ``rollout_reward_scores`` added.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from seffi.callbacks.verl import VerlCoverage
from seffi.coverage import OracleBaseline
from seffi.errors import SeffiError

STRATEGIES = ("algebra", "guess", "table")
RUBRIC = {s: rf"\b{s}\b" for s in STRATEGIES}


def user_score(data_source, solution_str, ground_truth, extra_info):
    """A verl-style scorer of the user's: 1 when the answer line holds the ground truth."""
    return {
        "score": float(solution_str.endswith(f"answer {ground_truth}")),
        "acc": ground_truth in solution_str,
    }


def _step(rng, prompts, n):
    """One GRPO step: n samples of each prompt, shuffled across the batch as verl's balancing does."""
    rows = []
    for p in prompts:
        for _ in range(n):
            way = rng.choice(STRATEGIES, p=[0.5, 0.3, 0.2])
            rows.append((p, f"by {way} answer {12 if rng.random() < 0.7 else 13}"))
    return [rows[i] for i in rng.permutation(len(rows))]


def _call(cov, rows):
    return cov.compute_score(
        data_sources=np.array(["openai/gsm8k"] * len(rows), dtype=object),
        solution_strs=[text for _, text in rows],
        ground_truths=["12"] * len(rows),
        extra_infos=[{"split": "train", "index": p, "rollout_reward_scores": {}} for p, _ in rows],
    )


def test_scores_pass_through_and_coverage_equals_a_hand_count(tmp_path):
    rng = np.random.default_rng(5)
    prompts = list(range(10))
    oracle = OracleBaseline(
        {str(p): {s: {s} for s in STRATEGIES} for p in prompts}, strategies=list(STRATEGIES)
    )
    out = tmp_path / "run"
    cov = VerlCoverage(
        RUBRIC, user_score, oracle=oracle, out_dir=out, wandb="disabled", plots=False, n_boot=20
    )
    steps = [_step(rng, prompts, 4) for _ in range(3)]
    for rows in steps:
        assert _call(cov, rows) == [user_score("openai/gsm8k", t, "12", {}) for _, t in rows]
    report = cov.close()
    # by hand: per step and prompt, its 4 samples in batch order are one run
    curves = []
    for rows in steps:
        for p in prompts:
            seen, curve = set(), []
            for q, text in rows:
                if q == p:
                    seen.add(text.split()[1])
                    curve.append(len(seen) / 3)
            curves.append(curve)
    line = report.comparisons[0].policies[0]
    np.testing.assert_allclose(line.curves.coverage, np.mean(curves, axis=0), atol=1e-12)
    assert line.curves.n_runs == 30 and report.comparisons[0].budget == 4
    logged = [json.loads(s) for s in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["seffi/step"] for r in logged][:3] == [1, 2, 3]  # one log per training step
    written = (out / "report.json").read_text()
    assert json.loads(written)["comparisons"][0]["task"] == "verl"
    cov.close()  # idempotent: at exit again, nothing changes
    assert (out / "report.json").read_text() == written


def test_a_sample_without_its_prompt_id_is_one_clear_error(tmp_path):
    cov = VerlCoverage(RUBRIC, user_score, out_dir=tmp_path / "run", wandb="disabled", plots=False)
    with pytest.raises(SeffiError, match="extra_info has no 'index' naming its prompt"):
        cov.compute_score(["d"], ["by guess answer 12"], ["12"], [{"split": "train"}])
    cov.close()

"""`seffi.score.score` on row-per-sample files: C(k), valid C(k) and gain against hand counts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from seffi.coverage import IidBaseline, OracleBaseline
from seffi.errors import SeffiError
from seffi.labelers import RegexRubric
from seffi.score import score

STRATEGIES = ("loop", "recursion", "memo", "closed_form")
TEXT = {
    "loop": "for i in range(n)",
    "recursion": "return f(n - 1)",
    "memo": "@cache",
    "closed_form": "phi ** n",
}
RUBRIC = RegexRubric(
    {"loop": r"\bfor\b", "recursion": r"f\(n - 1\)", "memo": r"@cache", "closed_form": r"phi"}, valid=r"\S"
)


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _draws(rng, n_prompts, n, p):
    """Per prompt, n (label list, correct) pairs; a few samples follow two strategies or none."""
    out = {}
    for i in range(n_prompts):
        rows = []
        for _ in range(n):
            u = rng.random()
            labels = (
                [] if u < 0.05 else list(rng.choice(STRATEGIES, size=2 if u > 0.9 else 1, replace=False, p=p))
            )
            rows.append((labels, bool(rng.random() < 0.8)))
        out[f"q{i}"] = rows
    return out


def _hand_coverage(draws, k_max, valid_only=False):
    """C(k): per prompt, runs of k_max consecutive samples; |union| / M averaged over runs, then prompts."""
    per_prompt = []
    for rows in draws.values():
        runs = [rows[j : j + k_max] for j in range(0, len(rows), k_max)]
        curves = []
        for run in runs:
            seen, curve = set(), []
            for labels, ok in run:
                if ok or not valid_only:
                    seen |= set(labels)
                curve.append(len(seen) / len(STRATEGIES))
            curves.append(curve)
        per_prompt.append(np.mean(curves, axis=0))
    return np.mean(per_prompt, axis=0)


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(7)
    base = _draws(rng, 6, 12, [0.7, 0.2, 0.07, 0.03])
    policy = _draws(rng, 6, 8, [0.25, 0.25, 0.25, 0.25])  # two runs of K = 4 per prompt
    as_rows = lambda d: [  # noqa: E731
        {
            "prompt_id": pid,
            "completion": " / ".join(TEXT[s] for s in labels) or "no idea",
            "strategy": labels,
            "correct": ok,
        }
        for pid, rows in d.items()
        for labels, ok in rows
    ]
    return (
        base,
        policy,
        _write(tmp_path / "base.jsonl", as_rows(base)),
        _write(tmp_path / "policy.jsonl", as_rows(policy)),
    )


def test_coverage_and_gain_equal_hand_counts(files, tmp_path):
    """Each prompt's 8 samples in file order form two runs of K = 4."""
    base, policy, base_file, policy_file = files
    report = score(
        [policy_file],
        [base_file],
        label_field="strategy",
        strategies=STRATEGIES,
        budget=4,
        out_dir=tmp_path / "out",
        wandb="disabled",
        plots=False,
        n_boot=20,
        say=lambda _: None,
    )
    line = report.comparisons[0].policies[0]
    np.testing.assert_allclose(line.curves.coverage, _hand_coverage(policy, 4), atol=1e-12)
    np.testing.assert_allclose(
        line.curves.valid_coverage, _hand_coverage(policy, 4, valid_only=True), atol=1e-12
    )
    iid = IidBaseline.from_samples(
        {p: [set(labels) for labels, _ in rows] for p, rows in base.items()},
        strategies=list(STRATEGIES),
        valid={p: [ok for _, ok in rows] for p, rows in base.items()},
    ).curves(4)
    oracle = OracleBaseline(
        {p: {s: {s} for s in STRATEGIES} for p in base}, strategies=list(STRATEGIES)
    ).curves(4)
    auc = float(np.mean(_hand_coverage(policy, 4)))
    expected = (auc - iid.auc) / (oracle.auc - iid.auc)
    assert line.gain.value == pytest.approx(expected, abs=1e-12)
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert saved["comparisons"][0]["policies"][0]["gain"]["value"] == pytest.approx(expected, abs=1e-12)


def test_rubric_labels_the_text_and_budget_defaults_to_samples_per_prompt(files, tmp_path):
    """A rubric over the texts gives the curves of the labels they were written from; K = 8 by default."""
    _, policy, base_file, policy_file = files
    said = []
    report = score(
        [policy_file],
        [base_file],
        labeler=RUBRIC,
        out_dir=tmp_path / "out",
        wandb="disabled",
        plots=False,
        n_boot=20,
        say=said.append,
    )
    assert (
        report.comparisons[0].budget == 8
        and "strategies: 4 (loop, recursion, memo, closed_form); budget K = 8" in said
    )
    np.testing.assert_allclose(
        report.comparisons[0].policies[0].curves.coverage, _hand_coverage(policy, 8), atol=1e-12
    )


def test_a_policy_prompt_without_base_samples_is_one_error(files, tmp_path):
    _, _, base_file, _ = files
    other = _write(tmp_path / "other.jsonl", [{"prompt_id": "new", "completion": "for", "strategy": "loop"}])
    with pytest.raises(SeffiError, match="1 policy prompt\\(s\\) have no base samples \\(first: 'new'\\)"):
        score(
            [other],
            [base_file],
            label_field="strategy",
            strategies=STRATEGIES,
            out_dir=tmp_path / "o",
            wandb="disabled",
            plots=False,
            say=lambda _: None,
        )


def test_seed_reaches_the_base_bootstrap(files, tmp_path):
    """The base's iid intervals are those of ``IidBaseline.from_samples(...).curves(K, seed=seed)``."""
    base, _, base_file, policy_file = files
    iid = IidBaseline.from_samples(
        {p: [set(labels) for labels, _ in rows] for p, rows in base.items()},
        strategies=list(STRATEGIES),
        valid={p: [ok for _, ok in rows] for p, rows in base.items()},
    )
    bounds = {}
    for seed in (1, 2):
        report = score(
            [policy_file],
            [base_file],
            label_field="strategy",
            strategies=STRATEGIES,
            budget=4,
            out_dir=tmp_path / f"out{seed}",
            wandb="disabled",
            plots=False,
            n_boot=20,
            seed=seed,
            say=lambda _: None,
        )
        got, want = report.comparisons[0].iid, iid.curves(4, seed=seed)
        np.testing.assert_allclose(got.coverage_lo, want.coverage_lo, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got.coverage_hi, want.coverage_hi, rtol=0, atol=1e-12)
        bounds[seed] = np.asarray(got.coverage_lo)
    assert np.abs(bounds[1] - bounds[2]).max() > 1e-6


def _two_prompt_files(tmp_path):
    """Policy: p0 (a, b), p1 (a, a); base: p0 and p1 all a, p2 alternating a, b (M = 2, K = 2)."""
    row = lambda p, s: {"prompt_id": p, "completion": s, "strategy": s}  # noqa: E731
    policy = _write(
        tmp_path / "policy.jsonl", [row("p0", "a"), row("p0", "b"), row("p1", "a"), row("p1", "a")]
    )
    base = [row(p, "a") for p in ("p0", "p1") for _ in range(4)] + [row("p2", s) for s in "abab"]
    return policy, _write(tmp_path / "base.jsonl", base)


def test_the_baselines_shown_are_over_the_policys_prompts(tmp_path):
    policy, base = _two_prompt_files(tmp_path)
    report = score(
        [policy], [base], label_field="strategy", strategies=("a", "b"), out_dir=tmp_path / "o",
        wandb="disabled", plots=False, n_boot=10, say=lambda _: None,
    )  # fmt: skip
    c = report.comparisons[0]
    # p0 and p1 each hold a in every base sample: iid C(k) = 1/2, AUC 1/2 (p2's 2/3 would make it 5/9).
    # Oracle: C(1) = 1/2, C(2) = 1, AUC 3/4. Policy: p0 0.75, p1 0.5, AUC 0.625; gain 0.125 / 0.25.
    assert (c.iid.n_inputs, c.oracle.n_inputs) == (2, 2)
    np.testing.assert_allclose([c.iid.auc, c.oracle.auc, c.policies[0].curves.auc], [0.5, 0.75, 0.625])
    gain = c.policies[0].gain
    assert gain.value == pytest.approx(0.5) and gain.room == pytest.approx(0.25)


def test_a_budget_no_prompt_reaches_is_one_error_naming_the_most_samples(tmp_path):
    policy, base = _two_prompt_files(tmp_path)
    with pytest.raises(
        SeffiError, match=r"no prompt has a run of K = 3 samples \(the most a prompt has is 2\)"
    ):
        score([policy], [base], label_field="strategy", budget=3, out_dir=tmp_path / "o", say=lambda _: None)
    assert not (tmp_path / "o").exists()


def test_declared_strategies_count_in_m_beside_a_rubrics(tmp_path):
    policy, base = _two_prompt_files(tmp_path)
    rubric = RegexRubric({"a": r"\ba\b", "b": r"\bb\b"})
    report = score(
        [policy], [base], labeler=rubric, strategies=("a", "b", "c"), out_dir=tmp_path / "o",
        wandb="disabled", plots=False, n_boot=10, say=lambda _: None,
    )  # fmt: skip
    c = report.comparisons[0]
    # M = 3: C(1) = 1/3 on both prompts; C(2) = 2/3 on p0 (a, b), 1/3 on p1 (a, a).
    assert c.num_strategies == 3
    np.testing.assert_allclose(c.policies[0].curves.coverage, [1 / 3, 1 / 2])
    with pytest.raises(SeffiError, match="--strategies leaves out 'b', which the labeler emits"):
        score([policy], [base], labeler=rubric, strategies=("a",), out_dir=tmp_path / "p", say=lambda _: None)

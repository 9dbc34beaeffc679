"""PassAtKEval: unbiased valid@k / C(k), the crossover k, the gain's interval and flag, any labeler.

References are independent of the code under test: binomials by hand, C(k) by brute force over every
k-subset of the samples, AUC@K by exact enumeration, coverage of the gain's interval by simulation
from known laws, and a tiny chat model's completions labelled by the test.
"""

from __future__ import annotations

import itertools
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from tests.helpers import require

# ruff: noqa: E402
torch = require("torch", "lm")
require("transformers", "lm")

from seffi.coverage import IidBaseline, OracleBaseline
from seffi.errors import SeffiError
from seffi.labelers import CallableLabeler, RegexRubric
from seffi.models.passk import (
    PassAtKEval,
    auc_table,
    crossover_k,
    evaluate_samples,
    gain_vs_base,
    render_prompt,
    unbiased_at_k,
)
from seffi.tasks import get_task
from tests import tiny_chat


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


# -- estimators -------------------------------------------------------------------------------------


def test_unbiased_at_k_is_pass_at_k() -> None:
    """valid@k = 1 - C(n-c, k)/C(n, k) for every (c, k), up to n = 64."""
    n = 64
    counts = [0, 1, 5, 32, 63, 64]
    got = unbiased_at_k(n, counts, np.arange(1, n + 1))
    for r, c in enumerate(counts):
        for k in (1, 2, 7, 33, 64):
            assert got[r, k - 1] == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)
    with pytest.raises(SeffiError, match="k must lie"):
        unbiased_at_k(4, [1], [5])


def test_coverage_and_valid_at_k_equal_the_average_over_every_k_subset_of_the_samples() -> None:
    """Per prompt, C(k) is the mean share of strategies the union of k of the n samples covers, over all
    C(n, k) subsets; valid@k the share of subsets holding a valid sample."""
    rng = np.random.default_rng(1)
    strategies = ("a", "b", "c")
    sets = {p: [frozenset(s for s in strategies if rng.random() < 0.35) for _ in range(7)] for p in "xyz"}
    valid = {p: [bool(rng.random() < 0.3) for _ in range(7)] for p in "xyz"}
    res = evaluate_samples(sets, valid, strategies)
    for r, p in enumerate(sorted(sets)):
        for k in range(1, 8):
            subsets = list(itertools.combinations(range(7), k))
            cov = np.mean([len(frozenset().union(*(sets[p][i] for i in c))) / 3 for c in subsets])
            hit = np.mean([any(valid[p][i] for i in c) for c in subsets])
            assert res.per_prompt_coverage[r, k - 1] == pytest.approx(cov, abs=1e-12)
            assert res.per_prompt_valid_at_k[r, k - 1] == pytest.approx(hit, abs=1e-12)
    assert res.sample_sets.shape == (3, 7, 3)
    assert res.sample_sets[0, 0].tolist() == [s in sets["x"][0] for s in strategies]


def test_evaluation_curves_match_the_iid_estimator() -> None:
    """C(k) from the evaluation equals from_samples' rarefaction; solvable share."""
    rng = np.random.default_rng(3)
    strategies = ("a", "b", "c", "d")
    sets, valid = {}, {}
    for pid in ("p1", "p2", "p3"):
        sets[pid] = [frozenset(s for s in strategies if rng.random() < 0.3) for _ in range(16)]
        valid[pid] = [bool(rng.random() < (0.0 if pid == "p3" else 0.4)) for _ in range(16)]
    res = evaluate_samples(sets, valid, strategies)
    ref = IidBaseline.from_samples(sets, strategies=strategies, valid=valid).curves(16, n_boot=0)
    np.testing.assert_allclose(res.coverage, ref.coverage, atol=1e-12)
    np.testing.assert_allclose(res.valid_at_k, ref.valid_at_k, atol=1e-12)
    assert res.solvable == pytest.approx(2 / 3)  # p3 never valid
    assert res.valid_rate == pytest.approx(sum(map(sum, valid.values())) / 48)


def test_crossover_needs_a_lead_beyond_noise_over_prompts() -> None:
    """Per-prompt curves cross only where the base's lead is significant over prompts.

    The base model resampled "crossed" at k = 1 with the mean-curve rule; reference values by hand:
    paired differences d = base - policy per prompt, bound mean - t(0.975, P-1) * sd/sqrt(P).
    """
    rng = np.random.default_rng(3)
    # The same model twice: 32 prompts, valid rate 0.88, n = 64 samples each -> no significant lead.
    p_valid = rng.uniform(0.6, 1.0, size=32)
    a, b = (
        evaluate_samples(
            {f"p{i}": [frozenset()] * 64 for i in range(32)},
            {f"p{i}": list(rng.random(64) < p_valid[i]) for i in range(32)},
            ("a",),
        )
        for _ in range(2)
    )
    assert a.per_prompt_valid_at_k.shape == (32, 64)
    np.testing.assert_allclose(a.per_prompt_valid_at_k.mean(axis=0), a.valid_at_k, atol=1e-12)
    assert crossover_k(a.per_prompt_valid_at_k, b.per_prompt_valid_at_k) is None
    assert crossover_k(b.per_prompt_valid_at_k, a.per_prompt_valid_at_k) is None
    # ... while the mean curves alone "cross" one way or the other on sampling noise.
    assert crossover_k(a.valid_at_k, b.valid_at_k) or crossover_k(b.valid_at_k, a.valid_at_k)
    # A hand-made lead: 4 prompts, lead 0.1 everywhere at k = 2 but noisy at k = 1.
    base = np.array([[0.5, 0.9], [0.9, 0.9], [0.6, 0.8], [0.8, 0.8]])
    pol = np.array([[0.4, 0.8], [1.0, 0.8], [0.5, 0.7], [0.9, 0.7]])
    # k = 1: d = (0.1, -0.1, 0.1, -0.1), mean 0 -> no; k = 2: d = 0.1 each, sd 0 -> bound 0.1 > 0.
    assert crossover_k(base, pol) == 2
    assert crossover_k(base.mean(axis=0), pol.mean(axis=0)) == 2  # the mean-curve form: margin rule
    with pytest.raises(SeffiError):
        crossover_k(base, pol[:3])
    assert crossover_k([0.2, 0.5, 0.9], [0.4, 0.6, 0.8]) == 3
    assert crossover_k([0.2, 0.5], [0.4, 0.6]) is None
    assert crossover_k([0.5, 0.6], [0.4, 0.6]) == 1
    assert crossover_k([0.9, 0.9999995, 1.0], [0.95, 0.9999990, 1.0]) is None  # saturated: no crossing


# -- the gain's interval ----------------------------------------------------------------------------


def _exact_auc_law(sets: list[frozenset[str]], strategies: tuple[str, ...], K: int) -> tuple[float, float]:
    """Mean and variance of the prompt's AUC@K when its n samples are redrawn with replacement: every one
    of the n^n equally likely index tuples enumerated, AUC@K of each by binomials by hand."""
    n = len(sets)
    values = []
    for idx in itertools.product(range(n), repeat=n):
        y = [sum(s in sets[i] for i in idx) for s in strategies]
        values.append(
            np.mean(
                [np.mean([1 - math.comb(n - c, k) / math.comb(n, k) for c in y]) for k in range(1, K + 1)]
            )
        )
    return float(np.mean(values)), float(np.var(values))


def test_auc_table_is_the_point_estimate_and_its_law_mean_the_exact_auc() -> None:
    """A prompt's AUC@K from the table at its strategy counts is its per-prompt C(k) averaged over k <= K,
    and averaged over every redraw of its n samples (exact enumeration) it is unbiased for the law."""
    strategies = ("a", "b")
    sets = {
        "p": [frozenset({"a"}), frozenset({"a"}), frozenset({"b"}), frozenset()],
        "q": [frozenset({"a", "b"}), frozenset(), frozenset(), frozenset()],
        "r": [frozenset({"b"}), frozenset({"b"}), frozenset({"b"}), frozenset({"a"})],
    }
    res = evaluate_samples(sets, {p: [True] * 4 for p in sets}, strategies)
    K = 3
    y = res.sample_sets.sum(axis=1)
    np.testing.assert_allclose(auc_table(4, K)[y].mean(axis=1), res.per_prompt_coverage[:, :K].mean(axis=1))
    for pid in res.prompt_ids:  # the empirical law's exact AUC@K = mean over redraws
        q = np.mean([[s in m for s in strategies] for m in sets[pid]], axis=0)
        exact = np.mean([np.mean(1 - (1 - q) ** k) for k in range(1, K + 1)])
        assert _exact_auc_law(sets[pid], strategies, K)[0] == pytest.approx(exact)


def _laws(count: int, m: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` single-label laws over m strategies plus an unmatched atom (Dirichlet(0.7) weights)."""
    rng = np.random.default_rng(seed)
    atoms = np.vstack([np.eye(m, dtype=bool), np.zeros((1, m), dtype=bool)])
    return [(atoms, rng.dirichlet(np.full(m + 1, 0.7))) for _ in range(count)]


def _true_auc(law: tuple[np.ndarray, np.ndarray], K: int) -> float:
    q = law[1] @ law[0]
    return float(np.mean([np.mean(1 - (1 - q) ** k) for k in range(1, K + 1)]))


def _simulate(base_laws, pol_laws, prompts, n, K, seeds, truth) -> tuple[float, float]:
    """Share of the 95 % intervals containing ``truth`` over datasets drawn from the laws (an unbounded
    one contains it); mean width of the bounded ones."""
    strategies = tuple(f"s{j}" for j in range(base_laws[0][0].shape[1]))
    oracle = {
        f"x{i}": float(np.mean([min(k, 3) / 3 for k in range(1, K + 1)])) for i in range(len(base_laws))
    }
    hits, widths = [], []
    for seed in range(seeds):
        rng = np.random.default_rng([seed, 5])
        chosen = rng.choice(len(base_laws), size=prompts, replace=False)
        ev = []
        for laws in (base_laws, pol_laws):
            sets = {}
            for j in chosen:
                atoms, p = laws[j]
                rows = rng.choice(len(p), size=n, p=p)
                sets[f"x{j}"] = [
                    frozenset(s for s, h in zip(strategies, atoms[r], strict=True) if h) for r in rows
                ]
            ev.append(evaluate_samples(sets, {i: [True] * n for i in sets}, strategies))
        g = gain_vs_base(ev[1], ev[0], oracle, K)
        if g.lo is None:
            assert g.unbounded
            hits.append(True)
            continue
        hits.append(g.lo <= truth <= g.hi)
        widths.append(g.hi - g.lo)
    return float(np.mean(hits)), float(np.mean(widths))


def test_gain_interval_of_an_unchanged_model_covers_zero_on_few_prompts() -> None:
    """The policy's samples drawn from the base's own law (an unchanged model, independent samples): the
    95 % interval over 6 prompts x 16 samples contains the true gain 0 in 0.93-0.97 of 400 datasets
    (measured 0.9425; binomial SE 0.011): each prompt's estimate carries its own sampling noise, so
    the spread over prompts already holds it."""
    laws = _laws(40, 3, seed=0)
    covered, width = _simulate(laws, laws, prompts=6, n=16, K=4, seeds=400, truth=0.0)
    assert 0.93 <= covered <= 0.97, (covered, width)


def test_gain_interval_contains_the_true_gain_of_a_changed_model() -> None:
    """A policy whose law is the base's sharpened (p^3): the interval contains the exact population gain
    (over the 40 prompts' laws, from 1 - (1 - q_s)^k) in at least 0.9 of the datasets."""
    laws = _laws(40, 3, seed=0)
    sharp = [(a, p**3 / (p**3).sum()) for a, p in laws]
    K = 4
    o = np.mean([min(k, 3) / 3 for k in range(1, K + 1)])
    tb, tp = np.mean([_true_auc(x, K) for x in laws]), np.mean([_true_auc(x, K) for x in sharp])
    truth = (tp - tb) / (o - tb)
    assert truth < -0.2  # a real change
    covered, _ = _simulate(laws, sharp, prompts=8, n=16, K=K, seeds=150, truth=truth)
    assert covered >= 0.9, covered


def test_gain_of_the_same_samples_is_zero_and_flags_what_it_cannot_bound() -> None:
    """The same samples on both sides: gain 0 with a zero-width interval (the per-prompt differences are
    all 0). A spread policy: a gain in (0, 1]. Undefined gains and bad input."""
    sets = {f"p{i}": [frozenset({"a"})] * 6 + [frozenset({"b"})] * 2 for i in range(6)}
    valid = {k: [True] * 8 for k in sets}
    base = evaluate_samples(sets, valid, ("a", "b"))
    oracle = {k: float(np.mean([min(j, 2) / 2 for j in range(1, 5)])) for k in sets}
    same = gain_vs_base(base, base, oracle, 4)
    assert (same.value, same.lo, same.hi) == (0.0, 0.0, 0.0) and same.n_inputs == 6
    spread = {k: [frozenset({"a"}), frozenset({"b"})] * 4 for k in sets}
    better = gain_vs_base(evaluate_samples(spread, valid, ("a", "b")), base, oracle, 4)
    assert 0 < better.value <= 1  # six identical prompts: a zero-width interval at the value
    assert (better.lo, better.hi) == pytest.approx((better.value, better.value))
    # The room: oracle AUC@4 0.875 minus the base's, held equally by all 6 prompts.
    assert better.room == pytest.approx(0.875 - float(base.per_prompt_coverage[0, :4].mean()))
    assert better.held_by == pytest.approx(6.0) and not better.fragile
    one = evaluate_samples({"p0": sets["p0"]}, {"p0": valid["p0"]}, ("a", "b"))
    assert gain_vs_base(one, one, oracle, 4).lo is None  # one prompt: no interval
    saturated = {k: 0.0 for k in sets}  # no room above the base
    assert gain_vs_base(base, base, saturated, 4).value is None
    with pytest.raises(SeffiError, match="budget"):
        gain_vs_base(base, base, oracle, 9)
    other = evaluate_samples({"q": sets["p0"]}, {"q": valid["p0"]}, ("a", "b"))
    with pytest.raises(SeffiError, match="different prompts"):
        gain_vs_base(other, base, oracle, 4)


def test_held_out_gain_is_flagged_where_one_prompt_of_eight_holds_the_room() -> None:
    """PassAtKEval's logged gain says it is fragile: 7 of 8 prompts have one feasible strategy the base
    always finds (no room), one has two; its scalars carry the flag, the room and the interval."""
    prompts = {f"p{i}": f"prompt {i}" for i in range(8)}
    oracle = {p: {"a": {"a"}} for p in prompts}  # one feasible strategy: the oracle's C(k) = 1/2
    oracle["p7"] = {"a": {"a"}, "b": {"b"}}
    ev = PassAtKEval(lambda x, text: set(), prompts, strategies=("a", "b"), oracle=oracle, n=8)
    base_sets = {p: [frozenset({"a"})] * 8 for p in prompts}
    ev.base = evaluate_samples(base_sets, {p: [True] * 8 for p in prompts}, ("a", "b"))
    pol_sets = dict(base_sets, p7=[frozenset({"a"}), frozenset({"b"})] * 4)
    policy = evaluate_samples(pol_sets, {p: [True] * 8 for p in prompts}, ("a", "b"))
    scalars = ev.scalars(policy, 4)
    # The room by hand: only p7 has any, oracle AUC@4 there (1/2 + 1 + 1 + 1)/4 = 0.875 vs base 0.5.
    g = gain_vs_base(policy, ev.base, ev.oracle_aucs(4), 4)
    assert g.room == pytest.approx((0.875 - 0.5) / 8) and g.held_by == pytest.approx(1.0)
    assert g.fragile and g.unbounded and "fragile gain" in g.reason
    assert scalars["seffi/eval/gain_vs_base_fragile"] == 1.0
    assert scalars["seffi/eval/gain_vs_base_room"] == pytest.approx(g.room)
    assert scalars["seffi/eval/gain_vs_base"] == pytest.approx(g.value)
    assert "seffi/eval/gain_vs_base_lo" not in scalars  # unbounded: no bounds logged


# -- PassAtKEval with any labeler -------------------------------------------------------------------

STRATEGIES = ("astar", "bfs", "dfs")
WORDS = ["\n", "system", "user", "assistant", "find", "a", "route", "plan", "bfs", "dfs", "astar", "done"]
PROMPTS = {
    "maze-a": [{"role": "system", "content": "plan"}, {"role": "user", "content": "find a route"}],
    "maze-b": [{"role": "user", "content": "plan a route"}],
    "maze-c": "find a plan",  # a text prompt next to the conversational ones
}


def tiny_chat_model() -> tuple[object, object]:
    """A tiny random Qwen2 (about 1,000 parameters) and a word-level tokenizer with a ChatML template."""
    return tiny_chat.tiny_chat_model(WORDS, intermediate_size=16, max_position_embeddings=64)


def hand_labels(text: str) -> frozenset[str]:
    return frozenset(s for s in STRATEGIES if re.search(rf"\b{s}\b", text))


def brute_force_coverage(label_sets: list[frozenset[str]], k: int) -> float:
    subsets = itertools.combinations(range(len(label_sets)), k)
    return float(
        np.mean([len(frozenset().union(*(label_sets[i] for i in c))) / len(STRATEGIES) for c in subsets])
    )


def test_pass_at_k_eval_labels_chat_prompts_with_a_labeler_and_counts_coverage_by_hand() -> None:
    """A labeler (no seffi Task), prompts as {id: text or messages}: the messages are sampled through the
    tokenizer's chat template (TRL's rendering), the labeler gets each prompt as given, C(k) and valid@k
    equal brute-force counts of the labels, the default oracle is min(k, M) / M, the gain has an interval."""
    require("trl", "trl")
    from trl.data_utils import maybe_apply_chat_template

    model, tok = tiny_chat_model()
    seen: list[tuple[object, str]] = []

    class Recording:  # a user's own labeler class around a labeling function
        strategies = STRATEGIES
        inner = CallableLabeler(
            lambda x, text: (sorted(hand_labels(text)), "done" in text.split()), STRATEGIES
        )

        def __call__(self, x, text):
            seen.append((x, text))
            return self.inner(x, text)

    n = 6
    ev = PassAtKEval(Recording(), PROMPTS, n=n, every=1, seed=3)
    assert ev.strategies == STRATEGIES and ev.task is None
    texts = ev.prompt_texts(tok)
    assert texts[0] == maybe_apply_chat_template({"prompt": PROMPTS["maze-a"]}, tok)["prompt"]
    assert texts[0].endswith("<|im_start|>assistant\n") and texts[2] == "find a plan"
    args = SimpleNamespace(
        max_completion_length=6,
        num_generations=4,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        min_p=None,
        repetition_penalty=1.0,
        generation_kwargs=None,
        chat_template_kwargs=None,
    )
    state = SimpleNamespace(global_step=0, max_steps=1, is_world_process_zero=True, log_history=[])
    ev.on_train_begin(args, state, None, model=model, processing_class=tok)
    assert len(seen) == 3 * n and ev.budget == 4
    seen.clear()
    state.global_step = 1
    ev.on_step_end(args, state, None, model=model)
    step, result, scalars = ev.history[-1]
    assert step == 1 and len(seen) == 3 * n
    by_prompt: dict[str, list[tuple[frozenset[str], bool]]] = {}
    for x, text in seen:  # the labeler got the prompt itself (messages or text)
        pid = next(i for i, p in PROMPTS.items() if p == x)
        by_prompt.setdefault(pid, []).append((hand_labels(text), "done" in text.split()))
    assert result.prompt_ids == sorted(PROMPTS)
    for r, pid in enumerate(result.prompt_ids):
        labels = [s for s, _ in by_prompt[pid]]
        for k in range(1, n + 1):
            assert result.per_prompt_coverage[r, k - 1] == pytest.approx(brute_force_coverage(labels, k))
        hit = np.mean([any(by_prompt[pid][i][1] for i in c) for c in itertools.combinations(range(n), 2)])
        assert result.per_prompt_valid_at_k[r, 1] == pytest.approx(hit)
    assert any(ms for rows in by_prompt.values() for ms, _ in rows), "the salad names some strategy"
    oracle_auc = np.mean([min(k, 3) / 3 for k in range(1, 5)])
    assert ev.oracle_aucs(4) == pytest.approx({pid: oracle_auc for pid in PROMPTS})
    g = gain_vs_base(result, ev.base, ev.oracle_aucs(4), 4)
    assert scalars["seffi/eval/gain_vs_base"] == pytest.approx(g.value)
    assert scalars["seffi/eval/gain_vs_base_fragile"] == float(g.fragile)
    if g.lo is not None:
        assert scalars["seffi/eval/gain_vs_base_lo"] <= g.value <= scalars["seffi/eval/gain_vs_base_hi"]


def test_pass_at_k_eval_takes_a_regex_rubric_and_refuses_what_it_cannot_label() -> None:
    """A RegexRubric is a labeler like any other; wrong inputs are one SeffiError each."""
    rubric = RegexRubric({s: rf"\b{s}\b" for s in STRATEGIES})
    ev = PassAtKEval(rubric, {"p": "find a route"}, n=4)
    assert ev.strategies == STRATEGIES and ev.ids == ["p"]
    refs = {"bfs": {"bfs"}, "dfs": {"dfs", "bfs"}}  # this prompt's feasible strategies' reference traces
    ev = PassAtKEval(rubric, {"p": "find a route"}, oracle={"p": refs}, n=4)
    want = OracleBaseline({"p": refs}, strategies=STRATEGIES).curves(4).auc
    assert ev.oracle_aucs(4) == pytest.approx({"p": want}) and want < np.mean(
        [min(k, 3) / 3 for k in range(1, 5)]
    )
    task = get_task("hanoi", max_disks=3)
    with pytest.raises(SeffiError, match="strategies"):
        PassAtKEval(lambda x, t: ["bfs"], {"p": "q"})
    with pytest.raises(SeffiError, match=r"\{prompt id: prompt\}"):
        PassAtKEval(rubric, ["find a route"])
    with pytest.raises(SeffiError, match="text or a list of chat messages"):
        PassAtKEval(rubric, {"p": 3})
    with pytest.raises(SeffiError, match="a Task labels its own inputs"):
        PassAtKEval(task, {"p": "q"})
    with pytest.raises(SeffiError, match="prompt="):
        PassAtKEval(rubric, task.make_inputs(2, seed=0))
    with pytest.raises(SeffiError, match="no reference sets"):
        PassAtKEval(rubric, {"p": "a", "q": "b"}, oracle={"p": {"bfs": {"bfs"}}})
    _, tok = tiny_chat_model()
    tok.chat_template = None
    with pytest.raises(SeffiError, match="chat template"):
        render_prompt([{"role": "user", "content": "plan"}], tok)


def test_pass_at_k_eval_with_a_task_keeps_its_prompts_validator_and_reference_traces() -> None:
    """The Task path: task inputs prompted by ``task.prompt``, labelled by ``validate_y_text``, and the
    gain's oracle from the task's reference traces."""
    task = get_task("hanoi", max_disks=3)
    inputs = task.make_inputs(3, seed=0)
    ev = PassAtKEval(task, inputs, n=4)
    assert ev.task is task and ev.strategies == tuple(task.strategies())
    assert ev.prompt_texts(tokenizer=None) == [task.prompt(x) for x in inputs]
    x = inputs[0]
    good = task.solve(x, task.strategies()[0])
    assert ev.labeler(x, good) == task.validate_y_text(x, good)
    want = {
        y.id: OracleBaseline({y.id: task.reference_match_sets(y)}, strategies=ev.strategies, seed=0)
        .curves(4)
        .auc
        for y in inputs
    }
    assert ev.oracle_aucs(4) == pytest.approx(want)

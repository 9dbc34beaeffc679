"""ClassifierLabeler and agreement: kappa by hand, a classifier learned from grid_routes' own traces.

References: Cohen's kappa from 2x2 tables worked by hand and from a second closed form; the task's
validator (``TaskLabeler``) as the reference labeler on held-out inputs; a classifier trained on
shuffled labels as the chance level.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from seffi.errors import SeffiError
from seffi.labelers import Labeler, TaskLabeler, as_labeler
from seffi.models.classifier import ClassifierLabeler, agreement, cohen_kappa
from seffi.tasks import MAX_TRACE_CHARS, ValidationResult, get_task

# -- Cohen's kappa ----------------------------------------------------------------------------------


def test_cohen_kappa_of_hand_computed_tables() -> None:
    # tp 20, fp 5, fn 10, tn 15 (N = 50): p_o = 35/50 = 0.7; reference yes 30/50 = 0.6,
    # predicted yes 25/50 = 0.5; p_e = 0.6 * 0.5 + 0.4 * 0.5 = 0.5; kappa = (0.7 - 0.5) / 0.5 = 0.4
    assert cohen_kappa(20, 5, 10, 15) == pytest.approx(0.4)
    # tp 45, fp 15, fn 25, tn 15 (N = 100): p_o = 0.60; reference yes 0.7, predicted yes 0.6;
    # p_e = 0.7 * 0.6 + 0.3 * 0.4 = 0.54; kappa = 0.06 / 0.46 = 0.130435
    assert cohen_kappa(45, 15, 25, 15) == pytest.approx(0.06 / 0.46)
    assert cohen_kappa(10, 0, 0, 5) == pytest.approx(1.0)
    assert cohen_kappa(0, 5, 5, 0) == pytest.approx(-1.0)
    assert np.isnan(cohen_kappa(0, 0, 0, 0))
    assert np.isnan(cohen_kappa(7, 0, 0, 0))  # both raters always say yes: chance explains everything


def test_cohen_kappa_equals_its_closed_form_on_random_tables() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        tp, fp, fn, tn = (int(v) for v in rng.integers(0, 30, size=4))
        denom = (tp + fp) * (fp + tn) + (tp + fn) * (fn + tn)
        if denom == 0:
            continue
        assert cohen_kappa(tp, fp, fn, tn) == pytest.approx(2 * (tp * tn - fn * fp) / denom, abs=1e-12)


def test_agreement_tables_kappas_and_exact_set_rate_by_hand() -> None:
    reference = [{"a"}, {"a", "b"}, set(), {"b"}]
    predicted = [{"a"}, {"a"}, {"b"}, ValidationResult.correct({"b"})]
    got = agreement(reference, predicted, ["a", "b"])
    assert got["n"] == 4 and got["strategies"] == ["a", "b"]
    # a: reference 1 1 0 0, predicted 1 1 0 0
    assert got["per_strategy"]["a"] == {"tp": 2, "fp": 0, "fn": 0, "tn": 2, "agreement": 1.0, "kappa": 1.0}
    # b: reference 0 1 0 1, predicted 0 0 1 1 -> p_o 0.5 = p_e 0.5
    assert got["per_strategy"]["b"] == {"tp": 1, "fp": 1, "fn": 1, "tn": 1, "agreement": 0.5, "kappa": 0.0}
    assert got["exact_set_rate"] == pytest.approx(2 / 4)  # traces 1 and 4
    # pooled: tp 3 fp 1 fn 1 tn 3, p_o = 6/8; chance = mean(0.5, 0.5)
    pooled = got["pooled"]
    assert (pooled["tp"], pooled["fp"], pooled["fn"], pooled["tn"]) == (3, 1, 1, 3)
    assert pooled["agreement"] == pytest.approx(0.75)
    assert pooled["kappa"] == pytest.approx((0.75 - 0.5) / 0.5)
    assert got["mean_kappa"] == pytest.approx(0.5)


def test_pooled_kappa_gives_no_credit_for_knowing_which_strategy_is_common() -> None:
    # "a" is in 3 of 4 reference sets, "b" in 1; the labeler always answers {"a"} (each majority).
    got = agreement([{"a"}, {"a"}, {"a"}, {"b"}], [{"a"}] * 4, ["a", "b"])
    # a: tp 3 fp 1 -> p_o 0.75, p_e = 0.75 * 1 + 0.25 * 0 = 0.75 -> 0
    # b: fn 1 tn 3 -> p_o 0.75, p_e = 0.25 * 0 + 0.75 * 1 = 0.75 -> 0
    assert got["per_strategy"]["a"]["kappa"] == pytest.approx(0.0)
    assert got["per_strategy"]["b"]["kappa"] == pytest.approx(0.0)
    assert got["pooled"]["kappa"] == pytest.approx(0.0)  # p_o 0.75, chance mean(0.75, 0.75)
    # one table: tp 3 fp 1 fn 1 tn 3 -> yes-rates 0.5 and 0.5, p_e 0.5 -> (0.75 - 0.5) / 0.5
    assert got["pooled"]["kappa_one_table"] == pytest.approx(0.5)
    assert got["exact_set_rate"] == pytest.approx(0.75)


def test_agreement_rejects_mismatched_lengths_and_undeclared_ids() -> None:
    with pytest.raises(SeffiError, match="one prediction per reference"):
        agreement([{"a"}], [], ["a"])
    with pytest.raises(SeffiError, match=r"predicted 0 holds undeclared strategy ids \['z'\]"):
        agreement([{"a"}], [{"z"}], ["a"])
    with pytest.raises(SeffiError, match="at least one"):
        agreement([], [], [])
    empty = agreement([], [], ["a"])
    assert empty["n"] == 0 and np.isnan(empty["exact_set_rate"]) and np.isnan(empty["pooled"]["kappa"])


# -- the classifier on grid_routes ------------------------------------------------------------------


@pytest.fixture(scope="module")
def grid() -> SimpleNamespace:
    """Traces of grid_routes' own base sampler (on-strategy, wrong-answer and off-strategy draws),
    labelled by the task's validator; the held-out set uses inputs the training set never saw."""
    task = get_task("grid_routes")
    labeler = TaskLabeler(task)

    def draw(inputs: list, seed: int, per_input: int) -> tuple[list, list[str], list[ValidationResult]]:
        rng = np.random.default_rng(seed)
        xs, texts, labels = [], [], []
        for x in inputs:
            for _ in range(per_input):
                y = task.sample_y_text(x, rng)
                xs.append(x)
                texts.append(y)
                labels.append(labeler(x, y))
        return xs, texts, labels

    train_inputs = task.make_inputs(150, seed=0)
    seen = {x.id for x in train_inputs}
    test_inputs = [x for x in task.make_inputs(150, seed=1) if x.id not in seen]
    assert len(test_inputs) >= 40  # the default config's grids repeat; enough unseen ones remain
    _, train_texts, train_labels = draw(train_inputs, seed=10, per_input=6)
    test_xs, test_texts, test_labels = draw(test_inputs, seed=11, per_input=8)
    return SimpleNamespace(
        task=task,
        strategies=task.strategies(),
        train_texts=train_texts,
        train_labels=train_labels,
        test_xs=test_xs,
        test_texts=test_texts,
        test_labels=test_labels,
    )


def test_classifier_trained_on_validator_labels_agrees_with_the_validator_on_held_out_inputs(grid) -> None:
    task = grid.task
    clf = ClassifierLabeler(valid=lambda x, y: task.validate_y_text(x, y).valid)
    clf.fit(grid.train_texts, grid.train_labels, grid.strategies)
    assert clf.n_iter < clf.max_iter  # converged
    predicted = [clf(x, y) for x, y in zip(grid.test_xs, grid.test_texts, strict=True)]
    got = agreement(grid.test_labels, predicted, grid.strategies)
    # Measured on three train/test seed pairs: pooled kappa 0.89-0.93, exact-set rate 0.85-0.90,
    # wall_following (the strategy whose trace depends on walls the text does not show) 0.70-0.77, the
    # other three 0.92-1.0. Bounds sit ~0.1 below the lowest.
    assert got["pooled"]["kappa"] > 0.8
    assert got["exact_set_rate"] > 0.75
    assert got["per_strategy"]["wall_following"]["kappa"] > 0.6
    for s in ("right_first", "down_first", "staircase"):
        assert got["per_strategy"][s]["kappa"] > 0.85
    # validity comes from the validator's own check, so it is right on every trace
    assert [p.valid for p in predicted] == [r.valid for r in grid.test_labels]


def test_classifier_trained_on_shuffled_labels_agrees_only_by_chance(grid) -> None:
    perm = np.random.default_rng(0).permutation(len(grid.train_labels))
    shuffled = [grid.train_labels[i] for i in perm]
    clf = ClassifierLabeler().fit(grid.train_texts, shuffled, grid.strategies)
    got = agreement(grid.test_labels, clf.predict(grid.test_texts), grid.strategies)
    # Labels independent of the text: kappa's spread around 0 is about 1/sqrt(N) ~ 0.05 with N ~ 400
    # held-out traces; measured |kappa| <= 0.01. 0.1 is twice that spread.
    assert abs(got["pooled"]["kappa"]) < 0.1
    for s in grid.strategies:
        assert abs(got["per_strategy"][s]["kappa"]) < 0.1, s


def test_classifier_fit_is_a_deterministic_stationary_point_of_its_objective(grid) -> None:
    a = ClassifierLabeler().fit(grid.train_texts, grid.train_labels, grid.strategies)
    b = ClassifierLabeler().fit(grid.train_texts, grid.train_labels, grid.strategies)
    assert np.array_equal(a._weights, b._weights) and a.features == b.features
    order = np.random.default_rng(1).permutation(len(grid.train_texts))
    c = ClassifierLabeler().fit(
        [grid.train_texts[i] for i in order], [grid.train_labels[i] for i in order], grid.strategies
    )
    np.testing.assert_allclose(c._weights, a._weights, atol=1e-6)  # row order moves only rounding
    # gradient of mean logistic loss + l2/2 ||W||^2 (intercept row unpenalised), computed here
    X = a._matrix(grid.train_texts)
    Y = np.array([[s in r.strategy_matches for s in grid.strategies] for r in grid.train_labels], float)
    p = 1.0 / (1.0 + np.exp(-(X @ a._weights)))
    penalty = np.ones((X.shape[1], 1))
    penalty[-1] = 0.0
    grad = X.T @ (p - Y) / len(X) + a.l2 * penalty * a._weights
    assert np.max(np.abs(grad)) < 1e-4


def test_classifier_is_a_labeler_and_never_raises_on_junk(grid) -> None:
    calls = []

    def valid(x, text):
        calls.append(text)
        return True

    clf = ClassifierLabeler(valid=valid).fit(grid.train_texts, grid.train_labels, grid.strategies)
    assert isinstance(clf, Labeler) and as_labeler(clf) is clf
    assert clf.strategies == grid.strategies
    junk = [None, 12345, object(), b"\xff\xfe", "", "  \n\t", "x" * (MAX_TRACE_CHARS + 1), ["right"]]
    for y in junk:
        res = clf(None, y)
        assert not res.parse_ok and not res.valid and res.strategy_matches == frozenset(), y
        assert res.error
    assert calls == []  # junk never reaches the validity check
    # text of unknown words, and huge text within the limit: labelled, not raised on
    for y in ("zebra " * 16_000, "right " * 16_000 + "answer 3 3"):
        res = clf(None, y)
        assert res.parse_ok and res.valid and res.strategy_matches <= set(grid.strategies)
    res = clf(None, b"right\nright\nright\ndown\ndown\ndown\nanswer 3 3")
    assert res.parse_ok and res.strategy_matches == {"right_first", "wall_following"}


def test_classifier_validity_check_errors_become_invalid_with_the_predicted_matches(grid) -> None:
    def broken(x, text):
        raise RuntimeError("verifier down")

    clf = ClassifierLabeler(valid=broken).fit(grid.train_texts, grid.train_labels, grid.strategies)
    res = clf(None, "down\ndown\ndown\nright\nright\nright\nanswer 3 3")
    assert res.parse_ok and not res.valid and res.strategy_matches == {"down_first"}
    assert "RuntimeError: verifier down" in res.error
    no = ClassifierLabeler(valid=lambda x, t: False).fit(grid.train_texts, grid.train_labels, grid.strategies)
    res = no(None, "down\ndown\ndown\nright\nright\nright\nanswer 3 3")
    assert not res.valid and res.strategy_matches == {"down_first"}


def test_classifier_setup_errors_are_one_clear_message() -> None:
    with pytest.raises(SeffiError, match="not fitted"):
        ClassifierLabeler()(None, "right")
    with pytest.raises(SeffiError, match="one match set per text"):
        ClassifierLabeler().fit(["a"], [], ["s"])
    with pytest.raises(SeffiError, match=r"match set 0 holds undeclared strategy ids \['t'\]"):
        ClassifierLabeler().fit(["a"], [{"t"}], ["s"])
    with pytest.raises(SeffiError, match="no usable training text"):
        ClassifierLabeler().fit([None, ""], [set(), {"s"}], ["s"])
    with pytest.raises(SeffiError, match="valid must be callable"):
        ClassifierLabeler(valid="yes")
    with pytest.raises(SeffiError, match="l2 must be > 0"):
        ClassifierLabeler(l2=0)
    with pytest.raises(SeffiError, match="predict_proba takes strings"):
        ClassifierLabeler().fit(["a b"], [{"s"}], ["s"]).predict_proba([None])


def test_classifier_skips_junk_training_texts() -> None:
    texts = ["right right down down", None, "down down right right", b"\xff"] * 10
    sets = [{"r"}, {"d"}, {"d"}, {"r"}] * 10  # the junk rows carry labels that would confuse it
    clf = ClassifierLabeler().fit(texts, sets, ["r", "d"])
    assert clf.predict(["right right down down", "down down right right"]) == [{"r"}, {"d"}]

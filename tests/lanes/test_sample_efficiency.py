from __future__ import annotations

import functools
import hashlib
import json
import sys

import pytest

from seffi.lanes.packs import Concept, ConceptError
from seffi.lanes.sample_efficiency import (
    GATE_THRESHOLD,
    ProbeResponse,
    TeachOutcome,
    curve_metrics,
    run_concept,
    run_lane,
)
from tests.lanes import learners_fixture as lf

TOKENS = ("alpha", "beta", "gamma", "delta")
CONCEPT = Concept(
    id="greek",
    split="public",
    probe="Which letters open the alphabet?",
    expected_tokens=TOKENS,
    curriculum=(
        "Alpha comes first.",
        "Beta follows alpha.",
        "Gamma is third after beta.",
        "Delta closes the opening four.",
    ),
)
ALL = "alpha beta gamma delta"


def _hits(result) -> list[int]:
    return [p.cumulative_token_hit_count for p in result.curve]


def _scripted(script: dict[int, tuple[str, str]]):
    return functools.partial(lf.ScriptedLearner, script)


def test_echo_learner_curve_is_k() -> None:
    r = run_concept(CONCEPT, lf.EchoLearner)
    assert _hits(r) == [0, 1, 2, 3, 4]
    assert [p.vault_hits for p in r.curve] == [0, 1, 2, 3, 4]
    assert [p.accepted for p in r.curve] == [0, 1, 2, 3, 4]
    assert r.corrections_to_first_hit == 1
    assert r.corrections_to_saturation == 4
    assert r.saturation_score == 1.0
    assert r.replay_determinism == 1.0
    assert r.error is None
    assert all(p.replay_identical and p.first_divergent_step is None for p in r.curve)


@pytest.mark.parametrize(
    ("script", "hits", "first", "saturation", "score"),
    [
        ({}, [0, 0, 0, 0, 0], None, None, 0.0),  # never hits
        # last two only, in walk_surface: never saturates
        (
            {1: ("", "alpha"), 2: ("", "alpha beta"), 3: ("", "beta gamma"), 4: ("gamma delta", "")},
            [0, 1, 2, 2, 2],
            1,
            None,
            0.5,
        ),
        # saturates at k=2, then forgets everything: saturation recorded, final score 0
        ({2: (ALL, "")}, [0, 0, 4, 0, 0], 2, 2, 0.0),
        # case-insensitive; token-bounded (alphabet, betas, gamma-ray, xdelta do not count); union of both
        ({3: ("ALPHA, Beta! alphabet betas", "gamma-ray xdelta gAmMa.")}, [0, 0, 0, 3, 0], 3, None, 0.0),
        # repeated tokens count once
        ({4: ("alpha alpha alpha", "alpha delta delta")}, [0, 0, 0, 0, 2], 4, None, 0.5),
    ],
)
def test_scripted_curves_and_metrics_exact(script, hits, first, saturation, score) -> None:
    r = run_concept(CONCEPT, _scripted(script))
    assert _hits(r) == hits
    assert r.corrections_to_first_hit == first
    assert r.corrections_to_saturation == saturation
    assert r.saturation_score == score
    assert [p.vault_hits for p in r.curve] == [k % 3 for k in range(5)]
    assert r.replay_determinism == 1.0


def test_curve_metrics_pure() -> None:
    assert curve_metrics([0, 0, 0], 2) == (None, None, 0.0)
    assert curve_metrics([0, 2, 1, 1], 2) == (1, 1, 0.5)
    assert curve_metrics([1, 1, 3], 3) == (0, 2, 1.0)


def test_aggregate_over_concepts_by_hand() -> None:
    other = CONCEPT.model_copy(update={"id": "greek-2"})
    third = CONCEPT.model_copy(update={"id": "greek-3"})
    factories = {
        "greek": lf.EchoLearner,  # first 1, saturation 4, final 1.0
        "greek-2": _scripted({2: (ALL, "")}),  # first 2, saturation 2, final 0.0
        "greek-3": _scripted({}),  # never
    }
    results = [run_concept(c, factories[c.id]) for c in (CONCEPT, other, third)]
    from seffi.lanes.sample_efficiency import aggregate

    agg = aggregate(results)
    assert agg.mean_corrections_to_first_hit == pytest.approx((1 + 2) / 2)
    assert agg.mean_corrections_to_saturation == pytest.approx((4 + 2) / 2)
    assert agg.saturation_rate == pytest.approx(1 / 3)  # only the echo learner ends saturated
    assert agg.replay_determinism == 1.0
    assert (agg.n_snapshots, agg.n_identical_replays) == (15, 15)
    assert agg.gate_passed and agg.gate_threshold == GATE_THRESHOLD
    assert agg.first_divergence is None
    none = aggregate([results[2]])
    assert none.mean_corrections_to_first_hit is None and none.mean_corrections_to_saturation is None
    assert none.saturation_rate == 0.0


def test_trace_hash_is_computed_by_the_runner_from_steps() -> None:
    r = run_concept(CONCEPT, lf.EchoLearner)
    point = r.curve[1]
    steps = [
        {"step": "teach", "index": 0, "correction": CONCEPT.curriculum[0], "accepted": True, "reason": None},
        {
            "step": "probe",
            "question": CONCEPT.probe,
            "surface": CONCEPT.curriculum[0],
            "walk_surface": "",
            "vault_hits": 1,
        },
    ]
    h = ""
    for s in steps:
        text = json.dumps(s, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        h = hashlib.sha256((h + text).encode("utf-8")).hexdigest()
    assert point.trace_hash == h == point.replay_trace_hash
    assert len({p.trace_hash for p in r.curve}) == 5


def test_random_learner_fails_the_gate_and_names_the_probe() -> None:
    report = run_lane([CONCEPT], lf.RandomLearner)
    agg = report.aggregate
    assert agg.replay_determinism == 0.0
    assert not agg.gate_passed
    assert agg.first_divergence is not None
    assert (agg.first_divergence.concept, agg.first_divergence.k, agg.first_divergence.step) == (
        "greek",
        0,
        "probe",
    )
    assert all(p.first_divergent_step == "probe" for p in report.concepts[0].curve)
    assert _hits(report.concepts[0]) == [0, 1, 2, 3, 4]  # the nonce does not add hits


def test_one_flaky_snapshot_is_located_at_its_correction() -> None:
    lf.reset_flaky()
    report = run_lane([CONCEPT], lf.FlakyOnceLearner)
    curve = report.concepts[0].curve
    assert [p.replay_identical for p in curve] == [True, True, False, True, True]
    assert curve[2].first_divergent_step == "correction[1]"
    agg = report.aggregate
    assert agg.replay_determinism == pytest.approx(4 / 5)
    assert not agg.gate_passed
    assert agg.first_divergence.model_dump() == {"concept": "greek", "k": 2, "step": "correction[1]"}


def test_learner_errors_name_the_concept_and_keep_other_results() -> None:
    empty = CONCEPT.model_copy(update={"id": "empty", "curriculum": ()})
    short = CONCEPT.model_copy(
        update={"id": "short", "curriculum": CONCEPT.curriculum[:2], "expected_tokens": TOKENS[:2]}
    )
    report = run_lane([CONCEPT.model_copy(update={"id": "broken"}), empty, short], lf.BrokenLearner)
    by_id = {c.id: c for c in report.concepts}
    assert "concept 'broken': teach(correction[2]) raised RuntimeError: vault is on fire (snapshot k=3)" in (
        report.errors
    )
    assert "concept 'empty': empty curriculum" in report.errors
    assert len(by_id["broken"].curve) == 3 and by_id["broken"].corrections_to_first_hit is None
    # the short concept never reaches the failing third correction: its results are kept
    assert _hits(by_id["short"]) == [0, 1, 2] and by_id["short"].corrections_to_saturation == 2
    assert report.aggregate.n_errors == 2 and report.aggregate.n_evaluated == 1
    assert report.aggregate.saturation_rate == 1.0 and report.aggregate.n_snapshots == 3
    report = run_lane([CONCEPT, empty], lf.EchoLearner, load_errors=[ConceptError(concept="#7", problem="x")])
    assert report.errors == ["concept '#7': x", "concept 'empty': empty curriculum"]
    assert report.aggregate.n_concepts == 3 and report.aggregate.n_evaluated == 1
    assert report.aggregate.saturation_rate == 1.0


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lf.WrongTypeLearner, "probe returned str, expected ProbeResponse"),
        (lambda: object(), "the learner factory returned object, which lacks teach()/probe()"),
        (lambda: 1 / 0, "the learner factory raised ZeroDivisionError"),
    ],
)
def test_protocol_violations_are_concept_errors(factory, message) -> None:
    r = run_concept(CONCEPT, factory)
    assert r.error is not None and r.error.startswith("concept 'greek': ") and message in r.error


def test_dict_outcomes_are_accepted_and_bad_fields_rejected() -> None:
    class DictLearner:
        def teach(self, c):
            return {"accepted": True, "reason": None}

        def probe(self, q):
            return {"surface": "alpha", "vault_hits": -1}

    r = run_concept(CONCEPT, DictLearner)
    assert r.error is not None and "invalid ProbeResponse" in r.error and "vault_hits" in r.error
    assert TeachOutcome(accepted=False, reason="x").accepted is False
    assert ProbeResponse(surface="s").walk_surface == ""


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise SystemExit(3)


class _Quit(BaseException):
    pass


@pytest.mark.parametrize(
    ("raised", "message"),
    [
        (SystemExit(0), "teach(correction[0]) raised SystemExit: 0 (snapshot k=1)"),
        (GeneratorExit(), "teach(correction[0]) raised GeneratorExit (snapshot k=1)"),
        (_Quit("bye"), "teach(correction[0]) raised _Quit: bye (snapshot k=1)"),
        (_Unprintable(), "teach(correction[0]) raised _Unprintable: <unprintable> (snapshot k=1)"),
    ],
)
def test_any_base_exception_from_learner_code_is_the_concepts_error(raised, message) -> None:
    """Learner code raising anything but KeyboardInterrupt is that concept's error."""

    class Raiser(lf.EchoLearner):
        def teach(self, correction: str) -> TeachOutcome:
            raise raised

    report = run_lane([CONCEPT, CONCEPT.model_copy(update={"id": "other"})], Raiser)
    assert report.errors[:2] == [f"concept 'greek': {message}", f"concept 'other': {message}"]
    assert [len(c.curve) for c in report.concepts] == [1, 1]  # k = 0 (nothing taught) was measured


def test_keyboard_interrupt_from_the_learner_stops_the_run() -> None:
    """The one exception that is not the concept's error is the user's Ctrl-C."""

    class Interrupted(lf.EchoLearner):
        def probe(self, question: str) -> ProbeResponse:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_lane([CONCEPT], Interrupted)


def test_reading_a_returned_object_is_learner_code_too() -> None:
    """A subclass of the protocol's model whose field access raises is a concept error."""

    class Sneaky(ProbeResponse):
        def __getattribute__(self, name: str):
            if name == "walk_surface":
                sys.exit(0)
            return super().__getattribute__(name)

    class Learner(lf.EchoLearner):
        def probe(self, question: str) -> ProbeResponse:
            return Sneaky(surface="alpha")

    r = run_concept(CONCEPT, Learner)
    assert r.error == "concept 'greek': reading what probe returned raised SystemExit: 0 (snapshot k=0)"


def test_no_concept_measured_is_the_runs_error() -> None:
    """With no curve there is no gate result; the report says why instead."""
    report = run_lane([CONCEPT], lf.AlwaysRaisingLearner)
    assert report.errors == [
        "concept 'greek': probe raised RuntimeError: model server unreachable (snapshot k=0)",
        "no concept produced a complete curve (1 of 1 failed)",
    ]
    assert report.concepts[0].curve == [] and report.aggregate.n_snapshots == 0
    assert run_lane([], lf.EchoLearner).errors == ["no concepts to run (the pack or split is empty)"]

"""Labelers: task parser, regex rubric and user callables; junk never raises."""

from __future__ import annotations

import re

import pytest

from seffi.callbacks.labelers import (
    CallableLabeler,
    Labeler,
    RegexRubric,
    TaskLabeler,
    as_labeler,
    coerce_text,
)
from seffi.tasks.base import MAX_TRACE_CHARS, ValidationResult
from tests.callbacks.helpers import hanoi_inputs

JUNK = [None, 3, 2.5, ["a"], {"a": 1}, b"\xff\xfe\x00", "", "   \n\t", "x" * (MAX_TRACE_CHARS + 1), object()]


@pytest.fixture(scope="module")
def hanoi():
    return hanoi_inputs(2)


def test_task_labeler_is_validate_y_text(hanoi):
    task, inputs = hanoi
    lab = TaskLabeler(task)
    assert isinstance(lab, Labeler)
    assert lab.strategies == task.strategies()
    for x in inputs:
        for s in task.strategies():
            trace = task.solve(x, s)
            assert lab(x, trace) == task.validate_y_text(x, trace)
            assert s in lab(x, trace).strategy_matches
    assert as_labeler(task).strategies == task.strategies()


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_junk_is_unparsable_for_every_labeler(hanoi, junk):
    task, inputs = hanoi
    labelers = [
        TaskLabeler(task),
        RegexRubric({"a": r"a", "b": r"b"}),
        CallableLabeler(lambda x, t: ["a"], strategies=["a"]),
    ]
    for lab in labelers:
        res = lab(inputs[0], junk)
        assert isinstance(res, ValidationResult)
        assert not res.parse_ok and not res.valid and res.strategy_matches == frozenset()
        assert res.error


def test_coerce_text():
    assert coerce_text("ab") == ("ab", None)
    assert coerce_text(b"caf\xc3\xa9") == ("café", None)
    assert coerce_text(bytearray(b"ok")) == ("ok", None)
    assert coerce_text(b"\xc3")[1] == "bytes are not valid UTF-8"
    assert coerce_text(" ")[1] == "empty text"
    assert coerce_text(7)[1] == "expected text, got int"


def test_regex_rubric_matches_and_validity():
    rubric = RegexRubric(
        {"loop": r"\b(for|while)\b", "recursion": r"^def (\w+)\(.*\n(.*\n)*.*\b\1\("},
        valid=r"^return\b|\breturn\b",
    )
    assert rubric.strategies == ("loop", "recursion")
    rec = "def f(n):\n    if n: return f(n - 1)\n    return 0"
    loop = "def g(n):\n    for i in range(n): pass\n    return n"
    both = "def h(n):\n    while n: n -= 1\n    return h(0)"
    none = "print('hello')"
    assert rubric(None, rec) == ValidationResult.correct({"recursion"})
    assert rubric(None, loop) == ValidationResult.correct({"loop"})
    assert rubric(None, both).strategy_matches == {"loop", "recursion"}
    res = rubric(None, none)
    assert res.parse_ok and not res.valid and res.strategy_matches == frozenset()
    # bytes are decoded like validate_y_text does
    assert rubric(None, rec.encode()) == ValidationResult.correct({"recursion"})


def test_regex_rubric_without_validity_counts_parseable_text_valid():
    rubric = RegexRubric({"a": re.compile("A", re.IGNORECASE)})
    assert rubric(None, "xa") == ValidationResult.correct({"a"})
    assert rubric(None, "zz") == ValidationResult.correct(frozenset())


def test_regex_rubric_valid_callable_errors_do_not_raise():
    def boom(x, text):
        raise RuntimeError("no")

    res = RegexRubric({"a": "a"}, valid=boom)(None, "a")
    assert res.parse_ok and not res.valid and res.strategy_matches == {"a"}
    assert "RuntimeError" in res.error
    assert RegexRubric({"a": "a"}, valid=lambda x, t: x == 1)(1, "a").valid


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        ({}, "at least one"),
        ({"a": "("}, "does not compile"),
        ({"a": 3}, "regex string"),
        ([("a", "a")], "mapping"),
    ],
)
def test_regex_rubric_bad_config(patterns, message):
    with pytest.raises(ValueError, match=message):
        RegexRubric(patterns)


def test_callable_labeler_return_shapes_and_faults():
    seen = []

    def fn(x, text):
        seen.append((x, text))
        if text == "boom":
            raise KeyError("k")
        if text == "pair":
            return ["a", "b"], False
        if text == "one":
            return "a"
        if text == "result":
            return ValidationResult.invalid("wrong answer", frozenset({"b"}))
        if text == "unknown":
            return ["a", "zzz"]
        return ["b"]

    lab = CallableLabeler(fn, strategies=["a", "b", "a"])
    assert lab.strategies == ("a", "b")
    assert lab("x0", "plain") == ValidationResult.correct({"b"})
    assert lab("x0", "one") == ValidationResult.correct({"a"})
    pair = lab("x0", "pair")
    assert pair.parse_ok and not pair.valid and pair.strategy_matches == {"a", "b"}
    assert lab("x0", "result") == ValidationResult.invalid("wrong answer", frozenset({"b"}))
    unknown = lab("x0", "unknown")
    assert unknown.valid and unknown.strategy_matches == {"a"} and "zzz" in unknown.error
    boom = lab("x0", "boom")
    assert not boom.parse_ok and "KeyError" in boom.error
    # junk never reaches the user function
    n = len(seen)
    lab("x0", None), lab("x0", b"\xff"), lab("x0", "")
    assert len(seen) == n


def test_as_labeler_dispatch_and_errors(hanoi):
    task, _ = hanoi
    assert isinstance(as_labeler(task), TaskLabeler)
    assert isinstance(as_labeler({"a": "a"}), RegexRubric)
    assert isinstance(as_labeler(lambda x, t: [], strategies=["s"]), CallableLabeler)
    rubric = RegexRubric({"a": "a"})
    assert as_labeler(rubric) is rubric

    class Mine:
        strategies = ("q",)

        def __call__(self, x, y_text):
            return ValidationResult.correct({"q"})

    mine = Mine()
    assert as_labeler(mine) is mine
    with pytest.raises(ValueError, match="strategies"):
        as_labeler(lambda x, t: [])
    with pytest.raises(ValueError, match="cannot label"):
        as_labeler(42)
    with pytest.raises(ValueError, match="callable"):
        CallableLabeler("nope", ["a"])  # type: ignore[arg-type]

from __future__ import annotations

import itertools

import pytest

from seffi.tasks import get_task
from tests.tasks.checks import assert_illegal


@pytest.fixture(scope="module")
def task():
    return get_task("edit_script")


def test_single_substitution(task):
    x = task.make_input(source="abc", target="abb")
    for s in ("left_to_right", "right_to_left", "substitution_preferring"):
        assert task.solve(x, s) == "sub 2 b\nanswer a b b"
    # LCS alignment a|b -> a b b: the backtrace prefers matching the *last* b, so the new b goes
    # before it, at position 1.
    assert task.solve(x, "delete_then_insert") == "del 2\nins 1 b\nanswer a b b"
    assert len(task.reference_match_sets(x)["left_to_right"]) == 3


def test_deletion_vs_positional(task):
    x = task.make_input(source="abc", target="bc")
    for s in ("left_to_right", "right_to_left", "delete_then_insert"):
        assert task.solve(x, s) == "del 0\nanswer b c"
    assert task.solve(x, "substitution_preferring") == "sub 0 b\nsub 1 c\ndel 2\nanswer b c"


def test_left_and_right_orders_differ_in_positions(task):
    x = task.make_input(source="aab", target="bcaa")
    l2r, r2l = task.solve(x, "left_to_right"), task.solve(x, "right_to_left")
    assert l2r != r2l
    assert task.validate_y_text(x, l2r).strategy_matches == {"left_to_right"}


def test_levenshtein_strategies_are_minimal_against_brute_force(task):
    def distance(s, t):
        # Independent recursive definition (no DP table shared with the task).
        if not s or not t:
            return len(s) + len(t)
        return min(distance(s[1:], t) + 1, distance(s, t[1:]) + 1, distance(s[1:], t[1:]) + (s[0] != t[0]))

    words = ["".join(p) for n in (1, 2, 3) for p in itertools.product("ab", repeat=n)]
    for s, t in itertools.product(words, repeat=2):
        x = task.make_input(source=s, target=t)
        for strategy in task.strategies():
            trace = task.solve(x, strategy)
            assert task.validate_y_text(x, trace).valid
            if strategy in ("left_to_right", "right_to_left"):
                assert len(trace.split("\n")) - 1 == distance(s, t)


def test_illegal_scripts(task):
    x = task.make_input(source="abc", target="abb")
    assert_illegal(
        task,
        x,
        {
            "del 3\nanswer a b b": "has 3 letters",
            "sub 0 b\nanswer a b b": "gives bbc",
            "ins 4 a\nanswer a b b": "has 3 letters",
        },
    )
    for text in ("sub 2 B\nanswer a b b", "sub 2 bb\nanswer a b b", "del 2 b\nanswer a b b", "answer"):
        assert not task.validate_y_text(x, text).parse_ok

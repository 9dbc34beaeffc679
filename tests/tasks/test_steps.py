from __future__ import annotations

import pytest

from seffi.tasks._steps import MAX_INT_CHARS, parse_int, parse_ints, render_trace, render_words


@pytest.mark.parametrize(
    ("word", "expected"),
    [("0", 0), ("42", 42), ("007", 7), ("9" * MAX_INT_CHARS, int("9" * MAX_INT_CHARS))],
)
def test_parse_int_accepts_ascii_digits(word, expected):
    assert parse_int(word) == expected


@pytest.mark.parametrize(
    "word",
    ["", "-1", "+1", "1.0", "1e3", "\u00b2", "\u0663", "\uff11", "9" * (MAX_INT_CHARS + 1), "1_0", " 1"],
)
def test_parse_int_rejects_everything_else(word):
    assert parse_int(word) is None


def test_parse_ints_and_rendering():
    assert parse_ints(["1", "2"], 2) == (1, 2)
    assert parse_ints(["1", "2"], 3) is None
    assert parse_ints(["1", "x"], 2) is None
    assert render_words(("swap", 0, 1)) == "swap 0 1"
    assert render_trace([("swap", 0, 1), ("swap", 1, 2)], (1, 2, 3)) == "swap 0 1\nswap 1 2\nanswer 1 2 3"
    assert render_trace([], (5,)) == "answer 5"

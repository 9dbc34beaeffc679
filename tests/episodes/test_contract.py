"""The contract table, its fast column checks against the per-value rule, the screen and the coder."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from seffi.episodes import EpisodeRejected, MatchCoder
from seffi.episodes.contract import CONTRACT, screen

#: (key, value, keeps the rule), decided by hand from the contract's words.
CASES = [
    ("input_id", "x", True), ("input_id", np.str_("x"), True), ("input_id", 3, True),
    ("input_id", np.int64(3), True), ("input_id", True, False), ("input_id", 3.0, False),
    ("input_id", None, False), ("valid", True, True), ("valid", np.bool_(False), True),
    ("valid", 1, False), ("valid", None, False), ("sample_index", 0, True), ("sample_index", 3.0, True),
    ("sample_index", -1, False), ("sample_index", 2.5, False), ("sample_index", math.nan, False),
    ("sample_index", math.inf, False), ("sample_index", 2**63, False),
    ("sample_index", np.uint64(2**64 - 1), False), ("run_index", True, False), ("z", np.float32(1.0), True),
    ("z", "1", False),
]  # fmt: skip


@pytest.mark.parametrize(("key", "value", "keeps"), CASES)
def test_rule_table(key: str, value: Any, keeps: bool) -> None:
    rule = CONTRACT[key]
    assert rule.ok(value) is keeps
    assert (rule.bad([value]) is None) is keeps  # the list column path
    column = np.array([value])
    if column.dtype != object:  # the typed column path, where numpy can hold the value as itself
        assert (rule.bad(column) is None) is keeps or column.dtype.kind not in "biufU"


def test_fast_column_checks_agree_with_the_rule_value_by_value() -> None:
    """The at-a-glance checks of lists and numpy columns never differ from per-value ``ok`` (fuzzed)."""
    pool: list[Any] = [0, 1, 7, -1, 2**63, 2**63 - 1, True, False, None, "x", "", 2.0, 2.5, math.nan]
    pool += [np.int64(3), np.int32(-4), np.uint64(2**64 - 1), np.bool_(True), np.float32(1.0), (1,)]
    rng = np.random.default_rng(11)
    for _ in range(3000):
        values = [pool[i] for i in rng.integers(len(pool), size=int(rng.integers(1, 5)))]
        have = rng.random(len(values)) < 0.8
        for key, rule in CONTRACT.items():
            if key == "strategy_matches":
                continue
            want = [h and not rule.ok(v) for v, h in zip(values, have, strict=True)]
            got = rule.bad(values, have)
            assert (got.tolist() if got is not None else [False] * len(values)) == want, (key, values)
            try:
                column = np.array(values)
            except (OverflowError, ValueError):
                continue
            if column.ndim == 1 and column.dtype != object:  # a Gymnasium column, as the parsers read it
                want = [not rule.ok(v) for v in column.tolist()]
                for got in (rule.bad(column.tolist()), rule.bad(column)):
                    assert (got.tolist() if got is not None else [False] * len(values)) == want, (key, column)


def test_screen_keeps_the_good_rows_and_names_the_first_bad_one() -> None:
    coder = MatchCoder(("a", "b"))
    cols = {
        "input_id": (["x", "y", "z", "w"], None),
        "strategy_matches": ([("a",), ("b", "a"), ("c",), None], np.array([True, True, True, False])),
        "valid": ([True, "no", True, True], None),
    }
    infos = [{}, {}, {}, {"input_id": "w", "valid": True}]
    env = np.array([5, 6, 7, 8])

    def rejected(columns: dict[str, Any]) -> EpisodeRejected:
        with pytest.raises(EpisodeRejected) as err:
            screen(columns, env, coder, infos.__getitem__, "E")
        return err.value

    # row 1: valid "no"; row 2: unknown strategy "c"; row 3: no strategy_matches. The first is row 1.
    e = rejected(cols)
    assert (e.key, e.env_index, e.rejected) == ("valid", 6, 3)
    assert str(e) == "env 'E' (sub-env index 6): 'valid' must be a bool (or numpy bool), got str 'no'"
    assert e.batch.input_id.tolist() == ["x"] and e.batch.hits.tolist() == [[True, False]]
    assert e.batch.env_index.tolist() == [5] and e.batch.sample_index.tolist() == [-1]
    e = rejected({**cols, "valid": ([True] * 4, None)})
    assert (e.key, e.env_index, e.rejected) == ("strategy_matches", 7, 2)
    assert e.batch.hits.tolist() == [[True, False], [True, True]]
    matches = ([("a",)] * 3 + [None], cols["strategy_matches"][1])
    e = rejected({"input_id": cols["input_id"], "strategy_matches": matches})
    assert str(e).endswith(
        "an episode ended but its info has no 'strategy_matches' (keys: ['input_id', 'valid']); coverage "
        "needs the final-step info of a seffi env, or a wrapper that passes it through"
    )
    good = {"input_id": (["x"], None), "strategy_matches": ([()], None)}
    assert len(screen(good, env[:1], coder, list)) == 1


def test_match_coder_codes_each_set_once_in_declared_columns() -> None:
    coder = MatchCoder(("a", "b", "c"))
    codes, bad = coder.codes([("c", "a"), ["a", "c"], (), np.array(["b"]), ("a", "c")])
    assert bad == {}
    assert coder.table[codes].tolist() == [
        [True, False, True],
        [True, False, True],
        [False, False, False],
        [False, True, False],
        [True, False, True],
    ]
    assert len(coder.table) == 3  # three distinct sets
    shared = ["c", "b"]  # a labeler's one list per match set, given for many completions
    codes, bad = coder.codes([shared] * 1000 + [["b", "c"], np.array(["c", "b"])])
    assert bad == {} and np.all(codes == codes[0]) and coder.table[codes[0]].tolist() == [False, True, True]
    _, bad = coder.codes(["ab", ("z",), np.array([["a"]]), [["a"], "b"]])
    assert bad[0].startswith("'strategy_matches' must be a tuple of strategy ids, got str")
    assert "strategy ids ['z'] that are not among the declared strategies ['a', 'b', 'c']" in bad[1]
    assert "of shape (1, 1)" in bad[2]
    assert bad[3] == "'strategy_matches' must hold str strategy ids, got [['a'], 'b']"  # ragged


def test_rejected_message_names_env_key_and_what_was_kept() -> None:
    e = EpisodeRejected("'z' must be an int >= 0, got str 'q'", key="z", env_index=4, env_name="E-v0",
                        rejected=3, batch=None)  # fmt: skip
    assert str(e) == "env 'E-v0' (sub-env index 4): 'z' must be an int >= 0, got str 'q'"
    assert str(e.recorded_as(5)).endswith(
        "; 3 finished episodes (the first named here) were rejected, the other 5 of this call recorded"
    )
    assert e.recorded == 5


def test_none_is_no_strategy_id_and_messages_cap_what_they_echo():
    """None in strategy_matches is refused even when "None" is declared; long lists are cut short."""
    from seffi.episodes import EpisodeRejected, MatchCoder, parse_info

    with pytest.raises(EpisodeRejected, match=r"must hold str strategy ids, got \[None\]"):
        parse_info({"input_id": "x", "strategy_matches": (None,)}, MatchCoder(["a", "None"]))
    many = [f"s{i}" for i in range(100_000)]
    with pytest.raises(EpisodeRejected) as caught:
        parse_info({"input_id": "x", "strategy_matches": ("z" * 10**6,)}, MatchCoder(many))
    assert len(str(caught.value)) < 400 and "(99992 more)" in str(caught.value)

"""Ids keep their type, and a refusal echoes a bounded part of what it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from seffi.callbacks import CoverageMonitor
from seffi.coverage.tracker import CoverageTracker
from seffi.episodes import (
    EpisodeBatch,
    EpisodeRejected,
    MatchCoder,
    parse_generation,
    parse_infos,
    parse_rows,
)
from seffi.errors import SeffiError

HUGE = "a" * 10**6
MANY = [f"s{i}" for i in range(10**5)]
CAP = 1000  # characters a message may take, whatever it refuses


def _monitor(tmp_path, strategies=("a", "b"), **kw) -> CoverageMonitor:
    return CoverageMonitor(4, list(strategies), out_dir=tmp_path / "run", wandb="disabled", plots=False, **kw)


def test_int_and_str_input_ids_are_not_one_input(tmp_path) -> None:
    monitor = _monitor(tmp_path)
    monitor.update_infos({"input_id": 1, "strategy_matches": ("a",), "sample_index": 1}, True)
    mixed = "'input_id' '1' is a str but the input ids so far are int"
    with pytest.raises(EpisodeRejected, match=mixed) as e:
        monitor.update_infos({"input_id": "1", "strategy_matches": ("b",), "sample_index": 2}, True)
    assert e.value.key == "input_id" and e.value.recorded == 0
    monitor.update_infos({"input_id": np.int64(2), "strategy_matches": ("b",), "sample_index": 1}, True)
    monitor.flush()
    assert [k[1] for k in monitor.tracker.keys] == ["1", "2"] and monitor.tracker.samples == 2


def test_one_call_with_both_kinds_keeps_the_first_kind() -> None:
    rows = [{"input_id": "7", "strategy_matches": ("a",)}, {"input_id": 7, "strategy_matches": ("b",)}]
    with pytest.raises(EpisodeRejected, match="'input_id' 7 is an int but the input ids so far are str") as e:
        parse_rows(rows, MatchCoder(("a", "b")))
    assert e.value.batch.input_id.tolist() == ["7"] and e.value.batch.hits.tolist() == [[True, False]]
    with pytest.raises(ValueError, match="mix str and int"):
        EpisodeBatch.of(("a", "b"), ["7", 7], [[1, 0], [0, 1]])


def test_strategy_ids_keep_their_type(tmp_path) -> None:
    coder = MatchCoder(("1", "2"))
    with pytest.raises(EpisodeRejected, match=r"must hold str strategy ids, got \[1\]"):
        parse_rows([{"input_id": "x", "strategy_matches": (1,)}], coder)
    assert parse_rows([{"input_id": "x", "strategy_matches": ("1",)}], coder).hits.tolist() == [[True, False]]
    with pytest.raises(SeffiError, match="must be str strategy ids, got int 2"):
        _monitor(tmp_path, strategies=("1", 2))


def test_a_list_as_one_envs_info_is_named_as_it_is() -> None:
    with pytest.raises(EpisodeRejected, match=r"its info is \['x'\], not a dict"):
        parse_infos(["x"], MatchCoder(("a",)), True)


def _message(call) -> str:
    with pytest.raises((SeffiError, ValueError)) as e:
        call()
    return str(e.value)


def test_refusals_echo_a_bounded_part_of_what_they_refuse(tmp_path) -> None:
    coder = MatchCoder(MANY)
    unknown = [{"input_id": "x", "strategy_matches": (HUGE,)}]
    refused = {
        "a 10^6-character key": lambda: parse_rows([{"input_id": "x", HUGE: 1}], coder),
        "10^5 keys": lambda: parse_rows([{"input_id": "x", **dict.fromkeys(MANY)}], coder),
        "a 10^6-character match": lambda: parse_rows([{"input_id": "x", "strategy_matches": HUGE}], coder),
        "a nested match": lambda: parse_rows([{"input_id": "x", "strategy_matches": [MANY]}], coder),
        "a 10^6-character env name": lambda: parse_rows([{"input_id": 1.5}], coder, env_name=HUGE),
        "an unknown 10^6-character id": lambda: parse_rows(unknown, coder),
        "10^5 repeated declared ids": lambda: _monitor(tmp_path, strategies=[*MANY, "s1"]),
        "10^5 repeated tracker ids": lambda: CoverageTracker([*MANY, "s1"], budget=4),
    }
    lengths = {name: len(_message(call)) for name, call in refused.items()}
    assert all(n < CAP for n in lengths.values()), lengths


def test_malformed_calls_are_named() -> None:
    """An unhashable id after known str ids, an info of no known shape, ragged columns, unknown columns."""
    coder = MatchCoder(("a", "b"))
    parse_rows([{"input_id": "x", "strategy_matches": ("a",)}], coder)
    with pytest.raises(EpisodeRejected, match=r"'input_id' must be a str \(or int\) id, got list") as e:
        parse_rows(
            [{"input_id": "x", "strategy_matches": ()}, {"input_id": ["x"], "strategy_matches": ()}], coder
        )
    assert (e.value.key, e.value.env_index, len(e.value.batch)) == ("input_id", 0, 1)
    with pytest.raises(SeffiError, match="infos must be a vector info dict, a list of dicts or one dict"):
        parse_infos(5, coder)
    with pytest.raises(SeffiError, match="columns of equal length"):
        parse_generation(["x"], [(), ()], coder)
    with pytest.raises(TypeError, match=r"unknown columns \['stream'\]"):
        EpisodeBatch.of(("a", "b"), ["x"], [[True, False]], stream=[0])

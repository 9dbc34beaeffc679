from __future__ import annotations

import json

from seffi.cli import main
from seffi.tasks import get_task, list_tasks
from seffi.tasks.summary import summarize


def test_json_lists_every_task_with_measured_ambiguity(capsys):
    assert main(["tasks", "--json", "--pool", "15", "--seed", "3"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list_tasks()
    assert len(rows) >= 7
    for r in rows:
        assert r["strategies"] == list(get_task(r["name"]).strategies())
        assert 0.0 <= r["base_ambiguity"] <= 1.0 and 0.0 <= r["reference_ambiguity"] <= 1.0
    by_name = {r["name"]: r for r in rows}
    assert by_name["hanoi"]["reference_ambiguity"] == 1.0
    expected = summarize(get_task("coin_sum"), n_inputs=15, seed=3).to_dict()
    assert by_name["coin_sum"] == expected
    # Natural ambiguity: every non-control task has some, but not total, ambiguity.
    for name, r in by_name.items():
        if name != "hanoi":
            assert 0.0 < r["reference_ambiguity"] < 1.0, name


def test_table_and_selection(capsys):
    assert main(["tasks", "countdown", "hanoi", "--pool", "5"]) == 0
    out = capsys.readouterr().out
    assert "countdown" in out and "hanoi" in out and "sort_swaps" not in out
    assert "multiply_first" in out


def test_user_errors_exit_2(capsys):
    assert main(["tasks", "no_such_task"]) == 2
    assert "unknown task" in capsys.readouterr().err
    assert main(["tasks", "--pool", "0"]) == 2

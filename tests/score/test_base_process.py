"""`seffi.score.score` with the base files read, labelled and bootstrapped in a second process."""

from __future__ import annotations

import json

import numpy as np
import pytest

from seffi.coverage import IidBaseline
from seffi.coverage import samples as samples_module
from seffi.errors import SeffiError
from seffi.score import api, score

STRATEGIES = ("loop", "recursion", "memo")


def _rows(rng, prompts, n):
    rows = []
    for i in range(prompts):
        for _ in range(n):
            labels = [s for s in STRATEGIES if rng.random() < 0.35]
            rows.append(
                {
                    "prompt_id": f"q{i}",
                    "completion": "x",
                    "strategy": labels,
                    "correct": bool(rng.random() < 0.8),
                }
            )
    return rows


@pytest.fixture
def files(tmp_path, monkeypatch):
    # One input per chunk and one chunk per block: 30 blocks, shared between the two processes.
    monkeypatch.setattr(samples_module, "CHUNK_BYTES", 1)
    monkeypatch.setattr(samples_module, "BLOCK_CHUNKS", 1)
    rng = np.random.default_rng(3)
    paths = {}
    for name, n in (("base", 10), ("policy", 8)):
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in _rows(rng, 30, n)))
    return paths


def _report(files, out, monkeypatch, in_process: bool, said: list[str] | None = None) -> dict:
    monkeypatch.setattr(api, "BASE_PROCESS_BYTES", 1 << 62 if in_process else 0)
    score(
        [files["policy"]],
        [files["base"]],
        label_field="strategy",
        budget=4,
        out_dir=out,
        wandb="disabled",
        plots=False,
        n_boot=20,
        seed=5,
        say=(said if said is not None else []).append,
    )
    report = json.loads((out / "report.json").read_text())
    report.pop("meta")
    return report


def _base_iid(files) -> IidBaseline:
    per_prompt: dict[str, tuple[list[set[str]], list[bool]]] = {}
    for line in files["base"].read_text().splitlines():
        row = json.loads(line)
        sets, valid = per_prompt.setdefault(row["prompt_id"], ([], []))
        sets.append(set(row["strategy"]))
        valid.append(row["correct"])
    keys = sorted(per_prompt)
    return IidBaseline.from_samples(
        {k: per_prompt[k][0] for k in keys},
        strategies=sorted(STRATEGIES),  # the ids the label field names, sorted
        valid={k: per_prompt[k][1] for k in keys},
    )


def test_the_base_process_gives_the_one_process_report(files, tmp_path, monkeypatch):
    """Every number of report.json and every statement are equal; the iid intervals are those of
    ``IidBaseline.from_samples(...).curves(K, seed=seed)``."""
    started = []
    real = api._BaseProcess

    class Spy(real):
        def __init__(self, *args):
            started.append(1)
            super().__init__(*args)

    monkeypatch.setattr(api, "_BaseProcess", Spy)
    said_two, said_one = [], []
    two = _report(files, tmp_path / "two", monkeypatch, in_process=False, said=said_two)
    assert started == [1]
    one = _report(files, tmp_path / "one", monkeypatch, in_process=True, said=said_one)
    assert started == [1]
    assert two == one and said_two == said_one
    want = _base_iid(files).curves(4, seed=5)
    got = two["comparisons"][0]["iid"]
    np.testing.assert_array_equal(got["coverage_lo"], want.coverage_lo)
    np.testing.assert_array_equal(got["valid_coverage_hi"], want.valid_coverage_hi)


def test_a_base_process_that_dies_leaves_its_work_here(files, tmp_path, monkeypatch):
    """Killed after reading the base files, or before: the report is the one-process report."""
    one = _report(files, tmp_path / "one", monkeypatch, in_process=True)

    def dies_after_reading(conn, counter, results, *args):
        sets = api._base_sets(
            api._Labelled("base", args[0], args[1], api.sample_labels(args[2]), lambda _: None)
        )
        conn.send(([], sets, None))
        with counter.get_lock():
            counter.value += 3  # took three blocks and died before sending them

    monkeypatch.setattr(api, "_base_work", dies_after_reading)
    assert _report(files, tmp_path / "after", monkeypatch, in_process=False) == one
    monkeypatch.setattr(api, "_base_work", lambda *args: None)
    assert _report(files, tmp_path / "before", monkeypatch, in_process=False) == one


def test_a_bad_base_file_is_the_same_one_line_error(files, tmp_path, monkeypatch):
    with files["base"].open("a") as f:
        f.write("{not json\n")
    errors = []
    for in_process in (False, True):
        with pytest.raises(SeffiError) as info:
            _report(files, tmp_path / f"o{in_process}", monkeypatch, in_process=in_process)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and errors[0].startswith(f"{files['base']}:301: not a JSON line")

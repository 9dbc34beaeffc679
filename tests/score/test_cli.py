"""``seffi score`` on the command line: what it detects, and one line with exit 2 for every bad file."""

from __future__ import annotations

import json

import pytest

from seffi.cli import main


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


ROWS = [{"prompt_id": f"p{i}", "completion": "x", "strategy": s} for i in range(3) for s in "abab"]


@pytest.fixture
def base(tmp_path):
    return _jsonl(tmp_path / "base.jsonl", ROWS)


def _score(capsys, *argv):
    code = main(["score", *argv, "--wandb", "disabled", "--no-plots", "--n-boot", "10"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_scores_a_file_and_says_what_it_detected(tmp_path, base, capsys):
    policy = _jsonl(tmp_path / "policy.jsonl", ROWS)
    code, _, err = _score(
        capsys, str(policy), "--base", str(base), "--labels", "strategy", "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    assert "strategies: 2 (a, b); budget K = 4" in err
    assert "policy files: rows (id=prompt_id, text=completion, label=strategy)" in err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    # every prompt's run of 4 alternates a, b: C(1) = 1/2, C(k >= 2) = 1
    assert report["comparisons"][0]["policies"][0]["curves"]["coverage"] == [0.5, 1.0, 1.0, 1.0]


BAD = {
    "not JSON": (['{"prompt_id": 1,'], "policy.jsonl:1: not a JSON line"),
    "no id field": (
        [{"completion": "x"}],
        "policy.jsonl:1: no prompt id field in the first row (keys: completion)",
    ),
    "no text field": (
        [{"prompt_id": "p0"}],
        "policy.jsonl:1: no completion field in the first row (keys: prompt_id)",
    ),
    "empty": ([], "the file holds no rows"),
    "a list per line": ([[1, 2]], "policy.jsonl:1: a row is list; need a JSON object per line"),
    "a later row without text": (
        [{"prompt_id": "p0", "completion": "x", "strategy": "a"}, {"prompt_id": "p0"}],
        "policy.jsonl:2: no 'completion' field",
    ),
    "unknown label": (
        [{"prompt_id": "p0", "completion": "x", "strategy": "zzz"}],
        "label 'zzz' is not a declared",
    ),
    "an infinite step": (
        ['{"prompt_id": "p0", "completion": "x", "strategy": "a", "step": Infinity}'],
        "policy.jsonl:1: the step field holds inf; need a whole number",
    ),
    "a NaN step": (
        ['{"prompt_id": "p0", "completion": "x", "strategy": "a", "step": NaN}'],
        "policy.jsonl:1: the step field holds nan; need a whole number",
    ),
    "an id of 5000 digits": (
        ['{"prompt_id": ' + "9" * 5000 + ', "completion": "x"}'],
        "policy.jsonl:1: not a JSON line (ValueError: Exceeds the limit (4300 digits)",
    ),
    "nesting 10^5 deep": (
        ['{"prompt_id": "p0", "completion": ' + "[" * 100_000 + "]" * 100_000 + "}"],
        "policy.jsonl:1: not a JSON line (RecursionError: maximum recursion depth exceeded",
    ),
    "a prompt id of 10^6 characters without base samples": (
        [{"prompt_id": "x" * 10**6, "completion": "x", "strategy": "a"}],
        "1 policy prompt(s) have no base samples (first: '" + "x" * 59 + "...); the base files",
    ),
    "bad score": (
        [{"prompt_id": "p0", "completion": "x", "strategy": "a", "score": "yes"}],
        "the score field holds",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_policy_files_give_one_line_and_exit_2(tmp_path, base, capsys, case):
    rows, needle = BAD[case]
    policy = _jsonl(tmp_path / "policy.jsonl", rows)
    argv = [
        str(policy),
        "--base",
        str(base),
        "--labels",
        "strategy",
        "--strategies",
        "a,b",
        "--out",
        str(tmp_path / "o"),
    ]
    code, _, err = _score(capsys, *argv)
    assert code == 2
    assert err.count("seffi score: error: ") == 1 and needle in err.splitlines()[-1], err
    assert not (tmp_path / "o" / "report.json").exists()


def test_files_of_two_layouts_are_refused(tmp_path, base, capsys):
    verl = _jsonl(
        tmp_path / "verl.jsonl", [{"input": "q", "output": "x", "gts": "1", "score": 1.0, "step": 1}]
    )
    code, _, err = _score(
        capsys, str(tmp_path / "base.jsonl"), str(verl), "--base", str(base), "--labels", "strategy"
    )
    assert code == 2 and "differs from the first file's" in err


def test_missing_file_and_labeler_choices(tmp_path, base, capsys):
    code, _, err = _score(capsys, str(tmp_path / "nope.jsonl"), "--base", str(base), "--labels", "strategy")
    assert code == 2 and "nope.jsonl: no such file; need a JSONL or Parquet file" in err
    code, _, err = _score(capsys, str(tmp_path), "--base", str(base), "--labels", "strategy")
    assert code == 2 and f"{tmp_path}: a folder; need a JSONL or Parquet file" in err
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("a: '('\n")
    code, _, err = _score(capsys, str(base), "--base", str(base), "--rubric", str(rubric))
    assert code == 2 and err.startswith("seffi score: error: ") and "rubric.yaml" in err
    code, _, err = _score(capsys, str(base), "--base", str(base), "--labeler", "no_such_module:f")
    assert code == 2 and "No module named 'no_such_module'" in err


def test_a_million_character_completion_matches_nothing_and_is_counted(tmp_path, base, capsys):
    long = "for " * 250_000
    rows = [
        {"prompt_id": f"p{i}", "completion": long if j == 0 else "while", "x": 1}
        for i in range(3)
        for j in range(4)
    ]
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("a: 'for'\nb: 'while'\n")
    policy = _jsonl(tmp_path / "policy.jsonl", rows)
    code, _, err = _score(
        capsys, str(policy), "--base", str(policy), "--rubric", str(rubric), "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    assert (
        "policy files: 3 of 12 samples could not be labelled and match nothing (first: text too long" in err
    )
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["comparisons"][0]["policies"][0]["curves"]["coverage"] == [0.0, 0.5, 0.5, 0.5]


@pytest.mark.parametrize("bad", ["a truncated row", "a prompt without base samples"])
def test_overwrite_keeps_the_earlier_run_when_an_input_is_refused(tmp_path, base, capsys, bad):
    out = tmp_path / "o"
    argv = ["--base", str(base), "--labels", "strategy", "--out", str(out)]
    assert _score(capsys, str(base), *argv)[0] == 0
    before = (out / "report.json").read_bytes()
    rows = (
        ['{"prompt_id": "p0", "completion": "x']
        if bad == "a truncated row"
        else [{**ROWS[0], "prompt_id": "p9"}]
    )
    code, _, err = _score(capsys, str(_jsonl(tmp_path / "bad.jsonl", rows)), *argv, "--overwrite")
    assert code == 2 and err.count("seffi score: error: ") == 1, err
    assert (out / "report.json").read_bytes() == before


def test_a_function_labeler_with_a_strategies_attribute_returns_ids(tmp_path, capsys, monkeypatch):
    (tmp_path / "seffi_test_fn_labeler.py").write_text(
        "def fn(x, text):\n    return [text]\n\nfn.strategies = ('a', 'b')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    files = _jsonl(tmp_path / "gen.jsonl", [{**r, "completion": r["strategy"]} for r in ROWS])
    out = tmp_path / "o"
    code, _, err = _score(
        capsys, str(files), "--base", str(files), "--labeler", "seffi_test_fn_labeler:fn", "--out", str(out)
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    # every prompt's run of 4 alternates a, b: C(1) = 1/2, C(k >= 2) = 1
    assert report["comparisons"][0]["policies"][0]["curves"]["coverage"] == [0.5, 1.0, 1.0, 1.0]


OPTION_ERRORS = {
    "a Latin-1 rubric": (["--rubric", "latin1.yaml"], "latin1.yaml: cannot read the rubric (not UTF-8: "),
    "a labeler with a syntax error": (
        ["--labeler", "seffi_test_typo_labeler:fn", "--strategies", "a"],
        "--labeler 'seffi_test_typo_labeler:fn': SyntaxError: expected ':'",
    ),
    "a budget above the cap": (
        ["--labels", "strategy", "--budget", "70000"],
        "budget must be a positive number of samples up to 65536 (seffi's cap on K), got 70000",
    ),
    "a judge URL without scheme": (
        ["--judge", "host/v1", "--judge-model", "m", "--strategies", "a"],
        "--judge 'host/v1': need an http:// or https:// URL",
    ),
    "a negative judge timeout": (
        [
            "--judge",
            "http://127.0.0.1:9/v1",
            "--judge-model",
            "m",
            "--strategies",
            "a",
            "--judge-timeout",
            "-1",
        ],
        "--judge-timeout must be a positive number of seconds, got -1.0",
    ),
}


@pytest.mark.parametrize("case", sorted(OPTION_ERRORS))
def test_bad_options_give_one_line_and_exit_2(tmp_path, base, capsys, monkeypatch, case):
    (tmp_path / "latin1.yaml").write_bytes(b'a: "caf\xe9"\n')
    (tmp_path / "seffi_test_typo_labeler.py").write_text("def fn(x, text)\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    options, needle = OPTION_ERRORS[case]
    code, _, err = _score(capsys, str(base), "--base", str(base), *options, "--out", str(tmp_path / "o"))
    assert code == 2 and err.count("seffi score: error: ") == 1 and needle in err, err
    assert not (tmp_path / "o" / "report.json").exists()


def test_online_without_a_login_is_refused_before_any_work(tmp_path, base, capsys, monkeypatch):
    """``--wandb online`` with no W&B login: one line and exit 2, as ``seffi run``, and no folder."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    out = tmp_path / "scored"
    code = main(["score", str(base), "--base", str(base), "--labels", "strategy", "--out", str(out),
                 "--wandb", "online"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "W&B online mode needs a login" in err and "\n" not in err.strip()
    assert not out.exists()

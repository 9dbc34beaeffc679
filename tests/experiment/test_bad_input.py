"""Bad input never costs data: run folders, config files, malformed report.json and the W&B
mode and init timeout, through the ``seffi`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seffi.cli import main
from seffi.report.files import dumps_report, load_report

TINY = [
    "--tasks",
    "sort_swaps",
    "--n-inputs",
    "3",
    "--budget",
    "3",
    "--eval-runs",
    "1",
    "--rounds",
    "2",
    "--bootstrap",
    "10",
    "--wandb",
    "disabled",
    "--no-progress",
]


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _one_error_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


# -- case 2: run folders ---------------------------------------------------------------------------


def test_run_refuses_a_folder_holding_a_run_then_overwrite_replaces_it(tmp_path, capsys):
    """`seffi run --out DIR` on an earlier run exits 2 and changes nothing;
    --overwrite removes that run's files (old plots, metrics) but keeps the user's own files."""
    out = tmp_path / "run"
    assert _run(capsys, "run", *TINY, "--out", out)[0] == 0
    first_report = (out / "report.json").read_bytes()
    n_metrics = len((out / "metrics.jsonl").read_text().splitlines())
    stale = out / "plots" / "OldTaskRouter-v0_coverage.png"  # a plot only the earlier run made
    stale.write_bytes(b"old")
    (out / "notes.txt").write_text("mine")

    code, _, err = _run(capsys, "run", *TINY, "--seed", "1", "--out", out)
    line = _one_error_line(code, err)
    assert str(out) in line and "pass --overwrite" in line
    assert (out / "report.json").read_bytes() == first_report and stale.exists()
    assert len((out / "metrics.jsonl").read_text().splitlines()) == n_metrics

    code, _, err = _run(capsys, "run", *TINY, "--seed", "1", "--out", out, "--overwrite")
    assert code == 0, err
    assert not stale.exists() and (out / "notes.txt").read_text() == "mine"
    assert load_report(out).seed == 1
    steps = [json.loads(line)["seffi/step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == n_metrics and steps == sorted(steps)  # not appended to the earlier run's


def test_compare_refuses_to_overwrite_an_earlier_compare(tmp_path, capsys):
    """`seffi compare` into a folder with compare.md/png exits 2 unless --overwrite."""
    from tests.experiment.test_compare import _report

    dirs = []
    for name, shift in (("a", 0.0), ("b", 0.05)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(dumps_report(_report(shift)))
        dirs.append(tmp_path / name)
    into = ("--out", tmp_path / "a")
    assert _run(capsys, "compare", *dirs, *into)[0] == 0  # into the first run folder: its report stays
    md = (tmp_path / "a" / "compare.md").read_text()
    (tmp_path / "a" / "compare.md").write_text("earlier")
    line = _one_error_line(*_run(capsys, "compare", *dirs, *into)[::2])
    assert "pass --overwrite" in line and (tmp_path / "a" / "compare.md").read_text() == "earlier"
    assert _run(capsys, "compare", *dirs, *into, "--overwrite")[0] == 0
    assert (tmp_path / "a" / "compare.md").read_text() == md
    assert load_report(tmp_path / "a").comparisons[0].task == "hanoi"


# -- case 3: config files --------------------------------------------------------------------------

LAUGHS = (
    "tasks: hanoi\ntask_options:\n  hanoi:\n"
    '    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"    {chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
)


CONFIG_CASES = [
    ("laughs.yaml", LAUGHS, "aliases (*a) are not allowed (line 5"),
    ("latin1.yaml", b"tasks: hanoi\nnote: caf\xe9\n", "is not UTF-8 text (byte 0xe9 at offset 22)"),
    ("deep.json", "[" * 50_000 + "]" * 50_000, "is nested deeper than 16 levels"),
    ("deep.yaml", "a: " + "[" * 50_000 + "]" * 50_000, "nested deeper than 16 levels"),
    ("dup.yaml", "tasks: hanoi\nbudget: 8\nbudget: 16\n", "duplicate key 'budget' (line 3, column 1)"),
    ("big.yaml", "tasks: hanoi\n" + "#" * 2**20 + "\n", "is larger than 1,048,576 bytes"),
    ("bool.yaml", "tasks: hanoi\nbudget: true\n", "budget: Input should be a valid integer"),
    (
        "boolrounds.json",
        '{"tasks": "hanoi", "learner": {"rounds": true}}',
        "learner.rounds: Input should",
    ),
    ("strskew.yaml", "tasks: hanoi\nskew: '2'\n", "skew: Input should be a valid number"),
    (
        "boolopt.yaml",
        "tasks: hanoi\ntask_options: {hanoi: {max_disks: true}}\n",
        "max_disks: True is not",
    ),
]


@pytest.mark.parametrize(("name", "content", "needle"), CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_bad_config_files_are_one_line(tmp_path, capsys, name, content, needle):
    """Aliases, non-UTF-8, deep nesting (not "not valid YAML"), duplicate keys, size,
    and bools or strings for numbers are each one line and exit 2."""
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    line = _one_error_line(*_run(capsys, "run", "--config", path, "--print-config")[::2])
    assert needle in line and "not valid YAML" not in line


def test_every_task_option_is_checked_before_any_work(tmp_path, capsys, monkeypatch):
    """A bad task_options value for the second task stops the run before the first
    task trains and before the run folder is touched."""
    from seffi.experiment import runner

    trained = []
    monkeypatch.setattr(runner.Runner, "run_task", lambda self, name, seed: trained.append(name))
    config = tmp_path / "c.yaml"
    config.write_text("tasks: hanoi,sort_swaps\ntask_options:\n  sort_swaps: {invalid_rate: 0.95}\n")
    out = tmp_path / "run"
    line = _one_error_line(*_run(capsys, "run", *TINY[2:], "--config", config, "--out", out)[::2])
    assert "task_options.sort_swaps: invalid_rate + off_strategy_rate must be < 1" in line
    assert trained == [] and not out.exists()
    config.write_text("tasks: hanoi,sort_swaps\ntask_options:\n  sort_swaps: {max_length: 'x'}\n")
    line = _one_error_line(*_run(capsys, "run", *TINY[2:], "--config", config, "--out", out)[::2])
    assert "task_options.sort_swaps.max_length" in line and trained == [] and not out.exists()


def test_env_level_settings_are_checked_before_any_work(tmp_path, capsys, monkeypatch):
    """Every task's env is built before the first task trains."""
    from seffi.experiment import runner

    built = []
    real = runner.make_vec

    def spy(task_name, num_envs, **kwargs):
        built.append((task_name, num_envs))
        return real(task_name, num_envs, **kwargs)

    monkeypatch.setattr(runner, "make_vec", spy)
    out = tmp_path / "run"
    argv = ["run", *TINY, "--tasks", "hanoi,sort_swaps", "--out", out]
    assert _run(capsys, *argv)[0] == 0
    assert built[:2] == [("hanoi", 1), ("sort_swaps", 1)]  # both checked before hanoi's training env


# -- case 7: malformed report.json -----------------------------------------------------------------


def _write_report(folder: Path, data: dict | str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    raw = data if isinstance(data, bytes) else (data if isinstance(data, str) else json.dumps(data)).encode()
    (folder / "report.json").write_bytes(raw)
    return folder


def _good() -> dict:
    from tests.experiment.test_compare import _report

    return json.loads(dumps_report(_report(0.0)))


def _bad_reports() -> dict[str, tuple[object, str]]:
    def edit(fn):
        data = _good()
        fn(data)
        return data

    comp = lambda d: d["comparisons"][0]  # noqa: E731
    return {
        "deep": ('{"schema_version": 1, "config": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper"),
        "latin1": (b'{"schema_version": 1, "title": "caf\xe9"}', "is not UTF-8 text"),
        "coverage": (
            edit(lambda d: comp(d)["policies"][0]["curves"]["coverage"].__setitem__(1, 7.5)),
            "coverage must lie in [0, 1], got 7.5",
        ),
        "budget0": (edit(lambda d: comp(d).__setitem__("budget", 0)), "comparisons.0.budget: must lie in [1"),
        "budget_huge": (edit(lambda d: comp(d).__setitem__("budget", 10**18)), "budget: must lie in [1"),
        "k_huge": (
            edit(lambda d: comp(d)["iid"].__setitem__("k", [1, 2, 3, 10**18])),
            "k must not exceed 10,000,000",
        ),
        "auc": (edit(lambda d: comp(d)["oracle"].__setitem__("auc", -3.0)), "auc must lie in [0, 1]"),
        "no_comparisons": (edit(lambda d: d.pop("comparisons")), "at comparisons: Field required"),
        "nan": ('{"schema_version": 1, "comparisons": [], "seed": NaN}', "NaN is not a number"),
    }


@pytest.mark.parametrize("case", list(_bad_reports()))
@pytest.mark.parametrize("command", ["report", "compare"])
def test_malformed_report_json_is_one_line(tmp_path, capsys, case, command):
    """Deep nesting, non-UTF-8 and out-of-range values in report.json (all accepted
    or a traceback before) are one line and exit 2, in `seffi report` and `seffi compare`."""
    data, needle = _bad_reports()[case]
    bad = _write_report(tmp_path / "bad", data)
    argv = (
        ["report", bad] if command == "report" else ["compare", _write_report(tmp_path / "ok", _good()), bad]
    )
    line = _one_error_line(*_run(capsys, *argv)[::2])
    assert needle in line and str(bad) in line, line
    assert not (bad / "report.md").exists() and not (tmp_path / "ok" / "compare.md").exists()


# -- case 8: W&B -----------------------------------------------------------------------------------


def test_wandb_mode_precedence_flag_then_config_then_env(tmp_path, capsys, monkeypatch):
    """--wandb wins, then the config file, then WANDB_MODE, then offline."""

    def mode(*argv):
        code, out, err = _run(capsys, "run", "--tasks", "hanoi", "--print-config", *argv)
        assert code == 0, err
        return json.loads(out)["wandb"]

    monkeypatch.setenv("WANDB_MODE", "online")
    assert mode() == "online"
    assert mode("--wandb", "offline") == "offline"
    config = tmp_path / "c.yaml"
    config.write_text("wandb: disabled\n")
    assert mode("--config", config) == "disabled"
    monkeypatch.setenv("WANDB_MODE", "dryrun")  # W&B's old name for offline
    assert mode() == "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert mode() == "disabled"
    monkeypatch.setenv("WANDB_MODE", "nonsense")
    assert mode() == "offline"
    monkeypatch.delenv("WANDB_MODE")
    assert mode() == "offline"


def test_online_init_gives_up_after_the_stated_timeout(monkeypatch):
    """An online W&B init is bounded by INIT_TIMEOUT_S (<= 20 s), not W&B's 90 s; offline is not."""
    import wandb

    from seffi.report.wandb_run import INIT_TIMEOUT_S, SafeWandbRun

    monkeypatch.delenv("WANDB_INIT_TIMEOUT", raising=False)
    assert INIT_TIMEOUT_S <= 20
    assert SafeWandbRun._settings(wandb, "online", quiet=True).init_timeout == INIT_TIMEOUT_S
    assert SafeWandbRun._settings(wandb, "offline", quiet=True).init_timeout != INIT_TIMEOUT_S


def test_unreachable_wandb_server_warns_once_and_keeps_the_local_report(tmp_path):
    """An online run whose W&B server cannot be reached (bad key, nothing listening) warns in one line
    and finishes with its local report (the time it waits is bounded by the init timeout above)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k not in ("NETRC", "HOME")}
    env.update(
        HOME=str(tmp_path),
        WANDB_BASE_URL="http://127.0.0.1:9",  # the discard port: connection refused
        WANDB_API_KEY="x" * 40,
        WANDB_DIR=str(tmp_path),
        MPLBACKEND="Agg",
    )
    argv = [a for a in TINY if a not in ("--wandb", "disabled")]
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "seffi.cli", "run", *argv, "--wandb", "online", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert load_report(out).comparisons[0].task == "sort_swaps"
    warning = [ln for ln in proc.stderr.splitlines() if "WandbSinkWarning" in ln]
    assert len(warning) == 1 and "W&B init failed" in warning[0], proc.stderr
    assert "W&B logging failed" in proc.stdout

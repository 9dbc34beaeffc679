from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from seffi.cli import COMMANDS, build_parser, main
from seffi.experiment.config import DEFAULT_TASKS, RunConfig, build_config


def _run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_print_config_shows_defaults_and_overrides(capsys):
    code, out, err = _run(
        capsys, "run", "--print-config", "--tasks", "hanoi", "--budget", "32", "--seed", "1"
    )
    assert code == 0, err
    cfg = json.loads(out)
    assert cfg["tasks"] == ["hanoi"] and cfg["budget"] == 32 and cfg["seed"] == 1
    assert cfg["wandb"] == "offline"
    assert cfg["learner"]["rounds"] == RunConfig.model_fields["learner"].default.rounds
    assert tuple(RunConfig.model_fields["tasks"].default) == DEFAULT_TASKS


def test_config_file_json_and_yaml_then_cli_overrides(tmp_path, capsys):
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"tasks": ["hanoi"], "budget": 5, "learner": {"rounds": 3}}))
    y = tmp_path / "c.yaml"
    y.write_text("tasks: hanoi\nbudget: 7\nlearner:\n  lr: 0.25\n")
    assert build_config(j).learner.rounds == 3
    cfg = build_config(y, {"budget": 9, "learner.rounds": 2, "seed": None})
    assert (cfg.budget, cfg.learner.lr, cfg.learner.rounds, cfg.tasks) == (9, 0.25, 2, ("hanoi",))
    code, out, _ = _run(capsys, "run", "--config", str(y), "--rounds", "4", "--print-config")
    assert code == 0 and json.loads(out)["learner"]["rounds"] == 4


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--tasks", "hanoi,nope_task"], "unknown task(s) nope_task"),
        (["--tasks", "hanoi", "--budget", "0"], "budget"),
        (["--tasks", "hanoi", "--skew", "-1"], "skew"),
        (["--tasks", "hanoi,hanoi"], "duplicate task"),
    ],
)
def test_bad_values_give_one_clear_line(capsys, argv, needle):
    code, _out, err = _run(capsys, "run", "--print-config", *argv)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_config_files(tmp_path, capsys):
    cases = {
        "keys.json": (
            json.dumps({"tasks": ["hanoi"], "budgett": 3}),
            "budgett: Extra inputs are not permitted",
        ),
        "nested.json": (json.dumps({"learner": {"lrr": 1}}), "learner.lrr"),
        "broken.json": ("{not json", "not valid JSON"),
        "broken.yaml": ("a: [1, 2\n", "not valid YAML"),
        "list.yaml": ("- 1\n- 2\n", "must hold a mapping"),
        "conf.toml": ("x = 1", "must end in .json, .yaml or .yml"),
    }
    for name, (text, needle) in cases.items():
        (tmp_path / name).write_text(text)
        code, _, err = _run(capsys, "run", "--config", str(tmp_path / name), "--print-config")
        assert code == 2, name
        assert needle in err, (name, err)
        assert "Traceback" not in err
    code, _, err = _run(capsys, "run", "--config", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot read config file" in err


def test_unwritable_out(tmp_path, capsys):
    # A read-only folder does not stop root (CI runs as root); a kernel filesystem stops everyone.
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    target = locked / "run" if os.geteuid() != 0 else Path("/sys/seffi-run")
    code, _, err = _run(capsys, "run", "--tasks", "hanoi", "--out", str(target), "--wandb", "disabled")
    assert code == 2 and "cannot write to" in err and "Traceback" not in err


def test_out_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = _run(capsys, "run", "--tasks", "hanoi", "--out", str(f), "--wandb", "disabled")
    assert code == 2 and "exists and is not a folder" in err
    code, _, err = _run(capsys, "run", "--tasks", "hanoi", "--out", str(f / "sub"), "--wandb", "disabled")
    assert code == 2 and "cannot write to" in err and "Traceback" not in err


def test_online_without_login(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, err = _run(capsys, "run", "--tasks", "hanoi", "--out", str(tmp_path / "r"), "--wandb", "online")
    assert code == 2 and "W&B online mode needs a login" in err
    assert not (tmp_path / "r").exists()  # checked before anything is written


def test_report_and_compare_on_missing_dirs(tmp_path, capsys):
    code, _, err = _run(capsys, "report", str(tmp_path / "nothing"))
    assert code == 2 and "no report.json" in err
    code, _, err = _run(capsys, "compare", str(tmp_path), str(tmp_path))
    assert code == 2 and "twice" in err


def _parsers(parser: argparse.ArgumentParser, name: str):
    """``(command name, parser)`` of ``parser`` and of every subcommand below it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_of_every_command_has_help(command):
    """Each option of each ``seffi`` command and subcommand says what it does in ``--help``."""
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, parser in _parsers(build_parser([command]), "seffi")
        for action in parser._actions
        if action.dest != "help" and not action.help and not isinstance(action, argparse._SubParsersAction)
    ]
    assert missing == []


def test_sigterm_ends_seffi_run_with_exit_143_and_no_lock_left(tmp_path):
    """SIGTERM as soon as the run folder is locked, and mid-training: exit 143 (128 + 15), lock released."""
    import signal
    import subprocess
    import sys
    import time

    cmd = [sys.executable, "-u", "-m", "seffi.cli", "run", "--wandb", "disabled", "--no-progress",
           "--n-inputs", "8", "--rounds", "400", "--bootstrap", "50", "--out"]  # fmt: skip
    for i, extra in enumerate((0.0, 3.0)):  # at start-up, then during training
        out = tmp_path / f"run{i}"
        proc = subprocess.Popen(
            [*cmd, str(out)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while not (out / ".seffi-lock").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        assert (out / ".seffi-lock").exists()
        time.sleep(extra)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, err.decode()[-2000:]
        assert "seffi run: terminated" in err.decode() and not (out / ".seffi-lock").exists()


@pytest.mark.parametrize(("sig", "caught"), [("SIGTERM", "Terminated"), ("SIGINT", "KeyboardInterrupt")])
def test_a_signal_landing_in_a_garbage_collection_callback_still_ends_the_run(tmp_path, sig, caught):
    """A SIGTERM or Ctrl-C whose exception Python swallows (raised inside a weakref callback) comes again."""
    import subprocess
    import sys

    script = tmp_path / "gc_signal.py"
    script.write_text(
        "import os, signal, time, weakref\n"
        "from seffi.cli import _sigterm_raises\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # even where the parent ignores it\n"
        "_sigterm_raises()\n"
        "class Held: pass\n"
        "held = Held()\n"
        "def callback(_):\n"
        f"    os.kill(os.getpid(), signal.{sig})\n"
        "    for _ in range(100_000): pass\n"
        "ref = weakref.ref(held, callback)\n"
        "try:\n"
        "    del held\n"
        "    time.sleep(10)\n"
        "    print('survived')\n"
        "except KeyboardInterrupt as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == caught, out.stderr[-2000:]
    assert "Traceback" not in out.stderr


_HOLD = """
import sys
from pathlib import Path
from seffi.report.run_folder import claim_run_folder
claim_run_folder(Path(sys.argv[1]))
print("held", flush=True)
sys.stdin.readline()
"""


def test_report_refuses_a_folder_a_live_run_writes_to(tmp_path, capsys):
    """``seffi report DIR`` while another process holds DIR's lock: one line, exit 2, nothing written."""
    import subprocess
    import sys

    run = tmp_path / "run"
    assert (
        _run(capsys, "run", "--tasks", "hanoi", "--rounds", "2", "--out", str(run), "--wandb", "disabled")[0]
        == 0
    )
    before = sorted(p.name for p in (run / "plots").iterdir())
    (run / "plots" / before[0]).unlink()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, _, err = _run(capsys, "report", str(run))
        assert code == 2 and f"is in use by another seffi run (pid {holder.pid})" in err
        assert sorted(p.name for p in (run / "plots").iterdir()) == before[1:]  # nothing redrawn
    finally:
        holder.communicate("\n")
    assert (
        _run(capsys, "report", str(run))[0] == 0
        and sorted(p.name for p in (run / "plots").iterdir()) == before
    )

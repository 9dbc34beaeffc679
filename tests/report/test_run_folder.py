"""Run folders are never silently overwritten: the shared helpers."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from seffi.errors import RunFolderExists, SeffiError
from seffi.report.run_folder import (
    LOCK_FILE,
    SEFFI_OWNED,
    fresh_out_dir,
    prepare_run_folder,
    release_run_folders,
)


def _fake_run(folder):
    """The files an earlier `seffi run` left, plus a user's own file and folder."""
    (folder / "plots").mkdir(parents=True)
    (folder / "plots" / "SortSwapsRouter-v0_coverage.png").write_bytes(b"png")
    for name in ("report.json", "report.md", "metrics.jsonl", "tracker_state.json", "routers.json"):
        (folder / name).write_text("{}\n")
    (folder / "notes.txt").write_text("mine")
    (folder / "data").mkdir()
    (folder / "data" / "report.json").write_text("user data")


def test_only_seffi_owned_names_make_a_folder_a_seffi_run(tmp_path):
    """A folder with the user's files (or a crashed write probe) is free; one with seffi's output is not."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    (user / ".seffi-write-test").write_text("ok")  # a crashed probe alone is not a run
    assert fresh_out_dir(user) == user
    for name in ("metrics.jsonl", "report.json", "curves.png", "plots"):
        d = tmp_path / f"with-{name}"
        d.mkdir()
        (d / name).mkdir() if name == "plots" else (d / name).write_text("x")
        with pytest.warns(UserWarning, match="already holds a seffi run"):
            assert fresh_out_dir(d) == tmp_path / f"with-{name}-2", name
    assert {"report.json", "metrics.jsonl", "tracker_state.json", "routers.json", "plots"} <= set(SEFFI_OWNED)


def test_prepare_refuses_a_folder_holding_a_run_and_leaves_it_untouched(tmp_path):
    """Refuse with one line naming the folder and --overwrite; nothing is removed."""
    run = tmp_path / "run"
    _fake_run(run)
    before = sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    with pytest.raises(RunFolderExists) as info:
        prepare_run_folder(run, overwrite=False)
    msg = str(info.value)
    assert "\n" not in msg and str(run) in msg and "pass --overwrite" in msg
    assert isinstance(info.value, SeffiError)
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == before


def test_prepare_overwrite_removes_only_seffi_files(tmp_path):
    """--overwrite removes the earlier run's files, never the user's."""
    run = tmp_path / "run"
    _fake_run(run)
    assert prepare_run_folder(run, overwrite=True) == run
    assert sorted(p.name for p in run.iterdir()) == [LOCK_FILE, "data", "notes.txt"]  # claimed while it runs
    release_run_folders()
    assert sorted(p.name for p in run.iterdir()) == ["data", "notes.txt"]
    assert (run / "data" / "report.json").read_text() == "user data"
    assert fresh_out_dir(run) == run


def test_prepare_creates_and_checks_the_folder(tmp_path):
    """A new folder is created; a file or an unwritable folder is one SeffiError line."""
    new = tmp_path / "a" / "b"
    assert prepare_run_folder(new, overwrite=False) == new and new.is_dir()
    assert [p.name for p in new.iterdir()] == [LOCK_FILE]
    release_run_folders()
    assert list(new.iterdir()) == []
    (tmp_path / "f").write_text("x")
    with pytest.raises(SeffiError, match="not a folder"):
        prepare_run_folder(tmp_path / "f", overwrite=True)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            with pytest.raises(SeffiError, match="cannot write"):
                prepare_run_folder(locked, overwrite=False)
        finally:
            locked.chmod(0o700)


def test_prepare_with_narrow_owned_names(tmp_path):
    """`seffi compare` claims only its own names inside another run's folder."""
    run = tmp_path / "run"
    _fake_run(run)
    assert prepare_run_folder(run, overwrite=False, owned=("compare.png", "compare.md")) == run
    (run / "compare.md").write_text("old")
    with pytest.raises(RunFolderExists):
        prepare_run_folder(run, overwrite=False, owned=("compare.png", "compare.md"))
    prepare_run_folder(run, overwrite=True, owned=("compare.png", "compare.md"))
    assert not (run / "compare.md").exists() and (run / "report.json").exists()


def test_fresh_run_folder_picks_a_suffix_with_one_warning(tmp_path):
    """A callback's out_dir holding a run -> DIR-2 (then DIR-3), one UserWarning."""
    run = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh_out_dir(run) == run  # missing: used as is, no warning
        run.mkdir()
        (run / "notes.txt").write_text("mine")
        assert fresh_out_dir(run) == run  # the user's files only: still free of runs
    (run / "metrics.jsonl").write_text("")
    (run / LOCK_FILE).write_text("1 training\n")  # a live run that has not logged yet (init: always alive)
    with pytest.warns(UserWarning) as record:
        got = fresh_out_dir(run)
    assert got == tmp_path / "run-2" and not got.exists()
    assert len(record) == 1 and str(tmp_path / "run-2") in str(record[0].message)
    got.mkdir()
    (got / "report.json").write_text("{}")
    with pytest.warns(UserWarning, match="run-3"):
        assert fresh_out_dir(run) == tmp_path / "run-3"


def test_a_folder_a_killed_run_left_before_its_first_log_is_reused_and_swept(tmp_path):
    """A dead pid's lock, an empty metrics.jsonl and a cut temporary file: the plain rerun uses the folder."""
    import subprocess
    import sys

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text(f"{dead} training\n")
    (run / "metrics.jsonl").write_text("")
    (run / ".tracker_state.json.q1w2.tmp").write_text('{"cut')
    with pytest.warns(UserWarning, match=f"removing the lock of pid {dead}, which no longer runs") as seen:
        assert fresh_out_dir(run) == run
    assert len(seen) == 1
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl"]
    (run / LOCK_FILE).write_text(f"{dead} training\n")
    (run / "metrics.jsonl").write_text('{"seffi/step": 1}\n')  # its first log: an earlier run's output
    with pytest.warns(UserWarning) as seen:
        assert fresh_out_dir(run) == tmp_path / "run-2"
    assert [str(w.message).split(",")[0] for w in seen] == [
        f"removing the lock of pid {dead}",
        f"{run} already holds a seffi run; writing this run to {run}-2 instead",
    ]
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl"]


def test_fresh_out_dir_default_and_nested(tmp_path, monkeypatch):
    """The callbacks' run-folder helpers live in seffi.report (one definition): an
    explicit folder holding a run in a nested layout moves to a suffix, None gives runs/<prefix>-<UTC>."""
    from seffi.report.run_folder import default_out_dir, fresh_out_dir

    (tmp_path / "cb" / "eval").mkdir(parents=True)
    (tmp_path / "cb" / "eval" / "report.json").write_text("{}")
    (tmp_path / "cb-2").mkdir()
    (tmp_path / "cb-2" / "metrics.jsonl").write_text("")
    (tmp_path / "cb-2" / LOCK_FILE).write_text("1 training\n")  # live, not logged yet
    with pytest.warns(UserWarning, match="cb-3"):
        assert fresh_out_dir(tmp_path / "cb", nested=("stream", "eval")) == tmp_path / "cb-3"
    # Without the nested names the top folder holds no run of its own: it is used as it is.
    assert fresh_out_dir(tmp_path / "cb") == tmp_path / "cb"
    monkeypatch.chdir(tmp_path)
    import seffi.report.run_folder as rf

    monkeypatch.setattr(rf.time, "strftime", lambda fmt, t: "20260101-000000")
    first = fresh_out_dir(None, "p")
    assert first == Path("runs/p-20260101-000000")
    first.mkdir(parents=True)
    assert default_out_dir("p") == Path("runs/p-20260101-000000-2")  # same second: made unique
    assert default_out_dir("") == Path("runs/20260101-000000")


def _hold_lock(folder, ready, stop):
    """Child process: claim ``folder`` and keep it until told to stop."""
    prepare_run_folder(folder, overwrite=False)
    ready.set()
    stop.wait(30)
    release_run_folders()


def test_a_folder_claimed_by_a_live_run_is_refused_even_with_overwrite(tmp_path):
    """Two runs on one folder: the second is refused while the first runs, so no folder mixes two runs."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_lock, args=(tmp_path / "run", ready, stop))
    child.start()
    try:
        assert ready.wait(60)
        for overwrite in (False, True):
            with pytest.raises(SeffiError, match=f"in use by another seffi run \\(pid {child.pid}\\)"):
                prepare_run_folder(tmp_path / "run", overwrite=overwrite)
    finally:
        stop.set()
        child.join(30)
    assert not (tmp_path / "run" / LOCK_FILE).exists()
    assert prepare_run_folder(tmp_path / "run", overwrite=False) == tmp_path / "run"
    release_run_folders()


def test_a_lock_of_a_dead_process_is_taken_over_with_one_warning_and_leftovers_go(tmp_path):
    """A killed run's lock and its half-written temporary files do not block the plain rerun."""
    import subprocess
    import sys

    code = "import os; print(os.getpid())"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text(f"{pid}\n")
    (run / ".report.json.k2x9a1.tmp").write_text("{half")  # a write_atomic cut by a kill
    (run / ".notes.txt.tmp").write_text("the user's own")
    with pytest.warns(UserWarning, match=f"lock of pid {pid}, which no longer runs"):
        assert prepare_run_folder(run, overwrite=False) == run
    assert not (run / ".report.json.k2x9a1.tmp").exists() and (run / ".notes.txt.tmp").exists()
    release_run_folders()
    assert not (run / LOCK_FILE).exists()


def test_a_lock_of_a_live_process_says_how_to_clear_it(tmp_path):
    """A live pid that is not this run (another run, or a reused pid) is refused, with the way out."""
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text("1\n")  # init: always alive, never a seffi run
    for overwrite in (False, True):
        with pytest.raises(
            SeffiError, match=r"pid 1\); choose another folder, or remove .*\.seffi-lock if pid 1 is no"
        ):
            prepare_run_folder(run, overwrite=overwrite)


def test_an_interrupted_run_that_left_only_an_empty_log_does_not_block_the_rerun(tmp_path):
    """A 0-byte metrics.jsonl (a run stopped before its first log) is no earlier run to protect."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    assert prepare_run_folder(run, overwrite=False) == run
    assert not (run / "metrics.jsonl").exists()
    release_run_folders()


def _dead_pid() -> int:
    import subprocess
    import sys

    code = "import os; print(os.getpid())"
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)


def test_a_command_killed_mid_run_is_rerun_without_overwrite_but_a_killed_training_is_kept(tmp_path):
    """A dead command's lock marks output a rerun rebuilds; a dead training's folder is its only copy."""
    dead = _dead_pid()
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text(f"{dead} command\n")
    (run / "report.json").write_text('{"checkpoint": true}')
    (run / ".report.md.zz11.tmp").write_text("# cut")
    (run / "notes.txt").write_text("mine")
    with pytest.warns(UserWarning, match=rf"pid {dead}, which no longer runs, .*replacing what it left"):
        assert prepare_run_folder(run, overwrite=False) == run
    assert sorted(p.name for p in run.iterdir()) == [LOCK_FILE, "notes.txt"]
    release_run_folders()
    (run / LOCK_FILE).write_text(f"{dead} training\n")
    (run / "tracker_state.json").write_text("{}")
    with pytest.warns(UserWarning, match=f"pid {dead}, which no longer runs"), pytest.raises(RunFolderExists):
        prepare_run_folder(run, overwrite=False)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt", "tracker_state.json"]

"""W&B failing for real: its ``wandb-core`` process killed, its files cut by a full disk.

The closing line then says W&B failed instead of offering ``wandb sync`` for an incomplete run, and
W&B's own tracebacks stay off the terminal.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

SAVED = "W&B offline run saved"


# An earlier test's in-process W&B run leaves WANDB_SERVICE set: a child would attach to that service
# instead of starting a wandb-core of its own, as a user's fresh process does.
def _fresh_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}, **extra}


FAILED = "W&B logging failed"


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _kill_wandb_core(parent: subprocess.Popen, wandb_dir: Path, killed: list[int]) -> None:
    """SIGKILL the ``wandb-core`` child of ``parent`` once its run has started (its .wandb file exists)."""
    while parent.poll() is None and not killed:
        time.sleep(0.01)
        if not any(wandb_dir.glob("wandb/offline-run-*/run-*.wandb")):
            continue
        for pid in _children(parent.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"wandb-core" in cmd:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)


def test_seffi_run_with_wandb_core_killed_closes_with_the_failure_and_no_traceback(tmp_path: Path) -> None:
    env = _fresh_env(MPLBACKEND="Agg", WANDB_DIR=str(tmp_path))
    args = ["run", "--wandb", "offline", "--no-progress", "--tasks", "sort_swaps", "--n-inputs", "8"]
    args += ["--rounds", "4", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "seffi.cli", *args], cwd=tmp_path, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    killed: list[int] = []
    watcher = threading.Thread(target=_kill_wandb_core, args=(proc, tmp_path, killed))
    watcher.start()
    out, err = proc.communicate(timeout=600)
    watcher.join()
    assert killed, "wandb-core was not running after the run started"
    assert proc.returncode == 0, err
    assert (tmp_path / "run" / "report.json").is_file()  # the local report is whole
    assert SAVED not in out + err and FAILED in out, out
    assert "Traceback" not in err and err.count("WandbSinkWarning") == 1, err


# A user's loop that logs to W&B only: every local file it has is W&B's own.
LOOP = """
import sys
from seffi.report import SafeWandbRun
from seffi.report.sinks import closing_lines

run = SafeWandbRun(mode="offline", dir=sys.argv[1])
for step in range(100):
    run.log({"seffi/loss": 1.0 / (step + 1), "seffi/note": "x" * 20_000}, step=step)
run.finish()
print("\\n".join(closing_lines(None, run)))
"""


def _loop(wandb_dir: Path, max_file_bytes: int | None) -> subprocess.CompletedProcess:
    def cap() -> None:
        if max_file_bytes is not None:  # every file of the process and of wandb-core stops there
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run(
        [sys.executable, "-c", LOOP, str(wandb_dir)], preexec_fn=cap, capture_output=True, text=True,
        timeout=600, cwd=wandb_dir.parent, env=_fresh_env(),
    )  # fmt: skip


def test_a_wandb_folder_that_fills_up_is_no_saved_offline_run(tmp_path: Path) -> None:
    whole = _loop(tmp_path / "whole", None)
    assert whole.returncode == 0 and SAVED in whole.stdout and not whole.stderr, whole.stderr
    full = _loop(tmp_path / "full", 50_000)  # the run's .wandb file needs ~2 MB
    assert full.returncode == 0, full.stderr
    run_file = next((tmp_path / "full" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert run_file.stat().st_size == 50_000  # cut by the cap, for real
    assert SAVED not in full.stdout and FAILED in full.stdout, full.stdout
    assert "Traceback" not in full.stderr and full.stderr.count("WandbSinkWarning") == 1, full.stderr


def test_a_mailbox_closed_during_init_counts_as_the_lost_wandb_core() -> None:
    """wandb-core dying inside wandb.init surfaces as MailboxClosedError: the service is torn down
    quietly then, as for a lost connection later, so W&B's exit hook prints no traceback."""
    from wandb.sdk.mailbox import HandleAbandonedError, MailboxClosedError

    from seffi.report.wandb_run import _service_lost

    assert _service_lost(MailboxClosedError()) and _service_lost(HandleAbandonedError())
    try:
        try:
            raise MailboxClosedError()
        except MailboxClosedError as inner:
            raise RuntimeError("wandb.init failed") from inner
    except RuntimeError as outer:
        assert _service_lost(outer)
    assert not _service_lost(ValueError("a bad config value"))


_BAD_SETTING = """
import json, sys, warnings
from seffi.report.wandb_run import SafeWandbRun
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    run = SafeWandbRun(mode="offline", dir=sys.argv[1])
failed = [str(w.message) for w in caught if "W&B init failed" in str(w.message)]
print(json.dumps({"warnings": failed, "enabled": run.enabled, "failed": run.failed}))
"""


def test_a_bad_wandb_setting_is_named_in_the_one_warning(tmp_path: Path) -> None:
    """A W&B setting W&B refuses (``WANDB_INIT_TIMEOUT=abc``, in a fresh process: W&B reads it once)
    turns W&B off with one warning naming the setting and why, not only "1 validation error"."""
    import json

    env = _fresh_env(WANDB_INIT_TIMEOUT="abc")
    argv = [sys.executable, "-c", _BAD_SETTING, str(tmp_path)]
    got = json.loads(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)
    (message,) = got["warnings"]
    assert "init_timeout: Input should be a valid number" in message
    assert (got["enabled"], got["failed"]) == (False, True)

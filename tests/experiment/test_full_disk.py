"""A full disk during `seffi run` or `seffi report`: one error line, exit 2, earlier files still whole.

The disk fills for real: the child process runs under an RLIMIT_FSIZE cap (with SIGXFSZ ignored), so
the kernel fails the write that crosses it with EFBIG, exactly where a full disk fails with ENOSPC.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from seffi.report import load_report

RUN = ["run", "--wandb", "disabled", "--no-progress", "--tasks", "sort_swaps", "--n-inputs", "8"]
RUN += ["--rounds", "4"]


def _seffi(args: list[str], cwd: Path, max_file_bytes: int | None = None) -> subprocess.CompletedProcess:
    def cap() -> None:
        if max_file_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run(
        [sys.executable, "-m", "seffi.cli", *args], cwd=cwd, env=env, preexec_fn=cap,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "run"
    assert _seffi([*RUN, "--out", str(out)], out.parent).returncode == 0
    return out


def test_seffi_report_never_rewrites_report_json(finished_run: Path) -> None:
    """Re-rendering reads report.json and writes plots and report.md only: the only copy is untouched."""
    before = (finished_run / "report.json").stat()
    done = _seffi(["report", str(finished_run)], finished_run.parent)
    assert done.returncode == 0, done.stderr
    after = (finished_run / "report.json").stat()
    same = ("st_ino", "st_mtime_ns", "st_size")
    assert [getattr(after, a) for a in same] == [getattr(before, a) for a in same]


def test_seffi_report_on_a_full_disk_is_one_line_and_keeps_the_report(finished_run: Path) -> None:
    report = (finished_run / "report.json").read_bytes()
    done = _seffi(["report", str(finished_run)], finished_run.parent, max_file_bytes=20_000)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "File too large" in done.stderr, done.stderr
    assert (finished_run / "report.json").read_bytes() == report
    assert not [p for p in finished_run.rglob(".*.tmp")]  # no temporary file left behind


def test_seffi_run_on_a_full_disk_is_one_line_and_leaves_only_whole_files(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _seffi([*RUN, "--out", str(out)], tmp_path, max_file_bytes=30_000)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "File too large" in done.stderr, done.stderr
    for path in out.iterdir():
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".jsonl":
            assert path.read_text().endswith("\n") or path.stat().st_size == 0
    assert not (out / "report.json").exists() or load_report(out)

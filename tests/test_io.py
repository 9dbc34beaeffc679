"""Crash-safe writes: a reader sees the old file or the whole new one, and JSONL ends on a whole line."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from seffi import _io
from seffi._io import append_line, read_jsonl, write_atomic


def test_write_atomic_replaces_the_whole_file(tmp_path):
    path = tmp_path / "report.json"
    write_atomic(path, "old\n")
    write_atomic(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_full_disk_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "report.json"
    write_atomic(path, '{"auc": 0.8}\n')

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_io.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(path, '{"auc": 0.9}\n' * 1000)
    assert json.loads(path.read_text()) == {"auc": 0.8}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


class _HalfWrite(io.StringIO):
    """A text file whose next write stores half the text, then fails like a full disk."""

    fail = False

    def write(self, s):
        if self.fail:
            super().write(s[: len(s) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(s)


def test_a_failed_append_is_cut_back_to_the_last_whole_line():
    fh = _HalfWrite()
    append_line(fh, json.dumps({"step": 1}))
    fh.fail = True
    with pytest.raises(OSError):
        append_line(fh, json.dumps({"step": 2, "pad": "x" * 100}))
    assert fh.getvalue() == '{"step": 1}\n'


def test_read_jsonl_skips_a_partial_last_line_with_a_warning(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "seffi/au')
    with pytest.warns(UserWarning, match="partial last line"):
        assert read_jsonl(path) == [{"step": 1}, {"step": 2}]


def test_read_jsonl_refuses_a_damaged_line_in_the_middle(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"st\n{"step": 3}\n')
    with pytest.raises(ValueError, match="line 2"):
        read_jsonl(path)


_WRITER = """
import json, sys
from seffi._io import write_atomic
path, n = sys.argv[1], int(sys.argv[2])
i = 0
print("ready", flush=True)
while True:
    i += 1
    write_atomic(path, json.dumps({"i": i, "pad": [i] * n}))
"""


def test_sigkill_at_random_moments_never_leaves_a_damaged_file(tmp_path):
    """20 kills of a process rewriting a 400 kB JSON file: the file is always whole and parseable."""
    path = tmp_path / "report.json"
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(20):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), "50000"], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.0, 0.3)))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        if path.exists():
            data = json.loads(path.read_text())
            assert data["pad"] == [data["i"]] * 50000
            seen.add(data["i"])
    assert seen, "the writer never finished one write in 20 runs"


def test_written_files_get_the_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "report.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "report.json").stat().st_mode & 0o777 == 0o644

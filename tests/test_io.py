"""Crash-safe writes: a reader sees the old file or the whole new one, and JSONL ends on a whole line."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from seffi import _io
from seffi._io import drop_partial_line, read_jsonl, write_atomic


def test_write_atomic_replaces_the_whole_file(tmp_path):
    path = tmp_path / "report.json"
    write_atomic(path, "old\n")
    write_atomic(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_text_in_pieces_is_written_as_it_comes_or_not_at_all(tmp_path):
    """Pieces of text are the file's text joined; an error while they are made leaves the old file alone."""
    path = tmp_path / "state.json"
    write_atomic(path, iter(['{"a":', "[1,2]", ',"\u00e9":"\u00e9"}\n']))
    assert path.read_bytes() == '{"a":[1,2],"\u00e9":"\u00e9"}\n'.encode()

    def failing():
        yield '{"a":'
        raise ValueError("a piece that cannot be made")

    with pytest.raises(ValueError, match="cannot be made"):
        write_atomic(path, failing())
    assert json.loads(path.read_text()) == {"a": [1, 2], "é": "é"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


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


_APPENDER = """
import json, resource, signal, sys
from seffi._io import append_line
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
written, errors = 0, []
with open(sys.argv[1], "ab", buffering=0) as fh:
    for i in range(60):  # about 40 bytes a line: the line that crosses 1000 bytes and every later one fail
        try:
            append_line(fh, json.dumps({"step": i, "pad": "x" * 16}))
            written += 1
        except OSError as exc:
            errors.append(exc.errno)
print(json.dumps({"written": written, "errors": sorted(set(errors))}))
"""


def test_an_append_past_a_file_size_limit_is_cut_back_to_the_last_whole_line(tmp_path):
    """A real RLIMIT_FSIZE: every failed append (the first one part-way) leaves whole lines only."""
    path = tmp_path / "metrics.jsonl"
    proc = subprocess.run([sys.executable, "-c", _APPENDER, str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = [json.dumps({"step": i, "pad": "x" * 16}) + "\n" for i in range(60)]
    sizes = np.cumsum([len(line) for line in lines])
    fit = int((sizes <= 1000).sum())  # the lines that fit whole under the limit
    assert json.loads(proc.stdout) == {"written": fit, "errors": [errno.EFBIG]}
    assert path.read_text() == "".join(lines[:fit])
    assert [r["step"] for r in read_jsonl(path)] == list(range(fit))


def test_read_jsonl_skips_a_partial_last_line_with_a_warning(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "seffi/au')
    with pytest.warns(UserWarning, match="partial last line"):
        assert read_jsonl(path) == [{"step": 1}, {"step": 2}]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ('{"step": 1}\n{"step": 2}\n{"step": 3, "seffi/au', '{"step": 1}\n{"step": 2}\n'),
        ('{"step": 1}\n', '{"step": 1}\n'),
        ('{"step": 1, "se', ""),
        ("", ""),
        ('{"step": 1}\n' + "x" * 200_000, '{"step": 1}\n'),  # the newline lies blocks before the end
    ],
)
def test_drop_partial_line_cuts_back_to_the_last_newline(tmp_path, text, kept):
    path = tmp_path / "metrics.jsonl"
    path.write_text(text)
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        drop_partial_line(fd)
    finally:
        os.close(fd)
    assert path.read_text() == kept


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

"""Crash-safe file output: whole files appear complete or not at all; JSONL lines never half-written.

Every file seffi writes goes through `write_atomic` (a temporary file in the same folder,
flushed and fsynced, then ``os.replace``d over the target, so a kill or a full disk leaves either the
old file or the new one) or `append_line` (one ``write`` of a whole line; a failed write is cut
back so the file still ends on a line boundary). `read_jsonl` skips a partial last line, with a
warning, should one be left by a crash of an older writer or by another program.

Examples:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "report.json"
    >>> write_atomic(path, "{}")
    >>> path.read_text()
    '{}'
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

__all__ = ["append_line", "read_jsonl", "write_atomic", "write_figure"]


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, encoding: str = "utf-8") -> None:
    """Write ``data`` to ``path`` so that a reader only ever sees the old file or the whole new one.

    Args:
        path: The target file; its folder must exist.
        data: Text (encoded with ``encoding``) or bytes.
        encoding: Text encoding.

    Raises:
        OSError: The folder is not writable or the disk is full; ``path`` is then unchanged and no
            temporary file is left behind.
    """
    target = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        mask = os.umask(0)  # read the umask: mkstemp makes 0600, a written file gets what open() gives
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:  # KeyboardInterrupt included: never leave the temporary file
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_figure(fig: Any, path: str | os.PathLike[str], **savefig: Any) -> None:
    """Render a matplotlib ``Figure`` to PNG in memory (``savefig`` arguments), then `write_atomic` it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", **savefig)
    write_atomic(path, buf.getvalue())


def append_line(fh: Any, line: str) -> None:
    """Append one line (``line`` plus a newline) to the open file ``fh`` as a whole.

    The bytes go straight to the file descriptor (no buffer that a failed flush would keep), so a
    write that fails part-way (a full disk, a file-size limit) is always cut back to where the file
    ended before: the file keeps ending on a complete line. The error is re-raised.

    Args:
        fh: A file opened for appending (``open(path, "ab", buffering=0)``); only its descriptor is used.
        line: One line of text without its newline.
    """
    fd = fh.fileno()
    start = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview((line + "\n").encode("utf-8"))
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


def drop_partial_line(fd: int) -> None:
    """Cut a file open for reading and writing back to its last newline, before appending to it.

    A process killed inside a write can leave a partial last line: Linux stops a write to a regular
    file between pages when a SIGKILL arrives. `read_jsonl` skips such a line, but a line appended
    after it would join it into one damaged line, so a writer resuming the file drops it first.

    Args:
        fd: A file descriptor open for reading and writing.
    """
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    end, block = size, 1 << 16
    while end > 0:
        start = max(0, end - block)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            os.ftruncate(fd, start + at + 1)
            return
        end = start
    os.ftruncate(fd, 0)


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """Every record of a JSONL file; a partial (unterminated, unparseable) last line is skipped, warned.

    Args:
        path: A JSONL file.

    Raises:
        ValueError: A line other than an unterminated last one is not JSON (the file is damaged).
    """
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # no newline after it: a write that never finished
                warnings.warn(f"{path}: ignoring a partial last line ({len(line)} bytes)", stacklevel=2)
                break
            raise ValueError(f"{path}: line {i + 1} is not valid JSON") from None
    return out

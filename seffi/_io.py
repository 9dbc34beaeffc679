"""Crash-safe file output: whole files appear complete or not at all; JSONL lines never half-written."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from seffi.errors import SeffiError

__all__ = ["append_line", "read_jsonl", "write_atomic", "write_figure"]


def write_atomic(
    path: str | os.PathLike[str], data: str | bytes | Iterable[str], *, encoding: str = "utf-8"
) -> None:
    """Write ``data`` (text, bytes or text in pieces) to ``path``: readers see the old or the whole new file.

    A temporary file in the same folder is written (pieces as they come), flushed, fsynced and
    ``os.replace``d over ``path``; on an ``OSError`` (full disk, read-only folder) or any error while
    the pieces are made, ``path`` is unchanged and no temporary file is left.
    """
    target = Path(path)
    pieces = [data] if isinstance(data, str | bytes) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        mask = os.umask(0)  # read the umask: mkstemp makes 0600, a written file gets what open() gives
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as fh:
            for piece in pieces:
                fh.write(piece.encode(encoding) if isinstance(piece, str) else piece)
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
    """Append ``line`` and a newline to ``fh`` (``open(path, "ab", buffering=0)``) as a whole.

    The bytes go straight to the descriptor (no buffer a failed flush would keep), and a write that
    fails part-way is cut back, so the file keeps ending on a complete line; the error is re-raised.
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
    """Cut the file ``fd`` (open for reading and writing) back to its last newline before appending.

    A SIGKILL can stop a write between pages and leave a partial last line, which a line appended
    after it would join into one damaged line.
    """
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":  # whole: no write (a truncate would touch mtime)
        return
    while end > 0:  # backwards, a block at a time
        start = max(0, end - (1 << 16))
        if (at := os.pread(fd, end - start, start).rfind(b"\n")) >= 0:
            os.ftruncate(fd, start + at + 1)
            return
        end = start
    os.ftruncate(fd, 0)


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """Every record of a JSONL file; a partial last line is skipped, warned; another bad one raises."""
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


def drop_lines_after(path: Path, key: str, step: int) -> None:
    """Keep the JSON lines of ``path`` whose ``key`` is at most ``step``; a cut last line is dropped."""
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    partial = lines.pop()  # "" when the file ends on a newline
    with contextlib.suppress(ValueError):
        json.loads(partial)
        lines.append(partial)  # whole, only its newline missing
    kept = []
    for line in lines:
        try:
            if float(json.loads(line).get(key, step)) > step:
                continue
        except (ValueError, AttributeError, TypeError):
            pass  # a line seffi did not write as such: left alone
        kept.append(line)
    new = "".join(f"{line}\n" for line in kept)
    if new == text:
        return
    try:
        write_atomic(path, new)
    except OSError as exc:
        raise SeffiError(
            f"cannot trim {path} to step {step} for the resumed run: {exc.strerror or exc}; "
            "the log is unchanged"
        ) from None

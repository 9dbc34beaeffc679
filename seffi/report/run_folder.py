"""Run folders: one seffi run per folder, never two mixed, never a silent overwrite.

Owns `SEFFI_OWNED` (the names a seffi command writes), `prepare_run_folder` (command line:
refuse an earlier run unless ``--overwrite``), `fresh_run_folder` /
[`fresh_out_dir`][seffi.report.fresh_out_dir] (callbacks: move to ``DIR-2``, ``DIR-3``, ... with one warning)
and [`default_out_dir`][seffi.report.default_out_dir].

Examples:
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "run"
    >>> prepare_run_folder(d, overwrite=False) == d, holds_seffi_run(d)
    (True, False)
"""

from __future__ import annotations

import atexit
import fnmatch
import os
import shutil
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from seffi.errors import RunFolderExists, SeffiError

#: Names (``fnmatch`` patterns, matched against the entries directly inside the folder) that a seffi
#: command writes into a run folder. Folders among them (``plots``) are seffi-owned as a whole. The lane
#: writes report.json and its curve figures (``curves.png``, and ``curves-<page>.png`` when paged).
SEFFI_OWNED: tuple[str, ...] = (
    "report.json",
    "report.md",
    "metrics.jsonl",
    "snapshots.jsonl",
    "tracker_state.json",
    "routers.json",
    "plots",
    "compare.png",
    "compare.pdf",
    "compare.svg",
    "compare.md",
    "curves.png",
    "curves-*.png",
    ".seffi-write-test",
)


#: The lock file that claims a run folder for one process (created with ``O_EXCL``; holds the pid).
LOCK_FILE = ".seffi-lock"
#: Locks this process holds, released by `release_run_folders` (and at exit).
_CLAIMED: set[Path] = set()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    return True


def _lock_owner(lock: Path) -> int | None:
    try:
        text = lock.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def claim_run_folder(path: Path, *, overwrite: bool = False) -> Path:
    """Claim the existing folder ``path`` for this process: one atomic ``O_EXCL`` create of its lock file.

    Two runs started together on one folder cannot both pass: the second finds the first's lock. A
    lock left by a process that no longer runs (a killed run) is taken over with one warning; a lock
    of a live process raises `SeffiError`, which says how to clear it if that process is no seffi run.
    ``overwrite`` is accepted for the callers' symmetry: it changes nothing about locks.
    """
    lock = Path(path) / LOCK_FILE
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            fd = None
        except OSError as exc:
            raise SeffiError(f"cannot write to {path}: {exc.strerror or exc}") from None
        if fd is not None:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()}\n")
            _CLAIMED.add(lock)
            return path
        owner = _lock_owner(lock)
        if owner == os.getpid():
            return path
        if owner is not None and _pid_alive(owner):
            raise SeffiError(
                f"{path} is in use by another seffi run (pid {owner}); choose another folder, or remove "
                f"{lock} if pid {owner} is no seffi run (a pid the system gave to another program)"
            )
        warnings.warn(
            f"taking over the lock of pid {owner}, which no longer runs, in {path}", UserWarning, stacklevel=3
        )
        lock.unlink(missing_ok=True)
    raise SeffiError(f"cannot claim {path}: its lock file keeps coming back")  # pragma: no cover


def _release(lock: Path) -> None:
    if _lock_owner(lock) == os.getpid():
        lock.unlink(missing_ok=True)
    _CLAIMED.discard(lock)


def release_run_folders() -> None:
    """Remove the locks this process holds (a lock another process has taken over stays)."""
    for lock in list(_CLAIMED):
        _release(lock)


atexit.register(release_run_folders)


def _owned_entries(path: Path, owned: tuple[str, ...] = SEFFI_OWNED) -> list[Path]:
    """The seffi-owned entries directly inside ``path`` (empty when it is not a readable folder)."""
    try:
        return sorted(p for p in path.iterdir() if any(fnmatch.fnmatchcase(p.name, o) for o in owned))
    except OSError:
        return []


def holds_seffi_run(path: Path) -> bool:
    """True when the folder ``path`` holds files a seffi run writes (report.json, metrics.jsonl, ...).

    A missing path, a file, or a folder with only the user's own files is not a seffi run. The
    write-probe file alone (left by a crash between two system calls) does not count either. An
    empty metrics.jsonl does: a callback's run that has not logged yet looks like that.
    """
    path = Path(path)
    if not path.is_dir():
        return False
    return any(p.name != ".seffi-write-test" for p in _owned_entries(path))


def _earlier_output(entry: Path) -> bool:
    """Whether an owned entry of a claimed folder is an earlier run's output worth protecting.

    The folder's lock rules out a live run, so an empty file there is what a run stopped before its
    first log left behind: nothing to lose.
    """
    if entry.name == ".seffi-write-test":
        return False
    try:
        return entry.is_dir() or entry.stat().st_size > 0
    except OSError:
        return False


def _remove(entry: Path) -> None:
    """Remove one seffi-owned entry; a symlink is unlinked, never followed."""
    if entry.is_symlink() or not entry.is_dir():
        entry.unlink()
    else:
        shutil.rmtree(entry)


def _remove_leftovers(path: Path) -> None:
    """Delete the temporary files an interrupted atomic write of a seffi file left (``.NAME.*.tmp``)."""
    try:
        entries = list(path.iterdir())
    except OSError:
        return
    for entry in entries:
        if any(fnmatch.fnmatchcase(entry.name, f".{o}.*.tmp") for o in SEFFI_OWNED) and not entry.is_dir():
            entry.unlink(missing_ok=True)


def prepare_run_folder(path: Path, *, overwrite: bool, owned: tuple[str, ...] = SEFFI_OWNED) -> Path:
    """Create the run folder ``path`` (if needed) and prove it is writable, before any work starts.

    Args:
        path: The run folder (``--out``).
        overwrite: When the folder already holds a seffi run, remove that run's seffi-owned files and
            folders first (never anything else) instead of refusing.
        owned: The names that count as an earlier run's output (default `SEFFI_OWNED`). A command
            that writes into another run's folder on purpose narrows it, e.g. ``seffi compare`` passes
            ``("compare.png", "compare.md")``.

    Returns:
        ``path``.

    Raises:
        RunFolderExists: The folder holds an earlier run and ``overwrite`` is False.
        SeffiError: ``path`` is not a folder, or cannot be created, cleaned or written.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SeffiError(f"{path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SeffiError(f"cannot write to {path}: {exc.strerror or exc}") from None
    lock = path / LOCK_FILE
    held_before = lock in _CLAIMED
    claim_run_folder(path, overwrite=overwrite)  # before the check: the check and the claim are one step
    _remove_leftovers(path)
    earlier = [p for p in _owned_entries(path, owned) if _earlier_output(p)]
    if earlier and not overwrite:
        if not held_before:  # refused: the folder is left exactly as it was
            _release(lock)
        names = ", ".join(p.name for p in earlier[:3]) + (", ..." if len(earlier) > 3 else "")
        raise RunFolderExists(
            f"{path} already holds a seffi run ({names}); pass --overwrite to replace it, "
            "or choose another folder"
        )
    probe = path / ".seffi-write-test"
    try:
        for entry in [*earlier, *(p for p in _owned_entries(path, owned) if p not in earlier)]:
            _remove(entry)
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise SeffiError(f"cannot write to {path}: {exc.strerror or exc}") from None
    return path


def fresh_run_folder(path: Path, *, nested: Sequence[str] = (), stacklevel: int = 2) -> Path:
    """``path``, or the first free ``path-2``, ``path-3``, ... when ``path`` already holds a seffi run.

    For library callers (a callback's ``out_dir``), which must neither stop training nor mix two runs
    in one folder. When another folder is used, one `UserWarning` names it. Nothing is created here.

    Args:
        path: The folder asked for.
        nested: Sub-folders that also hold a run of this layout (the SB3 callback's ``stream``/``eval``
            in ``mode="both"``): a folder counts as taken when it or one of them holds a seffi run.
        stacklevel: Of the warning (2: the caller's line).
    """
    path = Path(path)

    def taken(p: Path) -> bool:
        return holds_seffi_run(p) or any(holds_seffi_run(p / sub) for sub in nested)

    if not taken(path):
        return path
    n = 2
    while True:
        candidate = path.with_name(f"{path.name}-{n}")
        if not candidate.exists() or (candidate.is_dir() and not taken(candidate)):
            break
        n += 1
    warnings.warn(
        f"{path} already holds a seffi run; writing this run to {candidate} instead",
        UserWarning,
        stacklevel=stacklevel,
    )
    return candidate


def default_out_dir(prefix: str = "seffi") -> Path:
    """A fresh run folder: ``runs/<prefix>-<UTC timestamp>``, or ``runs/<UTC timestamp>`` without a prefix.

    Made unique if it exists; the timestamp lives in the folder name only, never in report.json.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path("runs") / (f"{prefix}-{stamp}" if prefix else stamp)
    out, n = base, 1
    while out.exists():
        n += 1
        out = Path(f"{base}-{n}")
    return out


def fresh_out_dir(out_dir: str | Path | None, prefix: str = "seffi", *, nested: Sequence[str] = ()) -> Path:
    """The folder (not created) a callback writes its run into: never one that already holds a seffi run.

    ``out_dir`` goes through `fresh_run_folder`; ``None`` gives
    [`default_out_dir`][seffi.report.default_out_dir] with ``prefix`` (always fresh).
    """
    if out_dir is None:
        return default_out_dir(prefix)
    return fresh_run_folder(Path(out_dir), nested=nested, stacklevel=4)

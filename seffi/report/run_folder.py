"""Run folders: one seffi run per folder, never two mixed, never a silent overwrite.

A command refuses an earlier run unless ``--overwrite`` (`prepare_run_folder`); a callback moves to
``DIR-2``, ``DIR-3``, ... with one warning ([`fresh_out_dir`][seffi.report.fresh_out_dir]).
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
from seffi.report.safe_load import os_errors

#: ``fnmatch`` patterns of the entries a seffi command writes into a run folder (``plots`` as a whole).
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
_CLAIMED: set[Path] = set()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    return True


def _lock_owner(lock: Path) -> tuple[int | None, str]:
    """(pid, kind) written in a lock file; pid None when it holds none (being written, or damaged)."""
    try:
        words = lock.read_text(encoding="utf-8").split()
    except OSError:
        return None, ""
    if not words or not words[0].isdigit():
        return None, ""
    return int(words[0]), " ".join(words[1:])


#: The lock of a command, which rebuilds its folder from its settings; of a training, whose folder
#: holds the only copy of what it measured.
COMMAND = "command"
TRAINING = "training"


def _claim(path: Path, kind: str) -> tuple[int | None, str] | None:
    """Create the lock of ``path`` for this process; the (pid, kind) of a dead process's lock taken over."""
    lock = Path(path) / LOCK_FILE
    taken = None
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            fd = None
        except OSError as exc:
            raise SeffiError(f"cannot write to {path}: {exc.strerror or exc}") from None
        if fd is not None:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()} {kind}\n")
            _CLAIMED.add(lock)
            return taken
        owner, owner_kind = _lock_owner(lock)
        if owner == os.getpid():
            return None
        if owner is not None and _pid_alive(owner):
            raise SeffiError(
                f"{path} is in use by another seffi run (pid {owner}); choose another folder, or remove "
                f"{lock} if pid {owner} is no seffi run (a pid the system gave to another program)"
            )
        lock.unlink(missing_ok=True)
        taken = (owner, owner_kind)
    raise SeffiError(f"cannot claim {path}: its lock file keeps coming back")  # pragma: no cover


def claim_run_folder(path: Path, *, kind: str = TRAINING) -> Path:
    """Claim the existing folder ``path`` for this process (a dead process's lock taken over with a warning).

    Raises:
        SeffiError: A live process holds the folder.
    """
    taken = _claim(path, kind)
    if taken is not None:
        warnings.warn(
            f"taking over the lock of pid {taken[0]}, which no longer runs, in {path}", stacklevel=3
        )
    remove_leftovers(Path(path))
    return Path(path)


def holds_claim(path: Path) -> bool:
    """Whether this process holds the lock of the folder ``path``."""
    return Path(path) / LOCK_FILE in _CLAIMED


def release_run_folder(path: Path) -> None:
    """Remove the lock of the folder ``path`` if this process holds it."""
    _release(Path(path) / LOCK_FILE)


def refuse_links(path: Path) -> None:
    """Raise `SeffiError` naming the first name seffi writes in ``path`` that is a symbolic link."""
    for entry in _owned_entries(Path(path)):
        if entry.is_symlink():
            raise SeffiError(
                f"{entry} is a symbolic link: seffi writes only its own files and folders inside a run "
                "folder, never through a link; remove the link, or choose another folder"
            )


def _release(lock: Path) -> None:
    if _lock_owner(lock)[0] == os.getpid():
        lock.unlink(missing_ok=True)
    _CLAIMED.discard(lock)


def release_run_folders() -> None:
    """Remove the locks this process holds (a lock another process has taken over stays)."""
    for lock in list(_CLAIMED):
        _release(lock)


atexit.register(release_run_folders)


def _owned_entries(path: Path, owned: tuple[str, ...] = SEFFI_OWNED) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if any(fnmatch.fnmatchcase(p.name, o) for o in owned))
    except OSError:
        return []


def _earlier_output(entry: Path) -> bool:
    """Whether an owned entry of a claimed folder is an earlier run's output (an empty file is not)."""
    if entry.name == ".seffi-write-test":
        return False
    try:
        return entry.is_dir() or entry.stat().st_size > 0
    except OSError:
        return False


def remove_leftovers(path: Path) -> None:
    """Delete the temporary files of interrupted atomic writes (``.NAME.*.tmp``)."""
    try:
        entries = list(path.iterdir())
    except OSError:
        return
    for entry in entries:
        if any(fnmatch.fnmatchcase(entry.name, f".{o}.*.tmp") for o in SEFFI_OWNED) and not entry.is_dir():
            entry.unlink(missing_ok=True)


def _names(entries: list[Path]) -> str:
    return ", ".join(p.name for p in entries[:3]) + (", ..." if len(entries) > 3 else "")


def prepare_run_folder(path: Path, *, overwrite: bool, owned: tuple[str, ...] = SEFFI_OWNED) -> Path:
    """Create the run folder ``path`` (if needed), claim it and prove it is writable, before any work.

    Args:
        path: The run folder (``--out``).
        overwrite: Remove an earlier run's seffi-owned files and folders (never anything else).
        owned: The names that count as an earlier run's output (``seffi compare`` narrows them).

    Raises:
        RunFolderExists: The folder holds an earlier run and ``overwrite`` is False.
        SeffiError: ``path`` is not a folder, or cannot be created, cleaned or written.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SeffiError(f"{path} exists and is not a folder")
    with os_errors(f"cannot write to {path}"):
        path.mkdir(parents=True, exist_ok=True)
    lock = path / LOCK_FILE
    held_before = lock in _CLAIMED
    # Claimed before the check: the check and the claim are one step.
    killed = _claim(path, COMMAND)
    remove_leftovers(path)
    earlier = [p for p in _owned_entries(path, owned) if _earlier_output(p)]
    if killed is not None:
        # A dead command left unfinished output, which a rerun rebuilds; a training's is its only copy.
        rerun = killed[1] == COMMAND and earlier
        what = f"; replacing what it left unfinished ({_names(earlier)})" if rerun else ""
        warnings.warn(
            f"taking over the lock of pid {killed[0]}, which no longer runs, in {path}{what}", stacklevel=2
        )
        overwrite = overwrite or bool(rerun)
    if earlier and not overwrite:
        if not held_before:  # refused: the folder is left exactly as it was
            _release(lock)
        raise RunFolderExists(
            f"{path} already holds a seffi run ({_names(earlier)}); pass --overwrite to replace it, "
            "or choose another folder"
        )
    probe = path / ".seffi-write-test"
    with os_errors(f"cannot write to {path}"):
        for entry in [*earlier, *(p for p in _owned_entries(path, owned) if p not in earlier)]:
            if entry.is_symlink() or not entry.is_dir():  # a link is unlinked, never followed
                entry.unlink()
            else:
                shutil.rmtree(entry)
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    return path


def _in_use(path: Path) -> bool:
    """Whether another live process holds the folder's lock; a dead one's lock and temporary files go."""
    lock = path / LOCK_FILE
    if not lock.is_file():
        return False
    owner, _ = _lock_owner(lock)
    if owner == os.getpid():  # a command of this process prepared the folder for it (seffi score)
        return False
    if owner is not None and _pid_alive(owner):
        return True
    msg = f"removing the lock of pid {owner}, which no longer runs, in {path}"
    warnings.warn(msg, stacklevel=4)
    lock.unlink(missing_ok=True)
    remove_leftovers(path)
    return False


def default_out_dir(prefix: str = "seffi") -> Path:
    """A fresh run folder ``runs/<prefix>-<UTC timestamp>``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path("runs") / (f"{prefix}-{stamp}" if prefix else stamp)
    out, n = base, 1
    while out.exists():
        n += 1
        out = Path(f"{base}-{n}")
    return out


def fresh_out_dir(out_dir: str | Path | None, prefix: str = "seffi", *, nested: Sequence[str] = ()) -> Path:
    """The folder (not created) a callback writes its run into: never one that holds a seffi run.

    ``None`` gives `default_out_dir`; a folder a live run holds or with an earlier run's output gives
    the first free ``DIR-2``, ``DIR-3``, ... with one warning. ``nested``: sub-folders that also hold
    a run (the SB3 callback's ``stream``/``eval``).
    """
    if out_dir is None:
        return default_out_dir(prefix)
    path = Path(out_dir)

    def taken(p: Path) -> bool:
        folders = [p, *(p / sub for sub in nested)]
        live = [_in_use(f) for f in folders]  # every folder swept of a killed run's leftovers
        return any(live) or any(_earlier_output(e) for f in folders for e in _owned_entries(f))

    if not taken(path):
        return path
    n = 2
    while (candidate := path.with_name(f"{path.name}-{n}")).exists() and not (
        candidate.is_dir() and not taken(candidate)
    ):
        n += 1
    warnings.warn(f"{path} already holds a seffi run; writing this run to {candidate} instead", stacklevel=3)
    return candidate

"""Run folders: one seffi run per folder, never two mixed, never a silent overwrite.

Owns :data:`SEFFI_OWNED` (the names a seffi command writes), :func:`prepare_run_folder` (command line:
refuse an earlier run unless ``--overwrite``), :func:`fresh_run_folder` / :func:`fresh_out_dir`
(callbacks: move to ``DIR-2``, ``DIR-3``, ... with one warning) and :func:`default_out_dir`.

Example:
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "run"
    >>> prepare_run_folder(d, overwrite=False) == d, holds_seffi_run(d)
    (True, False)
"""

from __future__ import annotations

import fnmatch
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
    "compare.md",
    "curves.png",
    "curves-*.png",
    ".seffi-write-test",
)


def _owned(name: str, owned: tuple[str, ...] = SEFFI_OWNED) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in owned)


def _owned_entries(path: Path, owned: tuple[str, ...] = SEFFI_OWNED) -> list[Path]:
    """The seffi-owned entries directly inside ``path`` (empty when it is not a readable folder)."""
    try:
        return sorted(p for p in path.iterdir() if _owned(p.name, owned))
    except OSError:
        return []


def holds_seffi_run(path: Path) -> bool:
    """True when the folder ``path`` holds files a seffi run writes (report.json, metrics.jsonl, ...).

    A missing path, a file, or a folder with only the user's own files is not a seffi run. The
    write-probe file alone (left by a crash between two system calls) does not count either.
    """
    path = Path(path)
    if not path.is_dir():
        return False
    return any(p.name != ".seffi-write-test" for p in _owned_entries(path))


def _remove(entry: Path) -> None:
    """Remove one seffi-owned entry; a symlink is unlinked, never followed."""
    if entry.is_symlink() or not entry.is_dir():
        entry.unlink()
    else:
        shutil.rmtree(entry)


def prepare_run_folder(path: Path, *, overwrite: bool, owned: tuple[str, ...] = SEFFI_OWNED) -> Path:
    """Create the run folder ``path`` (if needed) and prove it is writable, before any work starts.

    Args:
        path: The run folder (``--out``).
        overwrite: When the folder already holds a seffi run, remove that run's seffi-owned files and
            folders first (never anything else) instead of refusing.
        owned: The names that count as an earlier run's output (default :data:`SEFFI_OWNED`). A command
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
    earlier = [p for p in _owned_entries(path, owned) if p.name != ".seffi-write-test"]
    if earlier and not overwrite:
        names = ", ".join(p.name for p in earlier[:3]) + (", ..." if len(earlier) > 3 else "")
        raise RunFolderExists(
            f"{path} already holds a seffi run ({names}); pass --overwrite to replace it, "
            "or choose another folder"
        )
    probe = path / ".seffi-write-test"
    try:
        path.mkdir(parents=True, exist_ok=True)
        for entry in earlier:
            _remove(entry)
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise SeffiError(f"cannot write to {path}: {exc.strerror or exc}") from None
    return path


def fresh_run_folder(path: Path, *, nested: Sequence[str] = (), stacklevel: int = 2) -> Path:
    """``path``, or the first free ``path-2``, ``path-3``, ... when ``path`` already holds a seffi run.

    For library callers (a callback's ``out_dir``), which must neither stop training nor mix two runs
    in one folder (report.json overwritten, metrics.jsonl appended to with its step going backwards,
    old plots beside new ones). When another folder is used, one :class:`UserWarning` names it. The
    folder is not created here; the caller's sink creates it.

    Args:
        path: The folder asked for.
        nested: Sub-folders that also hold a run of this layout (the SB3 callback's ``stream``/``eval``
            in ``mode="both"``): a folder counts as taken when it or one of them holds a seffi run.
        stacklevel: Of the warning (2: the caller's line).

    Returns:
        The folder to write the run into: ``path`` itself, or a sibling that does not exist or holds
        no seffi run.
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
    """The folder a callback writes its run into: never one that already holds a seffi run.

    Args:
        out_dir: The user's folder (see :func:`fresh_run_folder`); ``None`` gives
            :func:`default_out_dir` (always fresh).
        prefix: Prefix of the default folder name.
        nested: See :func:`fresh_run_folder`.

    Returns:
        The folder to write into (not created here; the sinks create it).
    """
    if out_dir is None:
        return default_out_dir(prefix)
    return fresh_run_folder(Path(out_dir), nested=nested, stacklevel=4)

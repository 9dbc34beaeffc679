"""``examples/*.py --help``: works without extras and documents every field."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from seffi.experiment.example_args import extra_note, field_help, missing_modules, parse_args

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

#: Example file prefix -> (extra, the top-level module whose absence we simulate).
EXTRAS = {"sb3_": ("sb3", "stable_baselines3"), "rllib_": ("rllib", "ray"), "trl_": ("trl", "trl")}

#: Runs an example with some modules made unimportable (``sys.modules[name] = None`` is how Python
#: itself marks a blocked import), so the no-extras path is tested whatever this venv has installed.
BLOCKED_RUNNER = textwrap.dedent(
    """
    import runpy, sys
    blocked, path, *argv = sys.argv[1:]
    for name in filter(None, blocked.split(",")):
        sys.modules[name] = None
    sys.argv = [path, *argv]
    runpy.run_path(path, run_name="__main__")
    """
)


def _run(path: Path, *argv: str, blocked: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUNNER, blocked, str(path), *argv],
        cwd=cwd or ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _field_docs(path: Path) -> dict[str, str]:
    """Each ``Args`` field of an example file and its documentation, read straight from the source.

    Independent of ``field_help``: a trailing ``# comment`` or the string on the next line.
    """
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args")
    out = {}
    for i, node in enumerate(cls.body):
        if isinstance(node, ast.AnnAssign):
            line = lines[node.lineno - 1]
            nxt = cls.body[i + 1] if i + 1 < len(cls.body) else None
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                out[node.target.id] = " ".join(str(nxt.value.value).split())
            else:
                out[node.target.id] = line.split("#", 1)[1].strip() if "#" in line else ""
    return out


def _squash(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_help_shows_every_field_help(path: Path) -> None:
    """``--help`` shows every dataclass field's help text (RLlib and TRL included)."""
    proc = _run(path, "--help")
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = _squash(proc.stdout)
    docs = _field_docs(path)
    assert docs, f"{path.name} has no Args fields"
    for name, doc in docs.items():
        assert doc, f"{path.name}: field {name!r} has no comment or docstring to show in --help"
        assert f"--{name}" in shown
        assert _squash(doc) in shown, f"{path.name} --help lacks the help of {name!r}: {doc!r}"


@pytest.mark.parametrize(
    "path",
    [p for p in EXAMPLES if any(p.name.startswith(k) for k in EXTRAS)],
    ids=lambda p: p.name,
)
def test_help_without_extra_names_it(path: Path, tmp_path: Path) -> None:
    """Without the extra, ``--help`` prints one line naming it, then the help.

    The examples never die with ``ModuleNotFoundError`` at import; running one
    without its extra must also be one line and exit status 2, not a traceback.
    """
    extra, module = next(v for k, v in EXTRAS.items() if path.name.startswith(k))
    proc = _run(path, "--help", blocked=module)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    note = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(note) == 1 and f"'{extra}' extra" in note[0] and f".[{extra}]" in note[0], proc.stderr
    assert "--smoke" in proc.stdout and "usage:" in proc.stdout

    proc = _run(path, "--smoke", blocked=module, cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == note
    assert list(tmp_path.iterdir()) == []  # stopped before writing anything


def test_field_help_reads_comments_docstrings_and_metadata() -> None:
    """The shared parser's three ways to document a field, and a literal %."""

    @dataclass
    class Args:
        budget: int = 8  # K, 100% of the budget
        seed: int = 0
        """seed of
        everything"""
        lr: float = field(default=0.1, metadata={"help": "step size"})
        quiet: bool = False  # no output
        bare: int = 3

    assert field_help(Args) == {
        "budget": "K, 100% of the budget",
        "seed": "seed of everything",
        "lr": "step size",
        "quiet": "no output",
    }
    assert parse_args(Args, ["--budget", "4", "--quiet"]) == Args(budget=4, quiet=True)


def test_parse_args_with_missing_extra_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A missing extra is one line on stderr and exit status 2, found without importing."""

    @dataclass
    class Args:
        smoke: bool = False  # tiny

    assert missing_modules(["json", "seffi_no_such_module_xyz", "seffi_no_such_pkg.sub"]) == [
        "seffi_no_such_module_xyz",
        "seffi_no_such_pkg.sub",
    ]
    assert extra_note("sb3", ["json"]) is None
    with pytest.raises(SystemExit) as exc:
        parse_args(Args, ["--smoke"], extra="sb3", modules=("seffi_no_such_module_xyz",))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "this example needs the 'sb3' extra (missing: seffi_no_such_module_xyz): pip install -e '.[sb3]'\n"
    )

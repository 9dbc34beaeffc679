"""Every ```python block of every docs/*.md page runs.

A page's blocks run in order as one script (later blocks use names from earlier ones), in a fresh
Python process (a page may register a task or envs; that must not leak into other tests) with a
temporary working directory, offline W&B and the Agg backend. A block that needs an optional extra
is marked on the line above its fence::

    <!-- docs-test: requires stable_baselines3 sb3 -->

and is left out, with the reason, when the module is missing (CI's all-extras stage sets
SEFFI_REQUIRE_EXTRAS=1, which turns that into a failure, as for the integration tests).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REQUIRE_EXTRAS

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
#: The index and the guides; each must show runnable code.
GUIDES = ("index.md", "custom-env.md", "custom-task.md", "custom-llm.md", "plots.md", "wandb.md")

_MARKER = re.compile(r"<!--\s*docs-test:\s*requires\s+(\S+)\s+(\S+)\s*-->")
_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    """One fenced python block: its first code line (1-based), its code and an optional requirement."""

    line: int
    code: str
    requires: tuple[str, str] | None = None


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a markdown page, in order, with their ``docs-test`` markers."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i].strip())
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        start = i + 1
        j = start
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        if lang in ("python", "py"):
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            marker = _MARKER.search(prev)
            requires = (marker.group(1), marker.group(2)) if marker else None
            blocks.append(Block(start + 1, "\n".join(lines[start:j]), requires))
        i = j + 1
    return blocks


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def page_script(page: Path) -> tuple[str, list[str]]:
    """(the page's runnable code as one script, reasons for the blocks left out)."""
    parts, left_out = [], []
    for block in python_blocks(page.read_text(encoding="utf-8")):
        if block.requires and not _available(block.requires[0]):
            reason = (
                f"{page.name} line {block.line}: needs the '{block.requires[1]}' extra "
                f"(pip install -e '.[{block.requires[1]}]')"
            )
            if REQUIRE_EXTRAS:
                pytest.fail(reason, pytrace=False)
            left_out.append(reason)
            continue
        parts.append(f"# --- {page.name}, line {block.line}\n{block.code}\n")
    return "\n".join(parts), left_out


def test_block_extraction_and_markers() -> None:
    """The extractor finds python blocks only, in order, with their extra markers."""
    text = "\n".join(
        [
            "# t",
            "```bash",
            "pip install x",
            "```",
            "```python",
            "a = 1",
            "```",
            "<!-- docs-test: requires stable_baselines3 sb3 -->",
            "",
            "```python",
            "import stable_baselines3",
            "```",
            "````python",
            "s = '```'",
            "````",
        ]
    )
    blocks = python_blocks(text)
    assert [b.code for b in blocks] == ["a = 1", "import stable_baselines3", "s = '```'"]
    assert [b.line for b in blocks] == [6, 11, 14]
    assert [b.requires for b in blocks] == [None, ("stable_baselines3", "sb3"), None]


def test_every_guide_page_has_code() -> None:
    """The index and the five guide pages exist and each shows runnable python."""
    names = {p.name for p in PAGES}
    for name in GUIDES:
        assert name in names, f"docs/{name} is missing"
        assert python_blocks((ROOT / "docs" / name).read_text(encoding="utf-8")), f"docs/{name} has no python"


CODE_PAGES = [p for p in PAGES if python_blocks(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", CODE_PAGES, ids=[p.name for p in CODE_PAGES])
def test_page_code_runs(page: Path, tmp_path: Path) -> None:
    """Each docs page's python blocks run, in order, core-only unless marked."""
    script, left_out = page_script(page)
    if not script.strip():  # every block needs an extra this install lacks
        pytest.skip("; ".join(left_out))
    for reason in left_out:  # shown in pytest's warnings summary: a partly run page says so
        warnings.warn(f"not run: {reason}", stacklevel=1)
    env = {**os.environ, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"docs/{page.name} code failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )


def test_license_and_citation_match_pyproject() -> None:
    """LICENSE is MIT as pyproject says, and CITATION.cff (CFF 1.2.0) states its version."""
    import yaml

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # tomllib is 3.11+; 3.10 is supported
    project = {
        "version": re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1),
        "license": re.search(r"^license = \{ text = \"([^\"]+)\" \}", pyproject, re.M).group(1),
    }
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert project["license"] == "MIT"
    assert license_text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the seffi authors" in license_text
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert cff["version"] == project["version"]
    assert cff["license"] == "MIT"
    assert cff["authors"] == [{"name": "The seffi authors"}]
    assert str(cff["date-released"]) == "2026-12-01"
    assert cff["title"] and cff["message"]

"""Every source module stays small enough to read in one sitting (at most 600 lines)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600


def test_every_source_module_has_at_most_600_lines() -> None:
    files = [p for tree in ("seffi", "callbacks", "envs") for p in (ROOT / tree).rglob("*.py")]
    assert len(files) > 100  # the source trees were found
    lines = {str(p.relative_to(ROOT)): len(p.read_text("utf-8").splitlines()) for p in files}
    too_long = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert not too_long, too_long

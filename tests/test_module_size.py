"""A guard against runaway source files, not a shaping rule: no module beyond 1,500 lines.

Modules are split by concept: one module per thing it owns, as long as that thing needs. A tight line
cap shapes files instead: it pushes code that belongs together into parked helpers, mixins that
re-declare their host's attributes and layouts squeezed with ``# fmt: skip``. The limit here sits far
above any module that owns one concept (the largest are about 600 lines), so it only fires when a
file keeps growing by accretion, which is the moment to ask what the second concept in it is.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 1500


def test_no_source_module_runs_past_the_guard() -> None:
    files = [p for tree in ("seffi", "callbacks", "envs") for p in (ROOT / tree).rglob("*.py")]
    assert len(files) > 100  # the source trees were found
    lines = {str(p.relative_to(ROOT)): len(p.read_text("utf-8").splitlines()) for p in files}
    too_long = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert not too_long, too_long

"""The pages ``scripts/readme_numbers.py`` keeps in step, and the generated blocks on them.

A block is the region between ``<!-- readme-numbers:NAME -->`` and ``<!-- /readme-numbers:NAME -->``;
outside the blocks (and code), a page states no result (`stray_numbers`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: Any block, whole (group 1: its name).
BLOCK = re.compile(r"<!-- readme-numbers:([\w-]+) -->\n.*?<!-- /readme-numbers:\1 -->\n", re.DOTALL)
#: A result as the pages print one: three or more decimals, or a signed decimal.
MEASURED = re.compile(r"(?<![\w.])(?:[-+\u2212]\d+\.\d+|\d+\.\d{3,})(?![\w.])")
#: Decimals the prose may state: thresholds and bounds of the methods, not measurements.
CONSTANTS = {"0.001", "0.008"}


def pages() -> list[Path]:
    """README.md and every docs/*.md page."""
    return [README, *sorted(DOCS.glob("*.md"))]


def block_re(name: str) -> re.Pattern[str]:
    """The region of block ``name`` (group 1: its body, without the markers)."""
    return re.compile(
        rf"<!-- readme-numbers:{re.escape(name)} -->\n(.*?)<!-- /readme-numbers:{re.escape(name)} -->\n",
        re.DOTALL,
    )


def read_block(text: str, name: str) -> str:
    """The body of block ``name`` in ``text``.

    Raises:
        KeyError: the markers are missing or appear more than once.
    """
    found = block_re(name).findall(text)
    if len(found) != 1:
        raise KeyError(f"the page must hold exactly one readme-numbers:{name} block, found {len(found)}")
    return found[0]


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name``'s body replaced by ``body``."""
    read_block(text, name)
    start, end = f"<!-- readme-numbers:{name} -->\n", f"<!-- /readme-numbers:{name} -->\n"
    return block_re(name).sub(lambda _: start + body + end, text)


def block_names(text: str) -> list[str]:
    """The names of the blocks ``text`` opens, in order."""
    return re.findall(r"<!-- readme-numbers:([\w-]+) -->", text)


def _blank(match: re.Match[str]) -> str:
    """A matched region as as many empty lines (line numbers stay the page's)."""
    return "\n" * match.group(0).count("\n")


def stray_numbers(text: dict[Path, str], skip: Collection[Path] = ()) -> list[str]:
    """Results written by hand: measured-looking numbers outside every block and code span.

    Args:
        text: Page -> its text.
        skip: Pages with a checker of their own.
    """
    problems = []
    for page, body in text.items():
        if page in skip:
            continue
        prose = re.sub(r"```.*?```", _blank, BLOCK.sub(_blank, body), flags=re.DOTALL)
        for i, line in enumerate(prose.splitlines(), 1):
            found = [n for n in MEASURED.findall(re.sub(r"`[^`]*`", "", line)) if n not in CONSTANTS]
            if found:
                problems.append(f"{page.relative_to(ROOT)}:{i}: {', '.join(found)} outside a generated block")
    return problems

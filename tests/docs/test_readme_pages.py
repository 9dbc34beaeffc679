"""README.md and the docs pages: short, linked, about the software, and in the site's navigation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.docs.test_no_history import PHRASES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_readme_is_at_most_200_lines_and_keeps_the_ci_test_command() -> None:
    text = _text(README)
    assert len(text.splitlines()) <= 200
    section = text.split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    assert "\npip install -e '.[test]' && pytest\n" in section  # .ci/run runs this line verbatim


def test_readme_sections_come_in_the_order_a_researcher_needs() -> None:
    heads = re.findall(r"^## (.+)$", _text(README), flags=re.MULTILINE)
    order = ["Install", "Two commands", "Attach it to your loop", "Guides and reference", "Integrations"]
    assert [h for h in heads if h in order] == order
    assert heads[-1] == "Citing"
    assert _text(README).index("![") < _text(README).index("## Install")  # the figure comes first


def test_pages_say_nothing_about_how_or_when_they_were_built() -> None:
    hits = [
        f"{page.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}: {' '.join(m.group().split())}"
        for page in PAGES
        for text in [_text(page)]
        for m in PHRASES.finditer(text)
    ]
    extra = re.compile(r"\b(?:how it got here|before this|until this|at the previous)\b", re.IGNORECASE)
    hits += [f"{p.relative_to(ROOT)}: {m.group()}" for p in PAGES for m in extra.finditer(_text(p))]
    assert not hits, "\n".join(hits)


def test_the_scan_would_find_a_history_sentence() -> None:
    # built from pieces so that the history scan of the test files does not flag this file itself
    phrases = [" ".join(["as the earlier", "stops reported it"]), "took 61 s to" + "day"]
    assert all(PHRASES.search(p) for p in phrases)
    assert not PHRASES.search("a stop request, the latest release")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    missing = [
        target
        for target, _ in _LINK.findall(_text(page))
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_readme_links_every_guide() -> None:
    text = _text(README)
    guides = ["custom-env", "custom-llm", "custom-task", "plots", "wandb", "integrations", "statistics",
              "cli", "ladder", "lane", "performance", "architecture"]
    for name in guides:
        assert f"(docs/{name}.md)" in text, name


def test_every_docs_page_is_in_the_site_navigation() -> None:
    config = yaml.safe_load(_text(ROOT / "mkdocs.yml").replace("!!python", "#"))
    listed: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, str):
            listed.add(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config["nav"])
    pages = {p.name for p in PAGES if p != README}
    assert pages <= listed, sorted(pages - listed)


def test_index_code_blocks_fit_without_scrolling() -> None:
    inside, wide = False, []
    for number, line in enumerate(_text(ROOT / "docs" / "index.md").splitlines(), 1):
        if line.startswith("```"):
            inside = not inside
        elif inside and len(line) > 88:
            wide.append(number)
    assert not wide, f"docs/index.md code lines over 88 characters: {wide}"


def test_architecture_page_names_modules_that_exist() -> None:
    text = _text(ROOT / "docs" / "architecture.md")
    names = set()
    for base, group in re.findall(r"`(seffi(?:\.\w+)*)(?:\.\{([\w,]+)\})?`", text):
        names |= {f"{base}.{part}" for part in group.split(",")} if group else {base}
    assert len(names) > 15
    mapping = {"seffi.callbacks": "callbacks", "seffi.envs": "envs"}  # pyproject's package-dir
    missing = []
    for name in sorted(names):
        parts = name.split(".")
        top = ".".join(parts[:2])
        path = (ROOT / mapping.get(top, top.replace(".", "/"))).joinpath(*parts[2:])
        if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
            missing.append(name)
    assert not missing, missing

"""The documentation site renders the docstrings: strict build, no raw reST markup, each object once.

mkdocstrings renders Google-style docstrings as Markdown, so a Sphinx role (``:class:`Curves```)
shows verbatim on the page and a reST literal marker ("Typical use::") shows its two colons. The
fast check reads the strings (docstrings first) and comments of every package source (no build, no
extra needed); the site checks build the site with ``mkdocs build --strict`` into a temporary folder
(the ``docs`` extra) and read every HTML page it wrote.
"""

from __future__ import annotations

import html
import io
import os
import re
import subprocess
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]
#: The package sources, as mapped by ``[tool.setuptools] package-dir``: seffi.envs and seffi.callbacks
#: live in top-level folders.
PACKAGE = {"seffi": ROOT / "seffi", "seffi.envs": ROOT / "envs", "seffi.callbacks": ROOT / "callbacks"}
ROLES = ("meth", "class", "func", "attr", "data", "mod", "exc", "obj")
ROLE = re.compile(r":(?:{}):".format("|".join(ROLES)))
#: A reST literal-block marker: a line of prose ending in "::" (not "a::b" or a bare "::").
LITERAL_LINE = re.compile(r"[^\s:]::[ \t]*$", re.MULTILINE)
#: The same marker in HTML: a paragraph, list item or cell whose text ends in "::".
LITERAL_HTML = re.compile(r"[^\s:]::\s*</(?:p|li|dd|td|th)>")
HEADING = re.compile(r'<h\d id="(seffi(?:\.\w+)*)" class="doc doc-heading"')
_TEXT_TOKENS = {tokenize.STRING, tokenize.COMMENT} | {
    getattr(tokenize, name) for name in ("FSTRING_MIDDLE", "TSTRING_MIDDLE") if hasattr(tokenize, name)
}


def _sources() -> list[Path]:
    return sorted({p for folder in PACKAGE.values() for p in folder.rglob("*.py")})


def rest_markup(text: str) -> list[tuple[int, str]]:
    """(line, snippet) of every Sphinx role or literal marker in the strings and comments of ``text``."""
    if not ROLE.search(text) and "::" not in text:
        return []  # fast path: most files hold no candidate at all
    hits = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in _TEXT_TOKENS:
            continue
        for pattern in (ROLE, LITERAL_LINE):
            for m in pattern.finditer(tok.string):
                line = tok.start[0] + tok.string.count("\n", 0, m.start())
                start = tok.string.rfind("\n", 0, m.start()) + 1
                hits.append((line, tok.string[start : m.end() + 40].split("\n")[0].strip()))
    return sorted(hits)


def test_the_source_scan_finds_roles_and_literal_markers_in_docstrings_and_comments() -> None:
    text = (
        '"""Module.\n\nTypical use::\n\n    f()\n"""\n'
        "x = a[::2]  # see :data:`TAUS`\n"
        "def f():\n"
        '    """Call :meth:`Curves.gain`; ``a::b`` and a ``::`` stay."""\n'
    )
    assert [line for line, _ in rest_markup(text)] == [3, 7, 9]
    assert rest_markup('"""[`Curves`][seffi.coverage.Curves] and `gain`.\n\nExample:\n"""\n') == []


def test_package_docstrings_and_comments_are_markdown_not_rest() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{line}: {snippet}"
        for path in _sources()
        for line, snippet in rest_markup(path.read_text(encoding="utf-8"))
    ]
    assert not hits, f"{len(hits)} reST role(s) or literal marker(s) in docstrings/comments:\n" + "\n".join(
        hits
    )


def _page_text(page: str) -> str:
    """The page without scripts, styles and code blocks (a code block may show anything)."""
    return re.sub(r"<(script|style|pre)\b.*?</\1>", "", page, flags=re.DOTALL)


def page_markup(page: str) -> list[str]:
    """Snippets of the rendered text around every role or literal marker of an HTML page."""
    text = _page_text(page)
    out = []
    for pattern in (ROLE, LITERAL_HTML):
        for m in pattern.finditer(text):
            window = text[max(0, m.start() - 300) : m.start()] + "\0" + text[m.start() : m.end() + 300]
            clean = " ".join(html.unescape(re.sub(r"<[^>]+>", "", window)).split())
            at = clean.index("\0")
            out.append((clean[max(0, at - 50) : at] + clean[at + 1 : at + 61]).strip())
    return out


def test_the_page_scan_finds_roles_and_literal_markers_outside_code_blocks() -> None:
    page = (
        "<p>Build it with :meth:<code>from_probabilities</code>.</p><p>Public API::</p>"
        "<pre><code>ok = x[::2]  # :class:`kept` in a code block</code></pre>"
        "<p>Slices <code>a[::2]</code>.</p>"
    )
    hits = page_markup(page)
    assert len(hits) == 2
    assert "Build it with :meth:from_probabilities." in hits[0] and "Public API::" in hits[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The site built with ``mkdocs build --strict`` (pages are written before a strict abort)."""
    require("mkdocs", "docs")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return out, build


def _pages(out: Path) -> list[Path]:
    pages = sorted(out.rglob("*.html"))
    assert any("api" in p.relative_to(out).parts for p in pages), "the build wrote no API page"
    return pages


@pytest.mark.integration
def test_site_builds_with_strict(site) -> None:
    _, build = site
    warnings = [line for line in build.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert build.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(warnings or [build.stderr])


@pytest.mark.integration
def test_site_pages_show_no_rest_roles_or_literal_markers(site) -> None:
    out, _ = site
    pages = _pages(out)
    hits = [
        f"{page.relative_to(out)}: ...{snippet}"
        for page in pages
        for snippet in page_markup(page.read_text(encoding="utf-8"))
    ]
    assert not hits, f"{len(hits)} raw reST marker(s) on {len(pages)} pages:\n" + "\n".join(hits)


def _griffe_package(tmp: Path):
    """seffi loaded by griffe from the installed package layout (envs/ and callbacks/ mapped in)."""
    griffe = require("griffe", "docs")
    pkg = tmp / "seffi"
    pkg.mkdir()
    for entry in PACKAGE["seffi"].iterdir():
        if entry.name not in ("envs", "callbacks", "__pycache__"):
            (pkg / entry.name).symlink_to(entry)
    (pkg / "envs").symlink_to(PACKAGE["seffi.envs"])
    (pkg / "callbacks").symlink_to(PACKAGE["seffi.callbacks"])
    loader = griffe.GriffeLoader(search_paths=[str(tmp)])
    # try_relative_path=False: from the repository root "seffi" would otherwise be the folder there.
    loader.load("seffi", try_relative_path=False)
    loader.resolve_aliases(implicit=False, external=False)
    return loader.modules_collection


@pytest.mark.integration
def test_site_documents_each_object_once(site, tmp_path: Path) -> None:
    out, _ = site
    collection = _griffe_package(tmp_path)
    where: dict[str, list[str]] = defaultdict(list)
    for page in _pages(out):
        for anchor in HEADING.findall(page.read_text(encoding="utf-8")):
            try:
                canonical = collection[anchor].canonical_path  # a re-export's own definition
            except (KeyError, ValueError, AttributeError):
                canonical = anchor
            where[canonical].append(f"{anchor} ({page.relative_to(out).parent})")
    assert len(where) > 100, f"only {len(where)} documented objects found"
    twice = {path: places for path, places in where.items() if len(places) > 1}
    assert not twice, f"{len(twice)} object(s) documented more than once:\n" + "\n".join(
        f"{path}: {', '.join(places)}" for path, places in sorted(twice.items())
    )


#: Where an example section starts on a rendered page: a parsed Google ``Examples:`` section, or the
#: admonition griffe makes of a section title it does not parse (``Example:``), whose ``>>>`` lines
#: Markdown turns into nested blockquotes of prose.
EXAMPLE_START = re.compile(
    r'<span class="doc-section-title">Examples?:</span>'
    r'|<details class="examples?"|<div class="admonition examples?"'
)
#: Where such a section ends: the next section title, heading or documented object, or the admonition's end.
EXAMPLE_END = re.compile(r'<span class="doc-section-title">|<h\d\b|<div class="doc doc-object|</details>')


def example_sections(page: str) -> list[str]:
    """The HTML of every example section of a page, each up to where the next thing starts."""
    sections = []
    for m in EXAMPLE_START.finditer(page):
        end = EXAMPLE_END.search(page, m.end())
        sections.append(page[m.start() : end.end() if end else len(page)])
    return sections


def test_the_example_scan_tells_code_from_reflowed_prose() -> None:
    code = (
        '<p><span class="doc-section-title">Examples:</span></p><div class="highlight"><pre><code>'
        '&gt;&gt;&gt; f()</code></pre></div><p><span class="doc-section-title">Returns:</span></p>'
    )
    prose = '<details class="example" open><summary>Example</summary><blockquote><blockquote><p>f()</p>'
    prose += "</blockquote></blockquote></details><h3>next</h3><pre><code>other</code></pre>"
    (a,), (b,) = example_sections(code), example_sections(prose)
    assert "<pre>" in a and "Returns" not in a
    assert b.endswith("</details>") and "<pre>" not in b


@pytest.mark.integration
def test_site_api_examples_render_as_code_blocks(site) -> None:
    out, _ = site
    api = [p for p in _pages(out) if "api" in p.relative_to(out).parts]
    found = {p: example_sections(p.read_text(encoding="utf-8")) for p in api}
    assert sum(map(len, found.values())) >= 11  # the reference's docstring examples
    prose = [
        f"{p.relative_to(out)}: " + " ".join(html.unescape(re.sub(r"<[^>]+>", " ", s)).split())[:100]
        for p, sections in found.items()
        for s in sections
        if "<pre>" not in s and "<pre " not in s
    ]
    assert not prose, f"{len(prose)} example section(s) rendered as prose, not code:\n" + "\n".join(prose)

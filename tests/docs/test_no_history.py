"""Sources, tests and CLI help describe the software, never how or when it was built.

Every ``.py`` file under the package and tool folders is read: its comments, strings (docstrings,
messages) and the names of its functions and classes (``test_issue_11_case_3`` reads as
"test issue 11 case 3"). So is the ``--help`` of the ``seffi`` console script and of each of its
subcommands. None may say "this stop", "previous release", "today", "issue 11 case 3", ...
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("seffi", "callbacks", "envs", "tests", "benchmarks", "examples", "scripts")
#: Files whose pattern lists quote the phrases they look for: this one and the docs pages' scan.
SKIP = {Path(__file__).resolve(), ROOT / "tests" / "docs" / "test_readme_pages.py"}

_GAP = r"[\s#'\"]+"  # between two words: spaces, line breaks, a comment's '#', quotes of "a" "b"
#: Phrases about the project's own history, whole words, any case.
PHRASES = re.compile(
    "|".join(
        (
            rf"\b(?:this|last|previous|earlier){_GAP}stops?\b",
            rf"\bprevious{_GAP}releases?\b",
            rf"\bthis{_GAP}turn\b",
            r"\btoday\b",
            rf"\bthe{_GAP}issue'?s{_GAP}target\b",
            r"\bissues?[ -]#?\d+\b",  # "issue 11 case 3", "(issue 13)", "issue-13 case"
            r"\(issue\b",
        )
    ),
    re.IGNORECASE,
)
_TEXT = {tokenize.STRING, tokenize.COMMENT}
_BETWEEN = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def _words(name: str) -> str:
    """An identifier as words: ``test_issue_11`` -> "test issue 11", ``TestIssue11`` -> "Test Issue 11"."""
    return re.sub(r"(?<=[a-z])(?=[A-Z0-9])", " ", name).replace("_", " ")


def _segments(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each run of adjacent comments/strings, and of each def/class name."""
    out: list[tuple[int, str]] = []
    run: list[str] = []
    start = 0
    previous = ""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in _TEXT:
            if not run:
                start = tok.start[0]
            else:  # keep the line numbers: pad to the token's line
                run.append("\n" * (tok.start[0] - start - "".join(run).count("\n")) or " ")
            run.append(tok.string)
        elif tok.type not in _BETWEEN:
            if run:
                out.append((start, "".join(run)))
                run = []
            if tok.type == tokenize.NAME and previous in ("def", "class"):
                out.append((tok.start[0], _words(tok.string)))
        if tok.type not in _BETWEEN:
            previous = tok.string
    if run:
        out.append((start, "".join(run)))
    return out


def history_hits(text: str) -> list[tuple[int, str]]:
    """(line, phrase) of every history phrase in the comments, strings and def/class names of ``text``."""
    if not PHRASES.search(text) and not PHRASES.search(_words(text)):
        return []  # fast path: most files hold no candidate at all
    return [
        (line + segment[: m.start()].count("\n"), " ".join(m.group().split()))
        for line, segment in _segments(text)
        for m in PHRASES.finditer(segment)
    ]


def _sources() -> list[Path]:
    files = (p for folder in FOLDERS if (ROOT / folder).is_dir() for p in (ROOT / folder).rglob("*.py"))
    return sorted(p for p in files if p.resolve() not in SKIP)


def _report(hits: list[str]) -> str:
    return f"{len(hits)} sentence(s) about the project's history:\n" + "\n".join(hits)


def test_the_scanner_finds_phrases_in_comments_strings_and_names_but_not_in_code() -> None:
    text = (
        "def test_issue_11_case_3():\n"
        '    """Fixed at the previous\n    release."""\n'
        "    x = today()  # as this\n"
        "    # stop showed\n"
        "    return f'(issue 13)', 'last' 'stop'\n"
        "class TestIssue4: pass\n"
        "def stop_today_if_done(): pass\n"
    )
    assert history_hits(text) == [
        (1, "issue 11"),
        (2, "previous release"),
        (4, "this # stop"),
        (6, "(issue"),
        (6, "last' 'stop"),
        (7, "Issue 4"),
        (8, "today"),
    ]
    assert history_hits("stop = last_stop()  # a stop request, the latest release\n") == []


def test_sources_and_tests_say_nothing_about_how_or_when_they_were_built() -> None:
    files = _sources()
    assert len(files) > 100 and any(p.name == "__main__.py" for p in files)  # the tree was found
    hits = [
        f"{path.relative_to(ROOT)}:{line}: {phrase}"
        for path in files
        for line, phrase in history_hits(path.read_text(encoding="utf-8"))
    ]
    assert not hits, _report(hits)


def test_cli_help_says_nothing_about_how_or_when_it_was_built() -> None:
    # The console script as pyproject.toml wires it (tomllib is 3.11+; 3.10 is supported).
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    scripts = re.search(r"^\[project\.scripts\]\n(?:.*\n)*?seffi\s*=\s*\"([^\"]+)\"", pyproject, re.MULTILINE)
    assert scripts, "no seffi console script in pyproject.toml"
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    from readme_numbers import command_helps  # the walk over subcommands docs/cli.md is made with

    helps = command_helps(scripts.group(1), columns=1000)
    assert len(helps) >= 4 and "seffi run" in helps, sorted(helps)  # the subcommands were found
    for command, text in helps.items():
        assert text.startswith("usage: seffi"), (command, text[:200])
    hits = [
        f"`{command}` line {text[: m.start()].count(chr(10)) + 1}: {' '.join(m.group().split())}"
        for command, text in helps.items()
        for m in PHRASES.finditer(text)
    ]
    assert not hits, _report(hits)

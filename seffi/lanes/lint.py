"""The concept-pack linter: the anti-overfitting discipline of the lane, one problem per line.

Rules (each violation is one [`LintProblem`][seffi.lanes.LintProblem]):

* **Structure** — every concept parses (see `seffi.lanes.packs`); ids are unique.
* **Non-empty** — a curriculum and an expected-token list, the same length (one token per correction).
* **Real words** — each expected token is alphabetic word parts joined by single hyphens, not a
  stopword, and unique within its concept (case-insensitive).
* **One new token per correction** — walking the curriculum in order, the expected tokens found in
  correction ``i`` (case-insensitive, token-bounded — "bias" is not found in "biased") that no earlier
  correction contained must be exactly one. Zero means the correction teaches nothing scoreable; two
  or more is a compound correction that inflates the curve's slope. Every expected token must be
  introduced by some correction, and no correction may repeat an earlier one.
* **Fixed, non-leaking probe** — the probe is one non-empty string (structurally fixed for all
  snapshots) and contains *none* of the expected tokens. Decision: a probe that contains an answer
  token would score a hit at k = 0 for any learner that echoes the question, so the curve would no
  longer measure corrections.
* **Reviewable** — no correction trips the identity-override review (it would be rejected, not taught).
* **Disjoint splits** — no public and holdout concept share an id, a probe (compared
  whitespace/case-insensitively), an expected-token set, or a correction. Probes are also unique
  across the whole pack.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from seffi.lanes._text import STOPWORDS, is_real_word, token_set
from seffi.lanes.learners import identity_override
from seffi.lanes.packs import Concept, concept_label, parse_pack, read_pack_data


class LintProblem(BaseModel):
    """One discipline violation; ``concept`` is ``None`` for pack-level problems."""

    model_config = ConfigDict(frozen=True)

    concept: str | None
    message: str

    def __str__(self) -> str:
        return self.message if self.concept is None else f"concept {self.concept!r}: {self.message}"


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def lint_concept(concept: Concept) -> list[str]:
    """The problems of one parsed concept (messages without the concept prefix)."""
    problems: list[str] = []
    tokens = [t.casefold() for t in concept.expected_tokens]
    # Distinct tokens in first-seen order: every message lists tokens in this order. The per-correction
    # work below is set intersection, so a concept costs O(its text), not O(corrections x tokens).
    order = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    if not concept.curriculum:
        problems.append("empty curriculum")
    if not tokens:
        problems.append("no expected tokens")
    for tok in concept.expected_tokens:
        if not is_real_word(tok):
            problems.append(f"expected token {tok!r} is not a real word (letters, optionally hyphenated)")
        elif tok.casefold() in STOPWORDS:
            problems.append(f"expected token {tok!r} is a stopword")
    duplicates = sorted(t for t, n in Counter(tokens).items() if n > 1)
    if duplicates:
        problems.append(f"duplicate expected tokens {duplicates}")
    if concept.curriculum and tokens and len(concept.curriculum) != len(order):
        problems.append(
            f"{len(concept.curriculum)} corrections but {len(order)} expected tokens "
            "(each correction must introduce exactly one)"
        )
    if not concept.probe.strip():
        problems.append("empty probe")
    leaked = sorted(order.keys() & token_set(concept.probe), key=order.__getitem__)
    if leaked:
        problems.append(f"probe leaks expected tokens {leaked}")
    remaining = set(order)
    seen: dict[str, int] = {}
    for i, correction in enumerate(concept.curriculum):
        if _norm(correction) in seen:
            problems.append(f"correction {i} repeats correction {seen[_norm(correction)]}")
        seen.setdefault(_norm(correction), i)
        new = sorted(remaining & token_set(correction), key=order.__getitem__)
        if not new:
            problems.append(f"correction {i} introduces no new expected token")
        elif len(new) > 1:
            problems.append(f"correction {i} is compound: introduces {len(new)} new expected tokens {new}")
        remaining.difference_update(new)
        pattern = identity_override(correction)
        if pattern is not None:
            problems.append(f"correction {i} would be rejected by review (identity override {pattern!r})")
    never = sorted(remaining, key=order.__getitem__)
    if concept.curriculum and never:
        problems.append(f"expected tokens never introduced by the curriculum {never}")
    return problems


def _disjointness(concepts: list[Concept]) -> list[LintProblem]:
    """Split-disjointness and probe uniqueness, through hash indexes over the public concepts.

    Comparing every holdout concept with every public one made a 10k-concept pack take minutes; the
    indexes make the cost linear in the pack plus the number of overlaps found. Problems come out in
    the same order as the pairwise definition: holdout concepts in pack order, each with its
    overlapping public concepts in pack order.
    """
    problems: list[LintProblem] = []
    public = [c for c in concepts if c.split == "public"]
    holdout = [c for c in concepts if c.split == "holdout"]
    by_probe: dict[str, list[int]] = defaultdict(list)
    by_tokens: dict[frozenset[str], list[int]] = defaultdict(list)
    by_correction: dict[str, list[int]] = defaultdict(list)
    for index, p in enumerate(public):
        by_probe[_norm(p.probe)].append(index)
        by_tokens[frozenset(t.casefold() for t in p.expected_tokens)].append(index)
        for correction in {_norm(c) for c in p.curriculum}:
            by_correction[correction].append(index)
    for h in holdout:
        same_probe = set(by_probe.get(_norm(h.probe), ()))
        same_tokens = set(by_tokens.get(frozenset(t.casefold() for t in h.expected_tokens), ()))
        common: Counter[int] = Counter()
        for correction in {_norm(c) for c in h.curriculum}:
            common.update(by_correction.get(correction, ()))
        for index in sorted(same_probe | same_tokens | common.keys()):
            shared: list[str] = []
            if index in same_probe:
                shared.append("its probe")
            if index in same_tokens:
                shared.append("its expected-token set")
            if common[index]:
                shared.append(f"{common[index]} correction(s)")
            message = f"holdout overlaps public concept {public[index].id!r}: shares {', '.join(shared)}"
            problems.append(LintProblem(concept=h.id, message=message))
    first_with_probe: dict[str, Concept] = {}
    for c in concepts:
        other = first_with_probe.setdefault(_norm(c.probe), c)
        if other.id != c.id and c.split == other.split:
            problems.append(LintProblem(concept=c.id, message=f"same probe as concept {other.id!r}"))
    return problems


def lint_pack(source: str | Path | Mapping[str, Any]) -> list[LintProblem]:
    """Lint a pack file or raw pack mapping; an empty list means clean.

    Raises:
        SeffiError: the file cannot be read or is not a JSON object with the pack fields.
    """
    data, label = read_pack_data(source)
    pack, load_errors = parse_pack(data, label)
    problems = [LintProblem(concept=e.concept, message=e.problem) for e in load_errors]
    raw = data.get("concepts", [])
    ids = [concept_label(r, i) for i, r in enumerate(raw)]
    # An id used by a public and a holdout concept is a split-disjointness violation, not just a dup.
    splits_of: dict[Any, set[Any]] = defaultdict(set)
    for r in raw:
        if isinstance(r, Mapping) and isinstance(r.get("id"), str):
            splits_of[r["id"]].add(r.get("split"))
    for e in load_errors:
        if e.problem == "duplicate concept id":
            if {"public", "holdout"} <= splits_of[e.concept]:
                problems.append(LintProblem(concept=e.concept, message="id used in both public and holdout"))
    for concept in pack.concepts:
        problems.extend(LintProblem(concept=concept.id, message=m) for m in lint_concept(concept))
    problems.extend(_disjointness(list(pack.concepts)))
    if not ids:
        problems.append(LintProblem(concept=None, message=f"pack {label} has no concepts"))
    return problems

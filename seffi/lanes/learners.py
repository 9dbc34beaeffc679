"""Learners: the deterministic reference vault learner and an adapter for text-generation callables.

Both share [`review_correction`][seffi.lanes.review_correction], the teaching review: a correction is accepted
when it is a non-empty proposition and does not try to override the learner's identity or instructions.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from seffi.lanes._text import content_tokens
from seffi.lanes.sample_efficiency import ProbeResponse, TeachOutcome

#: Identity-override phrasings the review rejects (name, case-insensitive regex). They target the
#: learner itself ("you are now ...") or its instructions ("ignore previous ..."), which no
#: proposition about a concept needs to do. Matching is on whole words with flexible whitespace.
IDENTITY_OVERRIDE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("you are now", r"\byou\s+are\s+now\b"),
    ("you're now", r"\byou['’]re\s+now\b"),
    ("you are no longer", r"\byou\s+are\s+no\s+longer\b"),
    ("from now on you are/will", r"\bfrom\s+now\s+on\b[\s,]*you\s+(?:are|will|must|shall|should)\b"),
    (
        "ignore previous/prior/all instructions",
        r"\bignore\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+|my\s+)?"
        r"(?:previous|prior|earlier|above|preceding|all|instructions|rules|guidelines|system)\b",
    ),
    (
        "disregard previous instructions",
        r"\bdisregard\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+|my\s+)?"
        r"(?:previous|prior|earlier|above|preceding|instructions|rules|guidelines|system)\b",
    ),
    (
        "forget your instructions",
        r"\bforget\s+(?:all\s+|everything\b|(?:all\s+)?(?:of\s+)?(?:your|the)\s+"
        r"(?:previous\s+|prior\s+)?(?:instructions|rules|guidelines|training|identity|persona|prompt))",
    ),
    (
        "your new name/identity/role is",
        r"\byour\s+(?:new\s+|real\s+|true\s+)?(?:name|identity|role|persona)\s+is\b",
    ),
    ("pretend to be", r"\bpretend\s+(?:to\s+be|you\s+are|that\s+you\s+are)\b"),
    ("act as if you", r"\bact\s+as\s+(?:if|though)\s+you\b"),
    ("override your", r"\boverride\s+(?:your|the\s+system)\b"),
    ("new system prompt", r"\b(?:new|updated|replacement)\s+system\s+prompt\b"),
)
_COMPILED = tuple((name, re.compile(rx, re.IGNORECASE)) for name, rx in IDENTITY_OVERRIDE_PATTERNS)
# One pass over the text answers "any pattern?" for the common, clean case (the linter reviews every
# correction of a pack); only a hit pays for finding which pattern comes first in the list.
_ANY = re.compile("|".join(f"(?:{rx})" for _, rx in IDENTITY_OVERRIDE_PATTERNS), re.IGNORECASE)


def identity_override(text: str) -> str | None:
    """The name of the first identity-override pattern ``text`` matches, or ``None``."""
    if _ANY.search(text) is None:
        return None
    return next((name for name, rx in _COMPILED if rx.search(text)), None)


def review_correction(correction: str) -> TeachOutcome:
    """The teaching review: reject empty corrections and identity overrides, accept the rest."""
    if not isinstance(correction, str) or not content_tokens(correction):
        return TeachOutcome(accepted=False, reason="empty: a correction must state a proposition")
    pattern = identity_override(correction)
    if pattern is not None:
        return TeachOutcome(accepted=False, reason=f"identity override: {pattern!r}")
    return TeachOutcome(accepted=True, reason=None)


def _keep_reviewed(
    review: Callable[[str], TeachOutcome] | None, correction: str, kept: list[str]
) -> TeachOutcome:
    """Review ``correction`` (``review=None`` accepts it) and append it to ``kept`` when accepted."""
    outcome = review(correction) if review is not None else TeachOutcome(accepted=True)
    if outcome.accepted:
        kept.append(correction)
    return outcome


class VaultLearner:
    """A deterministic learner that stores reviewed propositions and answers by retrieval.

    ``teach`` runs [`review_correction`][seffi.lanes.review_correction] and stores accepted propositions
    (exact duplicates are rejected so a repeated correction cannot inflate retrieval). ``probe`` ranks stored
    propositions by the number of content tokens shared with the question (ties: older first), puts the best
    ``top_k`` in ``surface`` (``vault_hits`` = how many), then walks associations — propositions sharing
    at least one content token with a reached one — for ``walk_depth`` hops into ``walk_surface``.
    No randomness, no global state: two fresh instances taught the same corrections answer the same.

    Args:
        top_k: maximum number of propositions retrieved directly.
        walk_depth: association hops from the retrieved propositions (0 = no walk).
    """

    def __init__(self, top_k: int = 3, walk_depth: int = 2) -> None:
        if top_k < 1 or walk_depth < 0:
            raise ValueError("top_k must be >= 1 and walk_depth >= 0")
        self.top_k = top_k
        self.walk_depth = walk_depth
        self._texts: list[str] = []
        self._tokens: list[frozenset[str]] = []

    def teach(self, correction: str) -> TeachOutcome:
        outcome = review_correction(correction)
        if not outcome.accepted:
            return outcome
        normalized = " ".join(correction.split())
        if normalized.casefold() in (t.casefold() for t in self._texts):
            return TeachOutcome(accepted=False, reason="duplicate of a stored proposition")
        self._texts.append(normalized)
        self._tokens.append(content_tokens(normalized))
        return outcome

    def probe(self, question: str) -> ProbeResponse:
        query = content_tokens(question)
        scored = [(len(query & toks), i) for i, toks in enumerate(self._tokens)]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        retrieved = [i for _, i in ranked[: self.top_k]]
        reached = set(retrieved)
        frontier = list(retrieved)
        walked: list[int] = []
        for _ in range(self.walk_depth):
            nxt = [
                j
                for j in range(len(self._texts))
                if j not in reached and any(self._tokens[j] & self._tokens[i] for i in frontier)
            ]
            if not nxt:
                break
            reached.update(nxt)
            walked.extend(nxt)
            frontier = nxt
        surface = " ".join(self._texts[i] for i in retrieved) or "No stored proposition matches."
        return ProbeResponse(
            surface=surface,
            walk_surface=" ".join(self._texts[j] for j in walked),
            vault_hits=len(retrieved),
        )


class RecallLearner:
    """The recall control: repeats every correction it was taught, verbatim, as its answer.

    It understands nothing: its probe answer is every accepted correction joined (the question is
    ignored). Under the lane's token-hit metric it still saturates every linted concept after its last
    correction (each correction introduces one expected token), so its curve is what *pure recall*
    scores; the lane report draws it beside the learner's curve. A learner at or below this curve has
    shown nothing beyond recall.

    Args:
        review: the teaching review (default [`review_correction`][seffi.lanes.review_correction]); ``None``
            accepts everything.
    """

    def __init__(self, review: Callable[[str], TeachOutcome] | None = review_correction) -> None:
        self.review = review
        self.taught: list[str] = []

    def teach(self, correction: str) -> TeachOutcome:
        return _keep_reviewed(self.review, correction, self.taught)

    def probe(self, question: str) -> ProbeResponse:
        return ProbeResponse(surface=" ".join(self.taught), vault_hits=len(self.taught))


#: Prompt used by `TextGenerationLearner`; ``{facts}`` is one "- correction" line per
#: accepted correction (or "(none)"), ``{question}`` the probe.
DEFAULT_TEMPLATE = (
    "You have been taught the following facts:\n{facts}\n\n"
    "Answer the question using these facts.\nQuestion: {question}\nAnswer:"
)


class TextGenerationLearner:
    """Turn any text-generation callable (prompt -> text) into a learner.

    Accepted corrections are kept in context and rendered into the prompt at probe time (the
    in-context-learning baseline for an LLM). ``vault_hits`` is the number of corrections in the
    prompt: the context is this learner's vault and all of it is "retrieved". Determinism is the
    callable's business (e.g. greedy decoding); the lane's replay gate measures it.

    Args:
        generate: ``prompt -> completion``; e.g. ``lambda p: pipe(p, do_sample=False)[0]["generated_text"]``.
        review: the teaching review (default [`review_correction`][seffi.lanes.review_correction]); ``None``
            accepts everything.
        template: prompt template with ``{facts}`` and ``{question}`` fields.
    """

    def __init__(
        self,
        generate: Callable[[str], str],
        *,
        review: Callable[[str], TeachOutcome] | None = review_correction,
        template: str = DEFAULT_TEMPLATE,
    ) -> None:
        self.generate = generate
        self.review = review
        self.template = template
        self.context: list[str] = []

    def teach(self, correction: str) -> TeachOutcome:
        return _keep_reviewed(self.review, correction, self.context)

    def prompt(self, question: str) -> str:
        """The exact prompt sent to ``generate`` for ``question``."""
        facts = "\n".join(f"- {c}" for c in self.context) or "(none)"
        return self.template.format(facts=facts, question=question)

    def probe(self, question: str) -> ProbeResponse:
        text = self.generate(self.prompt(question))
        if not isinstance(text, str):
            raise TypeError(f"generate() returned {type(text).__name__}, expected str")
        return ProbeResponse(surface=text, vault_hits=len(self.context))


def text_generation_factory(
    generate: Callable[[str], str], **kwargs: object
) -> Callable[[], TextGenerationLearner]:
    """A zero-argument factory of fresh `TextGenerationLearner` objects sharing ``generate``."""

    def factory() -> TextGenerationLearner:
        return TextGenerationLearner(generate, **kwargs)  # type: ignore[arg-type]

    return factory

"""Text primitives shared by the lane: one tokenizer, one stopword list.

Hit counting, the linter and the reference learner must agree on what a "token" is, otherwise a
linted pack could still be unscorable. A token is a maximal run of letters/digits, optionally joined
by single hyphens ("off-policy" is one token, "off policy" is two), compared after ``casefold()``.
"Token-bounded" therefore means: ``bias`` is found in "the bias term" and "BIAS." but not in
"biased" or "bias-variance".
"""

from __future__ import annotations

import re

_TOKEN_RE = re.compile(r"[^\W_]+(?:-[^\W_]+)*")

#: Function words: never an expected token (trivially hit) and ignored by the reference learner's
#: retrieval (otherwise every proposition would match every question through "the").
STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each either few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself just
    let me might more most must my myself no nor not now of off on once one only or other our ours
    ourselves out over own same shall she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up upon very was we were
    what when where which while who whom why will with within without would yes yet you your yours
    yourself yourselves s t don isn aren doesn
    """.split()
)


def tokenize(text: str) -> list[str]:
    """The casefolded tokens of ``text``, in order (duplicates kept)."""
    return _TOKEN_RE.findall(text.casefold())


def token_set(*texts: str) -> frozenset[str]:
    """The set of casefolded tokens over all ``texts``."""
    out: set[str] = set()
    for text in texts:
        out.update(tokenize(text))
    return frozenset(out)


def content_tokens(text: str) -> frozenset[str]:
    """Tokens of ``text`` that carry content: not stopwords and longer than one character."""
    return frozenset(t for t in tokenize(text) if t not in STOPWORDS and len(t) > 1)


def is_real_word(token: str) -> bool:
    """Alphabetic word parts joined by single hyphens ("coverage", "off-policy"); no digits, no spaces."""
    parts = token.split("-")
    return bool(token) and all(part.isalpha() for part in parts)


def count_token_hits(expected_tokens: list[str] | tuple[str, ...], *texts: str) -> int:
    """Number of distinct expected tokens found (case-insensitive, token-bounded) in any of ``texts``."""
    present = token_set(*texts)
    return sum(1 for tok in {t.casefold() for t in expected_tokens} if tok in present)

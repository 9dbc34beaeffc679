r"""Labelers: who decides which strategies a generated text followed.

A built-in task parses its traces (``task.validate_y_text``); free-form text needs a rubric of regular
expressions or a user function. A [`Labeler`][seffi.labelers.Labeler] is either behind one interface.
It returns a [`ValidationResult`][seffi.tasks.ValidationResult] and **never raises** on the text: junk
and user-function exceptions come back as ``parse_ok=False`` with a reason.

Examples:
    >>> rubric = RegexRubric({"recursion": r"\bdef (\w+)\(.*\n.*\1\(", "loop": r"\bfor\b|\bwhile\b"})
    >>> sorted(rubric(None, "def f(n):\n    return f(n - 1)").strategy_matches)
    ['recursion']
    >>> rubric(None, b"\xff\xfe").error
    'bytes are not valid UTF-8'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from seffi.tasks.base import Task, ValidationResult, coerce_text

__all__ = ["CallableLabeler", "Labeler", "RegexRubric", "TaskLabeler", "as_labeler", "coerce_text"]


@runtime_checkable
class Labeler(Protocol):
    """Attributes a generated text to strategies (``strategies``: the declared ids, M of them)."""

    strategies: tuple[str, ...]

    def __call__(self, x: Any, y_text: Any) -> ValidationResult:
        """Label ``y_text`` generated for input ``x``. Must never raise."""
        ...


def judge_validity(
    matches: frozenset[str],
    valid: re.Pattern[str] | Callable[[Any, str], Any] | None,
    x: Any,
    text: str,
    who: str,
) -> ValidationResult:
    """``matches``, correct or invalid as ``valid`` (a regex, ``valid(x, text)`` or None) decides."""
    if valid is None:
        return ValidationResult.correct(matches)
    try:
        ok = bool(valid.search(text)) if isinstance(valid, re.Pattern) else bool(valid(x, text))
    except Exception as exc:  # a user validity check must not crash training
        return ValidationResult.invalid(f"valid check raised {type(exc).__name__}: {exc}", matches)
    return ValidationResult.correct(matches) if ok else ValidationResult.invalid(f"{who}: not valid", matches)


def _declared(strategies: Iterable[str], what: str) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(str(s) for s in strategies))
    if not out:
        raise ValueError(f"{what} needs at least one strategy id")
    return out


class TaskLabeler:
    """The default labeler: a seffi task's own parser, ``task.validate_y_text``."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.strategies: tuple[str, ...] = tuple(task.strategies())

    def __call__(self, x: Any, y_text: Any) -> ValidationResult:
        return self.task.validate_y_text(x, y_text)


class RegexRubric:
    """A rubric of regular expressions: strategy ``s`` matched iff its pattern is found in the text.

    Args:
        patterns: ``{strategy id: regex}`` (strings compiled with ``flags``); every key is declared.
        valid: Optional regex (or ``callable(x, text) -> bool``) deciding correctness (default:
            every parseable text is valid).
        flags: ``re`` flags for string patterns.
    """

    def __init__(
        self,
        patterns: Mapping[str, str | re.Pattern[str]],
        *,
        valid: str | re.Pattern[str] | Callable[[Any, str], bool] | None = None,
        flags: int = re.MULTILINE,
    ) -> None:
        if not isinstance(patterns, Mapping):
            raise ValueError(
                f"patterns must be a mapping of strategy id -> regex, got {type(patterns).__name__}"
            )
        self.strategies = _declared(patterns, "RegexRubric")
        self._patterns = {
            str(sid): self._compile(pat, flags, f"pattern of strategy {sid!r}")
            for sid, pat in patterns.items()
        }
        self._valid = (
            valid if valid is None or callable(valid) else self._compile(valid, flags, "valid pattern")
        )

    @staticmethod
    def _compile(pattern: str | re.Pattern[str], flags: int, what: str) -> re.Pattern[str]:
        if not isinstance(pattern, str | re.Pattern):
            raise ValueError(f"the {what} must be a regex string, got {type(pattern).__name__}")
        try:
            return pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, flags)
        except re.error as exc:
            raise ValueError(f"the {what} does not compile: {exc}") from exc

    def __call__(self, x: Any, y_text: Any) -> ValidationResult:
        """Strategies whose pattern occurs in ``y_text``; junk is ``parse_ok=False``."""
        text, reason = coerce_text(y_text)
        if text is None:
            return ValidationResult.unparsable(reason)
        matches = frozenset(s for s, p in self._patterns.items() if p.search(text))
        return judge_validity(matches, self._valid, x, text, "rubric")


class CallableLabeler:
    """Any user function ``fn(x, text)`` as a labeler, over the declared ``strategies``.

    ``fn`` gets usable text only and returns strategy ids (valid), a ``(strategy_ids, valid)`` pair
    or a [`ValidationResult`][seffi.tasks.ValidationResult]. Undeclared ids are dropped and named in
    ``error``; an exception inside ``fn`` becomes ``parse_ok=False`` with its message.
    """

    def __init__(self, fn: Callable[[Any, str], Any], strategies: Iterable[str]) -> None:
        if not callable(fn):
            raise ValueError(f"labeler must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.strategies = _declared(strategies, "CallableLabeler")
        self._known = frozenset(self.strategies)

    def __call__(self, x: Any, y_text: Any) -> ValidationResult:
        text, reason = coerce_text(y_text)
        if text is None:
            return ValidationResult.unparsable(reason)
        try:
            result = self.fn(x, text)
            if not isinstance(result, ValidationResult):
                valid = True
                if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], bool):
                    result, valid = result
                # one id is not an iterable of characters
                ids = frozenset(map(str, (result,) if isinstance(result, str | bytes) else result))
                result = (
                    ValidationResult.correct(ids)
                    if valid
                    else ValidationResult.invalid("labeler: not valid", ids)
                )
        except Exception as exc:  # user code must not crash a training loop
            return ValidationResult.unparsable(f"labeler raised {type(exc).__name__}: {exc}")
        unknown = result.strategy_matches - self._known
        if not unknown:
            return result
        note = f"labeler returned undeclared strategy ids {sorted(unknown)} (dropped)"
        kept = result.strategy_matches & self._known  # unparsable results have no matches: returned above
        if result.valid:
            return ValidationResult(parse_ok=True, valid=True, strategy_matches=kept, error=note)
        return ValidationResult.invalid(f"{result.error}; {note}" if result.error else note, kept)


def as_labeler(obj: Any, strategies: Iterable[str] | None = None) -> Labeler:
    """A [`Labeler`][seffi.labelers.Labeler] from a task, a labeler, a ``{id: regex}`` rubric or a callable.

    A callable ``fn(x, text)`` needs the declared ``strategies``.
    """
    if isinstance(obj, Task):
        return TaskLabeler(obj)
    if isinstance(obj, Mapping):
        return RegexRubric(obj)
    if isinstance(obj, Labeler):  # seffi's labelers, or a user class with .strategies and __call__
        return obj
    if callable(obj):
        if strategies is None:
            raise ValueError("a labeling function needs the declared strategy ids: pass strategies=[...]")
        return CallableLabeler(obj, strategies)
    raise ValueError(
        f"cannot label with {type(obj).__name__}: pass a seffi Task, a Labeler, a mapping of "
        "strategy id -> regex, or a callable fn(x, text) with strategies=[...]"
    )

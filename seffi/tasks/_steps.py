"""The step-trace scheme every built-in task follows, implemented once.

Step lines parse into canonical steps, which are simulated; a solving list matches the strategies
whose reference steps it equals, and the answer is checked last (a wrong one keeps the matches).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, TypeVar

import numpy as np

from seffi.tasks.base import Task, TaskConfig, TaskInput, ValidationResult

Step = tuple[Any, ...]
Answer = tuple[Any, ...]

#: Longest integer word accepted; longer digit strings are malformed (and would be slow to convert).
MAX_INT_CHARS = 6
#: Rejection-sampling attempts for one acceptable input before the config is declared degenerate.
MAX_DRAWS = 2000

X = TypeVar("X", bound=TaskInput)
C = TypeVar("C", bound=TaskConfig)


def parse_int(word: str) -> int | None:
    """A non-negative ASCII integer word (at most ``MAX_INT_CHARS`` digits), else ``None``."""
    # ASCII: str.isdigit alone accepts superscripts and other scripts' digits that int rejects.
    if 0 < len(word) <= MAX_INT_CHARS and word.isascii() and word.isdigit():
        return int(word)
    return None


def parse_ints(words: list[str], n: int) -> tuple[int, ...] | None:
    """Exactly ``n`` integer words, else ``None``."""
    if len(words) != n:
        return None
    values = tuple(map(parse_int, words))
    return None if None in values else values  # type: ignore[return-value]


def parse_command(words: list[str], keyword: str, n: int) -> Step | None:
    """The step ``(keyword, *ints)`` of a line ``keyword <int> ...`` of exactly ``n`` integers, else None."""
    values = parse_ints(words[1:], n) if words[:1] == [keyword] else None
    return None if values is None else (keyword, *values)


def render_words(items: tuple[Any, ...]) -> str:
    return " ".join(str(w) for w in items)


def render_trace(steps: list[Step], answer: Answer) -> str:
    """The canonical trace text: one line per step, then ``answer ...``."""
    return "\n".join([*(render_words(s) for s in steps), render_words(("answer", *answer))])


class StepTask(Task[X, C]):
    """A task whose traces are canonical step lines plus an answer line (see the module docstring).

    Subclasses declare ``strategy_names`` and the ``step_format`` / ``answer_format`` of parse errors.
    The default step line is ``command``, ``(keyword, number of integers)``, and the default answer one
    integer, the number of steps.
    """

    strategy_names: ClassVar[tuple[str, ...]]
    command: ClassVar[tuple[str, int]]
    step_format: ClassVar[str]
    answer_format: ClassVar[str]
    #: An input is redrawn unless at least this many strategies are feasible on it.
    min_feasible: ClassVar[int] = 2

    def __init__(self, config: C | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self._steps_cache: dict[tuple[str, str], list[Step] | None] = {}
        self._off_cache: dict[str, list[list[Step]]] = {}

    @abc.abstractmethod
    def _draw(self, rng: np.random.Generator) -> dict[str, Any]:
        """Candidate fields of one input (``_generate`` redraws until the input is acceptable)."""

    @abc.abstractmethod
    def _strategy_steps(self, x: X, strategy: str) -> list[Step] | None:
        """The canonical steps of ``strategy`` on ``x``; ``None`` when it has no valid trace."""

    def strategies(self) -> tuple[str, ...]:
        return self.strategy_names

    def _parse_step(self, x: X, words: list[str]) -> Step | None:
        return parse_command(words, *self.command)

    @abc.abstractmethod
    def _check(self, x: X, steps: list[Step]) -> str | None:
        """``None`` when every step is legal and solves ``x``, else why not."""

    def _answer(self, x: X, steps: list[Step]) -> Answer:
        return (len(steps),)

    def _parse_answer(self, x: X, words: list[str]) -> Answer | None:
        return parse_ints(words, 1)

    @abc.abstractmethod
    def _wrong_answer(self, x: X, steps: list[Step], rng: np.random.Generator) -> Answer:
        """A well-formed answer other than ``_answer(x, steps)``."""

    @abc.abstractmethod
    def _max_steps(self, x: X) -> int:
        """More step lines than this make a trace unparsable."""

    @abc.abstractmethod
    def _off_candidates(self, x: X) -> list[list[Step]]:
        """Correct step lists, most following no strategy (references are filtered out here)."""

    def steps(self, x: X, strategy: str) -> list[Step] | None:
        """Cached ``_strategy_steps``."""
        return self._cached(self._steps_cache, x, strategy, self._strategy_steps)

    def off_strategy_steps(self, x: X) -> list[list[Step]]:
        """Correct step lists of ``x`` that are no strategy's reference (cached)."""
        if x.id not in self._off_cache:
            refs = [s for s in (self.steps(x, k) for k in self.strategies()) if s is not None]
            self._off_cache[x.id] = [
                c for c in self._off_candidates(x) if c not in refs and self._check(x, c) is None
            ]
        return self._off_cache[x.id]

    def _generate(self, rng: np.random.Generator) -> dict[str, Any]:
        for _ in range(MAX_DRAWS):
            fields = self._draw(rng)
            x = self.make_input(**fields)
            if len(self.feasible_strategies(x)) >= self.min_feasible and self.off_strategy_steps(x):
                return fields
        raise ValueError(f"{self.name}: no acceptable input in {MAX_DRAWS} draws under {self.config!r}")

    def solve(self, x: X, strategy: str) -> str | None:
        steps = self.steps(x, strategy)
        return None if steps is None else render_trace(steps, self._answer(x, steps))

    def invalid_trace(self, x: X, strategy: str, rng: np.random.Generator) -> str:
        steps = self.steps(x, strategy)
        if steps is None:
            raise ValueError(f"{self.name}: strategy {strategy!r} is infeasible on input {x.id}")
        return render_trace(steps, self._wrong_answer(x, steps, rng))

    def off_strategy_trace(self, x: X, rng: np.random.Generator) -> str:
        options = self.off_strategy_steps(x)
        if not options:  # only for inputs built by hand with make_input; drawn inputs always have one
            raise ValueError(f"{self.name}: input {x.id} has no correct off-strategy trace")
        steps = options[int(rng.integers(len(options)))]
        return render_trace(steps, self._answer(x, steps))

    def _validate(self, x: X, y_text: str) -> ValidationResult:
        text = y_text.strip()
        limit = self._max_steps(x)
        # Count before splitting so a huge many-line junk string is rejected without building lists.
        if text.count("\n") > limit:
            return ValidationResult.unparsable(f"more than {limit} step lines; no solution needs that many")
        lines = text.split("\n")
        last = lines[-1].split()
        if not last or last[0] != "answer":
            return ValidationResult.unparsable("the last line must be 'answer ...'")
        if (answer := self._parse_answer(x, last[1:])) is None:
            return ValidationResult.unparsable(f"malformed answer line; expected '{self.answer_format}'")
        steps: list[Step] = []
        for i, line in enumerate(lines[:-1], 1):
            if (step := self._parse_step(x, line.split())) is None:
                return ValidationResult.unparsable(f"line {i}: expected '{self.step_format}'")
            steps.append(step)
        if (problem := self._check(x, steps)) is not None:
            return ValidationResult.invalid(problem)
        matches = frozenset(s for s in self.strategies() if self.steps(x, s) == steps)
        expected = self._answer(x, steps)
        if answer != expected:
            return ValidationResult.invalid(
                f"answer says '{render_words(answer)}', the steps give '{render_words(expected)}'", matches
            )
        return ValidationResult.correct(matches)

"""Sort a list by swaps: bubble, insertion, selection and odd-even transposition sort."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, model_validator

from seffi.tasks._steps import Answer, Step, StepTask, parse_command, parse_ints
from seffi.tasks.base import TaskConfig, TaskInput, Vocabulary, register_task


class SortSwapsConfig(TaskConfig):
    """Lists of ``min_length..max_length`` distinct values from ``0..max_value``."""

    min_length: int = Field(4, ge=2, le=8)
    max_length: int = Field(5, ge=2, le=8)
    max_value: int = Field(9, ge=1, le=99)

    ordered_fields = (("min_length", "max_length"),)

    @model_validator(mode="after")
    def _distinct(self) -> SortSwapsConfig:
        if self.max_value + 1 < self.max_length:
            raise ValueError("max_value + 1 must be >= max_length (values are distinct)")
        return self


class SortSwapsInput(TaskInput):
    """Sort ``values`` (distinct) ascending."""

    values: tuple[int, ...]


def _swap(a: list[int], out: list[Step], i: int, j: int) -> None:
    a[i], a[j] = a[j], a[i]
    out.append(("swap", i, j))


def _bubble(a: list[int]) -> list[Step]:
    out: list[Step] = []
    for end in range(len(a) - 1, 0, -1):
        swaps = len(out)
        for i in range(end):
            if a[i] > a[i + 1]:
                _swap(a, out, i, i + 1)
        if len(out) == swaps:  # a pass without a swap: sorted
            break
    return out


def _insertion(a: list[int]) -> list[Step]:
    out: list[Step] = []
    for i in range(1, len(a)):
        for j in range(i, 0, -1):
            if a[j - 1] <= a[j]:
                break
            _swap(a, out, j - 1, j)
    return out


def _selection(a: list[int]) -> list[Step]:
    out: list[Step] = []
    for i in range(len(a) - 1):
        if (m := min(range(i, len(a)), key=a.__getitem__)) != i:
            _swap(a, out, i, m)
    return out


def _odd_even(a: list[int]) -> list[Step]:
    out: list[Step] = []
    phase = 0  # even pairs (0,1),(2,3),... then odd pairs (1,2),(3,4),..., alternating until sorted
    while any(a[i] > a[i + 1] for i in range(len(a) - 1)):
        for i in range(phase, len(a) - 1, 2):
            if a[i] > a[i + 1]:
                _swap(a, out, i, i + 1)
        phase ^= 1
    return out


_PROCEDURES = {"bubble": _bubble, "insertion": _insertion, "selection": _selection, "odd_even": _odd_even}


@register_task
class SortSwaps(StepTask[SortSwapsInput, SortSwapsConfig]):
    """Sorting by swaps with four classic procedures."""

    name = "sort_swaps"
    strategy_names = tuple(_PROCEDURES)
    step_format = "swap <i> <j>"
    answer_format = "answer <sorted values>"

    def _draw(self, rng: np.random.Generator) -> dict[str, Any]:
        cfg = self.config
        n = int(rng.integers(cfg.min_length, cfg.max_length + 1))
        values = tuple(int(v) for v in rng.choice(cfg.max_value + 1, size=n, replace=False))
        return {"values": values}

    def prompt(self, x: SortSwapsInput) -> str:
        return "sort " + " ".join(map(str, x.values))

    def vocabulary(self) -> Vocabulary:
        top = max(self.config.max_value, self.config.max_length)
        return Vocabulary(("sort", "swap", "answer", *map(str, range(top + 1))))

    def _strategy_steps(self, x: SortSwapsInput, strategy: str) -> list[Step] | None:
        return _PROCEDURES[strategy](list(x.values))

    def _parse_step(self, x: SortSwapsInput, words: list[str]) -> Step | None:
        step = parse_command(words, "swap", 2)
        return None if step is None else ("swap", min(step[1:]), max(step[1:]))

    def _check(self, x: SortSwapsInput, steps: list[Step]) -> str | None:
        a = list(x.values)
        for k, (_, i, j) in enumerate(steps, 1):
            if i == j or j >= len(a):
                return f"step {k}: positions must be distinct and below {len(a)}"
            a[i], a[j] = a[j], a[i]
        if a != sorted(a):
            return "the list is not sorted after the swaps"
        return None

    def _answer(self, x: SortSwapsInput, steps: list[Step]) -> Answer:
        return tuple(sorted(x.values))

    def _parse_answer(self, x: SortSwapsInput, words: list[str]) -> Answer | None:
        return parse_ints(words, len(x.values))

    def _wrong_answer(self, x: SortSwapsInput, steps: list[Step], rng: np.random.Generator) -> Answer:
        a = list(sorted(x.values))
        i = int(rng.integers(len(a) - 1))
        a[i], a[i + 1] = a[i + 1], a[i]  # values are distinct, so this differs from the sorted list
        return tuple(a)

    def _max_steps(self, x: SortSwapsInput) -> int:
        return len(x.values) ** 2 + 4

    def _off_candidates(self, x: SortSwapsInput) -> list[list[Step]]:
        # A reference with a swap and its undo inserted: no procedure ever swaps a pair back.
        base = _bubble(list(x.values))
        n = len(x.values)
        return [
            [*base[:p], ("swap", i, i + 1), ("swap", i, i + 1), *base[p:]]
            for p in range(len(base) + 1)
            for i in range(n - 1)
        ]

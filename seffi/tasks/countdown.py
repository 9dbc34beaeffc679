"""Countdown arithmetic: combine every number once with + - * / to reach a target."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import permutations, product
from typing import Any

import numpy as np
from pydantic import Field

from seffi.tasks._steps import Answer, Step, StepTask, parse_int
from seffi.tasks.base import TaskConfig, TaskInput, Vocabulary, register_task

OPS = ("+", "-", "*", "/")


class CountdownConfig(TaskConfig):
    """``n_numbers`` numbers from ``1..max_number``; results at most ``max_value``."""

    n_numbers: int = Field(4, ge=4, le=5)
    max_number: int = Field(9, ge=2, le=20)
    max_value: int = Field(60, ge=10, le=200)
    min_target: int = Field(10, ge=1, le=200)

    ordered_fields = (("min_target", "max_value"), ("max_number", "max_value"))


class CountdownInput(TaskInput):
    """Reach ``target`` using each of ``numbers`` exactly once."""

    numbers: tuple[int, ...]
    target: int


def _apply(a: int, op: str, b: int, max_value: int) -> int | None:
    """``a op b`` when a positive integer at most ``max_value``, else ``None``."""
    if op == "/":
        r = None if b == 0 or a % b else a // b
    else:
        r = a + b if op == "+" else a - b if op == "-" else a * b
    return r if r is not None and 0 < r <= max_value else None


def _step(a: int, op: str, b: int, r: int) -> Step:
    if op in "+*" and a > b:  # commutative: canonical operand order
        a, b = b, a
    return (a, op, b, "=", r)


def _chain(
    nums: Sequence[int], ops: Sequence[str], max_value: int, flipped: bool = False
) -> list[Step] | None:
    """A chain over ``nums``; ``flipped`` makes the running result the right operand."""
    acc, steps = nums[0], []
    for op, b in zip(ops, nums[1:], strict=True):
        left, right = (b, acc) if flipped else (acc, b)
        r = _apply(left, op, right, max_value)
        if r is None:
            return None
        steps.append(_step(left, op, right, r))
        acc = r
    return steps


def _pairwise(nums: Sequence[int], ops: Sequence[str], max_value: int) -> list[Step] | None:
    steps: list[Step] = []
    for k, i in enumerate(range(0, len(nums) - 1, 2)):
        r = _apply(nums[i], ops[k], nums[i + 1], max_value)
        if r is None:
            return None
        steps.append(_step(nums[i], ops[k], nums[i + 1], r))
    k = len(steps)  # the pair results, then an odd last number, combined left to right
    rest = _chain([s[-1] for s in steps] + list(nums[2 * k :]), ops[k:], max_value)
    return None if rest is None else steps + rest


def _candidates(x: CountdownInput, shape: str, max_value: int) -> Iterator[list[Step]]:
    """Step lists of one shape (a strategy, or ``"flipped"``) reaching the target."""
    n = len(x.numbers)
    orders: Any = (
        [sorted(x.numbers, reverse=True)]
        if shape == "largest_first"
        else ([x.numbers[i] for i in p] for p in permutations(range(n)))
    )
    for nums in orders:
        for ops in product(OPS, repeat=n - 1):
            if shape == "multiply_first" and ops[0] != "*":
                continue
            if shape == "pairwise":
                steps = _pairwise(nums, ops, max_value)
            else:
                steps = _chain(nums, ops, max_value, flipped=shape == "flipped")
            if steps is not None and steps[-1][-1] == x.target:
                yield steps


@register_task
class Countdown(StepTask[CountdownInput, CountdownConfig]):
    """Countdown numbers game with four expression-shape strategies."""

    name = "countdown"
    strategy_names = ("chain", "pairwise", "multiply_first", "largest_first")
    step_format = "<a> <op> <b> = <c>"
    answer_format = "answer <target>"

    def _draw(self, rng: np.random.Generator) -> dict[str, Any]:
        cfg = self.config
        for _ in range(100):
            nums = [int(v) for v in rng.integers(1, cfg.max_number + 1, size=cfg.n_numbers)]
            ops = [OPS[int(i)] for i in rng.integers(len(OPS), size=cfg.n_numbers - 1)]
            build = _pairwise if rng.random() < 0.5 else _chain
            steps = build(nums, ops, cfg.max_value)
            if steps is not None and steps[-1][-1] >= cfg.min_target:
                rng.shuffle(nums)
                return {"numbers": tuple(nums), "target": int(steps[-1][-1])}
        return {"numbers": tuple(nums), "target": cfg.min_target}  # rejected unless it happens to work

    def prompt(self, x: CountdownInput) -> str:
        return f"countdown {' '.join(map(str, x.numbers))} target {x.target}"

    def vocabulary(self) -> Vocabulary:
        top = self.config.max_value + 2
        return Vocabulary(("countdown", "target", *OPS, "=", "answer", *map(str, range(top + 1))))

    def _strategy_steps(self, x: CountdownInput, strategy: str) -> list[Step] | None:
        return next(_candidates(x, strategy, self.config.max_value), None)

    def _parse_step(self, x: CountdownInput, words: list[str]) -> Step | None:
        if len(words) != 5 or words[1] not in OPS or words[3] != "=":
            return None
        a, b, r = (parse_int(words[i]) for i in (0, 2, 4))
        return None if a is None or b is None or r is None else _step(a, words[1], b, r)

    def _check(self, x: CountdownInput, steps: list[Step]) -> str | None:
        pool = Counter(x.numbers)
        for k, (a, op, b, _, r) in enumerate(steps, 1):
            pool[a] -= 1
            pool[b] -= 1
            if pool[a] < 0 or pool[b] < 0:
                return f"step {k}: {a} and {b} are not both available"
            value = _apply(a, op, b, self.config.max_value)
            if value is None:
                return f"step {k}: {a} {op} {b} is not a positive integer at most {self.config.max_value}"
            if value != r:
                return f"step {k}: {a} {op} {b} is {value}, not {r}"
            pool[r] += 1
        left = sorted(pool.elements())
        if left != [x.target]:
            return f"the steps leave {left}, not just the target {x.target} (use every number once)"
        return None

    def _answer(self, x: CountdownInput, steps: list[Step]) -> Answer:
        return (x.target,)

    def _wrong_answer(self, x: CountdownInput, steps: list[Step], rng: np.random.Generator) -> Answer:
        return (x.target + int(rng.choice([-1, 1, 2])),)

    def _max_steps(self, x: CountdownInput) -> int:
        return len(x.numbers) + 1

    def _off_candidates(self, x: CountdownInput) -> list[list[Step]]:
        # Every chain and pairwise solution, and chains with the result as the right operand.
        shapes = ("chain", "pairwise", "flipped")
        found = (tuple(s) for shape in shapes for s in _candidates(x, shape, self.config.max_value))
        return [list(s) for s in dict.fromkeys(found)]

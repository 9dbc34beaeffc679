"""Tower of Hanoi: the negative control.

Its optimal solution is unique, so every strategy's reference trace is the same and matches every
strategy: one valid sample covers the whole strategy space, and no exploration policy can beat iid.
A coverage pipeline that reports a gain here is broken.

Trace: ``move <disk> <from> <to>`` lines (disks 1 = smallest), then ``answer <number of moves>``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from seffi.tasks._steps import parse_int
from seffi.tasks.base import Task, TaskConfig, TaskInput, ValidationResult, Vocabulary
from seffi.tasks.registry import register_task

Move = tuple[int, int, int]


class HanoiConfig(TaskConfig):
    """Hanoi settings: disk counts are drawn uniformly from ``[min_disks, max_disks]``."""

    min_disks: int = Field(2, ge=1, le=8)
    max_disks: int = Field(4, ge=1, le=8)

    ordered_fields = (("min_disks", "max_disks"),)


class HanoiInput(TaskInput):
    """Move ``n_disks`` disks from peg ``source`` to peg ``target``."""

    n_disks: int
    source: int
    target: int


def _recursive(n: int, a: int, b: int, c: int, out: list[Move]) -> None:
    if n == 0:
        return
    _recursive(n - 1, a, c, b, out)
    out.append((n, a, b))
    _recursive(n - 1, c, b, a, out)


def _legal_between(pegs: list[list[int]], p: int, q: int) -> Move:
    """The one legal move between pegs p and q (smaller top disk moves)."""
    if not pegs[p] or (pegs[q] and pegs[q][-1] < pegs[p][-1]):
        p, q = q, p
    return (pegs[p][-1], p, q)


def _apply(pegs: list[list[int]], move: Move) -> None:
    disk, p, q = move
    pegs[p].pop()
    pegs[q].append(disk)


class Hanoi(Task[HanoiInput, HanoiConfig]):
    """Tower of Hanoi with three strategies that all yield the unique optimal trace."""

    name = "hanoi"

    def strategies(self) -> tuple[str, ...]:
        return ("recursive", "iterative", "smallest_cycle")

    def _generate(self, rng: np.random.Generator) -> dict[str, Any]:
        n = int(rng.integers(self.config.min_disks, self.config.max_disks + 1))
        source, target = (int(v) for v in rng.choice(3, size=2, replace=False))
        return {"n_disks": n, "source": source, "target": target}

    def prompt(self, x: HanoiInput) -> str:
        return f"hanoi disks {x.n_disks} from {x.source} to {x.target}"

    def vocabulary(self) -> Vocabulary:
        top = 2**self.config.max_disks + 2
        return Vocabulary(("hanoi", "disks", "from", "to", "move", "answer", *map(str, range(top + 1))))

    # -- strategies -----------------------------------------------------------------------------

    def _moves(self, x: HanoiInput, strategy: str) -> list[Move]:
        spare = 3 - x.source - x.target
        if strategy == "recursive":
            out: list[Move] = []
            _recursive(x.n_disks, x.source, x.target, spare, out)
            return out
        pegs: list[list[int]] = [[], [], []]
        pegs[x.source] = list(range(x.n_disks, 0, -1))
        total = 2**x.n_disks - 1
        # With an even disk count the smallest disk cycles source -> spare -> target, else
        # source -> target -> spare; both algorithms below derive from that one fact.
        cycle = [x.source, spare, x.target] if x.n_disks % 2 == 0 else [x.source, x.target, spare]
        moves: list[Move] = []
        if strategy == "iterative":
            pairs = [(cycle[0], cycle[1]), (cycle[0], cycle[2]), (cycle[1], cycle[2])]
            for i in range(total):
                move = _legal_between(pegs, *pairs[i % 3])
                _apply(pegs, move)
                moves.append(move)
            return moves
        # smallest_cycle: alternate "smallest disk one step along the cycle" and "the other legal move".
        pos = 0
        while len(moves) < total:
            if len(moves) % 2 == 0:
                move = (1, cycle[pos], cycle[(pos + 1) % 3])
                pos = (pos + 1) % 3
            else:
                others = [p for p in range(3) if p != cycle[pos]]
                move = _legal_between(pegs, *others)
            _apply(pegs, move)
            moves.append(move)
        return moves

    def _render(self, moves: list[Move], answer: int) -> str:
        return "\n".join([*(f"move {d} {p} {q}" for d, p, q in moves), f"answer {answer}"])

    def solve(self, x: HanoiInput, strategy: str) -> str | None:
        moves = self._moves(x, strategy)
        return self._render(moves, len(moves))

    def off_strategy_trace(self, x: HanoiInput, rng: np.random.Generator) -> str:
        # A correct but non-optimal solution: insert a wasted back-and-forth of the smallest disk.
        moves = self._moves(x, "recursive")
        cut = int(rng.integers(0, len(moves) + 1))
        pegs: list[list[int]] = [[], [], []]
        pegs[x.source] = list(range(x.n_disks, 0, -1))
        for m in moves[:cut]:
            _apply(pegs, m)
        here = next(p for p in range(3) if pegs[p] and pegs[p][-1] == 1)
        there = int(rng.choice([p for p in range(3) if p != here]))
        moves = [*moves[:cut], (1, here, there), (1, there, here), *moves[cut:]]
        return self._render(moves, len(moves))

    def invalid_trace(self, x: HanoiInput, strategy: str, rng: np.random.Generator) -> str:
        moves = self._moves(x, strategy)
        wrong = len(moves) + int(rng.choice([-1, 1, 2]))
        return self._render(moves, wrong)

    # -- validation -----------------------------------------------------------------------------

    def _validate(self, x: HanoiInput, y_text: str) -> ValidationResult:
        lines = [ln.split() for ln in y_text.strip().split("\n")]
        # parse_int, not str.isdigit: "²".isdigit() is True but int("²") raises, and int() of a
        # 5000-digit word raises too (Python's int-string conversion limit).
        answer = parse_int(lines[-1][1]) if len(lines[-1]) == 2 and lines[-1][0] == "answer" else None
        if answer is None:
            return ValidationResult.unparsable("last line must be 'answer <number of moves>'")
        if len(lines) - 1 > 4 * 2**x.n_disks:
            return ValidationResult.unparsable("far more moves than any solution needs")
        moves: list[Move] = []
        for i, words in enumerate(lines[:-1], 1):
            numbers = [parse_int(w) for w in words[1:]] if len(words) == 4 and words[0] == "move" else [None]
            if any(v is None for v in numbers):
                return ValidationResult.unparsable(f"line {i}: expected 'move <disk> <from> <to>'")
            disk, p, q = numbers
            moves.append((disk, p, q))  # type: ignore[arg-type]
        pegs: list[list[int]] = [[], [], []]
        pegs[x.source] = list(range(x.n_disks, 0, -1))
        for i, (disk, p, q) in enumerate(moves, 1):
            if p > 2 or q > 2 or p == q:
                return ValidationResult.invalid(f"move {i}: pegs must be distinct values in 0..2")
            if not pegs[p] or pegs[p][-1] != disk:
                return ValidationResult.invalid(f"move {i}: disk {disk} is not on top of peg {p}")
            if pegs[q] and pegs[q][-1] < disk:
                return ValidationResult.invalid(f"move {i}: disk {disk} cannot go on a smaller disk")
            _apply(pegs, (disk, p, q))
        if len(pegs[x.target]) != x.n_disks:
            return ValidationResult.invalid("the tower is not on the target peg at the end")
        optimal = moves == self._moves(x, "recursive")
        matches = frozenset(self.strategies()) if optimal else frozenset()
        if answer != len(moves):
            return ValidationResult.invalid(
                f"answer says {lines[-1][1]} moves, the trace has {len(moves)}", matches
            )
        return ValidationResult.correct(matches)


register_task(Hanoi)

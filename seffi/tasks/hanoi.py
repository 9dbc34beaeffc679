"""Tower of Hanoi, the negative control: every strategy's trace is the unique optimal one."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from seffi.tasks._steps import Answer, Step, StepTask
from seffi.tasks.base import TaskConfig, TaskInput, Vocabulary, register_task


class HanoiConfig(TaskConfig):
    """Disk counts drawn uniformly from ``min_disks..max_disks``."""

    min_disks: int = Field(2, ge=1, le=8)
    max_disks: int = Field(4, ge=1, le=8)

    ordered_fields = (("min_disks", "max_disks"),)


class HanoiInput(TaskInput):
    """Move ``n_disks`` disks from peg ``source`` to peg ``target``."""

    n_disks: int
    source: int
    target: int


def _tower(x: HanoiInput) -> list[list[int]]:
    pegs: list[list[int]] = [[], [], []]
    pegs[x.source] = list(range(x.n_disks, 0, -1))
    return pegs


def _recursive(n: int, a: int, b: int, c: int) -> list[Step]:
    return [*_recursive(n - 1, a, c, b), ("move", n, a, b), *_recursive(n - 1, c, b, a)] if n else []


def _legal_between(pegs: list[list[int]], p: int, q: int) -> Step:  # the smaller top disk moves
    if not pegs[p] or (pegs[q] and pegs[q][-1] < pegs[p][-1]):
        p, q = q, p
    return ("move", pegs[p][-1], p, q)


def _apply(pegs: list[list[int]], move: Step) -> None:
    _, disk, p, q = move
    pegs[p].pop()
    pegs[q].append(disk)


@register_task
class Hanoi(StepTask[HanoiInput, HanoiConfig]):
    """Tower of Hanoi with three strategies that all yield the unique optimal trace."""

    name = "hanoi"
    strategy_names = ("recursive", "iterative", "smallest_cycle")
    command = ("move", 3)
    step_format = "move <disk> <from> <to>"
    answer_format = "answer <number of moves>"

    def _draw(self, rng: np.random.Generator) -> dict[str, Any]:
        n = int(rng.integers(self.config.min_disks, self.config.max_disks + 1))
        source, target = (int(v) for v in rng.choice(3, size=2, replace=False))
        return {"n_disks": n, "source": source, "target": target}

    def prompt(self, x: HanoiInput) -> str:
        return f"hanoi disks {x.n_disks} from {x.source} to {x.target}"

    def vocabulary(self) -> Vocabulary:
        top = 2**self.config.max_disks + 2
        return Vocabulary(("hanoi", "disks", "from", "to", "move", "answer", *map(str, range(top + 1))))

    def _strategy_steps(self, x: HanoiInput, strategy: str) -> list[Step] | None:
        spare = 3 - x.source - x.target
        if strategy == "recursive":
            return _recursive(x.n_disks, x.source, x.target, spare)
        pegs = _tower(x)
        total = 2**x.n_disks - 1
        # The smallest disk cycles source -> spare -> target (even disk count) or source -> target ->
        # spare; both algorithms below derive from that one fact.
        cycle = [x.source, spare, x.target] if x.n_disks % 2 == 0 else [x.source, x.target, spare]
        moves: list[Step] = []
        if strategy == "iterative":
            pairs = [(cycle[0], cycle[1]), (cycle[0], cycle[2]), (cycle[1], cycle[2])]
            for i in range(total):
                moves.append(_legal_between(pegs, *pairs[i % 3]))
                _apply(pegs, moves[-1])
            return moves
        # smallest_cycle: alternate "smallest disk one step along the cycle" and the other legal move.
        pos = 0
        while len(moves) < total:
            if len(moves) % 2 == 0:
                move = ("move", 1, cycle[pos], cycle[(pos + 1) % 3])
                pos = (pos + 1) % 3
            else:
                move = _legal_between(pegs, *(p for p in range(3) if p != cycle[pos]))
            _apply(pegs, move)
            moves.append(move)
        return moves

    def _check(self, x: HanoiInput, steps: list[Step]) -> str | None:
        pegs = _tower(x)
        for i, (_, disk, p, q) in enumerate(steps, 1):
            if p > 2 or q > 2 or p == q:
                return f"move {i}: pegs must be distinct values in 0..2"
            if not pegs[p] or pegs[p][-1] != disk:
                return f"move {i}: disk {disk} is not on top of peg {p}"
            if pegs[q] and pegs[q][-1] < disk:
                return f"move {i}: disk {disk} cannot go on a smaller disk"
            _apply(pegs, steps[i - 1])
        if len(pegs[x.target]) != x.n_disks:
            return "the tower is not on the target peg at the end"
        return None

    def _wrong_answer(self, x: HanoiInput, steps: list[Step], rng: np.random.Generator) -> Answer:
        return (len(steps) + int(rng.choice([-1, 1, 2])),)

    def _max_steps(self, x: HanoiInput) -> int:
        return 4 * 2**x.n_disks

    def _off_candidates(self, x: HanoiInput) -> list[list[Step]]:
        # The optimal solution with a wasted back-and-forth of the smallest disk inserted anywhere.
        moves = self.steps(x, "recursive") or []
        pegs, out = _tower(x), []
        for cut in range(len(moves) + 1):
            here = next(p for p in range(3) if pegs[p] and pegs[p][-1] == 1)
            for there in (p for p in range(3) if p != here):
                out.append([*moves[:cut], ("move", 1, here, there), ("move", 1, there, here), *moves[cut:]])
            if cut < len(moves):
                _apply(pegs, moves[cut])
        return out

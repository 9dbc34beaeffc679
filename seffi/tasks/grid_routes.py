"""Route from the top-left to the bottom-right cell of a grid with walls."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from seffi.tasks._steps import Answer, Step, StepTask, parse_ints
from seffi.tasks.base import TaskConfig, TaskInput, Vocabulary, register_task

MOVES = {"right": (0, 1), "down": (1, 0), "left": (0, -1), "up": (-1, 0)}
Cell = tuple[int, int]


class GridRoutesConfig(TaskConfig):
    """``min_size..max_size`` rows and columns, up to ``max_walls`` walls."""

    min_size: int = Field(3, ge=2, le=8)
    max_size: int = Field(4, ge=2, le=8)
    max_walls: int = Field(3, ge=0, le=20)

    ordered_fields = (("min_size", "max_size"),)


class GridRoutesInput(TaskInput):
    """Go from ``(0, 0)`` to ``(rows - 1, cols - 1)`` avoiding the ``walls`` cells."""

    rows: int
    cols: int
    walls: tuple[tuple[int, int], ...]


def _wall_following(x: GridRoutesInput) -> list[Step] | None:
    walls, (r, c), moves = set(x.walls), (0, 0), []
    while (r, c) != (x.rows - 1, x.cols - 1):
        if c + 1 < x.cols and (r, c + 1) not in walls:
            c, move = c + 1, "right"
        elif r + 1 < x.rows and (r + 1, c) not in walls:
            r, move = r + 1, "down"
        else:
            return None
        moves.append(move)
    return [(m,) for m in moves]


def _monotone_routes(x: GridRoutesInput, r: int = 0, c: int = 0) -> list[list[str]]:
    """Every right/down route from ``(r, c)`` to the goal, right before down."""
    if (r, c) == (x.rows - 1, x.cols - 1):
        return [[]]
    out: list[list[str]] = []
    for move, nr, nc in (("right", r, c + 1), ("down", r + 1, c)):
        if nr < x.rows and nc < x.cols and (nr, nc) not in x.walls:
            out += [[move, *rest] for rest in _monotone_routes(x, nr, nc)]
    return out


@register_task
class GridRoutes(StepTask[GridRoutesInput, GridRoutesConfig]):
    """Grid routing with four route families that walls can block."""

    name = "grid_routes"
    strategy_names = ("right_first", "down_first", "staircase", "wall_following")
    step_format = "right | down | left | up"
    answer_format = "answer <row> <col>"

    def _draw(self, rng: np.random.Generator) -> dict[str, Any]:
        cfg = self.config
        rows, cols = (int(v) for v in rng.integers(cfg.min_size, cfg.max_size + 1, size=2))
        ends = ((0, 0), (rows - 1, cols - 1))
        free = [(r, c) for r in range(rows) for c in range(cols) if (r, c) not in ends]
        k = int(rng.integers(0, min(cfg.max_walls, len(free)) + 1))
        picks = rng.choice(len(free), size=k, replace=False) if k else []
        return {"rows": rows, "cols": cols, "walls": tuple(sorted(free[int(i)] for i in picks))}

    def prompt(self, x: GridRoutesInput) -> str:
        walls = " ".join(f"{r} {c}" for r, c in x.walls)
        return f"grid {x.rows} {x.cols} walls {walls}".rstrip()

    def vocabulary(self) -> Vocabulary:
        return Vocabulary(("grid", "walls", *MOVES, "answer", *map(str, range(self.config.max_size + 1))))

    def _strategy_steps(self, x: GridRoutesInput, strategy: str) -> list[Step] | None:
        right, down = x.cols - 1, x.rows - 1
        if strategy == "right_first":
            moves = ["right"] * right + ["down"] * down
        elif strategy == "down_first":
            moves = ["down"] * down + ["right"] * right
        elif strategy == "staircase":
            k = min(right, down)
            moves = ["right", "down"] * k + ["right"] * (right - k) + ["down"] * (down - k)
        else:
            return _wall_following(x)
        steps = [(m,) for m in moves]
        return None if self._end(x, steps)[1] else steps  # None: the route hits a wall

    def _parse_step(self, x: GridRoutesInput, words: list[str]) -> Step | None:
        return (words[0],) if len(words) == 1 and words[0] in MOVES else None

    def _end(self, x: GridRoutesInput, steps: list[Step]) -> tuple[Cell, str | None]:
        walls, (r, c) = set(x.walls), (0, 0)
        for k, (m,) in enumerate(steps, 1):
            dr, dc = MOVES[m]
            r, c = r + dr, c + dc
            if not (0 <= r < x.rows and 0 <= c < x.cols):
                return (r, c), f"step {k}: {m} leaves the grid"
            if (r, c) in walls:
                return (r, c), f"step {k}: {m} walks into the wall at {r} {c}"
        return (r, c), None

    def _check(self, x: GridRoutesInput, steps: list[Step]) -> str | None:
        end, problem = self._end(x, steps)
        if problem is None and end != (x.rows - 1, x.cols - 1):
            return f"the route ends at {end[0]} {end[1]}, not at the goal {x.rows - 1} {x.cols - 1}"
        return problem

    def _answer(self, x: GridRoutesInput, steps: list[Step]) -> Answer:
        return self._end(x, steps)[0]

    def _parse_answer(self, x: GridRoutesInput, words: list[str]) -> Answer | None:
        return parse_ints(words, 2)

    def _wrong_answer(self, x: GridRoutesInput, steps: list[Step], rng: np.random.Generator) -> Answer:
        r, c = self._answer(x, steps)
        return (r - 1, c) if rng.random() < 0.5 else (r, c - 1)  # the goal is never (0, 0)

    def _max_steps(self, x: GridRoutesInput) -> int:
        return 4 * x.rows * x.cols

    def _off_candidates(self, x: GridRoutesInput) -> list[list[Step]]:
        return [[(m,) for m in route] for route in _monotone_routes(x)]

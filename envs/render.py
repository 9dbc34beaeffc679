"""Gymnasium rendering of one env row: ``"ansi"`` text and an ``"rgb_array"`` coverage grid.

What each shows: docs/integrations.md ("Rendering").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")
RENDER_FPS = 4  # slow enough to read each sample
MAX_ROWS = 64  # inputs in one frame; a larger pool shows a window holding the current input
MAX_TEXT_LINES = 24  # of a trace in ``"ansi"``

#: RGB colours of the coverage grid, by role.
COLORS: dict[str, tuple[int, int, int]] = {
    "background": (255, 255, 255),
    "empty": (228, 228, 228),
    "infeasible": (96, 96, 96),
    "raw": (255, 165, 0),
    "valid": (44, 160, 44),
    "budget": (148, 103, 189),
    "current": (31, 119, 180),
    "last": (0, 0, 0),
}


@dataclass(frozen=True)
class GridLayout:
    """Geometry of the ``"rgb_array"`` frame: ``rows`` inputs of ``cell_h`` x ``cell_w`` pixel cells."""

    n_inputs: int
    n_strategies: int
    rows: int
    cell_h: int
    cell_w: int
    height: int
    width: int

    @classmethod
    def for_pool(cls, n_inputs: int, n_strategies: int) -> GridLayout:
        """Cells of 4 to 16 px in frames of about 256 x 384 px, rounded up to multiples of 16."""
        rows = min(n_inputs, MAX_ROWS)
        cell_h = int(np.clip(256 // rows, 4, 16))
        cell_w = int(np.clip(384 // (n_strategies + 1), 4, 16))
        height, width = (-(-pixels // 16) * 16 for pixels in (rows * cell_h, (n_strategies + 1) * cell_w))
        return cls(n_inputs, n_strategies, rows, cell_h, cell_w, height, width)

    def window(self, current: int) -> int:
        """Pool index of the first input drawn when ``current`` (-1: none yet) is the current one."""
        if current < 0 or self.n_inputs <= self.rows:
            return 0
        return min((current // self.rows) * self.rows, self.n_inputs - self.rows)

    def cell_center(self, row: int, column: int) -> tuple[int, int]:
        """Pixel ``(y, x)`` of a cell's centre (``column`` 0 is the budget bar)."""
        return row * self.cell_h + (self.cell_h - 1) // 2, column * self.cell_w + (self.cell_w - 1) // 2


def render_rgb(engine: Any, row: int) -> np.ndarray:
    """The coverage grid of env row ``row``: uint8 (H, W, 3)."""
    spec, life = engine.spec, engine.life
    lay = GridLayout.for_pool(spec.n_inputs, len(spec.strategies))
    ch, cw, m = lay.cell_h, lay.cell_w, lay.n_strategies
    cur = int(life.cur[row])
    start = lay.window(cur)
    shown = slice(start, start + lay.rows)

    # Later colours overwrite earlier ones (found beats infeasible).
    cells = np.full((lay.rows, m + 1, 3), COLORS["empty"], dtype=np.uint8)
    strategy_cells = cells[:, 1:]
    strategy_cells[~spec.feasible_mask[shown]] = COLORS["infeasible"]
    strategy_cells[life.matched[row, shown]] = COLORS["raw"]
    strategy_cells[life.seen[row, shown]] = COLORS["valid"]
    grid = cells.repeat(ch, axis=0).repeat(cw, axis=1)

    used = np.rint(life.counts[row, shown] / engine.cfg.budget * cw).astype(np.int64)
    bar = (np.arange(cw)[None, :] < used[:, None]).repeat(ch, axis=0)
    grid[:, :cw][bar] = COLORS["budget"]

    # One-pixel gaps between cells keep neighbouring cells of one colour apart.
    if ch >= 6:
        grid[ch - 1 :: ch] = COLORS["background"]
    if cw >= 6:
        grid[:, cw - 1 :: cw] = COLORS["background"]

    last = life.last_info[row]
    if last is not None:
        i = spec.index_of(last["input_id"]) - start
        if 0 <= i < lay.rows:
            d = max(1, min(ch, cw) // 4)
            for s in last["strategy_matches"]:
                y, x = lay.cell_center(i, 1 + spec.strategy_index[s])
                grid[y - d + 1 : y + d, x - d + 1 : x + d] = COLORS["last"]

    if cur >= 0:
        top, bottom = (cur - start) * ch, (cur - start + 1) * ch
        t = 2 if ch >= 8 else 1
        band = grid[top:bottom]
        band[:t] = band[-t:] = COLORS["current"]
        band[:, :t] = band[:, -t:] = COLORS["current"]

    frame = np.full((lay.height, lay.width, 3), COLORS["background"], dtype=np.uint8)
    frame[: grid.shape[0], : grid.shape[1]] = grid
    return frame


def indented(text: str, limit: int = MAX_TEXT_LINES) -> list[str]:
    """``text`` as lines indented by two spaces, at most ``limit`` of them, then a count."""
    lines = text.split("\n") if text else ["(empty)"]
    shown = [f"  {line}" for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"  ... ({len(lines) - limit} more lines)")
    return shown


def describe_sample(info: dict[str, Any]) -> list[str]:
    """Text lines of a final-step ``info``: input, k, validity, matches, the trace."""
    verdict = "valid" if info["valid"] else "invalid" + ("" if info["parse_ok"] else " (unparsable)")
    matches = ", ".join(info["strategy_matches"]) or "none"
    latent = f" · z={info['z']}" if "z" in info else ""
    head = (
        f"last sample: input {info['input_id']} · k={info['sample_index']}{latent} · {verdict} · "
        f"matches: {matches} · new strategies: {info['num_new_strategies']}"
    )
    return [head, *indented(info["y_text"])]


def render_ansi(engine: Any, row: int) -> str:
    """The text view of env row ``row``."""
    spec, life, cfg = engine.spec, engine.life, engine.cfg
    m = len(spec.strategies)
    lines = [f"seffi {engine.kind} env · task {spec.task.name} · {m} strategies · budget {cfg.budget}"]
    cur = int(life.cur[row])
    if cur < 0:
        lines.append("no episode yet: call reset()")
    else:
        x = spec.inputs[cur]
        state = "episode running" if life.active[row] else "episode over"
        lines.append(
            f"input {x.id} ({cur + 1}/{spec.n_inputs}) · run {life.runs[row, cur]} · "
            f"{life.counts[row, cur]}/{cfg.budget} samples used · {state}"
        )
        lines.append(f"prompt: {spec.task.prompt(x)}")
        if life.active[row]:
            lines += engine.episode_lines(row)
    last = life.last_info[row]
    if last is not None:
        lines += describe_sample(last)
    if cur >= 0:
        names, seen = np.array(spec.strategies), life.seen[row, cur]
        found, raw = names[seen].tolist(), names[life.matched[row, cur] & ~seen].tolist()
        feasible = int(spec.feasible_mask[cur].sum())
        lines.append(
            f"found this run on {spec.input_ids[cur]}: {', '.join(found) or 'none'} "
            f"({len(found)}/{feasible} feasible strategies)"
        )
        if raw:
            lines.append(f"followed only by invalid traces: {', '.join(raw)}")
    return "\n".join(lines) + "\n"

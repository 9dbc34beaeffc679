"""Gymnasium rendering of the seffi envs: ``"ansi"`` text and a small ``"rgb_array"`` coverage grid.

Both modes draw one env row from its engine's state (a single env is row 0; a native vector env
renders every row and returns a tuple of frames, as ``SyncVectorEnv.render`` does), so the native
vector env renders exactly what ``SyncVectorEnv`` over the single env renders.

* ``"ansi"``: the current input and its prompt, the output written so far (token env) or the latents
  tried (router env) while an episode runs, the last finished sample (its ``y_text``, validity and
  strategy matches), and the strategies found for the current input in this run.
* ``"rgb_array"``: uint8 array, shape (H, W, 3). One row of cells per pool input (at most
  `MAX_ROWS`; a larger pool shows the window of `MAX_ROWS` inputs that holds the current
  one), one column per strategy, after a first column whose bar shows the share of the input's budget
  used in this run. Cell colours (`COLORS`): ``"valid"`` — a valid trace followed the strategy
  in this run; ``"raw"`` — only invalid traces did (the procedure with a wrong answer: raw but not valid
  coverage); ``"empty"`` — not found yet; ``"infeasible"`` — the input admits no trace of the strategy.
  The current input's row is outlined (``"current"``) and the last sample's matches carry a dot
  (``"last"``). The shape is fixed by the pool (H and W are multiples of 16, which video encoders
  want), so video wrappers can stack frames. Pure numpy: no plotting library is imported.

Examples:
    >>> import gymnasium as gym, seffi.envs
    >>> env = gym.make("seffi/HanoiRouter-v0", n_inputs=3, budget=4, render_mode="rgb_array")
    >>> _ = env.reset(seed=0)
    >>> frame = env.render()
    >>> frame.shape, frame.dtype.name
    ((48, 64, 3), 'uint8')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:  # the engines import this module's users; only their types are needed here
    from .base import Engine

RenderMode = Literal["ansi", "rgb_array"]

#: The render modes every seffi env supports (``metadata["render_modes"]``).
RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")

#: Frames per second for video wrappers (``metadata["render_fps"]``): slow enough to read each sample.
RENDER_FPS = 4

#: Most inputs drawn in one frame (larger pools show a window holding the current input).
MAX_ROWS = 64

#: Most lines of a trace shown by ``"ansi"`` (the rest is summarised by a line count).
MAX_TEXT_LINES = 24

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

_RGB = {role: np.array(rgb, dtype=np.uint8) for role, rgb in COLORS.items()}


@dataclass(frozen=True)
class GridLayout:
    """Geometry of the ``"rgb_array"`` frame of a pool of N inputs and M strategies.

    ``rows`` inputs (``min(N, MAX_ROWS)``) of cells ``cell_h`` x ``cell_w`` pixels (the budget column is
    as wide) fill a frame of ``height`` x ``width``, both rounded up to a multiple of 16.
    """

    n_inputs: int
    n_strategies: int
    rows: int
    cell_h: int
    cell_w: int
    height: int
    width: int

    @classmethod
    def for_pool(cls, n_inputs: int, n_strategies: int) -> GridLayout:
        """The layout of a pool: cells of at most 16 px, at least 4 px, frames of about 256 x 384 px."""
        rows = min(n_inputs, MAX_ROWS)
        cell_h = int(np.clip(256 // rows, 4, 16))
        cell_w = int(np.clip(384 // (n_strategies + 1), 4, 16))
        height, width = (-(-pixels // 16) * 16 for pixels in (rows * cell_h, (n_strategies + 1) * cell_w))
        return cls(n_inputs, n_strategies, rows, cell_h, cell_w, height, width)

    def window(self, current: int) -> int:
        """Pool index of the first input drawn when ``current`` (or -1: none yet) is the current input."""
        if current < 0 or self.n_inputs <= self.rows:
            return 0
        return min((current // self.rows) * self.rows, self.n_inputs - self.rows)

    def cell_center(self, row: int, column: int) -> tuple[int, int]:
        """Pixel ``(y, x)`` of the centre of a cell: ``row`` in the window, ``column`` 0 = budget, 1..M."""
        return row * self.cell_h + (self.cell_h - 1) // 2, column * self.cell_w + (self.cell_w - 1) // 2


def render_row(engine: Engine, row: int, mode: RenderMode) -> str | np.ndarray:
    """One frame of env row ``row``: a string (``"ansi"``) or a uint8 array, shape (H, W, 3)."""
    return render_ansi(engine, row) if mode == "ansi" else render_rgb(engine, row)


def render_rgb(engine: Engine, row: int) -> np.ndarray:
    """The coverage grid of env row ``row``: uint8 array, shape (H, W, 3) (see the module docstring)."""
    spec, life = engine.spec, engine.life
    lay = GridLayout.for_pool(spec.n_inputs, len(spec.strategies))
    ch, cw, m = lay.cell_h, lay.cell_w, lay.n_strategies
    cur = int(life.cur[row])
    start = lay.window(cur)
    shown = slice(start, start + lay.rows)

    # One colour per cell, later priorities overwrite earlier ones (found beats infeasible).
    cells = np.empty((lay.rows, m + 1, 3), dtype=np.uint8)
    strategy_cells = cells[:, 1:]
    strategy_cells[:] = _RGB["empty"]
    strategy_cells[~spec.feasible_mask[shown]] = _RGB["infeasible"]
    strategy_cells[life.matched[row, shown]] = _RGB["raw"]
    strategy_cells[life.seen[row, shown]] = _RGB["valid"]
    cells[:, 0] = _RGB["empty"]
    grid = cells.repeat(ch, axis=0).repeat(cw, axis=1)

    # Budget bar: the used share of each input's budget, to the pixel.
    used = np.rint(life.counts[row, shown] / engine.cfg.budget * cw).astype(np.int64)
    bar = (np.arange(cw)[None, :] < used[:, None]).repeat(ch, axis=0)
    grid[:, :cw][bar] = _RGB["budget"]

    # One-pixel gaps between cells keep neighbouring cells of one colour apart.
    if ch >= 6:
        grid[ch - 1 :: ch] = _RGB["background"]
    if cw >= 6:
        grid[:, cw - 1 :: cw] = _RGB["background"]

    last = life.last_info[row]
    if last is not None:
        i = spec.index_of(last["input_id"]) - start
        if 0 <= i < lay.rows:
            d = max(1, min(ch, cw) // 4)
            for s in last["strategy_matches"]:
                y, x = lay.cell_center(i, 1 + spec.strategy_index[s])
                grid[y - d + 1 : y + d, x - d + 1 : x + d] = _RGB["last"]

    if cur >= 0:
        top, bottom = (cur - start) * ch, (cur - start + 1) * ch
        t = 2 if ch >= 8 else 1
        band = grid[top:bottom]
        band[:t] = band[-t:] = _RGB["current"]
        band[:, :t] = band[:, -t:] = _RGB["current"]

    frame = np.empty((lay.height, lay.width, 3), dtype=np.uint8)
    frame[:] = _RGB["background"]
    frame[: grid.shape[0], : grid.shape[1]] = grid
    return frame


def indented(text: str, limit: int = MAX_TEXT_LINES) -> list[str]:
    """``text`` as lines indented by two spaces, at most ``limit`` of them (then a count of the rest)."""
    lines = text.split("\n") if text else ["(empty)"]
    shown = [f"  {line}" for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"  ... ({len(lines) - limit} more lines)")
    return shown


def describe_sample(info: dict[str, Any]) -> list[str]:
    """Text lines of a final-step ``info``: which input, k, validity, strategy matches, the trace."""
    verdict = "valid" if info["valid"] else "invalid" + ("" if info["parse_ok"] else " (unparsable)")
    matches = ", ".join(info["strategy_matches"]) or "none"
    latent = f" · z={info['z']}" if "z" in info else ""
    head = (
        f"last sample: input {info['input_id']} · k={info['sample_index']}{latent} · {verdict} · "
        f"matches: {matches} · new strategies: {info['num_new_strategies']}"
    )
    return [head, *indented(info["y_text"])]


def render_ansi(engine: Engine, row: int) -> str:
    """The text view of env row ``row`` (see the module docstring)."""
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

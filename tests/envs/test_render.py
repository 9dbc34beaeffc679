"""Rendering: the ``"ansi"`` text, the ``"rgb_array"`` coverage grid, vector envs, SB3's make_vec_env."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from seffi.envs import RouterEnv, RouterVectorEnv, TokenEnv, TokenVectorEnv, env_id
from seffi.envs.render import COLORS, RENDER_FPS, GridLayout
from seffi.errors import SeffiError
from tests.envs.common import KINDS, SMALL, make, make_vec, policy_for
from tests.helpers import require


def pixel(frame: np.ndarray, y: int, x: int) -> tuple[int, int, int]:
    return tuple(int(c) for c in frame[y, x])


def cell_colour(frame: np.ndarray, lay: GridLayout, row: int, column: int) -> tuple[int, int, int]:
    """Colour of a cell away from its centre dot and from the current-row outline."""
    y, _ = lay.cell_center(row, column)
    return pixel(frame, y, column * lay.cell_w + 3)


@pytest.mark.parametrize("cls", [TokenEnv, RouterEnv, TokenVectorEnv, RouterVectorEnv])
def test_metadata_declares_both_render_modes_and_an_fps(cls) -> None:
    assert cls.metadata["render_modes"] == ["ansi", "rgb_array"]
    assert cls.metadata["render_fps"] == RENDER_FPS > 0


def base_episode(env, kind: str, rng: np.random.Generator) -> dict:
    """One episode of the iid base model (invalid traces included); returns the final info."""
    u = env.unwrapped
    if kind == "router":
        *_, info = env.step(u.sample_base_action(u.current_input_id, rng))
        return info
    for a in u.encode(u.sample_base_y_text(u.current_input_id, rng)):
        *_, term, trunc, info = env.step(a)
    assert term and not trunc
    return info


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("task", ["countdown", "sort_swaps"])
def test_rgb_grid_colours_follow_the_strategies_found_in_the_run(task: str, kind: str) -> None:
    n, budget = 4, 5
    # Many wrong answers, so some strategies are followed only by invalid traces ("raw" cells).
    env = make(
        task, kind, n_inputs=n, budget=budget, render_mode="rgb_array", task_config={"invalid_rate": 0.5}
    )
    u = env.unwrapped
    lay = GridLayout.for_pool(n, len(u.strategies))
    feasible = [set(u.task.feasible_strategies(x)) for x in u.inputs]
    env.reset(seed=3)
    first = env.render()
    assert first.dtype == np.uint8 and first.shape == (lay.height, lay.width, 3)
    assert first.shape[0] % 16 == 0 and first.shape[1] % 16 == 0
    rng = np.random.default_rng(0)
    # Independent reference, from the final infos alone: per input, strategies of valid traces and
    # strategies of any trace, and the number of samples taken.
    valid: list[set[str]] = [set() for _ in range(n)]
    raw: list[set[str]] = [set() for _ in range(n)]
    used = [0] * n
    roles_seen = set()
    for _ in range(n * budget):  # exactly one run: no input starts a second one
        info = base_episode(env, kind, rng)
        i = u.input_ids.index(info["input_id"])
        raw[i] |= set(info["strategy_matches"])
        if info["valid"]:
            valid[i] |= set(info["strategy_matches"])
        used[i] += 1
        frame = env.render()
        assert frame.shape == first.shape
        for r in range(n):
            for j, s in enumerate(u.strategies):
                role = (
                    "valid"
                    if s in valid[r]
                    else "raw"
                    if s in raw[r]
                    else "empty"
                    if s in feasible[r]
                    else "infeasible"
                )
                roles_seen.add(role)
                got = cell_colour(frame, lay, r, 1 + j)
                assert got == COLORS[role], (r, s, role)
                dot = s in info["strategy_matches"] and r == i
                centre = pixel(frame, *lay.cell_center(r, 1 + j))
                assert (centre == COLORS["last"]) == dot
            if r != i:  # budget bar, read on a row without the outline; the cell's last pixel is a gap
                y, _ = lay.cell_center(r, 0)
                bar = sum(pixel(frame, y, x) == COLORS["budget"] for x in range(lay.cell_w))
                assert bar == min(round(used[r] / budget * lay.cell_w), lay.cell_w - 1)
        outlined = [r for r in range(n) if pixel(frame, r * lay.cell_h, lay.cell_w + 3) == COLORS["current"]]
        assert outlined == [i]
        env.reset()
    assert {"valid", "raw", "empty"} <= roles_seen and not np.array_equal(frame, first)
    # The pool used its budget, so this reset started a new run: every strategy cell is clear again.
    frame = env.render()
    for r in range(n):
        for j, s in enumerate(u.strategies):
            assert cell_colour(frame, lay, r, 1 + j) == COLORS["empty" if s in feasible[r] else "infeasible"]


def test_rgb_grid_of_a_large_pool_shows_a_window_holding_the_current_input() -> None:
    env = make("sort_swaps", "router", n_inputs=150, budget=2, render_mode="rgb_array")
    lay = GridLayout.for_pool(150, 4)
    assert (lay.rows, lay.cell_h) == (64, 4)
    env.reset(seed=0)
    shapes = set()
    # Hand-computed windows of 64 rows: inputs 0-63, 64-127, then 86-149 (the last full window).
    for current, row in [(3, 3), (100, 36), (140, 54)]:
        env.reset(options={"input_id": env.unwrapped.input_ids[current]})
        frame = env.render()
        shapes.add(frame.shape)
        outlined = [r for r in range(64) if pixel(frame, r * 4, lay.cell_w + 3) == COLORS["current"]]
        assert outlined == [row]
    assert shapes == {(256, 80, 3)}


@pytest.mark.parametrize("kind", KINDS)
def test_ansi_shows_prompt_output_last_sample_and_matches(kind: str) -> None:
    env = make("sort_swaps", kind, render_mode="ansi")
    u = env.unwrapped
    env.reset(seed=0)
    x = u.inputs[1]
    env.reset(options={"input_id": x.id})
    text = env.render()
    assert isinstance(text, str)
    assert f"prompt: {u.task.prompt(x)}" in text and x.id in text and "last sample" not in text
    if kind == "token":
        tokens = u.encode(u.task.reference(x, "selection"))
        for a in tokens[:5]:
            env.step(a)
        partial = u.vocabulary.decode(tokens[:5])
        assert "output so far (5/" in env.render()
        assert all(f"  {line}" in env.render() for line in partial.split("\n"))
        for a in tokens[5:-1]:
            env.step(a)
        *_, info = env.step(tokens[-1])
    else:
        *_, info = env.step(2)
    text = env.render()
    assert info["input_id"] == x.id and "episode over" in text
    assert f"matches: {', '.join(info['strategy_matches']) or 'none'}" in text
    assert ("· valid ·" in text) == info["valid"]
    assert all(f"  {line}" in text for line in info["y_text"].split("\n"))
    if kind == "router":
        assert f"z={info['z']}" in text
    found = [s for s in u.strategies if info["valid"] and s in info["strategy_matches"]]  # declared order
    found = ", ".join(found) or "none"
    assert f"found this run on {x.id}: {found}" in text


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_native_vector_renders_what_sync_vector_renders(kind: str, mode: str) -> None:
    e = 3
    settings = {"schedule": "random", "n_inputs": 4, "budget": 3, "render_mode": mode}
    native = make_vec("grid_routes", kind, e, **settings)
    sync = make_vec("grid_routes", kind, e, mode="sync", **settings)
    obs, _ = native.reset(seed=5)
    sync.reset(seed=5)
    policy = policy_for(kind, native, e, seed=2)
    frames = []
    for _ in range(30 if kind == "token" else 12):
        a, b = native.render(), sync.render()
        assert isinstance(a, tuple) and len(a) == e
        assert data_equivalence(a, b, exact=True)
        frames.append(a)
        actions = policy(obs)
        obs, *_ = native.step(actions)
        sync.step(actions)
    assert len({str(f) if mode == "ansi" else f[0].tobytes() for f in frames}) > 2  # the frames change


def test_render_without_a_mode_warns_and_returns_none() -> None:
    env = make("hanoi", "router")
    env.reset(seed=0)
    vec = make_vec("hanoi", "token", 2)
    vec.reset(seed=0)
    for thing in (env, vec):
        with pytest.warns(UserWarning, match="render_mode"):
            assert thing.render() is None


def test_unknown_render_modes_are_clear_errors_and_gymnasium_wrappers_work() -> None:
    for make_it in (
        lambda: RouterEnv(task="hanoi", render_mode="human"),
        lambda: TokenVectorEnv(2, task="hanoi", render_mode="rgb"),
    ):
        with pytest.raises(SeffiError, match=r"render_mode: Input should be 'ansi' or 'rgb_array' \(got"):
            make_it()
    # gym.make maps "<mode>_list" onto a supported mode with its RenderCollection wrapper.
    env = gym.make(env_id("hanoi", "router"), **SMALL, render_mode="rgb_array_list")
    env.reset(seed=0)
    env.step(0)
    frames = env.render()
    assert len(frames) == 2 and all(f.shape == frames[0].shape and f.dtype == np.uint8 for f in frames)


@pytest.mark.parametrize("kind", KINDS)
def test_sb3_make_vec_env_with_default_arguments(kind: str) -> None:
    env_util = require("stable_baselines3.common.env_util", "sb3")
    eid = env_id("sort_swaps", kind)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SB3's render_mode="rgb_array" must be accepted, not warned about
        vec = env_util.make_vec_env(eid, n_envs=2, seed=0)
    assert vec.render_mode == "rgb_array"
    single = vec.envs[0].unwrapped
    lay = GridLayout.for_pool(len(single.input_ids), len(single.strategies))
    vec.reset()
    before = vec.get_images()
    for _ in range(40 if kind == "token" else 6):
        vec.step(np.array([vec.action_space.sample() for _ in range(2)]))
    after = vec.get_images()
    assert [f.shape for f in after] == [(lay.height, lay.width, 3)] * 2
    assert all(f.dtype == np.uint8 for f in after)
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    tiled = vec.render()  # SB3 tiles the envs' frames
    assert tiled.dtype == np.uint8 and tiled.ndim == 3 and tiled.shape[2] == 3

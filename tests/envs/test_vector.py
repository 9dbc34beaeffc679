"""Native vector envs against SyncVectorEnv over the single env, every task, every autoreset mode."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import SyncVectorEnv, VectorEnv

from seffi.envs import (
    FINAL_INFO_KEYS,
    AutoresetMode,
    RouterEnv,
    RouterVectorEnv,
)
from seffi.envs.base import final_obs_info
from seffi.episodes import parse_infos
from seffi.errors import SeffiError
from tests.envs.common import CASES, KINDS, make, make_vec, policy_for

SETTINGS = {"schedule": "random", "reward": "novel", "history": True, "n_inputs": 4, "budget": 3}
MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)
# Gymnasium 1.0's SyncVectorEnv has NEXT_STEP only (no autoreset_mode argument) and no reset_mask:
# nothing to compare the other modes and partial resets with there.
SYNC_HAS_MODES = "autoreset_mode" in inspect.signature(SyncVectorEnv.__init__).parameters
needs_sync_modes = pytest.mark.skipif(not SYNC_HAS_MODES, reason="SyncVectorEnv: NEXT_STEP only")


def assert_same(a, b, what: str) -> None:
    assert data_equivalence(a, b, exact=True), f"{what} differ:\n{a}\n{b}"


def pair(task: str, kind: str, e: int, mode: AutoresetMode, **kwargs) -> tuple:
    """The native vector env and a SyncVectorEnv over the single env, both in autoreset ``mode``."""
    if not SYNC_HAS_MODES and mode is not AutoresetMode.NEXT_STEP:
        pytest.skip(f"gymnasium {gym.__version__}'s SyncVectorEnv has NEXT_STEP only")
    native = make_vec(task, kind, e, autoreset_mode=mode, **kwargs)
    vector_kwargs = {"autoreset_mode": mode} if SYNC_HAS_MODES else {}
    sync = make_vec(task, kind, e, mode="sync", vector_kwargs=vector_kwargs, **kwargs)
    assert type(native.unwrapped).__name__.endswith("VectorEnv") and native.unwrapped is not sync.unwrapped
    assert native.metadata["autoreset_mode"] is mode
    assert sync.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP) is mode
    return native, sync


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize(("task", "kind"), CASES)
def test_native_vector_equals_sync_vector(task: str, kind: str, mode: AutoresetMode) -> None:
    e = 5
    native, sync = pair(task, kind, e, mode, **SETTINGS)
    obs_n, info_n = native.reset(seed=42)
    obs_s, info_s = sync.reset(seed=42)
    assert_same(obs_n, obs_s, "reset obs")
    assert info_n == info_s == {}
    policy = policy_for(kind, native, e, seed=1)
    finals = 0
    steps = 60 if kind == "token" else 24
    for t in range(steps):
        actions = policy(obs_n)
        obs_n, r_n, term_n, trunc_n, info_n = native.step(actions)
        obs_s, r_s, term_s, trunc_s, info_s = sync.step(actions)
        for what, a, b in [
            ("obs", obs_n, obs_s),
            ("rewards", r_n, r_s),
            ("terminations", term_n, term_s),
            ("truncations", trunc_n, trunc_s),
            ("infos", info_n, info_s),
        ]:
            assert_same(a, b, f"step {t} {what}")
        done = term_n | trunc_n

        # What the callbacks read: the same episode ends from both, with and without dones.
        def ends(infos, dones=None, strategies=native.unwrapped.strategies):
            b = parse_infos(infos, strategies, dones)
            return [c.tolist() for c in (b.input_id, b.hits, b.valid, b.env_index, b.sample_index, b.z)]

        got = ends(info_n, done)
        assert got == ends(info_s, done) == ends(info_n) == ends(info_s)
        assert got[3] == np.flatnonzero(done).tolist()
        finals += len(got[0])
        final = info_n.get("final_info", {}) if mode is AutoresetMode.SAME_STEP else info_n
        assert ("final_obs" in info_n) == (mode is AutoresetMode.SAME_STEP and bool(done.any()))
        if done.any():
            assert set(FINAL_INFO_KEYS) <= set(final)
            assert np.array_equal(final["_input_id"], done)
        if mode is AutoresetMode.SAME_STEP:
            assert set(info_n) <= {"final_obs", "_final_obs", "final_info", "_final_info"}
            for mask in ("_final_obs", "_final_info"):
                assert not done.any() or np.array_equal(info_n[mask], done)
        if mode is AutoresetMode.DISABLED and done.any():  # the caller resets ended rows itself
            obs_n, _ = native.reset(options={"reset_mask": done.copy()})
            obs_s, _ = sync.reset(options={"reset_mask": done.copy()})
            assert_same(obs_n, obs_s, f"step {t} reset_mask obs")
        if t == steps // 2 and SYNC_HAS_MODES:  # a partial reset with an explicit input, as Gymnasium does
            opts = {
                "reset_mask": np.array([True, False, True, False, False]),
                "input_id": native.unwrapped.input_ids[1],
            }
            obs_n, info_n = native.reset(options=dict(opts))
            obs_s, info_s = sync.reset(options=dict(opts))
            assert_same(obs_n, obs_s, "partial reset obs")
    assert finals >= e  # the comparison covered many episode ends


@pytest.mark.parametrize("task", ["hanoi", "coin_sum"])
def test_same_step_router_is_next_step_without_the_reset_only_steps(task: str) -> None:
    """An independent reference: SAME_STEP's step t is NEXT_STEP's step 2t-1 followed by its reset step 2t.

    Rewards, terminations and infos of the episode ends, ``final_obs`` (NEXT_STEP's ending observation)
    and the returned observation (NEXT_STEP's reset observation) must all match.
    """
    e = 4
    same = make_vec(task, "router", e, autoreset_mode=AutoresetMode.SAME_STEP, **SETTINGS)
    nxt = make_vec(task, "router", e, **SETTINGS)
    obs_s, _ = same.reset(seed=3)
    obs_n, _ = nxt.reset(seed=3)
    rng = np.random.default_rng(0)
    for t in range(15):
        actions = rng.integers(0, same.unwrapped.n_latents, size=e)
        obs_s, r_s, term_s, trunc_s, info_s = same.step(actions)
        end_obs, r_n, term_n, trunc_n, info_n = nxt.step(actions)
        assert term_s.all() and term_n.all() and not (trunc_s.any() or trunc_n.any())
        assert np.array_equal(r_s, r_n)
        assert_same(info_s["final_info"], info_n, f"step {t} final info")
        assert np.array_equal(np.stack(list(info_s["final_obs"])), end_obs)
        obs_n, r_reset, term_reset, _, info_reset = nxt.step(actions)  # the wasted reset-only step
        assert not r_reset.any() and not term_reset.any() and info_reset == {}
        assert np.array_equal(obs_s, obs_n)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ended", [[0, 1, 2, 3], [1, 3]], ids=["all rows", "some rows"])
def test_final_obs_layout_is_the_installed_gymnasiums(kind: str, ended: list[int]) -> None:
    """``infos["final_obs"]`` as this gymnasium's ``VectorEnv._add_info`` lays it out, row by row."""
    e = 4
    vec = make_vec("grid_routes", kind, e, history=True)
    vec.reset(seed=0)
    rows = np.array(ended)
    obs = vec.unwrapped._engine.observe(rows)
    reference = SimpleNamespace(num_envs=e)
    reference._add_info = lambda infos, info, i: VectorEnv._add_info(reference, infos, info, i)
    expected: dict = {}
    for j, r in enumerate(ended):
        row_obs = {k: v[j] for k, v in obs.items()} if kind == "token" else obs[j]
        expected = VectorEnv._add_info(reference, expected, {"final_obs": row_obs}, r)
    arr, mask = final_obs_info(e, rows, obs)
    assert_same({"final_obs": arr, "_final_obs": mask}, expected, "final_obs")


def test_disabled_mode_refuses_to_step_an_ended_episode() -> None:
    vec = make_vec("hanoi", "router", 3, autoreset_mode="Disabled")
    ids = vec.unwrapped.input_ids
    vec.reset(seed=0)
    _, _, _, _, infos = vec.step(np.zeros(3, dtype=np.int64))
    assert list(infos["input_id"]) == [ids[0]] * 3
    with pytest.raises(SeffiError, match=r"DISABLED.*reset_mask"):
        vec.step(np.zeros(3, dtype=np.int64))
    vec.reset(options={"reset_mask": np.array([True, False, True])})
    with pytest.raises(SeffiError, match="env 1's episode is over"):
        vec.step(np.zeros(3, dtype=np.int64))
    vec.reset(options={"reset_mask": np.array([False, True, False])})
    _, _, terminated, _, infos = vec.step(np.zeros(3, dtype=np.int64))  # round-robin: the next input
    assert terminated.all() and list(infos["input_id"]) == [ids[1]] * 3


def test_autoreset_mode_is_per_instance_and_validated() -> None:
    same = RouterVectorEnv(2, autoreset_mode="same_step", task="hanoi")
    nxt = RouterVectorEnv(2, task="hanoi")
    disabled = RouterVectorEnv(2, autoreset_mode="DISABLED", task="hanoi")
    assert same.metadata["autoreset_mode"] is same.autoreset_mode is AutoresetMode.SAME_STEP
    assert nxt.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert disabled.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    assert RouterVectorEnv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP  # the class default
    assert same.metadata["render_modes"] == nxt.metadata["render_modes"]
    with pytest.raises(SeffiError, match="autoreset_mode must be one of"):
        RouterVectorEnv(2, autoreset_mode="sometimes", task="hanoi")
    # Gymnasium 1.2's SyncVectorEnv states its mode by writing into its first env's metadata dict (1.4
    # copies the dict first, Gymnasium PR #1623): the write must reach neither the class dict shared by
    # every env of the process nor another vector env (on both versions).
    sync_same = make_vec(
        "hanoi", "router", 2, mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}
    )
    sync_next = make_vec("hanoi", "router", 2, mode="sync")
    assert sync_same.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert sync_next.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert "autoreset_mode" not in RouterEnv.metadata
    assert "autoreset_mode" not in make("hanoi", "router").unwrapped.metadata
    first = sync_same.unwrapped.envs[0].unwrapped
    assert first.metadata is not RouterEnv.metadata
    assert first.metadata["render_modes"] == ["ansi", "rgb_array"]


@pytest.mark.parametrize("kind", KINDS)
def test_vector_exposes_the_same_pool_api(kind: str) -> None:
    single = make("countdown", kind).unwrapped
    vec = make_vec("countdown", kind, 3).unwrapped
    assert vec.task.name == single.task.name and vec.inputs == single.inputs
    assert vec.input_ids == single.input_ids and vec.budget == single.budget
    assert vec.strategies == single.strategies == tuple(single.task.strategies())
    for xid in vec.input_ids:
        assert vec.base_match_distribution(xid) == single.base_match_distribution(xid)
        assert vec.reference_match_sets(xid) == single.reference_match_sets(xid)
    if kind == "router":
        assert np.array_equal(vec.latent_prior(vec.input_ids[0]), single.latent_prior(single.input_ids[0]))
        assert vec.obs_layout == single.obs_layout
    else:
        assert vec.max_length == single.max_length and vec.vocabulary == single.vocabulary


@pytest.mark.parametrize("kind", KINDS)
def test_vector_bad_input_is_a_clear_error(kind: str) -> None:
    vec = make_vec("hanoi", kind, 3)
    with pytest.raises(SeffiError, match="reset"):
        vec.step(np.zeros(3, dtype=np.int64))
    vec.reset(seed=0)
    n = vec.unwrapped.single_action_space.n
    with pytest.raises(SeffiError, match="shape"):
        vec.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(SeffiError, match="outside"):
        vec.step(np.array([0, n, 0]))
    with pytest.raises(SeffiError, match="seeds"):
        vec.reset(seed=[1, 2])
    with pytest.raises(ValueError, match="unknown input_id"):
        vec.reset(options={"input_id": ["a", "b", "c"]})


def test_vector_per_row_input_ids() -> None:
    vec = make_vec("grid_routes", "router", 3)
    ids = vec.unwrapped.input_ids
    vec.reset(seed=0, options={"input_id": [ids[2], ids[0], ids[2]]})
    _, _, _, _, infos = vec.step(np.zeros(3, dtype=np.int64))
    assert list(infos["input_id"]) == [ids[2], ids[0], ids[2]]
    assert list(infos["sample_index"]) == [1, 1, 1]

"""Native vector envs against SyncVectorEnv over the single env (NEXT_STEP autoreset), every task."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from seffi.envs import FINAL_INFO_KEYS
from seffi.errors import SeffiError
from tests.envs.common import CASES, KINDS, make, make_vec, policy_for

SETTINGS = {"schedule": "random", "reward": "novel", "history": True, "n_inputs": 4, "budget": 3}


def assert_same(a, b, what: str) -> None:
    assert data_equivalence(a, b, exact=True), f"{what} differ:\n{a}\n{b}"


@pytest.mark.parametrize(("task", "kind"), CASES)
def test_native_vector_equals_sync_vector(task: str, kind: str) -> None:
    e = 5
    native = make_vec(task, kind, e, **SETTINGS)
    sync = make_vec(task, kind, e, mode="sync", **SETTINGS)
    assert type(native.unwrapped).__name__.endswith("VectorEnv") and native.unwrapped is not sync.unwrapped
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
        if "_input_id" in info_n:
            finals += int(info_n["_input_id"].sum())
            assert set(FINAL_INFO_KEYS) <= set(info_n)
            assert np.array_equal(info_n["_input_id"], term_n | trunc_n)
        if t == steps // 2:  # a partial reset with an explicit input, as Gymnasium passes it
            opts = {
                "reset_mask": np.array([True, False, True, False, False]),
                "input_id": native.unwrapped.input_ids[1],
            }
            obs_n, info_n = native.reset(options=dict(opts))
            obs_s, info_s = sync.reset(options=dict(opts))
            assert_same(obs_n, obs_s, "partial reset obs")
    assert finals >= e  # the comparison covered many episode ends


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

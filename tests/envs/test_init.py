from __future__ import annotations

import subprocess
import sys
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from seffi.envs import env_id, register_envs
from seffi.errors import SeffiError
from tests.envs.common import CASES, TASKS, make
from tests.helpers import require


def test_every_task_has_both_ids_registered_with_vector_entry_points() -> None:
    assert register_envs() == []  # idempotent: everything was registered at import
    ids = {i for i in gym.registry if i.startswith("seffi/")}
    for task in TASKS:
        for kind in ("token", "router"):
            spec = gym.spec(env_id(task, kind))
            assert spec.id in ids
            assert spec.vector_entry_point is not None
            assert spec.kwargs == {"task": task}


def test_env_id_camel_cases_task_names() -> None:
    assert env_id("hanoi") == "seffi/Hanoi-v0"
    assert env_id("sort_swaps", "token") == "seffi/SortSwaps-v0"
    assert env_id("sort_swaps", kind="router") == "seffi/SortSwapsRouter-v0"
    with pytest.raises(SeffiError, match="kind"):
        env_id("hanoi", "tokens")  # type: ignore[arg-type]


@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
@pytest.mark.parametrize(("task", "kind"), CASES)
def test_gymnasium_check_env_passes_without_warnings(task: str, kind: str, render_mode: str | None) -> None:
    # check_env also re-makes the env (via its spec) in every declared render mode and checks render().
    env = make(task, kind, render_mode=render_mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
@pytest.mark.parametrize(("task", "kind"), CASES)
def test_sb3_check_env_passes(task: str, kind: str, render_mode: str | None) -> None:
    sb3_checker = require("stable_baselines3.common.env_checker", "sb3")
    env = make(task, kind, render_mode=render_mode)  # "rgb_array" is what SB3's make_vec_env asks for
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_checker.check_env(env.unwrapped, warn=True, skip_render_check=False)
    assert [str(w.message) for w in caught] == []


def test_importing_envs_does_not_import_heavy_frameworks() -> None:
    code = (
        "import sys, seffi.envs; heavy = [m for m in ('torch', 'stable_baselines3', 'ray', 'trl', "
        "'transformers') if m in sys.modules]; assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_registered_id_makes_with_its_defaults_or_refuses_in_one_line():
    """A bare gym.make / make_vec either gives a working env or one SeffiError line saying what to pass."""
    ids = sorted(e for e in gym.registry if e.startswith("seffi/"))
    assert len(ids) >= 21
    refused = []

    def make_vec(i):
        return gym.make_vec(i, num_envs=2, vectorization_mode="vector_entry_point")

    for eid in ids:
        for build in (gym.make, make_vec):
            try:
                env = build(eid)
            except SeffiError as exc:
                assert "\n" not in str(exc) and "model_dir=" in str(exc), eid
                refused.append(eid)
                continue
            env.reset(seed=0)
            env.close()
    assert sorted(set(refused)) == [e for e in ids if e.endswith("LatentLM-v0")]

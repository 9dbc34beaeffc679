"""Budgets, schedules, runs and the final-step info contract (both env kinds, every task)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from seffi.envs import FINAL_INFO_KEYS
from seffi.errors import SeffiError
from tests.envs.common import CASES, KINDS, make, make_vec, policy_for


def run_episode(env, act, obs) -> tuple[list[dict], dict, float]:
    """Step from ``obs`` until the episode ends; returns (non-final infos, final info, final reward)."""
    between = []
    while True:
        obs, reward, term, trunc, info = env.step(act(obs))
        if term or trunc:
            return between, info, reward
        between.append(info)


def single_policy(kind, env, seed=0):
    batched = policy_for(kind, env, 1, seed)
    if kind == "token":
        return lambda obs: int(batched({k: v[None] for k, v in obs.items()})[0])
    return lambda obs: int(batched(obs)[0])


@pytest.mark.parametrize(("task", "kind"), CASES)
def test_final_info_contract_and_nothing_on_other_steps(task: str, kind: str) -> None:
    env = make(task, kind, reward="novel")
    obs, _ = env.reset(seed=7)
    act = single_policy(kind, env)
    u = env.unwrapped
    for _ in range(10):
        x = u.inputs[u.input_ids.index(u.current_input_id)]
        between, info, _ = run_episode(env, act, obs)
        assert all(b == {} for b in between)
        expected_keys = set(FINAL_INFO_KEYS) | ({"z"} if kind == "router" else set())
        assert set(info) == expected_keys
        # Independent reference: the task's own validator on the reported trace.
        res = u.task.validate_y_text(x, info["y_text"])
        assert info["input_id"] == x.id
        assert info["strategy_matches"] == tuple(sorted(res.strategy_matches))
        assert (info["valid"], info["parse_ok"]) == (res.valid, res.parse_ok)
        assert info["num_strategies"] == len(u.task.strategies())
        assert type(info["valid"]) is bool and type(info["sample_index"]) is int
        assert 1 <= info["sample_index"] <= u.budget
        assert info["budget_exhausted"] == (info["sample_index"] == u.budget)
        obs, _ = env.reset()


@pytest.mark.parametrize("kind", KINDS)
def test_round_robin_spreads_the_budget_and_starts_new_runs(kind: str) -> None:
    env = make("sort_swaps", kind, n_inputs=3, budget=2)
    obs, _ = env.reset(seed=0)
    act = single_policy(kind, env)
    ids = env.unwrapped.input_ids
    seen = []
    for _ in range(8):
        _, info, _ = run_episode(env, act, obs)
        seen.append((info["input_id"], info["sample_index"], info["run_index"], info["budget_exhausted"]))
        obs, _ = env.reset()
    assert seen == [
        (ids[0], 1, 0, False),
        (ids[1], 1, 0, False),
        (ids[2], 1, 0, False),
        (ids[0], 2, 0, True),
        (ids[1], 2, 0, True),
        (ids[2], 2, 0, True),
        (ids[0], 1, 1, False),
        (ids[1], 1, 1, False),
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_random_schedule_gives_each_input_exactly_its_budget_per_run(kind: str) -> None:
    n, budget = 5, 3
    env = make("graph_traversal", kind, n_inputs=n, budget=budget, schedule="random")
    obs, _ = env.reset(seed=11)
    act = single_policy(kind, env)
    order = []
    for _ in range(2 * n * budget):
        _, info, _ = run_episode(env, act, obs)
        order.append((info["input_id"], info["run_index"]))
        obs, _ = env.reset()
    counts = Counter(order)
    assert set(counts.values()) == {budget} and len(counts) == 2 * n
    first_pass = [i for i, r in order[: n * budget]]
    assert first_pass != [env.unwrapped.input_ids[j % n] for j in range(n * budget)]  # not round robin


@pytest.mark.parametrize("kind", KINDS)
def test_explicit_input_id_counts_its_own_budget(kind: str) -> None:
    env = make("coin_sum", kind, n_inputs=3, budget=2)
    target = env.unwrapped.input_ids[2]
    obs, _ = env.reset(seed=0, options={"input_id": target})
    act = single_policy(kind, env)
    got = []
    for _ in range(3):
        _, info, _ = run_episode(env, act, obs)
        got.append((info["input_id"], info["sample_index"], info["run_index"]))
        obs, _ = env.reset(options={"input_id": target})
    assert got == [(target, 1, 0), (target, 2, 0), (target, 1, 1)]
    with pytest.raises(ValueError, match="unknown input_id 'nope'"):
        obs, _ = env.reset(options={"input_id": "nope"})
    with pytest.raises(SeffiError, match="unknown reset option"):
        obs, _ = env.reset(options={"input": target})


@pytest.mark.parametrize("kind", KINDS)
def test_seeded_reset_is_reproducible_and_restarts_the_life(kind: str) -> None:
    def rollout(seed: int) -> list:
        env = make("edit_script", kind, schedule="random", reward="novel", history=True)
        obs, _ = env.reset(seed=seed)
        act = single_policy(kind, env, seed=5)
        trace = []
        for _ in range(40):
            obs, r, term, trunc, info = env.step(act(obs))
            trace.append((r, term, trunc, sorted(info.items())))
            if term or trunc:
                obs, _ = env.reset()
        return trace

    a, b = rollout(3), rollout(3)
    assert a == b
    assert rollout(4) != a
    env = make("edit_script", kind)
    obs, _ = env.reset(seed=1)
    _, info1, _ = run_episode(env, single_policy(kind, env), obs)
    obs, _ = env.reset(seed=1)  # a seed restarts counters: the same input gets k=1 again
    _, info2, _ = run_episode(env, single_policy(kind, env), obs)
    assert (
        (info1["input_id"], info1["sample_index"])
        == (info2["input_id"], info2["sample_index"])
        == (
            env.unwrapped.input_ids[0],
            1,
        )
    )


@pytest.mark.parametrize("kind", KINDS)
def test_step_errors_before_reset_after_end_and_on_bad_actions(kind: str) -> None:
    env = make("hanoi", kind).unwrapped
    with pytest.raises(SeffiError, match="reset"):
        env.step(0)
    obs, _ = env.reset(seed=0)
    n = env.action_space.n
    for bad in (-1, n, 1.5, True, "0", np.array([0, 1])):
        with pytest.raises(SeffiError, match="action"):
            env.step(bad)
    act = single_policy(kind, env)
    run_episode(env, act, obs)
    with pytest.raises(SeffiError, match="reset"):
        env.step(0)


def nan_reward(info: dict) -> float:
    """A user reward with a bug: NaN for the first sample of every run."""
    return float("nan") if info["sample_index"] == 1 else 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_a_user_reward_that_is_not_a_finite_number_is_an_error_naming_the_function(kind: str) -> None:
    """A NaN reward never reaches the learner silently."""
    env = make("coin_sum", kind, reward=nan_reward).unwrapped
    obs, _ = env.reset(seed=0)
    target = env.current_input_id
    with pytest.raises(
        SeffiError, match=r"reward function tests\.envs\.test_core\.nan_reward returned nan"
    ) as err:
        run_episode(env, single_policy(kind, env), obs)
    assert f"input {target!r} (sample 1)" in str(err.value)
    vec = make_vec("coin_sum", kind, 2, reward=lambda info: None)
    obs, _ = vec.reset(seed=0)
    policy = policy_for(kind, vec, 2, seed=0)
    with pytest.raises(SeffiError, match=r"reward function .*<lambda> returned None"):
        for _ in range(200):
            obs, *_ = vec.step(policy(obs))


def test_a_raising_user_reward_leaves_the_budget_unbooked() -> None:
    """The failed sample is not counted, so fixing the reward does not skew k."""
    env = make("coin_sum", "router", reward=nan_reward).unwrapped
    env.reset(seed=0)
    with pytest.raises(SeffiError, match="nan_reward"):
        env.step(0)
    assert int(env._engine.life.counts[0].sum()) == 0 and not env._engine.life.tried.any()
    with pytest.raises(SeffiError, match="nan_reward"):  # still sample 1 of the run: still NaN
        env.step(0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("options", ["input_id", ["input_id"], 3])
def test_reset_options_that_are_not_a_mapping_are_refused_whole(kind: str, options: object) -> None:
    """``reset(options='string')`` is refused whole, not read as one unknown option per character."""
    env = make("hanoi", kind)
    with pytest.raises(SeffiError, match=rf"^reset options must be a dict .* got {type(options).__name__} "):
        env.reset(options=options)
    vec = make_vec("hanoi", kind, 2)
    with pytest.raises(SeffiError, match=r"^reset options must be a dict .*'reset_mask'"):
        vec.reset(options=options)
    env.reset(seed=0, options={"input_id": env.unwrapped.input_ids[1]})  # a dict still works
    assert env.unwrapped.current_input_id == env.unwrapped.input_ids[1]


@pytest.mark.parametrize(
    ("kind", "pool_setting"),
    [("token", {"max_length": 64}), ("router", {"noise": 0.3}), ("router", {"mapping_seed": 1})],
)
def test_envs_share_a_pool_spec_exactly_when_their_pool_settings_agree(kind: str, pool_setting: dict) -> None:
    base = make("sort_swaps", kind).unwrapped._engine.spec
    run_only = make(
        "sort_swaps", kind, budget=9, reward="novel", novelty_bonus=2.0, schedule="random", history=True
    )
    assert run_only.unwrapped._engine.spec is base
    for other in ({"n_inputs": 4}, {"input_seed": 1}, {"task_config": {"max_length": 6}}, pool_setting):
        assert make("sort_swaps", kind, **other).unwrapped._engine.spec is not base, other

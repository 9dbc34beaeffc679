"""Reward modes."""

from __future__ import annotations

import pytest

from tests.envs.common import KINDS, make, policy_for


def rollout(env, kind: str, episodes: int, seed: int = 0) -> list[tuple[float, dict]]:
    """(reward, info) of every step of ``episodes`` episodes under a fixed scripted policy."""
    batched = policy_for(kind, env, 1, seed)
    obs, _ = env.reset(seed=seed)
    out = []
    done = 0
    while done < episodes:
        batch = {k: v[None] for k, v in obs.items()} if kind == "token" else obs
        obs, reward, term, trunc, info = env.step(int(batched(batch)[0]))
        out.append((reward, info))
        if term or trunc:
            done += 1
            obs, _ = env.reset()
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_valid_reward_is_one_for_valid_traces_and_zero_elsewhere(kind: str) -> None:
    steps = rollout(make("countdown", kind), kind, 30)
    assert any(i.get("valid") for _, i in steps) and any(i and not i["valid"] for _, i in steps)
    for reward, info in steps:
        assert reward == (float(info["valid"]) if info else 0.0)


@pytest.mark.parametrize("kind", KINDS)
def test_novel_reward_adds_a_bonus_per_strategy_new_to_the_run(kind: str) -> None:
    steps = rollout(make("grid_routes", kind, reward="novel", novelty_bonus=0.5, budget=3), kind, 40)
    seen: dict[str, set] = {}
    bonuses = 0
    for reward, info in steps:
        if not info:
            assert reward == 0.0
            continue
        if info["sample_index"] == 1:
            seen[info["input_id"]] = set()
        new = set(info["strategy_matches"]) - seen[info["input_id"]] if info["valid"] else set()
        seen[info["input_id"]] |= new
        assert info["num_new_strategies"] == len(new)
        assert reward == pytest.approx(float(info["valid"]) + 0.5 * len(new))
        bonuses += bool(new)
    assert bonuses >= 3


def test_callable_reward_gets_the_final_info() -> None:
    def score(info: dict) -> float:
        return 10.0 * len(info["strategy_matches"]) + info["sample_index"]

    for reward, info in rollout(make("edit_script", "router", reward=score), "router", 12):
        assert reward == 10.0 * len(info["strategy_matches"]) + info["sample_index"]

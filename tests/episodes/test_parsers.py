"""One parser per info format: each gives the finished episodes as a batch (hand-computed references)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.wrappers.vector import DictInfoToList

from seffi.callbacks import CoverageMonitor
from seffi.episodes import (
    EpisodeBatch,
    EpisodeRejected,
    parse_generation,
    parse_info,
    parse_infos,
    parse_list,
    parse_rows,
    parse_vector,
)
from seffi.errors import SeffiError
from seffi.report.sinks import NullSink
from tests.callbacks.fake_env import FakeCoverageEnv

S = ("a", "b", "c")


def _episodes(b: EpisodeBatch) -> list[tuple[Any, ...]]:
    """(input_id, matched ids, valid, env, sample_index, run_index, z) per episode of ``b``."""
    ms = [tuple(s for s, h in zip(b.strategies, row, strict=True) if h) for row in b.hits.tolist()]
    cols = (b.valid, b.env_index, b.sample_index, b.run_index, b.z)
    return list(zip(b.input_id.tolist(), ms, *(c.tolist() for c in cols), strict=True))


def _gym_dict(infos: list[dict[str, Any] | None]) -> dict[str, Any]:
    """A dict of arrays built by Gymnasium's own ``VectorEnv._add_info`` (None: that env reported nothing)."""

    class V(VectorEnv):
        def __init__(self, n: int) -> None:
            self.num_envs = n

    v, out = V(len(infos)), {}
    for i, info in enumerate(infos):
        if info is not None:
            out = v._add_info(out, info, i)
    return out


ENDED = [
    {"input_id": "x", "strategy_matches": ("b", "a"), "valid": False, "sample_index": 2, "z": 1},
    None,
    {"input_id": "y", "strategy_matches": (), "run_index": 4},
]
#: The batch of ENDED, by hand: env 1 did not finish; unreported keys hold their fill values.
EXPECTED = [("x", ("a", "b"), False, 0, 2, -1, 1), ("y", (), True, 2, -1, 4, -1)]


def test_vector_dict_next_step_and_same_step() -> None:
    done = np.array([True, False, True])
    assert _episodes(parse_vector(_gym_dict(ENDED), S, done)) == EXPECTED
    assert _episodes(parse_vector(_gym_dict(ENDED), S)) == EXPECTED  # ends told by strategy_matches
    same = {"final_info": _gym_dict(ENDED), "_final_info": done, "input_id": np.array(["r0", "r1", "r2"])}
    assert _episodes(parse_vector(same, S, done)) == EXPECTED
    assert _episodes(parse_vector(same, S)) == EXPECTED
    legacy = {"final_info": np.array(ENDED, dtype=object), "_final_info": done}  # Gymnasium 0.29
    assert _episodes(parse_vector(legacy, S)) == EXPECTED
    shifted = parse_vector(_gym_dict(ENDED), S, done, env_offset=10)
    assert shifted.env_index.tolist() == [10, 12]


def test_list_of_infos_sb3_and_steps_in_one_call() -> None:
    sb3 = [dict(ENDED[0], terminal_observation=0), {"step_note": 1}, ENDED[2]]
    done = np.array([True, False, True])
    assert _episodes(parse_list(sb3, S, done)) == EXPECTED
    assert _episodes(parse_list(sb3, S)) == EXPECTED
    # Two consecutive steps in one call: dones of shape (steps, envs), env index = position in the step.
    two = parse_list([sb3, sb3[::-1]], S, np.stack([done, done[::-1]]))
    assert _episodes(two) == EXPECTED + [(*e[:3], 2 - e[3], *e[4:]) for e in EXPECTED[::-1]]
    with pytest.raises(SeffiError, match="dones has 3 entries"):
        parse_list([{}, {}], S, np.array([False, False, True]))


def test_single_info_generation_and_rows() -> None:
    info = {"input_id": 7, "strategy_matches": ["c"], "z": np.int64(3)}
    (got,) = _episodes(parse_info(info, S, env_index=5))
    assert got == ("7", ("c",), True, 5, -1, -1, 3)  # an int id is its decimal string
    assert len(parse_infos({"step_note": 1}, S, False)) == len(parse_infos({"step_note": 1}, S)) == 0
    private = {"input_id": "x", "strategy_matches": ("a",), "_note": 1}  # one env's key, not a vector mask
    assert _episodes(parse_infos(private, S, True)) == [("x", ("a",), True, 0, -1, -1, -1)]
    gen = parse_generation(["p", "p", "q"], [("a",), (), ("c", "a")], S, [True, False, True],
                           sample_index=[1, 2, 1], run_index=[0, 0, 3])  # fmt: skip
    assert _episodes(gen) == [
        ("p", ("a",), True, 0, 1, 0, -1),
        ("p", (), False, 0, 2, 0, -1),
        ("q", ("a", "c"), True, 0, 1, 3, -1),
    ]
    rows = parse_rows([ENDED[0], ENDED[2]], S, env_index=[0, 2])
    assert _episodes(rows) == EXPECTED


def test_a_rejected_episode_leaves_the_others_in_its_batch() -> None:
    bad = dict(ENDED[0], valid="yes")
    with pytest.raises(EpisodeRejected) as err:
        parse_list([bad, None, ENDED[2]], S, np.array([True, False, True]), env_name="E")
    e = err.value
    assert (e.key, e.env_index, e.rejected, e.recorded) == ("valid", 0, 1, None)
    assert str(e) == "env 'E' (sub-env index 0): 'valid' must be a bool (or numpy bool), got str 'yes'"
    assert _episodes(e.batch) == EXPECTED[1:]


# -- real vector envs --------------------------------------------------------------------------------


def _vector(mode: AutoresetMode, n: int = 3, **kw: Any) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: FakeCoverageEnv(**kw) for _ in range(n)], autoreset_mode=mode)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("use_dones", [True, False])
def test_vector_infos_yield_exactly_the_finished_episodes(mode: AutoresetMode, use_dones: bool) -> None:
    envs = _vector(mode)
    envs.reset(seed=7)
    envs.action_space.seed(3)
    seen: list[tuple[Any, ...]] = []
    for _ in range(120):
        _, _, term, trunc, infos = envs.step(envs.action_space.sample())
        seen += _episodes(parse_infos(infos, S, (term | trunc) if use_dones else None, env_name="fake"))
    truth = [env.log for env in envs.envs]
    assert sum(map(len, truth)) > 60  # episodes of 1-3 steps over 120 steps x 3 envs
    assert [[e[:3] for e in seen if e[3] == i] for i in range(3)] == [
        [(x, m, v) for x, m, v in log] for log in truth
    ]


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_missing_strategy_matches_is_one_clear_error(mode: AutoresetMode) -> None:
    envs = _vector(mode, drop_key="strategy_matches")
    envs.reset(seed=0)
    with pytest.raises(EpisodeRejected) as err:
        for _ in range(10):
            _, _, term, trunc, infos = envs.step(envs.action_space.sample())
            parse_infos(infos, S, term | trunc, env_name="fake")
    assert err.value.key == "strategy_matches" and "'fake'" in str(err.value)
    assert "keys: ['input_id', 'num_strategies', 'parse_ok', " in str(err.value)


def test_single_env_under_gymnasium_wrappers() -> None:
    env = gym.wrappers.RecordEpisodeStatistics(FakeCoverageEnv())
    env.reset(seed=2)
    got: list[tuple[Any, ...]] = []
    for t in range(30):
        _, _, term, trunc, info = env.step(t % 3)
        got += _episodes(parse_infos(info, S, term or trunc))
        if term or trunc:
            env.reset()
    assert [e[:3] for e in got] == env.unwrapped.log


K = 3


class PickEnv(gym.Env):
    """A user env: one step = one sample on input ``x<row>``; the action is the strategy it follows."""

    def __init__(self, row: int) -> None:
        self.row, self.samples = row, 0
        self.observation_space, self.action_space = gym.spaces.Discrete(1), gym.spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        return 0, {"input_id": f"x{self.row}"}  # the reset info names the input too

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        self.samples += 1
        k = (self.samples - 1) % K + 1  # K samples per run
        info = {"input_id": f"x{self.row}", "strategy_matches": (S[int(action)],), "sample_index": k}
        return 0, 0.0, True, False, info


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED])
def test_dict_info_to_list_in_every_autoreset_mode(mode: AutoresetMode) -> None:
    """DictInfoToList over a vector env: C(k) equals a hand count of the actions taken."""
    envs = DictInfoToList(SyncVectorEnv([lambda r=r: PickEnv(r) for r in range(2)], autoreset_mode=mode))
    monitor = CoverageMonitor(K, S, sinks=NullSink(), n_boot=0)
    actions = np.random.default_rng(0).integers(0, 3, size=(40, 2))
    picked: list[list[int]] = [[], []]  # per env row: the strategy of each finished episode
    envs.reset(seed=0)
    for a in actions:
        _, _, term, trunc, infos = envs.step(a)
        done = term | trunc
        monitor.update_infos(infos, done)
        for i in np.flatnonzero(done):
            picked[i].append(int(a[i]))
        if mode == AutoresetMode.DISABLED:
            envs.reset(options={"reset_mask": done})
    # By hand: a run is K consecutive samples of a row; C(k) = mean over inputs of |first k| / M.
    want = np.zeros(K)
    for seq in picked:
        runs = [seq[j : j + K] for j in range(0, len(seq) - K + 1, K)]
        want += np.mean([[len(set(run[:k])) / len(S) for k in range(1, K + 1)] for run in runs], axis=0)
    assert monitor.episodes == sum(map(len, picked)) >= 40
    np.testing.assert_allclose(monitor.tracker.point()["coverage"], want / 2, atol=1e-12)

"""The monitor never loses good episodes and always names the bad key."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import VectorEnv

from seffi.callbacks import CoverageMonitor, EpisodeRejected
from seffi.episodes import parse_list, parse_rows
from seffi.episodes.contract import CONTRACT
from seffi.errors import SeffiError

STRATS = ("a", "b", "c")
ENV = "fake/Env-v0"


class _Null:
    def log(self, data, step):
        pass

    def log_snapshot(self, comparison, step, scope=None):
        pass

    def finish(self, report=None, tracker_state=None):
        pass


def _monitor(**kw: Any) -> CoverageMonitor:
    return CoverageMonitor(4, STRATS, sinks=_Null(), n_boot=0, env_name=ENV, **kw)


def _info(t: int, **over: Any) -> dict[str, Any]:
    """The final info of the t-th good episode: input x<t % 3>, k = t // 3 % 4 + 1, run t // 12."""
    info = {
        "input_id": f"x{t % 3}",
        "strategy_matches": (STRATS[t % 3],) if t % 4 else (),
        "valid": t % 5 != 0,
        "sample_index": t // 3 % 4 + 1,
        "run_index": t // 12,
    }
    info.update(over)
    return info


def _state(m: CoverageMonitor) -> str:
    return json.dumps(m.state_dict(), sort_keys=True)


def _vector_infos(infos: list[dict[str, Any] | None]) -> dict[str, Any]:
    """A Gymnasium dict-of-arrays built the way Gymnasium's own vector envs build it."""

    class V(VectorEnv):
        def __init__(self, n: int) -> None:
            self.num_envs = n

    v, out = V(len(infos)), {}
    for i, info in enumerate(infos):
        if info is not None:
            out = v._add_info(out, info, i)
    return out


def test_sb3_list_bad_sample_index_rejects_only_that_episode() -> None:
    """'abc' beside a full buffer is refused at ingestion by name; no good one lost."""
    m, ref = _monitor(), _monitor()
    good = [_info(t) for t in range(4095)]
    for t in range(0, 4095, 5):  # SB3 steps of 5 envs, all ending an episode; 4,095 buffered
        step = good[t : t + 5]
        assert m.update_infos(step, np.ones(len(step), dtype=bool)) == len(step)
    for t in range(0, 4095, 5):
        step = good[t : t + 5]
        ref.update_infos(step, np.ones(len(step), dtype=bool))
    assert m.pending == 4095  # one short of a flush: everything is still in the buffer
    bad = [_info(4095), _info(4096, sample_index="abc"), _info(4097)]
    with pytest.raises(EpisodeRejected) as err:
        m.update_infos(bad, np.array([True, True, True]))
    e = err.value
    assert isinstance(e, SeffiError)
    assert (e.key, e.env_index, e.rejected, e.recorded) == ("sample_index", 1, 1, 2)
    text = str(e)
    assert "'sample_index'" in text and "'abc'" in text and ENV in text and "sub-env index 1" in text
    assert "\n" not in text
    # The buffer (now past flush_every, so flushed) and the two good episodes of the call all count.
    ref.update_infos([bad[0], {}, bad[2]], np.array([True, False, True]))  # same sub-envs, bad one left out
    assert m.samples == m.episodes == 4097 == ref.samples
    same = _state(m) == _state(ref)  # (a bool: pytest's diff of two long JSON strings takes minutes)
    assert same
    # Training goes on: later steps and flushes work.
    m.update_infos([_info(4098)], np.array([True]))
    assert m.samples == 4098


def test_done_env_with_none_info_is_rejected_by_name() -> None:
    """A done env whose info is None is a rejected episode (not UnboundLocalError)."""
    m = _monitor()
    with pytest.raises(
        EpisodeRejected, match=r"sub-env index 0\): an episode ended but its info is None"
    ) as err:
        m.update_infos([None, _info(1)], np.array([True, True]))
    assert (err.value.key, err.value.env_index, err.value.recorded) == ("info", 0, 1)
    assert m.samples == 1
    # Gymnasium 0.29's final_info object array with a None for a done env: the same.
    legacy = {"final_info": np.array([_info(2), None], dtype=object), "_final_info": np.array([True, False])}
    with pytest.raises(EpisodeRejected, match=r"sub-env index 1\): an episode ended but its info is None"):
        m.update_infos(legacy, np.array([True, True]))
    assert m.samples == 2
    # Without dones, a None info is not an episode end (no final-step keys): nothing to reject.
    assert m.update_infos([None, _info(3)]) == 1


def _paths() -> list[str]:
    lists = ["sb3_list", "sb3_steps", "list_no_dones"]
    return ["gym_vector", "gym_final_info", *lists, "single_dict", "rows"]


BAD_VALUES = [
    ("valid", None),
    ("valid", 1),
    ("valid", "yes"),
    ("input_id", None),
    ("input_id", 3.5),
    ("input_id", True),
    ("sample_index", math.nan),
    ("sample_index", 2.5),
    ("sample_index", "abc"),
    ("sample_index", None),
    ("sample_index", -2),
    ("sample_index", 10**30),
    ("z", math.nan),
    ("z", 1.25),
    ("run_index", True),
    ("strategy_matches", np.array("a")),
    ("strategy_matches", "a"),
    ("strategy_matches", ("zzz",)),
]


def _ingest(m: CoverageMonitor, path: str, infos: list[dict[str, Any]]) -> int:
    """Feed the infos (all ending an episode) through one ingestion path."""
    done = np.ones(len(infos), dtype=bool)
    if path == "gym_vector":
        return m.update_infos(_vector_infos(infos), done)
    if path == "gym_final_info":
        n = len(infos)
        return m.update_infos(
            {"final_info": _vector_infos(infos), "_final_info": done, "_obs": np.ones(n, bool)}, done
        )
    if path == "sb3_list":
        return m.update_infos(infos, done)
    if path == "sb3_steps":  # a rollout read as one batch (SB3's log_at="rollout")
        return m.update_infos([infos], done[None])
    if path == "list_no_dones":
        return m.update_infos([dict(i, y_text="t") for i in infos])
    if path == "single_dict":
        total = 0
        for i, info in enumerate(infos):  # one env: one call per episode
            try:
                m.update_infos(info, True)
                total += 1
            except EpisodeRejected as exc:
                exc.single_index = i  # type: ignore[attr-defined]
                raise
        return total
    try:  # plain rows, the good ones kept as the monitor keeps them
        batch = parse_rows(infos, m.coder, env_name=ENV)
    except EpisodeRejected as exc:
        raise exc.recorded_as(m.update(exc.batch)) from None
    return m.update(batch)


@pytest.mark.parametrize("path", _paths())
@pytest.mark.parametrize(("key", "value"), BAD_VALUES, ids=[f"{k}={v!r}"[:30] for k, v in BAD_VALUES])
def test_one_rule_on_every_path(path: str, key: str, value: Any) -> None:
    """The same bad value is rejected, by name, on every ingestion path; goods count."""
    m, ref = _monitor(), _monitor()
    good = [_info(t, z=t % 2) for t in range(3)]
    bad = dict(_info(3, z=1), **{key: value})
    # Bad first: Gymnasium types a step's column by the first env that reports it (the worst case).
    infos = [bad, *good] if path != "single_dict" else [*good, bad]
    expect = 3
    if path.startswith("gym"):
        try:
            column = _vector_infos(infos)[key]
        except (ValueError, TypeError, OverflowError):
            pytest.skip("Gymnasium itself cannot store this value next to the good ones (it raises)")
        if key in CONTRACT and CONTRACT[key].bad(column[1:]) is not None:
            # Gymnasium typed the column by the bad value and coerced the good ones (True -> 1): seffi
            # cannot trust them and rejects the column, still naming the key.
            expect = 0
    with pytest.raises(EpisodeRejected) as err:
        _ingest(m, path, infos)
    e = err.value
    assert e.key == key
    assert f"'{key}'" in str(e) and "\n" not in str(e)
    assert ENV in str(e)
    ref.update(parse_rows(good, ref.coder))
    assert m.samples == expect, "the good episodes of the call are recorded"
    if expect:  # the same runs as a monitor fed only the good episodes (too short for curves at K)
        assert m.tracker.state_dict()["runs"] == ref.tracker.state_dict()["runs"]
        assert m.tracker.runs.first_hit[: len(m.tracker)].max() >= 0


@pytest.mark.parametrize("path", ["gym_vector", "sb3_list", "single_dict"])
@pytest.mark.parametrize("dones", [np.array([1, 0]), ["no", "no"], np.array([0.0, 1.0]), [None, True]])
def test_non_boolean_dones_name_dones_and_record_nothing(path: str, dones: Any) -> None:
    """Dones must be booleans on every path (1, 'no', 0.0, None are not)."""
    m = _monitor()
    infos = [_info(0), _info(1)]
    feed = {"gym_vector": _vector_infos(infos), "sb3_list": infos, "single_dict": infos[0]}[path]
    with pytest.raises(SeffiError, match="'dones' must be booleans"):
        m.update_infos(feed, dones if path != "single_dict" else dones[:1])
    assert m.episodes == 0


def test_integral_floats_from_gymnasium_columns_are_ints() -> None:
    """A good env's 3 stored as 3.0 (a float column) still counts; a NaN does not."""
    m = _monitor()
    vec = _vector_infos([_info(0, sample_index=math.nan), _info(1, sample_index=2)])
    assert vec["sample_index"].dtype == np.float64
    with pytest.raises(
        EpisodeRejected, match=r"sub-env index 0\): 'sample_index' must be an int >= 0, got float"
    ):
        m.update_infos(vec, np.array([True, True]))
    assert m.samples == 1
    assert m.update_infos([_info(2, sample_index=3.0)], np.array([True])) == 1


def test_valid_none_counts_the_same_everywhere() -> None:
    """valid=None counts the same on the vector, final_info, SB3 and single-dict paths."""
    outcomes = set()
    for path in ("gym_vector", "gym_final_info", "sb3_list", "single_dict"):
        m = _monitor()
        try:
            _ingest(m, path, [_info(1, valid=None)])
            outcomes.add(("recorded", m._valid))
        except EpisodeRejected as exc:
            outcomes.add(("rejected", exc.key))
    assert outcomes == {("rejected", "valid")}


def test_parsers_outside_a_monitor_raise_the_same_error() -> None:
    """The public parsers apply the same rule (no monitor: nothing recorded)."""
    with pytest.raises(EpisodeRejected, match=r"env 'e' \(sub-env index 1\): 'valid' must be a bool"):
        parse_list([_info(0), _info(1, valid=None)], STRATS, np.array([True, True]), env_name="e")


# -- load_state_dict / merge ------------------------------------------------------------------------------


def _filled() -> CoverageMonitor:
    m = _monitor()
    m.update_infos([_info(t) for t in range(40)], np.ones(40, dtype=bool))
    return m


CORRUPTIONS = {
    "inputs is a list": lambda s: s["tracker"].update(inputs=[]),
    "input M_x is a str": lambda s: s["tracker"]["inputs"].update(m="junk"),
    "tracker run n = 10**30": lambda s: s["tracker"]["runs"]["n"].__setitem__(0, 10**30),
    "episodes = 10**30": lambda s: s.update(episodes=10**30),
    "first hit out of range": lambda s: s["tracker"]["runs"]["first_hit"].__setitem__(0, "z" * 4),
    "first hits ragged": lambda s: s["tracker"]["runs"]["first_hit"].__setitem__(0, "0"),
    "first hit not a digit": lambda s: s["tracker"]["runs"]["first_hit"].__setitem__(0, "!!!!"),
    "open run not in tracker": lambda s: s["tracker"]["open_runs"][0].update(run=999),
    "open_runs is None": lambda s: s["tracker"].update(open_runs=None),
    "barcode cell out of range": lambda s: s["tracker"]["barcode"][0]["cells"].__setitem__(0, 99),
    "has_latent a str": lambda s: s["tracker"].update(has_latent="yes"),
    "stream_offset negative": lambda s: s["tracker"].update(stream_offset=-1),
    "n_valid a float": lambda s: s["tracker"]["runs"]["n_valid"].__setitem__(1, 1.5),
    "valid > samples": lambda s: s["tracker"].update(valid=10**6),
    "tracker missing": lambda s: s.pop("tracker"),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corrupt_state_is_refused_and_the_monitor_unchanged(name: str) -> None:
    """Validated before anything changes; overflowing counts refused at load."""
    m = _filled()
    before = _state(m)
    bad = copy.deepcopy(m.state_dict())
    CORRUPTIONS[name](bad)
    for op in (m.load_state_dict, m.merge):
        with pytest.raises(SeffiError) as err:
            op(bad)
        assert "\n" not in str(err.value)
        unchanged = _state(m) == before
        assert unchanged
    # Still fully usable.
    m.update_infos([_info(40)], np.array([True]))
    assert m.samples == 41


def test_fuzzed_states_load_or_leave_the_monitor_unchanged() -> None:
    """Any leaf replaced by junk either loads or raises SeffiError, never half-loads."""
    rng = np.random.default_rng(4)
    m = _filled()
    good = m.state_dict()
    before = _state(m)
    junk: list[Any] = [None, "s", -1, 10**30, 1.5, [], {}, True, [[1]], 2**62]

    def leaves(node: Any, path: tuple = ()) -> list[tuple]:
        if isinstance(node, dict):
            return [p for k, v in node.items() for p in leaves(v, (*path, k))] + [path]
        if isinstance(node, list):
            return [p for i, v in enumerate(node) for p in leaves(v, (*path, i))] + [path]
        return [path]

    paths = [p for p in leaves(good) if p]
    for _ in range(300):
        state = copy.deepcopy(good)
        path = paths[int(rng.integers(len(paths)))]
        parent = state
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = junk[int(rng.integers(len(junk)))]
        target = _monitor()
        target.load_state_dict(good)
        try:
            target.load_state_dict(state)
        except SeffiError:
            unchanged = _state(target) == before
            assert unchanged, path
            continue
        target.state_dict()  # a state that loads is a working monitor
        target.tracker.point()

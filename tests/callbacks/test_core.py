from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from seffi.callbacks.infos import EpisodeEnd, episode_ends
from seffi.errors import SeffiError
from tests.callbacks.fake_env import FakeCoverageEnv


def _vector(mode: AutoresetMode, n: int = 3, **kw) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: FakeCoverageEnv(**kw) for _ in range(n)], autoreset_mode=mode)


def _run_vector(envs: SyncVectorEnv, steps: int, use_dones: bool) -> list[EpisodeEnd]:
    envs.reset(seed=7)
    envs.action_space.seed(3)
    seen: list[EpisodeEnd] = []
    for _ in range(steps):
        _, _, term, trunc, infos = envs.step(envs.action_space.sample())
        seen += episode_ends(infos, (term | trunc) if use_dones else None, env_name="fake")
    return seen


def _by_env(ends: list[EpisodeEnd], n: int) -> list[list[tuple[str, tuple[str, ...], bool]]]:
    return [[(e.input_id, e.matches, e.valid) for e in ends if e.env_index == i] for i in range(n)]


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("use_dones", [True, False])
def test_vector_infos_yield_exactly_the_finished_episodes(mode: AutoresetMode, use_dones: bool) -> None:
    envs = _vector(mode)
    ends = _run_vector(envs, 120, use_dones)
    truth = [env.log for env in envs.envs]
    assert sum(map(len, truth)) > 60  # episodes of 1-3 steps over 120 steps x 3 envs
    assert _by_env(ends, 3) == truth


def test_sb3_style_lists_use_the_done_step_dict() -> None:
    env = FakeCoverageEnv()
    env.reset(seed=1)
    infos_per_step, dones_per_step = [], []
    for t in range(60):
        _, _, term, trunc, info = env.step(t % 3)
        done = term or trunc
        # SB3 VecEnv: the done step's dict is the final info (+ terminal_observation); reset is inside.
        infos_per_step.append([dict(info, terminal_observation=0) if done else info, {}])
        dones_per_step.append(np.array([done, False]))
        if done:
            env.reset()
    ends = [e for i, d in zip(infos_per_step, dones_per_step, strict=True) for e in episode_ends(i, d)]
    assert [(e.input_id, e.matches, e.valid) for e in ends] == env.log
    assert all(e.env_index == 0 for e in ends)
    # Without dones the final-step keys identify the same ends.
    ends2 = [e for infos in infos_per_step for e in episode_ends(infos)]
    assert ends2 == ends


def test_single_env_info() -> None:
    info = {"input_id": "x", "strategy_matches": ("b", "a"), "valid": False, "z": np.int64(3)}
    (end,) = episode_ends(info, True)
    assert end == EpisodeEnd("x", ("a", "b"), False, 0, None, 3)
    assert episode_ends({"step_note": 1}, False) == []
    assert episode_ends({"step_note": 1}) == []


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_missing_strategy_matches_is_one_clear_error(mode: AutoresetMode) -> None:
    envs = _vector(mode, drop_key="strategy_matches")
    envs.reset(seed=0)
    with pytest.raises(SeffiError, match=r"'strategy_matches'.*|.*'fake'") as err:
        for _ in range(10):
            _, _, term, trunc, infos = envs.step(envs.action_space.sample())
            episode_ends(infos, term | trunc, env_name="fake")
    assert "strategy_matches" in str(err.value) and "'fake'" in str(err.value)


def test_sb3_list_missing_key_names_key_and_env() -> None:
    with pytest.raises(SeffiError, match="strategy_matches") as err:
        episode_ends([{}, {"input_id": "x", "episode": {}}], np.array([False, True]), env_name="MyEnv-v0")
    assert "MyEnv-v0" in str(err.value) and "index 1" in str(err.value)


def test_strategy_matches_as_string_is_rejected() -> None:
    with pytest.raises(SeffiError, match="tuple of strategy ids"):
        episode_ends({"input_id": "x", "strategy_matches": "ab"}, True)


def test_dones_length_mismatch() -> None:
    with pytest.raises(SeffiError, match="dones has 3 entries"):
        episode_ends([{}, {}], np.array([False, False, True]))


def test_legacy_final_info_object_array() -> None:
    final = np.array([None, {"input_id": "x", "strategy_matches": ("c",)}], dtype=object)
    infos = {"final_info": final, "_final_info": np.array([False, True])}
    (end,) = episode_ends(infos)
    assert (end.input_id, end.matches, end.env_index) == ("x", ("c",), 1)


def test_gym_make_single_env_works_with_gymnasium_wrappers() -> None:
    env = gym.wrappers.RecordEpisodeStatistics(FakeCoverageEnv())
    env.reset(seed=2)
    got = []
    for t in range(30):
        _, _, term, trunc, info = env.step(t % 3)
        got += episode_ends(info, term or trunc)
        if term or trunc:
            env.reset()
    assert [(e.input_id, e.matches, e.valid) for e in got] == env.unwrapped.log


def test_a_monitor_with_its_own_sinks_says_where_its_report_went(tmp_path, capsys, monkeypatch) -> None:
    """``close()`` prints the folder and the sync command once (as ``seffi run``).

    Sinks passed in belong to an adapter or ``seffi run``, which prints the message itself.
    """
    from seffi.callbacks.core import CoverageMonitor
    from seffi.report.sinks import LocalSink

    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.chdir(tmp_path)
    monitor = CoverageMonitor(2, ("a", "b"), out_dir="out", wandb="offline", plots=False, n_boot=0)
    monitor.ingest_end(EpisodeEnd("x", ("a",), True, sample_index=1, run_index=0))
    monitor.close()
    monitor.close()  # idempotent: nothing printed twice
    run_dir = monitor.sinks.wandb.run.run_dir.relative_to(tmp_path)
    assert str(run_dir).startswith("wb/wandb/offline-run-")
    assert capsys.readouterr().out.splitlines() == [
        "[seffi] run folder: out  (report.json, report.md, plots)",
        f"[seffi] W&B offline run saved; upload it with: wandb sync {run_dir}",
    ]
    passed = CoverageMonitor(2, ("a", "b"), sinks=LocalSink(tmp_path / "own"), n_boot=0)
    passed.ingest_end(EpisodeEnd("x", ("b",), True, sample_index=1, run_index=0))
    passed.close()
    assert capsys.readouterr().out == ""


def test_snapshots_use_snapshot_n_boot_and_the_final_report_n_boot(tmp_path, monkeypatch) -> None:
    """Snapshots draw ``snapshot_n_boot`` bootstrap replicates; the final report draws ``n_boot``."""
    from seffi.callbacks.core import CoverageMonitor
    from seffi.coverage.tracker import CoverageTracker
    from seffi.report.sinks import LocalSink

    drawn: list[int] = []
    curves = CoverageTracker.curves

    def spy(self, *args, **kwargs):
        drawn.append(kwargs["n_boot"])
        return curves(self, *args, **kwargs)

    monkeypatch.setattr(CoverageTracker, "curves", spy)
    monitor = CoverageMonitor(
        2, ("a", "b"), sinks=LocalSink(tmp_path / "run", plots=False), n_boot=40, snapshot_n_boot=7,
        log_every=2, log_curves_every=1,
    )  # fmt: skip
    for i in range(8):
        end = EpisodeEnd(f"x{i // 2 % 3}", ("ab"[i % 2],), True, sample_index=1 + i % 2, run_index=i // 2)
        monitor.ingest_end(end)
        monitor.maybe_log(i + 1)
    assert drawn and set(drawn) == {7}
    drawn.clear()
    monitor.close()
    assert drawn == [40]
    assert CoverageMonitor(2, ("a",), sinks=LocalSink(tmp_path / "b"), n_boot=5).snapshot_n_boot == 5

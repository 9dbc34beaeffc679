from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import seffi.envs  # noqa: F401 - registers the env ids
from seffi.errors import SeffiError
from tests.callbacks.helpers import (
    assert_curves_match,
    assert_plots_nonempty,
    hand_tracker,
    load_report,
    tiny_ppo,
)
from tests.helpers import require, wandb_leet

sb3 = require("stable_baselines3", "sb3")
torch = require("torch", "sb3")
torch.set_num_threads(1)  # tiny nets: extra threads only fight over the shared cores
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback, CallbackList  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

from seffi.callbacks.sb3 import CoverageCallback  # noqa: E402

K = 8


class Recorder(BaseCallback):
    """Independent record of every finished episode's info, straight from SB3's locals."""

    def __init__(self) -> None:
        super().__init__()
        self.finals: list[tuple[int, dict[str, Any]]] = []

    def _on_step(self) -> bool:
        for i, (info, done) in enumerate(zip(self.locals["infos"], self.locals["dones"], strict=True)):
            if done:
                self.finals.append((i, dict(info)))
        return True


class RecordFinals(gym.Wrapper):
    """Eval-env side recorder of final infos."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.finals: list[dict[str, Any]] = []

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        if out[2] or out[3]:
            self.finals.append(dict(out[4]))
        return out


def _ppo(env_id: str, policy: str, n_envs: int = 2, **env_kwargs: Any) -> PPO:
    # render_mode=None: make_vec_env defaults to "rgb_array", which seffi envs refuse.
    venv = make_vec_env(env_id, n_envs=n_envs, seed=0, env_kwargs={"render_mode": None, **env_kwargs})
    return tiny_ppo(venv, policy=policy, n_steps=64, width=32)


def _both_modes(eval_env: gym.Env, out_dir: Path, eval_freq: int, **options: Any) -> CoverageCallback:
    """A mode="both" callback: streaming and periodic evaluation on ``eval_env``, plots off (the plots
    are checked in the W&B-failure test)."""
    return CoverageCallback(
        budget=K, mode="both", eval_env=eval_env, eval_freq=eval_freq, out_dir=out_dir, plots=False, **options
    )


def _check_eval(cb: CoverageCallback, eval_env: RecordFinals, n_inputs: int) -> None:
    # The last evaluation's curves equal a tracker fed by hand with the eval episodes it ran.
    per_eval = n_inputs * K
    assert len(eval_env.finals) == per_eval * cb.evaluator.n_evals
    assert cb.evaluator.n_evals >= 2
    last = eval_env.finals[-per_eval:]
    ref = hand_tracker([(0, f) for f in last], eval_env.unwrapped.strategies, K)
    rep = load_report(cb.evaluator.monitor.out_dir)
    (comp,) = rep["comparisons"]
    assert comp["policies"][0]["curves"]["label"] == "eval"
    assert_curves_match(comp["policies"][0]["curves"], ref.curves(K, n_boot=0))
    assert comp["iid"] is not None and comp["oracle"] is not None
    assert any(p["curves"]["label"].startswith("eval@") for p in comp["policies"][1:])
    # The report written is the one the callback hands back.
    assert cb.eval_report.comparisons[0].policies[0].curves.auc == pytest.approx(
        comp["policies"][0]["curves"]["auc"]
    )


def test_router_env_both_modes_curves_match_and_wandb_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At the end the callback prints its folder and the sync command, once."""
    model = _ppo("seffi/SortSwapsRouter-v0", "MlpPolicy", n_inputs=3, budget=K, reward="novel")
    eval_env = RecordFinals(gym.make("seffi/SortSwapsRouter-v0", n_inputs=3, budget=K, input_seed=1))
    cb = _both_modes(eval_env, tmp_path, eval_freq=400, log_every=128, n_boot=50, wandb="offline")
    rec = Recorder()
    model.learn(2048, callback=CallbackList([cb, rec]))

    # Streaming: the report equals a tracker fed by hand with the same episodes.
    assert len(rec.finals) == cb.monitor.episodes >= 2000
    ref = hand_tracker(rec.finals, model.get_env().get_attr("strategies")[0], K)
    rep = load_report(tmp_path / "stream")
    (comp,) = rep["comparisons"]
    assert_curves_match(comp["policies"][0]["curves"], ref.curves(K, n_boot=0))
    assert comp["policies"][0]["gain"]["value"] is not None
    assert comp["policies"][0]["latent"] is not None  # router: latent coverage, kept separate
    _check_eval(cb, eval_env, 3)

    # Logged steps increase; both scopes were logged.
    lines = [json.loads(x) for x in (tmp_path / "stream" / "metrics.jsonl").read_text().splitlines()]
    steps = [r["seffi/step"] for r in lines]
    assert steps == sorted(set(steps)) and len(steps) >= 10
    # log_at="rollout" (default): one log per rollout (64 steps x 2 envs = 128 episodes >= log_every),
    # at its end, on the steps SB3 logs its own rollout metrics at.
    assert steps == [128.0 * (i + 1) for i in range(2048 // 128)]
    assert "seffi/eval/auc" in json.loads((tmp_path / "eval" / "metrics.jsonl").read_text().splitlines()[-1])

    # The offline W&B run, read back with the W&B CLI, holds the headline numbers.
    run_dir = cb.wandb_run_dir
    assert run_dir is not None and run_dir.exists()
    summary = json.loads(wandb_leet(run_dir, "--summary", "--json"))["summary"]
    assert summary["seffi/auc"] == pytest.approx(comp["policies"][0]["curves"]["auc"])
    assert "seffi/gain_vs_iid" in summary and "seffi/eval/auc" in summary
    assert summary["seffi/auc_iid"] == pytest.approx(comp["iid"]["auc"])
    assert summary["seffi/gain_denominator"] == pytest.approx(comp["oracle"]["auc"] - comp["iid"]["auc"])
    # One final chart per part: the stream's report and the evaluations (the last and the earlier ones).
    for key, part in (("seffi/curves/coverage", "stream"), ("seffi/eval/curves/coverage", "eval")):
        meta = summary[f"{key}_table"]
        table = json.loads((run_dir / "files" / meta["path"]).read_text())
        labels = {row[table["columns"].index("lineKey")] for row in table["data"]}
        (final,) = load_report(tmp_path / part)["comparisons"]
        assert labels == {p["curves"]["label"] for p in final["policies"]} | {"iid", "oracle"}

    # One closing message for both folders and the one shared W&B run.
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[seffi] ")]
    assert printed == [
        f"[seffi] run folder: {tmp_path}  (stream/ and eval/: report.json, report.md)",  # plots off
        f"[seffi] W&B offline run saved; upload it with: wandb sync {run_dir}",
    ]


def test_token_env_both_modes(tmp_path: Path) -> None:
    model = _ppo("seffi/SortSwaps-v0", "MultiInputPolicy", n_inputs=2, budget=K)
    eval_env = RecordFinals(gym.make("seffi/SortSwaps-v0", n_inputs=2, budget=K))
    cb = _both_modes(eval_env, tmp_path, eval_freq=300, log_every=8, n_boot=20, wandb="disabled")
    rec = Recorder()
    model.learn(1280, callback=CallbackList([cb, rec]))
    assert len(rec.finals) == cb.monitor.episodes > 10
    ref = hand_tracker(rec.finals, eval_env.unwrapped.strategies, K)
    (comp,) = load_report(tmp_path / "stream")["comparisons"]
    assert_curves_match(comp["policies"][0]["curves"], ref.curves(K, n_boot=0))
    _check_eval(cb, eval_env, 2)


def test_read_api_in_both_mode_reads_the_stream_by_default_and_the_evaluation_on_request(
    tmp_path: Path,
) -> None:
    model = _ppo("seffi/SortSwaps-v0", "MultiInputPolicy", n_inputs=2, budget=K)
    eval_env = RecordFinals(gym.make("seffi/SortSwaps-v0", n_inputs=2, budget=K))
    cb = _both_modes(eval_env, tmp_path, eval_freq=200, log_every=8, n_boot=0, wandb="disabled")
    assert cb.metrics() == {} and cb.metrics("eval") == {}  # before training
    assert len(cb.to_dataframe()) == 0
    with pytest.raises(SeffiError, match="once training has started"):
        cb.curves()
    rec = Recorder()
    model.learn(640, callback=CallbackList([cb, rec]))

    # metrics(): the streaming monitor's last log, the very dict written to metrics.jsonl.
    stream_lines = (tmp_path / "stream" / "metrics.jsonl").read_text().splitlines()
    assert cb.metrics() == json.loads(stream_lines[-1]) == cb.monitor.metrics()
    assert "seffi/auc" in cb.metrics() and not any(k.startswith("seffi/eval/") for k in cb.metrics())
    eval_lines = (tmp_path / "eval" / "metrics.jsonl").read_text().splitlines()
    assert cb.metrics("eval") == json.loads(eval_lines[-1]) and "seffi/eval/auc" in cb.metrics("eval")
    # The stream logs its recent window; an evaluation is fresh, with no window.
    assert cb.metrics()["seffi/window/episodes"] > 0
    assert not any(k.startswith("seffi/eval/window/") for k in cb.metrics("eval"))

    # curves() / to_dataframe(): the stream's equal a tracker fed by hand with every training episode.
    ref = hand_tracker(rec.finals, eval_env.unwrapped.strategies, K).curves(K, n_boot=0)
    np.testing.assert_allclose(cb.curves().coverage, ref.coverage, rtol=1e-12)
    frame = cb.to_dataframe()
    assert list(frame["method"].unique()) == ["policy", "iid", "oracle"]
    np.testing.assert_allclose(frame.query("method == 'policy'")["coverage"], ref.coverage, rtol=1e-12)
    # The evaluation's: the last evaluation's K episodes per eval input.
    last_eval = eval_env.finals[-2 * K :]
    ref_eval = hand_tracker([(0, f) for f in last_eval], eval_env.unwrapped.strategies, K).curves(K, n_boot=0)
    np.testing.assert_allclose(cb.curves("eval").coverage, ref_eval.coverage, rtol=1e-12)
    assert cb.to_dataframe("eval").query("method == 'policy'")["auc"].iloc[0] == pytest.approx(ref_eval.auc)
    with pytest.raises(SeffiError, match="'stream' or 'eval'"):
        cb.metrics("train")


def test_read_api_of_a_stream_callback_has_no_eval_part(tmp_path: Path) -> None:
    cb = CoverageCallback(budget=K, out_dir=tmp_path, wandb="disabled")
    with pytest.raises(SeffiError, match="no 'eval' part"):
        cb.metrics("eval")


def test_wandb_init_failure_leaves_complete_local_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The closing message names the folder and says W&B failed."""
    import wandb

    def broken_init(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no network")

    monkeypatch.setattr(wandb, "init", broken_init)
    model = _ppo("seffi/SortSwapsRouter-v0", "MlpPolicy", n_inputs=2, budget=K)
    # W&B offline by default.
    # log_at="step": a log as soon as 64 episodes are in (rollout ends would give one per 128).
    cb = CoverageCallback(budget=K, out_dir=tmp_path, log_every=64, log_at="step", n_boot=20)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.learn(512, callback=cb)
    failures = [w for w in caught if "W&B init failed" in str(w.message)]
    assert len(failures) == 1 and "no network" in str(failures[0].message)
    files = {p.name for p in tmp_path.iterdir()}
    assert {"metrics.jsonl", "report.json", "report.md", "tracker_state.json"} <= files
    (comp,) = load_report(tmp_path)["comparisons"]
    assert comp["iid"] and comp["oracle"] and comp["policies"][0]["gain"]["value"] is not None
    assert comp["policies"][0]["curves"]["n_samples"] == cb.monitor.episodes == 512
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == cb.monitor.n_logs >= 8
    assert_plots_nonempty(tmp_path)
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[seffi] ")]
    assert printed == [
        f"[seffi] run folder: {tmp_path}  (report.json, report.md, plots)",
        "[seffi] W&B logging failed (see the warning above); the run folder has everything",
    ]


class DropMatches(gym.Wrapper):
    def step(self, action: Any) -> Any:
        obs, r, te, tr, info = self.env.step(action)
        info = {k: v for k, v in info.items() if k != "strategy_matches"}
        return obs, r, te, tr, info


def test_missing_strategy_matches_stops_training_with_a_clear_error(tmp_path: Path) -> None:
    venv = make_vec_env(
        "seffi/SortSwapsRouter-v0",
        n_envs=1,
        env_kwargs={"n_inputs": 2, "budget": K, "render_mode": None},
        wrapper_class=DropMatches,
    )
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, device="cpu")
    cb = CoverageCallback(budget=K, out_dir=tmp_path, wandb="disabled")
    with pytest.raises(SeffiError, match="'strategy_matches'") as err:
        model.learn(64, callback=cb)
    assert "seffi/SortSwapsRouter-v0" in str(err.value)


def test_user_baseline_replaces_the_env_one(tmp_path: Path) -> None:
    from seffi.coverage import IidBaseline

    with pytest.raises(SeffiError, match="mode 'eval' needs an eval_env"):
        CoverageCallback(budget=K, mode="eval")
    with pytest.raises(SeffiError, match="log_at must be 'rollout' or 'step'"):
        CoverageCallback(budget=K, log_at="episode")
    # An "unknown base model": the iid baseline is estimated from base samples the user drew.
    samples = [("bubble",), ("bubble",), ("insertion",), ("bubble", "odd_even"), ()] * 4
    user_iid = IidBaseline.from_samples(samples, strategies=("bubble", "insertion", "selection", "odd_even"))
    model = _ppo("seffi/SortSwapsRouter-v0", "MlpPolicy", n_envs=1, n_inputs=2)
    cb = CoverageCallback(budget=K, iid=user_iid, out_dir=tmp_path, wandb="disabled", plots=False, n_boot=0)
    model.learn(128, callback=cb)
    (comp,) = load_report(tmp_path)["comparisons"]
    np.testing.assert_allclose(comp["iid"]["coverage"], user_iid.curves(K, n_boot=0).coverage)


def test_out_dir_holding_a_run_is_never_written_into_again(tmp_path: Path) -> None:
    """A reused out_dir (even a "both"-layout one) gets out_dir-2 and one warning."""
    earlier = tmp_path / "cb" / "stream"
    earlier.mkdir(parents=True)
    (earlier / "report.json").write_text('{"earlier": true}')
    model = _ppo("seffi/SortSwapsRouter-v0", "MlpPolicy", n_envs=1, n_inputs=2, budget=K)
    cb = CoverageCallback(budget=K, out_dir=tmp_path / "cb", wandb="disabled", plots=False, n_boot=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.learn(64, callback=cb)
    said = [w for w in caught if issubclass(w.category, UserWarning) and "already holds" in str(w.message)]
    assert len(said) == 1 and str(tmp_path / "cb-2") in str(said[0].message)
    assert cb.out_dir == tmp_path / "cb-2"
    assert load_report(tmp_path / "cb-2")["meta"]["episodes"] == cb.monitor.episodes == 64
    assert (earlier / "report.json").read_text() == '{"earlier": true}'
    assert not (tmp_path / "cb" / "report.json").exists()
    # A second learn() with the same callback is a second run: it goes to cb-3, cb-2 stays as it was.
    with pytest.warns(UserWarning, match="cb-3"):
        model.learn(64, callback=cb)
    assert load_report(tmp_path / "cb-2")["meta"]["episodes"] == 64
    assert load_report(tmp_path / "cb-3")["meta"]["episodes"] == 64


def test_callback_takes_a_monitor_config(tmp_path: Path) -> None:
    """CoverageCallback(config=MonitorConfig(n_boot=0, wandb="disabled")) builds its
    streaming monitor and its evaluator with those values; options go on top; a typo is one error."""
    from seffi.callbacks import MonitorConfig

    with pytest.raises(SeffiError, match=r"unknown monitor option\(s\) \['n_bot'\]"):
        CoverageCallback(budget=K, n_bot=0)
    with pytest.raises(SeffiError, match="needs budget=K"):
        CoverageCallback(config=MonitorConfig(n_boot=0))
    cfg = MonitorConfig(n_boot=0, wandb="disabled", seed=5)
    eval_env = gym.make("seffi/SortSwapsRouter-v0", n_inputs=2, budget=K)
    cb = CoverageCallback(
        K, mode="both", eval_env=eval_env, eval_freq=32, config=cfg, out_dir=tmp_path, plots=False
    )
    model = _ppo("seffi/SortSwapsRouter-v0", "MlpPolicy", n_envs=1, n_inputs=2, budget=K)
    model.learn(64, callback=cb)
    for monitor in (cb.monitor, cb.evaluator.monitor):
        assert (monitor.budget, monitor.n_boot, monitor.seed, monitor.sinks.wandb) == (K, 0, 5, None)
    assert (cb.monitor.scope, cb.evaluator.monitor.scope) == (None, "eval")
    assert cb.monitor.out_dir == tmp_path / "stream" and cb.evaluator.monitor.out_dir == tmp_path / "eval"
    assert cb.evaluator.n_evals == 2 and cb.monitor.episodes == 64
    assert cb.wandb_run_dir is None


class _StopAt(BaseCallback):
    """Stops training after ``n`` steps (inside a rollout when ``n`` is not a multiple of n_steps)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def _on_step(self) -> bool:
        return self.n_calls < self.n


def test_rollout_logging_reads_each_rollout_once_and_keeps_a_stopped_one(tmp_path: Path) -> None:
    """With log_at="rollout" a step costs one append; the episodes are
    read once per rollout, and a training stopped inside a rollout still records every episode."""
    model = _ppo("seffi/SortSwapsRouter-v0", "MlpPolicy", n_inputs=2, budget=K)
    cb = CoverageCallback(budget=K, out_dir=tmp_path, wandb="disabled", plots=False, n_boot=0, log_every=64)
    rec = Recorder()
    calls: list[int] = []
    init = cb._init_callback

    def spied_init() -> None:  # count the monitor's ingestion calls and the episodes of each
        init()
        assert cb.monitor is not None
        for name in ("update_infos",):
            real = getattr(cb.monitor, name)

            def spy(*args: Any, real: Any = real, **kwargs: Any) -> int:
                got = real(*args, **kwargs)
                calls.append(got)
                return got

            setattr(cb.monitor, name, spy)

    cb._init_callback = spied_init  # type: ignore[method-assign]
    model.learn(4 * 64 * 2, callback=CallbackList([cb, rec, _StopAt(2 * 64 + 10)]))
    # two full rollouts of 64 steps x 2 envs, then 10 steps of a third one, stopped
    assert len(rec.finals) == cb.monitor.episodes == sum(calls) == 2 * 128 + 20
    assert calls == [128, 128, 20]
    assert load_report(tmp_path)["meta"]["episodes"] == 276
    ref = hand_tracker(rec.finals, model.get_env().get_attr("strategies")[0], K)
    (comp,) = load_report(tmp_path)["comparisons"]
    assert_curves_match(comp["policies"][0]["curves"], ref.curves(K, n_boot=0))


def test_the_closing_line_names_plots_only_when_they_are_drawn(tmp_path, capsys):
    """``plots=False``: no plots folder, and the closing line lists report.json and report.md only."""
    model = _ppo("seffi/SortSwapsRouter-v0", "MlpPolicy", n_inputs=2, budget=K)
    cb = CoverageCallback(budget=K, out_dir=tmp_path, wandb="disabled", plots=False, n_boot=0)
    model.learn(256, callback=cb)
    assert not (tmp_path / "plots").exists() and (tmp_path / "report.json").is_file()
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[seffi] ")]
    assert printed == [f"[seffi] run folder: {tmp_path}  (report.json, report.md)"]

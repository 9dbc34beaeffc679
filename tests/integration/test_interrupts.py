"""Ctrl-C, SIGTERM and SIGKILL lose no measurement: reports marked interrupted, checkpoints, resume.

The SB3 cases train PPO on the user env of ``user_env.py``; the kill cases SIGKILL a training
process and ``seffi run`` at 20 seeded random moments each and check every file left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from seffi._io import read_jsonl
from seffi.coverage import CoverageTracker
from seffi.report import load_report
from tests.helpers import require
from tests.integration.user_env import STRATEGIES, PlannerEnvWithLaws, hand_coverage, read_log

pytestmark = pytest.mark.integration
require("stable_baselines3", "sb3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback, CallbackList  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from seffi.callbacks import CoverageMonitor  # noqa: E402
from seffi.callbacks.sb3 import CoverageCallback  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
K = 4


@pytest.fixture(autouse=True)
def _python_sigint_handler():
    """Python's own SIGINT handler during each test, whatever the launcher set (``nohup`` ignores it)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


class _SignalAt(BaseCallback):
    """Sends ``sig`` to this process at call ``n`` (as a user pressing Ctrl-C, or a scheduler's SIGTERM)."""

    def __init__(self, n: int, sig: int) -> None:
        super().__init__()
        self.n, self.sig = n, sig

    def _on_step(self) -> bool:
        if self.n_calls == self.n:
            os.kill(os.getpid(), self.sig)
        return True


def _ppo(tmp_path: Path, n_envs: int = 2) -> tuple[PPO, list[str]]:
    logs = [str(tmp_path / f"env{i}.jsonl") for i in range(n_envs)]
    makers = [lambda i=i: PlannerEnvWithLaws(budget=K, start=i, log_path=logs[i]) for i in range(n_envs)]
    env = DummyVecEnv(makers)
    return PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu"), logs


def test_ctrl_c_during_sb3_training_writes_the_report_marked_interrupted(tmp_path, capsys):
    model, logs = _ppo(tmp_path)
    cb = CoverageCallback(budget=K, out_dir=tmp_path / "run", wandb="disabled", plots=False, n_boot=0)
    with pytest.raises(KeyboardInterrupt):  # the user's Ctrl-C still stops the script
        model.learn(10_000, callback=CallbackList([cb, _SignalAt(50, signal.SIGINT)]))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers given back
    report = load_report(tmp_path / "run")
    assert report.meta["interrupted"] is True
    episodes = [e for log in logs for e in read_log(log)]
    assert report.meta["episodes"] == len(episodes) <= 2 * 52
    want, runs = hand_coverage(episodes, K)
    policy = report.comparisons[0].policies[0].curves
    assert runs > 0 and np.allclose(policy.coverage, want, atol=1e-12)
    assert "SIGINT: stopping at the next step" in capsys.readouterr().out


class _CrashAt(BaseCallback):
    def _on_step(self) -> bool:
        if self.n_calls == 5:
            raise RuntimeError("the user's callback fails")
        return True


def test_ctrl_c_after_a_training_that_crashed_is_a_plain_keyboard_interrupt(tmp_path):
    """A learn() that dies of an exception never reaches the end hook: Ctrl-C afterwards acts at once."""
    model, _ = _ppo(tmp_path)
    cb = CoverageCallback(budget=K, out_dir=tmp_path / "run", wandb="disabled", plots=False, n_boot=0)
    with pytest.raises(RuntimeError, match="user's callback fails"):
        model.learn(1000, callback=CallbackList([cb, _CrashAt()]))
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler runs at the next bytecode; never reached
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_resume_from_a_checkpoint_continues_the_runs_and_equals_an_uninterrupted_monitor(tmp_path):
    """A monitor checkpointed at episode E and resumed there ends with the uninterrupted tracker."""
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 5, size=400)

    def feed(monitor, env, start, stop):
        for i in range(stop):
            env.reset()
            *_, info = env.step(int(actions[i]))
            if i >= start:
                monitor.update_infos(info, True)
                monitor.maybe_log(i + 1)

    kwargs = {"wandb": "disabled", "plots": False, "n_boot": 0, "log_every": 16, "checkpoint_every": 64}
    full = CoverageMonitor(K, STRATEGIES, out_dir=tmp_path / "full", **kwargs)
    feed(full, PlannerEnvWithLaws(budget=K), 0, 400)
    first = CoverageMonitor(K, STRATEGIES, out_dir=tmp_path / "cut", checkpoint_seconds=None, **kwargs)
    feed(first, PlannerEnvWithLaws(budget=K), 0, 200)  # then the process dies: no finalize
    state = json.loads((tmp_path / "cut" / "tracker_state.json").read_text())
    cut = state["samples"] + state["skipped"]
    assert cut == 192  # the checkpoint of the last log at or past 3 x 64 episodes
    resumed = CoverageMonitor(K, STRATEGIES, resume_from=tmp_path / "cut", **kwargs)
    assert resumed.out_dir == tmp_path / "cut" and resumed.episodes == cut
    feed(resumed, PlannerEnvWithLaws(budget=K), cut, 400)
    assert resumed.tracker.state_dict() == full.tracker.state_dict()
    assert resumed.finalize(400).meta["episodes"] == 400


_TRAIN = """
import sys, time
sys.path.insert(0, {root!r})
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv
from seffi.callbacks.sb3 import CoverageCallback
from tests.integration.user_env import PlannerEnvWithLaws
env = DummyVecEnv([lambda i=i: PlannerEnvWithLaws(budget=4, start=i) for i in range(2)])
model = PPO("MlpPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu")
cb = CoverageCallback(budget=4, out_dir=sys.argv[1], wandb="disabled", n_boot=20, log_every=8,
                      checkpoint_every=16, log_at="step")
print("ready", flush=True)
model.learn(100_000, callback=cb)
"""


def _tracker_states(state):
    """Every tracker state inside a (possibly nested: task -> policy -> state) tracker_state.json."""
    if isinstance(state, dict) and str(state.get("format", "")).startswith("seffi.coverage.tracker"):
        yield state
    elif isinstance(state, dict):
        for value in state.values():
            yield from _tracker_states(value)


def _check_folder(folder: Path, *, killed: bool = True) -> bool:
    """Every file is absent or whole and valid; returns whether a checkpoint (report.json) exists.

    A killed process's JSONL file may end on a partial line (Linux stops a write between pages on
    SIGKILL); only that last line may be partial. A finished or resumed run's lines are all whole.
    """
    for path in folder.iterdir():
        name = path.name
        if name.startswith(".") and name.endswith(".tmp"):
            continue  # a write that never finished, under its temporary name; never read
        if name in ("metrics.jsonl", "snapshots.jsonl"):
            with warnings.catch_warnings():
                if killed:
                    warnings.filterwarnings("ignore", "ignoring a partial last line")
                else:
                    warnings.simplefilter("error")  # a partial last line would warn
                read_jsonl(path)  # a damaged line before the last raises
        elif name == "tracker_state.json":
            states = list(_tracker_states(json.loads(path.read_text())))
            assert states, name
            for state in states:
                CoverageTracker.from_state_dict(state)
        elif name == "report.json":
            load_report(folder)
        elif name == "routers.json":
            json.loads(path.read_text())
        elif path.suffix == ".png":
            data = path.read_bytes()
            assert data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82"), name
        elif path.suffix == ".md":
            assert path.read_text().endswith("\n"), name
    return (folder / "report.json").exists()


def _kill_at(cmd: list[str], delay: float, cwd: Path, *, ready: bool = True) -> None:
    """Start ``cmd``, wait for its "ready" line (``ready``) or its start, then ``delay`` s, then SIGKILL."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    if ready:
        assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    proc.stdout.close()


def _report_renders(folder: Path) -> None:
    cmd = [sys.executable, "-m", "seffi.cli", "report", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_sigkill_sb3_training_at_20_random_moments_leaves_only_whole_files(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_TRAIN.format(root=str(ROOT))))
    delays = np.random.default_rng(1).uniform(0.0, 4.0, size=20)
    reported = 0
    for i, delay in enumerate(delays):
        out = tmp_path / f"run{i}"
        _kill_at([sys.executable, str(script), str(out)], float(delay), tmp_path)
        if out.exists() and _check_folder(out):
            reported += 1
            if i % 5 == 0:  # rendering costs seconds: every fifth checkpoint
                _report_renders(out)
            assert load_report(out).meta["checkpoint"] is True
    assert reported >= 5, f"only {reported} of 20 kills came after the first checkpoint"


def test_sigkill_seffi_run_at_20_random_moments_leaves_only_whole_files(tmp_path):
    cmd = [sys.executable, "-u", "-m", "seffi.cli", "run", "--wandb", "disabled", "--no-progress",
           "--n-inputs", "8", "--rounds", "4", "--bootstrap", "50", "--out"]  # fmt: skip
    started = time.perf_counter()
    whole = [*cmd, str(tmp_path / "whole")]
    subprocess.run(whole, cwd=tmp_path, capture_output=True, check=True, timeout=600)
    seconds = time.perf_counter() - started
    reported = 0
    for i, delay in enumerate(np.random.default_rng(2).uniform(0.0, seconds, size=20)):
        out = tmp_path / f"run{i}"
        _kill_at([*cmd, str(out)], float(delay), tmp_path, ready=False)
        if out.exists() and _check_folder(out):
            reported += 1
            if reported == 1:
                _report_renders(out)
    assert reported >= 3, f"only {reported} of 20 kills left a report"


_LOOP = """
import sys
sys.path.insert(0, {root!r})
import numpy as np
from seffi.callbacks import CoverageMonitor
from tests.integration.user_env import STRATEGIES, PlannerEnvWithLaws
out, start, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
actions = np.random.default_rng(0).integers(0, 5, size=stop)
kw = dict(wandb="disabled", plots=False, n_boot=0, log_every=16, checkpoint_every=64, checkpoint_seconds=None)
monitor = (CoverageMonitor(4, STRATEGIES, resume_from=out, **kw) if start
           else CoverageMonitor(4, STRATEGIES, out_dir=out, **kw))
env = PlannerEnvWithLaws(budget=4)
print("ready", flush=True)
for i in range(stop):
    env.reset()
    *_, info = env.step(int(actions[i]))
    if i >= start:
        monitor.update_infos(info, True)
        monitor.maybe_log(i + 1)
monitor.finalize(stop)
"""


def test_a_killed_loop_resumed_from_its_checkpoint_ends_with_the_uninterrupted_tracker(tmp_path):
    """20 SIGKILLs of a monitor loop: each checkpoint equals the uninterrupted tracker at its episode,
    and resuming from it gives the uninterrupted run's final tracker."""
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(_LOOP.format(root=str(ROOT))))
    total = 5_000
    subprocess.run([sys.executable, str(script), str(tmp_path / "whole"), "0", str(total)], check=True)
    final = json.loads((tmp_path / "whole" / "tracker_state.json").read_text())
    resumed = 0
    for i, delay in enumerate(np.random.default_rng(3).uniform(0.0, 0.5, size=20)):
        out = tmp_path / f"run{i}"
        _kill_at([sys.executable, str(script), str(out), "0", str(total)], float(delay), tmp_path)
        if not (out.exists() and _check_folder(out)):
            continue
        state = json.loads((out / "tracker_state.json").read_text())
        cut = state["samples"] + state["skipped"]
        # A checkpoint writes the state, then the report: a kill between them leaves the report one behind.
        assert cut % 64 == 0 and load_report(out).meta["episodes"] in (cut, cut - 64)
        subprocess.run([sys.executable, str(script), str(out), str(cut), str(total)], check=True)
        assert json.loads((out / "tracker_state.json").read_text()) == final
        _check_folder(out, killed=False)  # the resumed run appended only whole lines
        resumed += 1
    assert resumed >= 5, f"only {resumed} of 20 kills came after the first checkpoint"

"""20 SIGKILLs of ``seffi run`` and of SB3 training, each followed by a plain rerun or a resume.

After every kill the folder holds only whole, valid files; the next start (``seffi run`` without
``--overwrite``; the training resumed from its checkpoint, or rerun when it had none) is never
refused; and once a start runs to its end the folders hold no lock and no temporary file. The
children are forked from this process once seffi, SB3 and torch are imported, so a start costs no
import time and 20 kills fit in seconds; the kill moments are seeded.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from seffi._io import read_jsonl
from seffi.coverage import CoverageTracker
from seffi.report import load_report
from tests.helpers import require

pytestmark = pytest.mark.integration
require("stable_baselines3", "sb3")

import torch  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback, CallbackList  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from seffi.callbacks.sb3 import CoverageCallback  # noqa: E402
from seffi.cli import main as seffi_main  # noqa: E402
from tests.integration.user_env import PlannerEnvWithLaws  # noqa: E402

FORK = mp.get_context("fork")
KILLS = 20
RUN = ["run", "--wandb", "disabled", "--no-progress", "--tasks", "coin_sum,countdown", "--n-inputs", "4",
       "--rounds", "2", "--bootstrap", "10"]  # fmt: skip


def _quiet() -> None:
    """A child's output goes nowhere (its warnings included)."""
    sys.stdout = sys.stderr = open(os.devnull, "w")


def _seffi_run(out: Path, _tell: Any) -> None:
    _quiet()
    os._exit(seffi_main([*RUN, "--out", str(out)]))


def _train(out: Path, tell: Any) -> None:
    """SB3 PPO with the coverage callback on the user env: resumed from ``out``'s checkpoint if it has one."""
    _quiet()
    torch.set_num_threads(1)
    resume = (out / "tracker_state.json").is_file()
    env = DummyVecEnv([lambda i=i: PlannerEnvWithLaws(budget=4, start=i) for i in range(2)])
    model = PPO("MlpPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu")
    where = {"resume_from": out} if resume else {"out_dir": out}
    cb = CoverageCallback(budget=4, wandb="disabled", n_boot=10, log_every=8, checkpoint_every=16,
                          log_at="step", plots=False, **where)  # fmt: skip

    class Tell(BaseCallback):  # the folder the callback chose (a rerun may move to out-2)
        def _on_training_start(self) -> None:
            tell.send(str(cb.out_dir))

        def _on_step(self) -> bool:
            return True

    model.learn(192, callback=CallbackList([cb, Tell()]))
    os._exit(0)


def _start(target: Callable[[Path, Any], None], out: Path, delay: float | None) -> tuple[int, Path | None]:
    """Fork ``target(out)``; SIGKILL it after ``delay`` s (None: let it end). (exit code, folder it told)."""
    receive, tell = FORK.Pipe(duplex=False)
    proc = FORK.Process(target=target, args=(out, tell))
    proc.start()
    tell.close()
    proc.join(delay)
    if proc.is_alive():
        os.kill(proc.pid, signal.SIGKILL)
    proc.join(120)
    try:
        told = Path(receive.recv()) if receive.poll() else None
    except EOFError:  # killed before it told
        told = None
    receive.close()
    assert proc.exitcode is not None
    return proc.exitcode, told


def _tracker_states(state: Any) -> Any:
    if isinstance(state, dict) and str(state.get("format", "")).startswith("seffi.coverage.tracker"):
        yield state
    elif isinstance(state, dict):
        for value in state.values():
            yield from _tracker_states(value)


def _check(folder: Path) -> None:
    """Every seffi file in ``folder`` is whole and valid (temporary files and the lock aside)."""
    for path in folder.iterdir():
        if path.name in ("metrics.jsonl", "snapshots.jsonl"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a partial last line would warn
                read_jsonl(path)
        elif path.name == "tracker_state.json":
            states = list(_tracker_states(json.loads(path.read_text())))
            assert states
            for state in states:
                CoverageTracker.from_state_dict(state)
        elif path.name == "report.json":
            load_report(folder)
        elif path.name == "routers.json":
            json.loads(path.read_text())
        elif path.name == "plots":
            for png in path.iterdir():
                data = png.read_bytes()
                assert data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82"), png


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*"))


def test_20_kills_of_seffi_run_then_plain_reruns_end_with_the_uninterrupted_report(tmp_path: Path) -> None:
    started = time.perf_counter()
    assert _start(_seffi_run, tmp_path / "whole", None)[0] == 0
    seconds = time.perf_counter() - started
    expected = (tmp_path / "whole" / "report.json").read_bytes()
    runs, folder, killed = tmp_path / "runs", tmp_path / "runs" / "r0", 0
    runs.mkdir()
    # The training, its checkpoints and the final report.json come in the first seconds, the plots after.
    for delay in np.random.default_rng(5).uniform(0.0, min(seconds, 2.5), size=KILLS):
        code, _ = _start(_seffi_run, folder, float(delay))
        assert code in (0, -signal.SIGKILL), f"a plain rerun was refused (exit {code})"
        if folder.exists():
            _check(folder)
        killed += code != 0
        if code == 0:  # it ended before its kill: the report equals the uninterrupted one
            assert (folder / "report.json").read_bytes() == expected
            folder = runs / f"r{len(list(runs.iterdir()))}"
    assert killed >= KILLS // 2
    assert _start(_seffi_run, folder, None)[0] == 0
    assert (folder / "report.json").read_bytes() == expected
    for done in runs.iterdir():
        _check(done)
    assert _leftovers(runs) == []


def test_20_kills_of_sb3_training_then_resumes_leave_whole_files_and_no_leftovers(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    PPO("MlpPolicy", DummyVecEnv([PlannerEnvWithLaws]), device="cpu")  # imports what PPO imports on first use
    started = time.perf_counter()
    assert _start(_train, tmp_path / "whole", None)[0] == 0
    seconds = time.perf_counter() - started
    whole = load_report(tmp_path / "whole")
    base = folder = tmp_path / "runs" / "cb"
    base.parent.mkdir()
    resumed = killed = 0
    for delay in np.random.default_rng(6).uniform(0.0, seconds, size=KILLS):
        resume = (folder / "tracker_state.json").is_file()
        code, told = _start(_train, folder if resume else base, float(delay))
        assert code in (0, -signal.SIGKILL), f"the start was refused (exit {code})"
        folder = told or folder
        resumed += resume
        killed += code != 0
        for done in base.parent.iterdir():
            _check(done)
    assert killed >= KILLS // 2 and resumed >= 5
    resume = (folder / "tracker_state.json").is_file()
    code, told = _start(_train, folder if resume else base, None)
    assert code == 0
    final = load_report(told or folder)
    assert "checkpoint" not in final.meta and final.meta["episodes"] >= whole.meta["episodes"]
    for done in base.parent.iterdir():
        _check(done)
    assert _leftovers(base.parent) == []

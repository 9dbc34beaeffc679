"""A full disk never stops training: the local sink keeps what it measures and writes it when it fits.

The disk is a real ``RLIMIT_FSIZE`` (SIGXFSZ ignored, so a write past it fails with EFBIG, as a full
disk fails with ENOSPC) set inside a subprocess that trains SB3's PPO with the coverage callback on
the user env of ``tests/integration/user_env.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

from seffi._io import read_jsonl
from seffi.report import load_report
from tests.helpers import require

require("stable_baselines3", "sb3")

ROOT = Path(__file__).resolve().parents[2]

_TRAIN = """
import json, resource, signal, sys, warnings
sys.path.insert(0, {root!r})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.vec_env import DummyVecEnv
from seffi.callbacks.sb3 import CoverageCallback
from tests.integration.user_env import PlannerEnvWithLaws

out, limit, space_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)


class SpaceReturns(BaseCallback):
    def _on_step(self):
        if self.n_calls == space_at:
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        return True


env = DummyVecEnv([lambda i=i: PlannerEnvWithLaws(budget=4, start=i) for i in range(2)])
model = PPO("MlpPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu")
cb = CoverageCallback(budget=4, out_dir=out, wandb="disabled", n_boot=20, log_every=8, checkpoint_every=16,
                      log_at="step")
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))  # the disk is full from the first log on
    model.learn(384, callback=CallbackList([cb, SpaceReturns()]))
warned = [str(w.message) for w in seen]
print(json.dumps({{"logs": cb.monitor.n_logs, "episodes": cb.monitor.episodes, "warnings": warned}}))
"""


def _train(tmp_path: Path, limit: int, space_at: int) -> tuple[dict, subprocess.CompletedProcess]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_TRAIN.format(root=str(ROOT))))
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(script), str(out), str(limit), str(space_at)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done


def _whole_jsonl(path: Path) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a partial last line would warn
        return read_jsonl(path)


def test_a_full_disk_during_training_loses_no_log_once_space_returns(tmp_path: Path) -> None:
    """The disk is full from the first log to the 150th step: one warning, then every log is on disk."""
    result, _ = _train(tmp_path, limit=600, space_at=150)
    out = tmp_path / "run"
    disk = [w for w in result["warnings"] if "File too large" in w]
    assert len(disk) == 1 and "training goes on" in disk[0], result["warnings"]
    records = _whole_jsonl(out / "metrics.jsonl")
    assert len(records) == result["logs"] >= 8
    steps = [r["seffi/step"] for r in records]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)  # in log order, none twice
    snapshots = _whole_jsonl(out / "snapshots.jsonl")
    assert [s["step"] for s in snapshots] == sorted(s["step"] for s in snapshots) and snapshots
    report = load_report(out)
    assert report.meta["episodes"] == result["episodes"] and "checkpoint" not in report.meta
    assert (out / "report.md").is_file() and list((out / "plots").glob("*.png"))
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []  # no lock, no temporary file


def test_a_disk_full_to_the_end_gives_one_message_and_whole_files(tmp_path: Path) -> None:
    """The disk never frees: training ends, one warning during it and one at the end, no traceback, and
    the closing line does not claim a report it could not write."""
    result, done = _train(tmp_path, limit=600, space_at=10**9)
    out = tmp_path / "run"
    closing = [line for line in done.stdout.splitlines() if "run folder:" in line]
    assert len(closing) == 1 and "report files did not fit" in closing[0], done.stdout[-2000:]
    disk = [w for w in result["warnings"] if "File too large" in w or "did not fit" in w]
    assert len(disk) == 2, result["warnings"]
    assert "training goes on" in disk[0]
    assert "did not fit" in disk[1] and "monitor.report() still holds the numbers" in disk[1]
    assert result["logs"] >= 8
    records = _whole_jsonl(out / "metrics.jsonl")  # the lines that fitted, each whole
    assert 0 <= len(records) < result["logs"] and (out / "metrics.jsonl").stat().st_size <= 600
    for path in out.iterdir():  # nothing half-written, nothing left behind
        assert not path.name.startswith("."), path.name
        if path.suffix == ".json":
            json.loads(path.read_text())


def test_seffi_report_never_writes_through_a_linked_plots_folder(tmp_path: Path) -> None:
    """plots/ links to another folder: `seffi report` refuses with one line and writes nothing there."""
    from seffi.report import write_report
    from tests.report import _fixtures as fx

    run = tmp_path / "run"
    write_report(run, fx.report(), plots=False, markdown=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "plots").symlink_to(elsewhere)
    cmd = [sys.executable, "-m", "seffi.cli", "report", str(run)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"seffi report: error: {run / 'plots'} is a symbolic link: seffi writes only its own files and "
        "folders inside a run folder, never through a link; remove the link, or choose another folder"
    ]
    assert list(elsewhere.iterdir()) == []

"""Callbacks' ``out_dir`` never mixes two runs."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from seffi.callbacks import CoverageMonitor
from seffi.report.run_folder import fresh_out_dir
from tests.helpers import require

STRATS = ("a", "b")


def _run(out_dir: Path, episodes: int) -> CoverageMonitor:
    monitor = CoverageMonitor(2, STRATS, out_dir=out_dir, wandb="disabled", plots=False, n_boot=0)
    for i in range(episodes):
        monitor.update_infos({"input_id": "x", "strategy_matches": ("a",), "sample_index": i % 2 + 1}, True)
    monitor.log(1)
    monitor.finalize(2)
    return monitor


def _episodes(folder: Path) -> int:
    return json.loads((folder / "report.json").read_text())["meta"]["episodes"]


def test_monitor_out_dir_holding_a_run_gets_a_fresh_sibling_and_one_warning(tmp_path: Path) -> None:
    """A second monitor on the same out_dir writes to out_dir-2, the first run intact."""
    first = tmp_path / "run"
    _run(first, 4)
    before = {p.name: p.read_bytes() for p in first.iterdir() if p.is_file()}
    assert "report.json" in before and "metrics.jsonl" in before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = _run(first, 6)
    said = [w for w in caught if issubclass(w.category, UserWarning)]
    assert len(said) == 1 and str(tmp_path / "run-2") in str(said[0].message)
    assert second.out_dir == tmp_path / "run-2"
    assert _episodes(tmp_path / "run-2") == 6
    # the first run's files are byte-for-byte what it wrote (nothing appended, nothing replaced)
    assert {p.name: p.read_bytes() for p in first.iterdir() if p.is_file()} == before
    # a third run skips run-2 too
    with pytest.warns(UserWarning, match="run-3"):
        third = _run(first, 2)
    assert third.out_dir == tmp_path / "run-3" and _episodes(tmp_path / "run-3") == 2


def test_folder_with_only_user_files_is_used_without_warning(tmp_path: Path) -> None:
    """A folder holding no seffi run (only the user's files) is used as given."""
    (tmp_path / "notes.txt").write_text("mine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monitor = _run(tmp_path, 3)
    assert monitor.out_dir == tmp_path and _episodes(tmp_path) == 3
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_nested_layout_counts_as_a_run(tmp_path: Path) -> None:
    """The SB3 "both" layout (runs in stream/ and eval/) makes the folder taken."""
    (tmp_path / "cb" / "eval").mkdir(parents=True)
    (tmp_path / "cb" / "eval" / "report.json").write_text("{}")
    (tmp_path / "cb-2").write_text("a file, not a folder: skipped")
    assert fresh_out_dir(tmp_path / "cb") == tmp_path / "cb"  # no seffi file directly inside
    with pytest.warns(UserWarning, match="cb-3") as caught:
        assert fresh_out_dir(tmp_path / "cb", nested=("stream", "eval")) == tmp_path / "cb-3"
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh_out_dir(tmp_path / "new", nested=("stream", "eval")) == tmp_path / "new"
        default = fresh_out_dir(None, "p")
    assert default.parent == Path("runs") and default.name.startswith("p-") and not default.exists()


# -- resumed runs write only to their own folder, under its lock ------------------------------------

_TRIM = """
import json, resource, signal, sys
from pathlib import Path
from seffi._io import drop_lines_after
from seffi.errors import SeffiError
path, limit, step = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    drop_lines_after(path, "seffi/step", step)
    print("trimmed")
except SeffiError as exc:
    print(exc)
"""


def _log_lines(n: int, pad: int = 40) -> str:
    return "".join(
        json.dumps({"seffi/step": s, "seffi/auc": s / n, "pad": "x" * pad}) + "\n" for s in range(n)
    )


def test_trimming_a_resumed_log_under_a_file_size_limit_never_shortens_it(tmp_path: Path) -> None:
    """A real RLIMIT_FSIZE below the trimmed log's size: the resume is refused and all 2,000 lines stay."""
    import subprocess
    import sys

    path = tmp_path / "metrics.jsonl"
    path.write_text(_log_lines(2000))
    before = path.read_text()
    trimmed = len("".join(before.splitlines(keepends=True)[:1501]).encode())
    done = subprocess.run(
        [sys.executable, "-c", _TRIM, str(path), str(trimmed // 2), "1500"], capture_output=True, text=True
    )
    assert path.read_text() == before, "the log was shortened"
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.startswith(f"cannot trim {path} to step 1500") and "the log is unchanged" in done.stdout
    )
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]  # no temporary file left
    done = subprocess.run(  # under a limit it fits: trimmed to the resume step
        [sys.executable, "-c", _TRIM, str(path), str(trimmed), "1500"], capture_output=True, text=True
    )
    assert done.stdout.strip() == "trimmed"
    assert [r["seffi/step"] for r in map(json.loads, path.read_text().splitlines())] == list(range(1501))


_TRIM_LOOP = """
import sys
from pathlib import Path
from seffi._io import drop_lines_after
path, n = Path(sys.argv[1]), int(sys.argv[2])
print("ready", flush=True)
for step in range(n - 2, 0, -1):  # one line fewer at each resume
    drop_lines_after(path, "seffi/step", step)
"""


def test_a_kill_mid_trim_never_shortens_the_log_below_the_resume_step(tmp_path: Path) -> None:
    """20 SIGKILLs of a process trimming a 4 MB log line by line: the log is always whole, never cut."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import numpy as np

    path = tmp_path / "metrics.jsonl"
    n = 2000
    path.write_text(_log_lines(n, pad=2000))
    last = n
    for delay in np.random.default_rng(4).uniform(0.0, 0.4, size=20):
        proc = subprocess.Popen(
            [sys.executable, "-c", _TRIM_LOOP, str(path), str(last)], stdout=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(float(delay))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        text = path.read_text()
        assert text.endswith("\n")
        steps = [json.loads(line)["seffi/step"] for line in text.splitlines()]
        # Whole lines 0..m, where m is the step of the last trim that finished (or of none yet).
        assert steps == list(range(len(steps))) and 1 <= len(steps) <= last
        last = len(steps)
        leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != "metrics.jsonl")
        for name in leftovers:  # only a write_atomic's temporary file, cut by the kill
            assert name.startswith(".metrics.jsonl.") and name.endswith(".tmp")
            (tmp_path / name).unlink()
    assert last < n - 1, "no trim finished before any of the 20 kills"


def _grpo_run(out_dir: Path, steps: int = 5) -> Any:
    """A GRPO-style coverage run of a user labeler over hand-made completions (no trainer)."""
    require("torch", "trl")  # the group reward asks torch.distributed for its rank
    from seffi.callbacks.trl import GRPOCoverage

    rubric = {"up": "up", "down": "down", "left": "left"}
    cov = GRPOCoverage(labeler=rubric, iid=None, out_dir=out_dir, budget=2, n_boot=0, plots=False)
    cov.configure_groups(2)
    texts = ["up", "down", "left up", "down", "up", "left"]
    for step in range(1, steps + 1):
        cov.reward.score(["p1", "p1", "p2", "p2", "p3", "p3"], ["prompt"] * 6, texts, True)
        cov.monitor.log(step)
    return cov


def test_a_grpo_state_recorded_for_another_folder_is_refused_and_that_folder_untouched(
    tmp_path: Path,
) -> None:
    """A checkpoint copied from run A into run B never rewrites A's log nor writes B's report into A."""
    from seffi.errors import SeffiError

    run_a = _grpo_run(tmp_path / "a")  # skips without the trl extra
    from seffi.callbacks.trl import GRPOCoverage

    state = json.loads(json.dumps(run_a.state_dict()))
    run_a.monitor.finalize()
    before = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    assert len((tmp_path / "a" / "metrics.jsonl").read_text().splitlines()) == 5
    rubric = {"up": "up", "down": "down", "left": "left"}
    b = GRPOCoverage(labeler=rubric, iid=None, out_dir=tmp_path / "b", budget=2, n_boot=0, plots=False)
    with pytest.raises(SeffiError, match=r"belongs to the run writing to .*a, not to this run's out_dir="):
        b.load_state_dict(state, step=2)
    assert {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()} == before
    assert not (tmp_path / "b").exists() and b.monitor is None
    # The run's own folder resumes: the log rewinds to step 2, under the folder's lock.
    own = GRPOCoverage(labeler=rubric, iid=None, out_dir=tmp_path / "a", budget=2, n_boot=0, plots=False)
    own.load_state_dict(state, step=2)
    lines = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["seffi/step"] for line in lines] == [1, 2]
    assert (tmp_path / "a" / ".seffi-lock").read_text().split()[0] == str(os.getpid())


_HOLD = """
import sys
from seffi.callbacks import CoverageMonitor
monitor = CoverageMonitor(2, ("a", "b"), resume_from=sys.argv[1], wandb="disabled", plots=False, n_boot=0)
print("resumed", flush=True)
sys.stdin.readline()
monitor.finalize()
"""


def test_a_second_process_resuming_one_folder_is_refused_with_one_message(tmp_path: Path) -> None:
    """Two resumes of one run folder: the second is refused while the first runs, then resumes."""
    import subprocess
    import sys

    from seffi.errors import SeffiError

    _run(tmp_path / "run", 6)
    first = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path / "run")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "resumed"
        with pytest.raises(SeffiError, match=rf"run is in use by another seffi run \(pid {first.pid}\)"):
            CoverageMonitor(2, STRATS, resume_from=tmp_path / "run", wandb="disabled", plots=False, n_boot=0)
    finally:
        first.communicate("\n", timeout=60)
    assert first.returncode == 0
    assert not (tmp_path / "run" / ".seffi-lock").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = CoverageMonitor(
            2, STRATS, resume_from=tmp_path / "run", wandb="disabled", plots=False, n_boot=0
        )
    assert second.episodes == 6
    second.finalize()


def test_a_resume_takes_over_a_killed_runs_lock_and_removes_its_temporary_files(tmp_path: Path) -> None:
    import subprocess
    import sys

    _run(tmp_path / "run", 6)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)  # fmt: skip
    (tmp_path / "run" / ".seffi-lock").write_text(f"{dead} training\n")
    (tmp_path / "run" / ".report.json.x1y2z3.tmp").write_text('{"half')  # a write_atomic cut by a kill
    (tmp_path / "run" / ".tracker_state.json.a9b8.tmp").write_text("")
    with pytest.warns(UserWarning, match=f"taking over the lock of pid {dead}, which no longer runs") as seen:
        monitor = CoverageMonitor(
            2, STRATS, resume_from=tmp_path / "run", wandb="disabled", plots=False, n_boot=0
        )
    assert len([w for w in seen if "taking over" in str(w.message)]) == 1
    monitor.finalize()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "metrics.jsonl", "report.json", "report.md", "snapshots.jsonl", "tracker_state.json"
    ]  # fmt: skip


def test_a_resume_never_appends_through_a_linked_log(tmp_path: Path) -> None:
    """metrics.jsonl replaced by a link to another file: the resume is refused, that file unchanged."""
    from seffi.errors import SeffiError

    _run(tmp_path / "run", 6)
    other = tmp_path / "notes.jsonl"
    other.write_text('{"mine": 1}\n')
    (tmp_path / "run" / "metrics.jsonl").unlink()
    (tmp_path / "run" / "metrics.jsonl").symlink_to(other)
    with pytest.raises(SeffiError, match=r"metrics\.jsonl is a symbolic link"):
        CoverageMonitor(2, STRATS, resume_from=tmp_path / "run", wandb="disabled", plots=False, n_boot=0)
    assert other.read_text() == '{"mine": 1}\n'
    assert not (tmp_path / "run" / ".seffi-lock").exists()


@pytest.mark.parametrize(
    "counts", [{"samples": "3", "skipped": "1"}, {"samples": 3}, {"samples": True, "skipped": 0}]
)
def test_a_resume_from_a_state_without_sample_counts_is_refused_and_the_folder_untouched(
    tmp_path: Path, counts: dict
) -> None:
    """Counts that are not non-negative ints are refused before any sink claims the folder."""
    from seffi.errors import SeffiError

    run = tmp_path / "run"
    run.mkdir()
    (run / "tracker_state.json").write_text(json.dumps({"format": 2, **counts}))
    with pytest.raises(SeffiError, match="holds no tracker state with sample counts"):
        CoverageMonitor(2, STRATS, resume_from=run, wandb="disabled", plots=False, n_boot=0)
    assert sorted(p.name for p in run.iterdir()) == ["tracker_state.json"]


def test_resume_with_out_dir_naming_the_same_folder_another_way_continues_it(tmp_path, monkeypatch) -> None:
    """``resume_from="run"`` with ``out_dir`` its absolute path (or ``run/../run``) is the same folder:
    the run goes on there, with no sibling folder and no warning."""
    monkeypatch.chdir(tmp_path)
    _run(Path("run"), 6)
    for out_dir in (tmp_path / "run", Path("run/../run")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            m = CoverageMonitor(2, STRATS, resume_from="run", out_dir=out_dir, wandb="disabled", plots=False)
        assert m.episodes == 6 and m.out_dir.resolve() == tmp_path / "run"
        m.finalize()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_resume_with_other_settings_names_them_and_leaves_the_folder_untouched(tmp_path: Path) -> None:
    """Another budget, task name or strategy set than the run's: one message naming what differs,
    given before any sink claims the folder or starts a W&B run."""
    from seffi.errors import SeffiError

    _run(tmp_path / "run", 6)
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()}
    cases = [
        ({"budget": 3}, r"it has budget=2 \(this monitor: 3\)"),
        ({"task_name": "maze"}, r"it has task_name='unknown' \(this monitor: 'maze'\)"),
        ({"strategies": ("a", "z")}, r"it has strategies=\['a', 'b'\] \(this monitor: \['a', 'z'\]\)"),
    ]
    for changed, message in cases:
        options = {"budget": 2, "strategies": STRATS, **changed}
        with pytest.raises(SeffiError, match="the state does not mix with this monitor: " + message):
            CoverageMonitor(resume_from=tmp_path / "run", wandb="offline", plots=False, **options)
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]

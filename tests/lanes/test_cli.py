from __future__ import annotations

import json
from pathlib import Path

import pytest

from seffi.cli import main
from seffi.lanes.packs import standard_pack
from tests.lanes.test_lint import GOOD


def _write(tmp_path: Path, data: dict, name: str = "pack.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _lane(tmp_path: Path, *args: str, out: Path | None = None, learner: str | None = None) -> int:
    """``seffi lane sample-efficiency`` into ``out`` (default ``tmp_path/out``) with W&B disabled;
    ``learner`` names a class of ``tests.lanes.learners_fixture``."""
    out = out or tmp_path / "out"
    if learner:
        args = (*args, "--learner", f"tests.lanes.learners_fixture:{learner}")
    return main(["lane", "sample-efficiency", "--out", str(out), "--wandb", "disabled", *args])


def test_default_run_end_to_end_with_offline_wandb(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The offline W&B run lands under $WANDB_DIR/wandb, not in the report folder."""
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    out = tmp_path / "out"
    assert main(["lane", "sample-efficiency", "--out", str(out), "--wandb", "offline"]) == 0
    report = json.loads((out / "report.json").read_text())
    public = standard_pack().select("public")
    assert [c["id"] for c in report["concepts"]] == [c.id for c in public]
    assert report["pack"]["split"] == "public" and report["learner"] == "seffi.lanes.learners:VaultLearner"
    agg = report["aggregate"]
    assert agg["replay_determinism"] == 1.0 and agg["gate_passed"] is True
    assert agg["n_snapshots"] == sum(len(c.curriculum) + 1 for c in public)
    for c in report["concepts"]:
        assert [p["k"] for p in c["curve"]] == list(range(c["n_corrections"] + 1))
        assert {"cumulative_token_hit_count", "vault_hits", "trace_hash"} <= set(c["curve"][0])
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = list((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))
    assert not (out / "wandb").exists()
    assert f"wandb sync {runs[0]}" in capsys.readouterr().out
    # Determinism: the same run again gives a byte-identical report.
    again = tmp_path / "again"
    assert main(["lane", "sample-efficiency", "--out", str(again), "--wandb", "disabled"]) == 0
    assert (again / "report.json").read_text() == (out / "report.json").read_text()
    assert not (again / "wandb").exists()


def test_gate_failure_exits_nonzero_and_names_the_first_divergent_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    pack = _write(tmp_path, GOOD)
    out = tmp_path / "out"
    rc = _lane(tmp_path, "--pack", str(pack), "--split", "all", out=out, learner="RandomLearner")
    assert rc == 1
    err = capsys.readouterr().err
    assert "replay-determinism gate FAILED" in err
    assert "first divergent snapshot: concept 'greek', k=0, at probe" in err
    agg = json.loads((out / "report.json").read_text())["aggregate"]
    assert agg["first_divergence"] == {"concept": "greek", "k": 0, "step": "probe"}
    assert agg["replay_determinism"] == 0.0 and agg["gate_passed"] is False


def test_holdout_split_and_echo_learner(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _lane(tmp_path, "--split", "holdout", out=out, learner="EchoLearner") == 0
    report = json.loads((out / "report.json").read_text())
    assert len(report["concepts"]) == len(standard_pack().select("holdout"))
    assert report["aggregate"]["saturation_rate"] == 1.0  # echo + linted pack: every concept saturates


def test_concept_errors_are_reported_and_other_results_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = json.loads(json.dumps(GOOD))
    data["concepts"].append(
        {"id": "empty", "split": "public", "probe": "Anything?", "expected_tokens": ["x"], "curriculum": []}
    )
    data["concepts"].append({"id": "typo", "split": "public", "probe": "Q?", "expected_tokens": "x"})
    out = tmp_path / "out"
    rc = _lane(
        tmp_path, "--pack", str(_write(tmp_path, data)), "--split", "all", out=out, learner="EchoLearner"
    )
    assert rc == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert err_lines[0].startswith("seffi lane: error: concept 'typo': malformed:")
    assert err_lines[1] == "seffi lane: error: concept 'empty': empty curriculum"
    assert "Traceback" not in "\n".join(err_lines)
    report = json.loads((out / "report.json").read_text())
    by_id = {c["id"]: c for c in report["concepts"]}
    assert by_id["greek"]["corrections_to_saturation"] == 2 and by_id["colours"]["saturation_score"] == 1.0
    assert report["aggregate"]["n_evaluated"] == 2 and report["aggregate"]["n_errors"] == 2
    assert (out / "curves.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--learner", "no_such_module_xyz:make"], "cannot import learner module 'no_such_module_xyz'"),
        (["--learner", "seffi.lanes.learners:Nope"], "has no attribute 'Nope'"),
        (["--learner", "seffi.lanes.learners"], "--learner must look like module:factory"),
        (["--learner", "seffi.lanes.learners:DEFAULT_TEMPLATE"], "is not callable"),
        (["--pack", "/nonexistent/pack.json"], "cannot read pack /nonexistent/pack.json"),
    ],
)
def test_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, args, message) -> None:
    rc = main(["lane", "sample-efficiency", "--out", str(tmp_path / "o"), "--wandb", "disabled", *args])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_lint_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = _write(tmp_path, GOOD, "good.json")
    assert main(["lane", "lint", str(good)]) == 0
    assert capsys.readouterr().out.strip() == f"{good}: clean"
    bad = json.loads(json.dumps(GOOD))
    bad["concepts"][0]["probe"] = "Is alpha first?"
    bad["concepts"][1]["curriculum"] = []
    path = _write(tmp_path, bad, "bad.json")
    assert main(["lane", "lint", str(path)]) == 1
    assert capsys.readouterr().out.strip().splitlines() == [
        f"{path}: concept 'greek': probe leaks expected tokens ['alpha']",
        f"{path}: concept 'colours': empty curriculum",
    ]
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert main(["lane", "lint", str(broken)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("learner", "error"),
    [
        ("AlwaysRaisingLearner", "probe raised RuntimeError: model server unreachable (snapshot k=0)"),
        ("ExitingLearner", "teach(correction[0]) raised SystemExit: 0 (snapshot k=1)"),
    ],
)
def test_no_curve_exits_2_with_every_concept_error_and_still_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture, learner: str, error: str
) -> None:
    """Every learner call raising (even sys.exit(0)) is exit 2, errors printed, report kept.

    With no curve to draw, plotting must not fail ("number sections must be larger than 0"), and a
    learner calling sys.exit(0) must not end the lane with status 0 and no report.json.
    """
    pack = _write(tmp_path, GOOD)
    rc = _lane(tmp_path, "--pack", str(pack), "--split", "all", learner=learner)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.splitlines() == [
        f"seffi lane: error: concept 'greek': {error}",
        f"seffi lane: error: concept 'colours': {error}",
        "seffi lane: error: no concept produced a complete curve (2 of 2 failed)",
    ]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["errors"][-1] == "no concept produced a complete curve (2 of 2 failed)"
    assert report["aggregate"]["n_evaluated"] == 0 and report["aggregate"]["n_errors"] == 2
    assert (tmp_path / "out" / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_empty_pack_exits_2_and_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An empty pack (or split) is not a gate failure (exit 1) but exit 2, and says so."""
    pack = _write(tmp_path, {"name": "empty", "version": 1, "concepts": []})
    assert _lane(tmp_path, "--pack", str(pack)) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["seffi lane: error: no concepts to run (the pack or split is empty)"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["concepts"] == [] and report["aggregate"]["n_snapshots"] == 0


def test_learner_module_exiting_at_import_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Learner code that calls sys.exit(0) while being imported is a user error, exit 2."""
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _lane(tmp_path, "--learner", "exits_on_import:make") == 2
    err = capsys.readouterr().err
    assert err == "seffi lane: error: cannot import learner module 'exits_on_import': SystemExit: 0\n"
    assert not (tmp_path / "out").exists()


def test_many_concepts_get_one_overview_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The figure's panel count is capped (one panel per concept takes minutes at 1k concepts).

    Counted through matplotlib's own ``Figure.savefig``: 100 concepts draw one overview figure.
    """
    from matplotlib.figure import Figure

    from seffi.lanes import plot
    from tests.lanes.packgen import write_pack

    saved: list[int] = []
    original = Figure.savefig

    def counting_savefig(self: Figure, *args, **kwargs):
        saved.append(sum(ax.get_visible() for ax in self.axes))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", counting_savefig)
    pack = write_pack(tmp_path / "big.json", 100)
    assert _lane(tmp_path, "--pack", str(pack), "--split", "all") == 0
    assert saved == [2]  # all curves at once + the first-hit/saturation histogram
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(report["concepts"]) == 100 and report["aggregate"]["saturation_rate"] == 1.0
    # The cap's boundary, made small so that the test stays fast: up to it, one panel per concept.
    monkeypatch.setattr(plot, "MAX_PANELS", 3)
    saved.clear()
    for n in (3, 4):
        pack = write_pack(tmp_path / f"p{n}.json", n)
        assert _lane(tmp_path, "--pack", str(pack), "--split", "all", out=tmp_path / f"o{n}") == 0
    assert saved == [3, 2]


def test_out_holding_a_seffi_run_is_refused_unless_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A second lane run never silently overwrites or mixes with the first."""
    pack = _write(tmp_path, GOOD)
    out = tmp_path / "out"
    assert _lane(tmp_path, "--pack", str(pack)) == 0
    first = (out / "report.json").read_text()
    (out / "curves-7.png").write_bytes(b"stale page of an earlier run")
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert _lane(tmp_path, "--pack", str(pack), "--split", "all") == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before any work
    assert captured.err.startswith(f"seffi lane: error: {out} already holds a seffi run (")
    assert "--overwrite" in captured.err and len(captured.err.splitlines()) == 1
    assert (out / "report.json").read_text() == first
    # A command that fails its own checks removes nothing, even with --overwrite.
    assert _lane(tmp_path, "--pack", str(pack), "--overwrite", "--learner", "no_such_module_xyz:f") == 2
    assert (out / "report.json").read_text() == first and (out / "curves-7.png").exists()
    capsys.readouterr()
    assert _lane(tmp_path, "--pack", str(pack), "--split", "all", "--overwrite") == 0
    report = json.loads((out / "report.json").read_text())
    assert [c["id"] for c in report["concepts"]] == ["greek", "colours"]
    assert not (out / "curves-7.png").exists()  # the earlier run's seffi files are gone
    assert (out / "notes.txt").read_text() == "mine"  # the user's are not
    assert sorted(p.name for p in out.iterdir()) == ["curves.png", "notes.txt", "report.json"]


def _deep(levels: int) -> str:
    return '{"name": "x", "version": 1, "concepts": ' + "[" * levels + "]" * levels + "}"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_deep(100_000).encode(), "is nested too deeply (more than 16 levels)"),  # not a RecursionError
        (_deep(40).encode(), "is nested too deeply (more than 16 levels)"),
        ('{"name": "café", "version": 1, "concepts": []}'.encode("latin-1"), "is not UTF-8 text"),
        (
            b'{"name": "x", "version": 1, "concepts": [{"id": "\\ud800"}]}',
            "concepts[0].id holds a lone surrogate",
        ),
        (
            b'{"name": "x", "version": ' + b"9" * 5000 + b', "concepts": []}',
            "is not valid JSON: Exceeds the limit",
        ),
        (b'{"name": "x", "version": 1, "concepts": [}', "is not valid JSON: Expecting value (line 1)"),
    ],
    ids=["recursion", "deep", "latin-1", "surrogate", "huge-int", "invalid"],
)
@pytest.mark.parametrize("command", ["lint", "sample-efficiency"])
def test_malformed_pack_files_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, content: bytes, message: str, command: str
) -> None:
    """Packs with deep nesting, non-UTF-8 and invalid JSON: one line, exit 2, no traceback."""
    path = tmp_path / "pack.json"
    path.write_bytes(content)
    if command == "lint":
        rc = main(["lane", "lint", str(path)])
    else:
        rc = _lane(tmp_path, "--pack", str(path))
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"seffi lane: error: pack {path}") and message in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["lint", "sample-efficiency"])
def test_an_endless_or_oversized_pack_file_is_one_line_not_a_memory_error(
    tmp_path: Path, capsys: pytest.CaptureFixture, command: str
) -> None:
    """/dev/zero (not a regular file) and a 9 MB file (by its size) are refused before any read."""
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (9 * 2**20))
    for source in ("/dev/zero", str(big)):
        out = ["--out", str(tmp_path / "out"), "--wandb", "disabled"]
        args = ["lane", "lint", source] if command == "lint" else ["lane", command, "--pack", source, *out]
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        why = "is not a regular file" if source == "/dev/zero" else "is larger than 8,388,608 bytes"
        assert err.count("\n") == 0 and f"pack {source} {why}" in err

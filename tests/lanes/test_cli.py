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


def test_default_run_end_to_end_with_offline_wandb(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
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
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))
    assert "wandb sync" in capsys.readouterr().out
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
    rc = main(
        [
            "lane",
            "sample-efficiency",
            "--pack",
            str(pack),
            "--split",
            "all",
            "--out",
            str(out),
            "--learner",
            "tests.lanes.learners_fixture:RandomLearner",
            "--wandb",
            "disabled",
        ]
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert "replay-determinism gate FAILED" in err
    assert "first divergent snapshot: concept 'greek', k=0, at probe" in err
    agg = json.loads((out / "report.json").read_text())["aggregate"]
    assert agg["first_divergence"] == {"concept": "greek", "k": 0, "step": "probe"}
    assert agg["replay_determinism"] == 0.0 and agg["gate_passed"] is False


def test_holdout_split_and_echo_learner(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert (
        main(
            [
                "lane",
                "sample-efficiency",
                "--split",
                "holdout",
                "--out",
                str(out),
                "--wandb",
                "disabled",
                "--learner",
                "tests.lanes.learners_fixture:EchoLearner",
            ]
        )
        == 0
    )
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
    rc = main(
        [
            "lane",
            "sample-efficiency",
            "--pack",
            str(_write(tmp_path, data)),
            "--split",
            "all",
            "--out",
            str(out),
            "--wandb",
            "disabled",
            "--learner",
            "tests.lanes.learners_fixture:EchoLearner",
        ]
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

"""``seffi score --ray``: shards labelled and tracked in Ray workers, merged to the one-process numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from seffi.labelers import RegexRubric
from seffi.score import score
from tests.helpers import require

ray = require("ray", "rllib")

STRATEGIES = ("algebra", "guess", "table", "draw")
RUBRIC = RegexRubric({s: rf"\b{s}\b" for s in STRATEGIES})


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _write(path, rng, steps, prompts=24, samples=4):
    with path.open("w") as f:
        for step in steps:
            for i in range(prompts):
                for _ in range(samples):
                    ways = rng.choice(
                        STRATEGIES, size=rng.integers(0, 3), replace=False, p=[0.4, 0.3, 0.2, 0.1]
                    )
                    row = {"prompt_id": f"q{i}", "completion": " and ".join(ways) or "no idea", "step": step}
                    f.write(json.dumps(row | {"correct": bool(rng.random() < 0.6)}) + "\n")
    return path


def _numbers(folder):
    report = json.loads((folder / "report.json").read_text())
    report.pop("meta", None)
    return report, json.loads((folder / "steps.json").read_text())


def test_two_workers_give_the_numbers_of_one_process(local_ray, tmp_path):
    rng = np.random.default_rng(11)
    base = _write(tmp_path / "base.jsonl", rng, steps=[0], samples=8)
    policy = _write(tmp_path / "policy.jsonl", rng, steps=[1, 2, 3])
    options = dict(labeler=RUBRIC, wandb="disabled", plots=False, n_boot=50, say=lambda _: None)
    score([policy], [base], out_dir=tmp_path / "one", **options)
    score([policy], [base], out_dir=tmp_path / "two", workers=2, **options)
    (one, one_steps), (two, two_steps) = _numbers(tmp_path / "one"), _numbers(tmp_path / "two")
    assert one["comparisons"][0]["n_inputs"] == 24
    _assert_close(one, two)
    _assert_close(one_steps, two_steps)


def _assert_close(a, b, path="report"):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _assert_close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, abs=1e-12), path
    else:
        assert a == b, path


def test_the_command_line_shards_with_ray(local_ray, tmp_path, capsys):
    from seffi.cli import main

    rng = np.random.default_rng(3)
    base = _write(tmp_path / "base.jsonl", rng, steps=[0], samples=8)
    policy = _write(tmp_path / "policy.jsonl", rng, steps=[5])
    (tmp_path / "rubric.yaml").write_text("".join(f"{s}: '\\b{s}\\b'\n" for s in STRATEGIES))
    argv = ["score", str(policy), "--base", str(base), "--rubric", str(tmp_path / "rubric.yaml"), "--wandb",
            "disabled", "--no-plots", "--n-boot", "20"]  # fmt: skip
    assert main([*argv, "--out", str(tmp_path / "one")]) == 0
    assert main([*argv, "--ray", "--out", str(tmp_path / "two")]) == 0
    assert "policy files: rows (id=prompt_id" in capsys.readouterr().err
    _assert_close(_numbers(tmp_path / "one")[0], _numbers(tmp_path / "two")[0])
    assert main([*argv, "--ray", "0"]) == 2

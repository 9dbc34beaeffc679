"""``seffi score --ray``: shards labelled and tracked in Ray workers, merged to the one-process numbers."""

from __future__ import annotations

import http.server
import json
import threading

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


class _Judge(http.server.BaseHTTPRequestHandler):
    """A judge that names the strategies written in the completion (the prompt's last line)."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][0]["content"].rsplit("Completion: ", 1)[1]
        found = [s for s in STRATEGIES if s in text.split()]
        reply = json.dumps(
            {"choices": [{"message": {"content": json.dumps({"strategies": found})}}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def test_the_judge_labels_in_ray_workers_with_one_shared_cache(local_ray, tmp_path):
    from seffi.score.judge import JudgeLabeler

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        rng = np.random.default_rng(8)
        base = _write(tmp_path / "base.jsonl", rng, steps=[0], samples=8)
        policy = _write(tmp_path / "policy.jsonl", rng, steps=[1])
        said: list[str] = []
        options = dict(wandb="disabled", plots=False, n_boot=20, say=said.append)
        url, cache = f"http://127.0.0.1:{httpd.server_port}/v1", tmp_path / "cache.sqlite"
        template = "Strategies: {strategies} Completion: {completion}"
        judge = lambda: JudgeLabeler(url, STRATEGIES, model="m", cache=cache, template=template)  # noqa: E731
        score([policy], [base], labeler=judge(), out_dir=tmp_path / "two", workers=2, **options)
        asked = next(line for line in said if line.startswith("judge: "))
        rows = [json.loads(line) for f in (base, policy) for line in f.read_text().splitlines()]
        pairs = {(r["prompt_id"], r["completion"]) for r in rows}  # a prompt's repeated text is asked once
        assert len(pairs) <= int(asked.split()[1]) <= len(pairs) + 10  # (a refused connection is retried)
        score([policy], [base], labeler=RUBRIC, out_dir=tmp_path / "rubric", **options)
        # this judge names what the rubric finds: the same numbers
        _assert_close(_numbers(tmp_path / "rubric")[0], _numbers(tmp_path / "two")[0])
        said.clear()
        score([policy], [base], labeler=judge(), out_dir=tmp_path / "again", workers=2, **options)
        assert "judge: 0 requests, " in next(line for line in said if line.startswith("judge: "))
    finally:
        httpd.shutdown()

"""The LLM judge against a real ``transformers serve`` process on a tiny model trained here.

The failure paths a real server cannot be made to show on demand (a refused connection, a stall, an
HTTP 429) use a closed port and a small ``http.server`` in the test.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from seffi.cli import main
from seffi.errors import SeffiError
from seffi.score.agreement import cohen_kappa
from seffi.score.judge import JudgeLabeler
from tests.helpers import require

require("torch", "lm")
require("fastapi", "serve")

from tests.score.tiny_judge import STRATEGIES, TASK_PROMPT, judge_cases, train_tiny_judge  # noqa: E402

TEMPLATE = (
    "Label the completion with strategies from: {strategies} . Prompt: {prompt} Completion: {completion} "
    "Answer in JSON"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``transformers serve`` on the tiny judge; yields (base URL, model path, its log file)."""
    import torch

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("judge")
    model = train_tiny_judge(root / "model", TEMPLATE)
    port, log = _free_port(), root / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TRANSFORMERS_VERBOSITY": "error"}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from transformers.cli.transformers import main; main()", "serve",
             str(model), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"transformers serve exited:\n{log.read_text()[-2000:]}")
                time.sleep(0.5)
        else:
            pytest.fail(f"transformers serve did not start:\n{log.read_text()[-2000:]}")
        yield url + "/v1", str(model), log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _posts(log: Path) -> int:
    return len(re.findall(r'"POST /v1/chat/completions', log.read_text()))


def _files(tmp_path):
    """Policy and base files of the judge's completions: 4 samples per prompt, every case used."""
    cases = judge_cases()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(cases))
    rows = [
        {"prompt_id": f"p{i // 4}", "prompt": TASK_PROMPT, "completion": cases[j][0]}
        for i, j in enumerate(order[:32])
    ]
    expected = [cases[j][1] for j in order[:32]]
    for name in ("policy", "base"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "template.txt").write_text(TEMPLATE)
    (tmp_path / "rubric.yaml").write_text(
        "loop: '\\bfor\\b'\nrecursion: 'fib\\(n\\)'\n"
    )  # recursion: a poor regex
    return rows, expected


def _args(tmp_path, url, model, *extra):
    return [
        "score", str(tmp_path / "policy.jsonl"), "--base", str(tmp_path / "base.jsonl"), "--judge", url,
        "--judge-model", model, "--judge-template", str(tmp_path / "template.txt"), "--judge-cache",
        str(tmp_path / "cache.sqlite"), "--strategies", ",".join(STRATEGIES), "--wandb", "disabled",
        "--no-plots", "--n-boot", "10", *extra,
    ]  # fmt: skip


def test_judge_labels_through_the_server_and_a_rerun_makes_no_request(server, tmp_path, capsys):
    url, model, log = server
    rows, expected = _files(tmp_path)
    before = _posts(log)
    code = main(
        _args(tmp_path, url, model, "--rubric", str(tmp_path / "rubric.yaml"), "--out", str(tmp_path / "a"))
    )
    err = capsys.readouterr().err
    assert code == 0, err
    distinct = len({r["completion"] for r in rows})
    assert _posts(log) - before == distinct
    assert f"judge: {distinct} requests, " in err
    malformed = sum(e is None for e in expected)
    assert (
        "could not be labelled and match nothing (first: the judge's answer is not JSON" in err
        or not malformed
    )
    # C(k) by hand from what the judge was trained to answer ("not JSON" matches nothing)
    sets = [set(e or ()) for e in expected]
    hand = np.mean(
        [[len(set().union(*sets[p * 4 : p * 4 + k])) / 2 for k in range(1, 5)] for p in range(8)], axis=0
    )
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    np.testing.assert_allclose(
        report["comparisons"][0]["policies"][0]["curves"]["coverage"], hand, atol=1e-12
    )
    # agreement with the rubric, counted here over base and policy (the same 32 samples twice)
    agreement = json.loads((tmp_path / "a" / "agreement.json").read_text())
    for s, pattern in (("loop", r"\bfor\b"), ("recursion", r"fib\(n\)")):
        confusion = np.zeros((2, 2), int)
        for r, e in zip(rows, expected, strict=True):
            confusion[int(s in (e or ())), int(bool(re.search(pattern, r["completion"])))] += 2
        assert agreement["strategies"][s]["kappa"] == pytest.approx(cohen_kappa(confusion))
        assert agreement["strategies"][s]["both"] == confusion[1, 1]
    assert (
        agreement["strategies"]["loop"]["kappa"] == 1.0
        and agreement["strategies"]["recursion"]["kappa"] < 0.5
    )
    # the same command again: every answer from the cache, no request reaches the server
    before = _posts(log)
    assert main(_args(tmp_path, url, model, "--out", str(tmp_path / "b"))) == 0
    assert _posts(log) == before and "judge: 0 requests, 64 answers from its cache" in capsys.readouterr().err
    again = json.loads((tmp_path / "b" / "report.json").read_text())
    assert (
        again["comparisons"][0]["policies"][0]["curves"] == report["comparisons"][0]["policies"][0]["curves"]
    )


def test_max_calls_below_the_need_refuses_before_any_request(server, tmp_path, capsys):
    url, model, log = server
    rows, _ = _files(tmp_path)
    before = _posts(log)
    code = main(_args(tmp_path, url, model, "--max-calls", "3", "--out", str(tmp_path / "o")))
    err = capsys.readouterr().err
    need = len({r["completion"] for r in rows})
    assert code == 2 and f"takes {need} requests to the judge" in err and "more than --max-calls 3" in err
    assert _posts(log) == before and not (tmp_path / "o" / "report.json").exists()


def test_a_server_that_is_down_stops_with_one_line(tmp_path, capsys):
    _files(tmp_path)
    url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    code = main(_args(tmp_path, url, "m", "--out", str(tmp_path / "o")))
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        code == 2
        and err[-1].startswith("seffi score: error: the judge at ")
        and "did not answer after" in err[-1]
    )


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers from a script: each request takes the next (status, delay, body) entry."""

    script: ClassVar[list[tuple[int, float, str]]] = []
    seen: ClassVar[list[float]] = []

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        status, delay, content = self.script.pop(0) if self.script else (200, 0.0, '{"strategies": []}')
        self.seen.append(time.monotonic())
        time.sleep(delay)
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        try:
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (a timeout)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted():
    _Scripted.script, _Scripted.seen = [], []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1", _Scripted
    httpd.shutdown()


def test_http_429_is_retried_and_a_stall_times_out(scripted, tmp_path):
    url, handler = scripted
    judge = JudgeLabeler(url, STRATEGIES, model="m", cache=None, retries=2, backoff=0.01, timeout=0.5)
    handler.script = [(429, 0, ""), (429, 0, ""), (200, 0, '{"strategies": ["loop"], "valid": false}')]
    (result,) = judge.label_many([("x", "for x")])
    assert result.strategy_matches == {"loop"} and result.valid is False and judge.calls == 3
    handler.script = [(200, 2.0, "{}")] * 3  # every try stalls past the timeout
    with pytest.raises(SeffiError, match="did not answer after 3 tries"):
        judge.label_many([("x", "while")])


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("loop", "not JSON: 'loop'"),
        ('["loop"]', 'no "strategies" list'),
        ('{"strategies": ["loop", "dfs"]}', "undeclared strategies ['dfs']"),
        ('{"strategies": ["loop"], "valid": "yes"}', '"valid" is not true or false'),
    ],
)
def test_an_answer_that_is_not_the_json_asked_for_is_unparsed_with_its_reason(scripted, content, reason):
    url, handler = scripted
    handler.script = [(200, 0, content)]
    (result,) = JudgeLabeler(url, STRATEGIES, model="m", cache=None).label_many([("x", "for")])
    assert not result.parse_ok and not result.strategy_matches and reason in result.error

"""Each tool's generation dump, in its exact field layout, detected and scored against a hand count."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from seffi.errors import SeffiError
from seffi.labelers import RegexRubric
from seffi.score import detect, read_samples, score

STRATEGIES = ("algebra", "guess", "table")
RUBRIC = RegexRubric({s: rf"\b{s}\b" for s in STRATEGIES})
K = 4


def _draw(seed=3, prompts=5):
    """Per prompt, K samples: (text naming 0-2 strategies, correct)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(prompts):
        rows = []
        for _ in range(K):
            n = rng.choice([0, 1, 1, 1, 2])
            picked = rng.choice(STRATEGIES, size=n, replace=False, p=[0.6, 0.3, 0.1])
            rows.append(
                ("Solve by " + " and ".join(picked) if n else "I am not sure.", bool(rng.random() < 0.7))
            )
        out[f"Question {i}: how many apples?"] = rows
    return out


def _hand_coverage(draws):
    """C(k) over prompts of one run each: the share of strategies named by the first k texts."""
    curves = []
    for rows in draws.values():
        seen, curve = set(), []
        for text, _ in rows:
            seen |= {s for s in STRATEGIES if s in text.split()}
            curve.append(len(seen) / len(STRATEGIES))
        curves.append(curve)
    return np.mean(curves, axis=0)


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def rows_layout(draws):
    return [
        {"prompt_id": f"p{i}", "prompt": q, "completion": t, "correct": ok}
        for i, (q, rows) in enumerate(draws.items())
        for t, ok in rows
    ]


def noveltybench_layout(draws):
    """src/inference.py: {id, prompt, model, generations}; rows in completion order, not dataset order."""
    rows = [
        {"id": f"curated-{i}", "prompt": q, "model": "gpt-4o", "generations": [t for t, _ in gens]}
        for i, (q, gens) in enumerate(draws.items())
    ]
    return rows[::-1]


def verl_layout(draws):
    """RayPPOTrainer._dump_generations: {input, output, gts, score, step} + reward extras, rows balanced
    across the batch (one prompt's responses are not adjacent)."""
    rows = [
        {
            "input": q,
            "output": t,
            "gts": "12",
            "score": 1.0 if ok else 0.0,
            "step": 120,
            "acc": ok,
            "pred": "12",
        }
        for q, gens in draws.items()
        for t, ok in gens
    ]
    by_sample = [rows[i * K + j] for j in range(K) for i in range(len(draws))]
    return by_sample


def lm_eval_layout(draws):
    """EvaluationTracker.save_results_samples: one line per (doc, filter); repeats: K -> resps [[r1..rK]]."""
    lines = []
    for i, (q, gens) in enumerate(draws.items()):
        resps = [[t for t, _ in gens]]
        for filt in ("strict-match", "flexible-extract"):
            lines.append(
                {
                    "doc_id": i,
                    "doc": {"question": q, "answer": "#### 12"},
                    "target": "#### 12",
                    "arguments": {
                        "gen_args_0": {"arg_0": f"Question: {q}\nAnswer:", "arg_1": {"until": ["Question:"]}}
                    },
                    "resps": resps,
                    "filtered_resps": ["12"],
                    "filter": filt,
                    "metrics": ["exact_match"],
                    "doc_hash": _sha(q),
                    "prompt_hash": _sha("Question: " + q),
                    "target_hash": _sha("#### 12"),
                    "exact_match": 1.0,
                }
            )
    return lines


def vllm_batch_layout(draws):
    """`vllm run-batch` output (OpenAI batch format): one request per prompt with n = K choices."""
    return [
        {
            "id": f"vllm-{i}",
            "custom_id": f"request-{i}",
            "response": {
                "status_code": 200,
                "request_id": f"vllm-batch-{i}",
                "body": {
                    "id": f"chatcmpl-{i}",
                    "object": "chat.completion",
                    "model": "tiny",
                    "choices": [
                        {"index": j, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                        for j, (t, _) in enumerate(gens)
                    ],
                },
            },
            "error": None,
        }
        for i, gens in enumerate(draws.values())
    ]


LAYOUTS = {
    "rows": rows_layout,
    "noveltybench": noveltybench_layout,
    "verl": verl_layout,
    "lm-eval": lm_eval_layout,
    "vllm-batch": vllm_batch_layout,
}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_layout_is_detected_and_scored_against_a_hand_count(tmp_path, name):
    policy, base = _draw(seed=3), _draw(seed=4)
    policy_file = _write(tmp_path / f"{name}.jsonl", LAYOUTS[name](policy))
    base_file = _write(tmp_path / f"base-{name}.jsonl", LAYOUTS[name](base))
    said = []
    report = score(
        [policy_file],
        [base_file],
        labeler=RUBRIC,
        out_dir=tmp_path / "out",
        wandb="disabled",
        plots=False,
        n_boot=20,
        say=said.append,
    )
    assert any(line.startswith(f"policy files: {name} (") for line in said), said
    comparison = report.comparisons[0]
    assert comparison.budget == K and comparison.n_inputs == len(policy)
    np.testing.assert_allclose(comparison.policies[0].curves.coverage, _hand_coverage(policy), atol=1e-12)


def test_lm_eval_reads_one_filter_and_scores_single_responses(tmp_path):
    """Two filters repeat a document's responses: read once. With one response, the metric is its score."""
    path = _write(tmp_path / "samples_gsm8k.jsonl", lm_eval_layout(_draw(prompts=2)))
    samples = [s for _, s in read_samples([path])]
    assert len(samples) == 2 * K and {s.correct for s in samples} == {None}
    single = [
        dict(r, resps=[[r["resps"][0][0]]], exact_match=float(r["doc_id"]))
        for r in lm_eval_layout(_draw(prompts=2))
    ]
    samples = [s for _, s in read_samples([_write(tmp_path / "single.jsonl", single)])]
    assert [(s.prompt_id, s.correct) for s in samples] == [("0", False), ("1", True)]


def test_verl_rows_use_the_prompt_text_as_id_and_acc_as_correctness(tmp_path):
    rows = verl_layout(_draw(prompts=2))
    layout = detect(rows[0])
    assert (layout.name, layout.id, layout.score, layout.step) == ("verl", "input", "acc", "step")
    assert detect({k: v for k, v in rows[0].items() if k not in ("acc", "pred")}).score == "score"
    samples = [s for _, s in read_samples([_write(tmp_path / "120.jsonl", rows)])]
    assert {s.step for s in samples} == {120} and [s.correct for s in samples] == [r["acc"] for r in rows]


def test_field_flags_override_detection(tmp_path):
    path = _write(tmp_path / "custom.jsonl", [{"qid": 7, "answer_text": "guess", "ok": 1}])
    ((layout, sample),) = read_samples([path], id="qid", text="answer_text", score="ok")
    assert layout.name == "custom" and (sample.prompt_id, sample.text, sample.correct) == ("7", "guess", True)


def test_parquet_is_read_by_record_batches(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = rows_layout(_draw(prompts=3))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "gen.parquet")
    samples = [s for _, s in read_samples([tmp_path / "gen.parquet"])]
    assert [(s.prompt_id, s.text, s.correct) for s in samples] == [
        (r["prompt_id"], r["completion"], r["correct"]) for r in rows
    ]


def test_a_parquet_step_column_holding_inf_is_one_error(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    table = pa.table({"prompt_id": ["p"] * 3, "completion": ["x"] * 3, "step": [0.0, float("inf"), 1.0]})
    pq.write_table(table, tmp_path / "gen.parquet")
    with pytest.raises(SeffiError, match=r"gen.parquet:2: the step field holds inf; need a whole number"):
        list(read_samples([tmp_path / "gen.parquet"]))


def test_a_failed_vllm_request_has_no_samples_and_a_bad_body_is_one_error(tmp_path):
    rows = vllm_batch_layout(_draw(prompts=2))
    rows[0] = {"id": "vllm-0", "custom_id": "request-0", "response": None, "error": {"message": "timeout"}}
    assert {s.prompt_id for _, s in read_samples([_write(tmp_path / "a.jsonl", rows)])} == {"request-1"}
    rows[1]["response"] = {"status_code": 200, "body": "oops"}
    with pytest.raises(SeffiError, match=r"b.jsonl:2: 'response' has no body.choices list"):
        list(read_samples([_write(tmp_path / "b.jsonl", rows)]))


def test_verl_dumps_give_coverage_and_gain_per_training_step(tmp_path):
    """{step}.jsonl rollout dumps: each step's C(K) and gain equal the hand count of that step's samples."""
    base = _draw(seed=4, prompts=10)
    base_file = _write(tmp_path / "0.jsonl", [dict(r, step=0) for r in verl_layout(base)])
    steps = {10: _draw(seed=10, prompts=10), 20: _draw(seed=20, prompts=10), 30: _draw(seed=30, prompts=10)}
    files = [
        _write(tmp_path / f"{s}.jsonl", [dict(r, step=s) for r in verl_layout(d)]) for s, d in steps.items()
    ]
    report = score(
        files,
        [base_file],
        labeler=RUBRIC,
        out_dir=tmp_path / "out",
        wandb="disabled",
        n_boot=20,
        plots=True,
        say=lambda _: None,
    )
    rows = json.loads((tmp_path / "out" / "steps.json").read_text())["steps"]
    assert [r["step"] for r in rows] == [10, 20, 30]
    iid, oracle = _baseline_aucs(base)
    for row, draws in zip(rows, steps.values(), strict=True):
        hand = _hand_coverage(draws)
        assert row["coverage"]["value"] == pytest.approx(hand[-1], abs=1e-12)
        assert row["coverage"]["lo"] <= row["coverage"]["value"] <= row["coverage"]["hi"]
        assert row["gain_vs_iid"]["value"] == pytest.approx((hand.mean() - iid) / (oracle - iid), abs=1e-12)
    logged = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    by_step = [r for r in logged if "seffi/by_step/coverage" in r]
    assert [r["seffi/step"] for r in by_step] == [10, 20, 30]
    assert (tmp_path / "out" / "plots" / "steps.png").stat().st_size > 0
    pooled = np.mean([_hand_coverage(d) for d in steps.values()], axis=0)  # every step's runs, pooled
    np.testing.assert_allclose(report.comparisons[0].policies[0].curves.coverage, pooled, atol=1e-12)


def _baseline_aucs(base):
    from seffi.coverage import IidBaseline, OracleBaseline

    sets = {q: [{s for s in STRATEGIES if s in t.split()} for t, _ in rows] for q, rows in base.items()}
    iid = IidBaseline.from_samples(sets, strategies=list(STRATEGIES)).curves(K).auc
    oracle = OracleBaseline({q: {s: {s} for s in STRATEGIES} for q in base}, strategies=list(STRATEGIES))
    return iid, oracle.curves(K).auc


def test_files_are_streamed_row_by_row_never_loaded_whole(tmp_path):
    """A 40 MB file is read with a peak of allocations far below its size (one row at a time)."""
    import tracemalloc

    path = tmp_path / "big.jsonl"
    text = "for " * 2_500  # 10 KB per completion
    with path.open("w") as f:
        for i in range(4_000):
            f.write(json.dumps({"prompt_id": f"p{i % 100}", "completion": text, "correct": True}) + "\n")
    assert path.stat().st_size > 40e6
    tracemalloc.start()
    n = sum(1 for _ in read_samples([path]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 4_000 and peak < 1e6


def test_rows_are_each_line_parsed_alone_whatever_the_lines_hold(tmp_path):
    """Blocks of lines give the rows and the error of ``json.loads`` on each non-blank line alone."""
    from seffi.score.files import _rows

    lines = [
        b'\xef\xbb\xbf{"prompt_id": "bom", "completion": "a"}\n',  # a UTF-8 BOM: json.loads takes it
        b"\n",
        b" \t\r\n",
        b"\x0c\n",  # blank for bytes.strip, not JSON whitespace
        b'  {"prompt_id": 1, "completion": "caf\xc3\xa9 \\u00e9", "x": [1.5, NaN, null]}  \r\n',
        b'{"prompt_id": "s", "completion": "\xed\xa0\x80"}\n',  # a lone surrogate: json.loads passes it
        b'{"prompt_id": "spans",\n',  # an object left open ...
        b'"completion": "b"}\n',  # ... closed on the next line: two bad lines, not one row
    ]
    good = [raw for raw in lines[:6] if raw.strip()]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"".join(good))
    assert [row for _, row in _rows(path)] == [json.loads(raw) for raw in good]
    path.write_bytes(b"".join(lines[:6]))
    assert [line for line, _ in _rows(path)] == [1, 5, 6]
    for bad, line in ((lines, 7), ([b'{"a": 1} {"b": 2}\n'], 1), ([b'[{"a": 1},\n', b'{"b": 2}]\n'], 1)):
        path.write_bytes(b"".join(bad))
        with pytest.raises(SeffiError, match=rf"rows.jsonl:{line}: not a JSON line \(JSONDecodeError"):
            list(_rows(path))

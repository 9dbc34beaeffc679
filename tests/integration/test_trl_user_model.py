"""TRL GRPO on a researcher's own chat model: a tiny Qwen2 with a chat template, built and saved here.

The model (about 2,800 parameters) and its word-level tokenizer with a ChatML-style template are
written with ``save_pretrained`` and loaded back as a user loads theirs. The labeler is a
``RegexRubric`` over the generated text; an extra zero-weight reward function records every
completion TRL hands the reward functions, and the test labels those with its own regexes and counts
coverage by hand. Each run is a few GRPO steps on CPU.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.helpers import require

pytestmark = pytest.mark.integration

require("trl", "trl")
torch = require("torch", "trl")

from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from seffi.callbacks.labelers import RegexRubric  # noqa: E402
from seffi.callbacks.trl import GRPOCoverage, checkpoint_state_path  # noqa: E402
from seffi.callbacks.trl_model import prompt_token_ids  # noqa: E402
from seffi.coverage import OracleBaseline  # noqa: E402
from seffi.models.grpo import cpu_training  # noqa: E402
from tests.tiny_chat import tiny_chat_model  # noqa: E402

STRATEGIES = ("astar", "bfs", "dfs", "greedy")
WORDS = ["\n", "system", "user", "assistant", "find", "a", "route", "through", "maze", "plan", "step",
         "bfs", "dfs", "astar", "greedy", "answer", "done", "left", "right", "up", "down"]  # fmt: skip
TEXTS = {"maze-a": "find a route through maze", "maze-b": "plan a route", "maze-c": "find a plan step"}
G = 4  # num_generations = K
PER_STEP = 8  # completions per step: 2 prompts x G


@pytest.fixture(autouse=True)
def _one_thread_and_own_cache(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.setenv("SEFFI_CACHE", str(tmp_path / "seffi-cache"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny Qwen2 chat model and its tokenizer, saved like any Hugging Face model folder."""
    model, tok = tiny_chat_model(WORDS, intermediate_size=32, max_position_embeddings=128)
    assert sum(p.numel() for p in model.parameters()) < 5_000
    folder = tmp_path_factory.mktemp("qwen2-chat")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def load(folder):
    """The saved model (with a counter of the rows it generates) and its tokenizer."""
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    generate, calls = model.generate, []

    def counted(*args, **kwargs):
        calls.append(int(kwargs["input_ids"].shape[0]))
        return generate(*args, **kwargs)

    model.generate = counted
    return model, PreTrainedTokenizerFast.from_pretrained(folder), calls


class Recorder:
    """A zero-weight reward function: every call's (input id, completion text), in TRL's order."""

    __name__ = "recorder"

    def __init__(self):
        self.calls = []

    def __call__(self, prompts, completions, input_id, **kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        self.calls.append(list(zip(map(str, input_id), texts, strict=True)))
        return [0.0] * len(completions)


def hand_labels(text):
    """The strategies a completion follows, by this test's own regexes."""
    return {s for s in STRATEGIES if re.search(rf"\b{s}\b", text)}


def hand_coverage(calls, k_max):
    """C(k) by hand: each consecutive group of G completions of one prompt is a run; runs averaged per
    prompt, prompts averaged with equal weight."""
    per_input = {}
    for batch in calls:
        for start in range(0, len(batch), G):
            group = batch[start : start + G]
            assert len({pid for pid, _ in group}) == 1, "TRL lays out each prompt's G completions together"
            seen, curve = set(), []
            for _, text in group[:k_max]:
                seen |= hand_labels(text)
                curve.append(len(seen) / len(STRATEGIES))
            per_input.setdefault(group[0][0], []).append(curve)
    return np.mean([np.mean(runs, axis=0) for runs in per_input.values()], axis=0)


def rubric():
    return RegexRubric({s: rf"\b{s}\b" for s in STRATEGIES}, valid=r"\banswer\b|\bdone\b")


def dataset(conversational):
    ids = list(TEXTS)
    if conversational:
        prompts = [
            [{"role": "system", "content": "plan step"}, {"role": "user", "content": TEXTS[i]}] for i in ids
        ]
    else:
        prompts = [TEXTS[i] for i in ids]
    return Dataset.from_dict({"prompt": prompts, "input_id": ids})


def grpo_args(out, steps, **kw):
    return GRPOConfig(
        output_dir=str(out), use_cpu=True, num_generations=G, per_device_train_batch_size=PER_STEP,
        max_completion_length=8, max_steps=steps, logging_steps=1, report_to="none", learning_rate=1e-2,
        seed=0, reward_weights=[1.0, 0.0], disable_tqdm=True, **{"save_strategy": "no", **kw},
        **cpu_training(),
    )  # fmt: skip


def train(folder, tmp_path, conversational, steps=3, resume=None, **kw):
    model, tok, rows = load(folder)
    # Without reference traces the oracle says every strategy is feasible and unambiguous.
    oracle = OracleBaseline({pid: {s: {s} for s in STRATEGIES} for pid in TEXTS}, strategies=STRATEGIES)
    cov = GRPOCoverage(labeler=rubric(), oracle=oracle, out_dir=tmp_path / "cov", n_boot=50, plots=False)
    recorder = Recorder()
    trainer = GRPOTrainer(
        model=model, processing_class=tok, reward_funcs=[cov.reward, recorder],
        args=grpo_args(tmp_path / "trainer", steps, **kw), train_dataset=dataset(conversational),
        callbacks=[cov.callback],
    )  # fmt: skip
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    return cov, recorder, rows, trainer


def report_of(cov):
    return json.loads((cov.monitor.out_dir / "report.json").read_text())["comparisons"][0]


def check_against_hand_count(cov, calls):
    comp = report_of(cov)
    policy = comp["policies"][0]
    np.testing.assert_allclose(policy["curves"]["coverage"], hand_coverage(calls, G), rtol=0, atol=1e-12)
    assert comp["iid"] is not None and comp["oracle"] is not None
    gain = policy["gain"]
    assert gain["value"] is not None and np.isfinite(gain["value"]), gain


def check_reference(cov, recorder, rows, steps):
    """The stated reference cost equals what was generated; the first batch's completions are in it."""
    cost, n = cov.reference_cost, 4 * G
    assert cost["prompts"] == len(TEXTS) and cost["samples_per_prompt"] == n
    assert cost["samples"] == len(TEXTS) * n == cost["drawn"] + cost["reused"] + cost["cached"]
    assert cost["reused"] == PER_STEP and cost["cached"] == 0
    # every row generated: TRL's steps x 8, then the reference's drawn rows
    assert sum(rows) == steps * PER_STEP + cost["drawn"] and len(rows) == steps + cost["generate_calls"]
    assert cov.iid.curves(G).samples == len(TEXTS) * n
    first = {}
    for pid, text in recorder.calls[0]:
        first.setdefault(pid, []).append(sorted(hand_labels(text)))
    for pid, labels in first.items():
        assert cov.reference["sets"][pid][: len(labels)] == labels


def test_grpo_on_a_qwen2_chat_model_with_string_prompts_counts_coverage_by_hand(model_dir, tmp_path):
    cov, recorder, rows, _ = train(model_dir, tmp_path, conversational=False)
    assert cov.budget == G and cov.group_sizes == {G: 3 * 2}
    assert sum(map(len, recorder.calls)) == 3 * PER_STEP == cov.monitor.episodes
    check_against_hand_count(cov, recorder.calls)
    check_reference(cov, recorder, rows, steps=3)
    # the read API: the latest log's scalars, the same on the coverage object and its callback
    assert cov.metrics() == cov.callback.metrics() == cov.callback.last_logged != {}
    assert "seffi/gain_vs_iid" in cov.metrics()
    frame = cov.to_dataframe()
    assert set(frame["method"]) == {"policy", "iid", "oracle"} and len(frame) == 3 * G
    np.testing.assert_allclose(cov.curves().coverage, hand_coverage(recorder.calls, G), atol=1e-12)


def test_grpo_with_conversational_prompts_samples_the_reference_through_the_chat_template(
    model_dir, tmp_path
):
    cov, recorder, rows, trainer = train(model_dir, tmp_path, conversational=True)
    prompts = list(dataset(True)["prompt"])
    # the reference samples start from exactly the tokens TRL generates from
    assert prompt_token_ids(trainer.processing_class, prompts) == trainer._tokenize_prompts(prompts)[0]
    tokens = trainer.processing_class.convert_ids_to_tokens(
        prompt_token_ids(trainer.processing_class, prompts)[0]
    )
    assert tokens[-3:] == ["<|im_start|>", "assistant", "\n"]  # the generation prompt
    assert cov.group_sizes == {G: 3 * 2}
    check_against_hand_count(cov, recorder.calls)
    check_reference(cov, recorder, rows, steps=3)


def test_resume_from_checkpoint_continues_the_monitor_and_keeps_the_reference(model_dir, tmp_path):
    # Run 1 saves at steps 2 and 3; run 2 resumes from step 2, as after a crash past a checkpoint.
    first, rec1, _, _ = train(model_dir, tmp_path, False, steps=3, save_strategy="steps", save_steps=2)
    checkpoint = tmp_path / "trainer" / "checkpoint-2"
    assert checkpoint_state_path(tmp_path / "trainer", 2) == checkpoint / "seffi_coverage.json"
    assert (checkpoint / "seffi_coverage.json").is_file()
    assert first.monitor.episodes == 3 * PER_STEP
    second, rec2, rows2, _ = train(model_dir, tmp_path, False, steps=4, resume=checkpoint)
    # nothing but TRL's own steps 3 and 4 generated: the reference was restored, not redrawn
    assert rows2 == [PER_STEP, PER_STEP]
    assert second.reference == first.reference and second.reference_cost == first.reference_cost
    # the same monitor, continued in the same folder from the checkpoint's 2 steps
    assert second.monitor.out_dir == first.monitor.out_dir == tmp_path / "cov"
    assert not (tmp_path / "cov-2").exists()
    assert second.monitor.episodes == 2 * PER_STEP + 2 * PER_STEP
    check_against_hand_count(second, rec1.calls[:2] + rec2.calls)
    # the local log rewound to the checkpoint (run 1's step 3 dropped), then continued
    lines = (tmp_path / "cov" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["seffi/step"] for line in lines] == [1, 2, 3, 4]

"""TRL GRPO: reward wrapper (junk-safe, gathers straddling groups), callback logging, tiny-LM run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import require

require("trl", "trl")
require("torch", "trl")

from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from seffi.callbacks.trl import CoverageReward, GRPOCoverage, completion_text  # noqa: E402
from seffi.coverage import CoverageTracker  # noqa: E402
from seffi.errors import SeffiError  # noqa: E402
from seffi.group_scoring import diversity_rewards  # noqa: E402
from seffi.models.grpo import cpu_training  # noqa: E402
from seffi.models.passk import PassAtKEval  # noqa: E402
from seffi.tasks import get_task  # noqa: E402
from tests.callbacks.helpers import hanoi_inputs  # noqa: E402
from tests.callbacks.tiny_lm import tiny_causal_lm  # noqa: E402


@pytest.fixture(autouse=True)
def _own_reference_cache(tmp_path, monkeypatch):
    """The default reference-iid cache goes to $SEFFI_CACHE: a fresh folder per test."""
    monkeypatch.setenv("SEFFI_CACHE", str(tmp_path / "seffi-cache"))


@pytest.fixture(scope="module")
def hanoi():
    return hanoi_inputs(3)


def test_reward_validates_junk_without_crashing(hanoi):
    task, inputs = hanoi
    x = inputs[0]
    good = task.solve(x, "recursive")
    completions = [None, "", b"\xff\xfe", 3, "  ", good, [{"role": "assistant", "content": good}], ["odd"]]
    reward = CoverageReward(task, inputs)
    got = reward(["p"] * len(completions), completions, input_id=[x.id] * len(completions))
    assert got == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    assert all(not r.parse_ok for r in reward.last_results[:5])
    assert reward.last_results[5] == task.validate_y_text(x, good)
    with pytest.raises(SeffiError, match="prompt-id column 'input_id'"):
        reward(["p"], ["q"], other=[1])


def test_completion_text_shapes():
    assert completion_text("a") == "a"
    assert completion_text([{"role": "assistant", "content": "hi"}]) == "hi"
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert completion_text(parts) == "ab"
    assert completion_text(7) == 7


def _batch(task, inputs, rng, per_group=4):
    ids, texts = [], []
    for x in inputs:
        for _ in range(per_group):
            ids.append(x.id)
            texts.append(task.sample_y_text(x, rng))
    return ids, texts


def test_groups_straddling_processes_are_gathered_before_merging(hanoi, tmp_path):
    task, inputs = hanoi
    rng = np.random.default_rng(0)
    batches = [_batch(task, inputs, rng) for _ in range(3)]
    # Two ranks split each batch of 12 in the middle: input 1's group of 4 straddles them.
    rank1_records = []

    def fake_gather(records):
        return records + rank1_records

    rank0 = GRPOCoverage(task, inputs, out_dir=tmp_path / "r0", gather=fake_gather, n_boot=0, plots=False)
    alone = GRPOCoverage(task, inputs, out_dir=tmp_path / "alone", n_boot=0, plots=False)
    reference = CoverageTracker(strategies=task.strategies())
    for run, (ids, texts) in enumerate(batches):
        rank1_records[:] = [
            (
                1,
                (
                    i,
                    tuple(
                        sorted(task.validate_y_text(next(x for x in inputs if x.id == i), t).strategy_matches)
                    ),
                    task.validate_y_text(next(x for x in inputs if x.id == i), t).valid,
                ),
            )
            for i, t in zip(ids[6:], texts[6:], strict=True)
        ]
        rank0.reward(["p"] * 6, texts[:6], input_id=ids[:6])
        alone.reward(["p"] * 6, texts[:6], input_id=ids[:6])
        for i, t in zip(ids, texts, strict=True):
            res = task.validate_y_text(next(x for x in inputs if x.id == i), t)
            reference.update(i, res.strategy_matches, valid=res.valid, stream=run)
    merged = rank0.monitor.tracker
    assert rank0.budget == 4 and rank0.group_sizes == {4: 9}
    assert len(merged) == len(reference) == 9 and merged.n_samples == 36
    a, b = merged.curves(4, n_boot=0), reference.curves(4, n_boot=0)
    np.testing.assert_allclose(a.coverage, b.coverage, atol=1e-12)
    np.testing.assert_allclose(a.full_coverage, b.full_coverage, atol=1e-12)
    # without the gather, rank 0 sees half of input 1's group: runs of 2 instead of 4
    assert alone.group_sizes == {4: 3, 2: 3}


def _grpo(model, tok, ds, cov, tmp_path, lr, steps=3, reward_funcs=None, callbacks=None, **config):
    """``steps`` GRPO steps of 2 prompts x 4 completions on the CPU; ``config``: more GRPOConfig fields.
    The reward functions and the callbacks default to the coverage object's alone."""
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        num_generations=4,
        per_device_train_batch_size=8,
        max_steps=steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        learning_rate=lr,
        seed=0,
        **{"max_completion_length": 12, **config},
        **cpu_training(),
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs or [cov.reward],
        args=args,
        train_dataset=ds,
        processing_class=tok,
        callbacks=callbacks or [cov.callback],
    )
    trainer.train()
    return trainer


class _Reporter(TrainerCallback):
    """Stands in for a reporting integration (W&B): records the logs it is handed."""

    def __init__(self):
        self.seen = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.seen.append(dict(logs or {}))


def test_grpo_tiny_lm_logs_coverage_through_trl(hanoi, tmp_path):
    task, inputs = hanoi
    model, tok = tiny_causal_lm(task, seed=0)
    assert sum(p.numel() for p in model.parameters()) < 10_000
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    seen = []

    def recorder(prompts, completions, input_id, **kwargs):  # independent record of every completion
        seen.extend(zip(input_id, completions, strict=True))
        return [0.0] * len(completions)

    cov = GRPOCoverage(task, inputs, out_dir=tmp_path / "grpo", n_boot=20)
    held_out = [x for x in task.make_inputs(8, seed=5) if x.id not in {y.id for y in inputs}][:2]
    evaluation = PassAtKEval(task, held_out, n=4, every=2, out_dir=tmp_path / "grpo", seed=0)
    reporter = _Reporter()
    trainer = _grpo(
        model,
        tok,
        ds,
        cov,
        tmp_path,
        lr=1e-3,
        reward_funcs=[cov.reward, recorder],
        callbacks=[reporter, cov.callback, evaluation],
        max_completion_length=24,
        reward_weights=[1.0, 0.0],
    )

    assert cov.budget == 4 and set(cov.group_sizes) == {4}
    # The evaluation's scalars reach the reporter too (the evaluation runs before it) and the history
    assert [s for s, _, _ in evaluation.history] == [2, 3] and evaluation.base.n == 4
    assert any("seffi/eval/valid@1" in rec and "seffi/eval/crossover_k" in rec for rec in reporter.seen)
    assert any("seffi/eval/valid@4" in rec for rec in trainer.state.log_history)
    assert json.loads((tmp_path / "grpo" / "eval.json").read_text())["history"][-1]["step"] == 3
    # the reporter (registered before us) still received the seffi keys: our on_log runs first
    logged = [rec for rec in reporter.seen if "seffi/auc" in rec]
    assert len(logged) == 3 and "seffi/coverage/k=4" in logged[-1] and "seffi/gain_vs_iid" in logged[-1]
    assert any("seffi/auc" in rec for rec in trainer.state.log_history)
    # the tracker equals one fed by hand with every completion, each prompt occurrence one run
    ref = CoverageTracker(strategies=task.strategies())
    runs: dict[str, int] = {}
    by_id = {x.id: x for x in inputs}
    for start in range(0, len(seen), 8):
        batch = seen[start : start + 8]
        for pid in dict.fromkeys(p for p, _ in batch):
            run = runs.get(pid, 0)
            runs[pid] = run + 1
            for p, text in batch:
                if p == pid:
                    res = task.validate_y_text(by_id[p], text)
                    ref.update(p, res.strategy_matches, valid=res.valid, stream=run)
    tracker = cov.monitor.tracker
    assert tracker.n_samples == len(seen) == 24
    np.testing.assert_allclose(
        tracker.curves(4, n_boot=0).coverage, ref.curves(4, n_boot=0).coverage, atol=1e-12
    )
    report = json.loads((tmp_path / "grpo" / "report.json").read_text())
    comp = report["comparisons"][0]
    assert comp["budget"] == 4 and comp["iid"] is not None and comp["oracle"] is not None
    assert (tmp_path / "grpo" / "metrics.jsonl").stat().st_size > 0


def test_labeler_in_place_of_validator(tmp_path):
    # Recording outside a trainer must not create accelerate's process-global state: that side
    # effect made this test depend on which tests ran before it in the same process.
    from accelerate.state import PartialState

    PartialState._reset_state()
    rubric = {"moves": r"\bmove\b", "answer": r"\banswer\b"}
    cov = GRPOCoverage(labeler=rubric, out_dir=tmp_path / "lab", n_boot=0, plots=False, budget=2)
    r = cov.reward(["p"] * 4, ["move 1", "answer 3", None, "move answer"], input_id=["a", "a", "b", "b"])
    assert r == [1.0, 1.0, 0.0, 1.0]
    t = cov.monitor.tracker
    assert t.n_samples == 4
    assert t.curves(2, n_boot=0).coverage.tolist() == pytest.approx(
        [0.25, 1.0]
    )  # a: {moves},{answer}; b: {}, {both}
    assert PartialState._shared_state == {}
    with pytest.raises(ValueError, match="task or a labeler"):
        CoverageReward()


def test_out_dir_holding_a_run_gets_a_fresh_sibling(tmp_path):
    """GRPOCoverage never writes into a folder that already holds a seffi run."""
    from accelerate.state import PartialState

    PartialState._reset_state()
    (tmp_path / "grpo").mkdir()
    (tmp_path / "grpo" / "metrics.jsonl").write_text('{"seffi/step": 9}\n')
    rubric = {"moves": r"\bmove\b"}
    cov = GRPOCoverage(labeler=rubric, out_dir=tmp_path / "grpo", n_boot=0, plots=False, budget=2)
    with pytest.warns(UserWarning, match="grpo-2") as caught:
        cov.reward(["p"] * 2, ["move 1", "no"], input_id=["a", "a"])
    assert len([w for w in caught if "already holds" in str(w.message)]) == 1
    assert cov.monitor.out_dir == tmp_path / "grpo-2" == cov.out_dir
    assert (tmp_path / "grpo" / "metrics.jsonl").read_text() == '{"seffi/step": 9}\n'
    PartialState._reset_state()


def test_iid_is_the_reference_models_own_samples_and_lr0_gain_contains_0(tmp_path):
    """Default iid = n reference samples per prompt (from_samples): the first batch's completions, then
    fresh ones drawn as GRPO draws; lr = 0: the gain's interval holds 0."""
    from seffi.callbacks.trl_model import generate_ids, generation_config, prompt_token_ids
    from seffi.coverage import IidBaseline, OracleBaseline

    task = get_task("hanoi", max_disks=3)
    inputs = task.make_inputs(4, seed=1)
    # A rubric over frequent words: the random LM's word salad then follows "strategies" often.
    rubric = {"move": r"\bmove\b", "answer": r"\banswer\b", "to": r"\bto\b", "a": r"\bA\b"}
    model, tok = tiny_causal_lm(task, seed=3)
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    oracle = OracleBaseline(strategies=tuple(rubric))
    seen = []

    def recorder(prompts, completions, input_id, **kwargs):
        seen.extend(zip(input_id, completions, strict=True))
        return [0.0] * len(completions)

    cov = GRPOCoverage(labeler=rubric, out_dir=tmp_path / "g", n_boot=200, oracle=oracle, seed=5)
    trainer = _grpo(model, tok, ds, cov, tmp_path, lr=0.0, steps=8, reward_funcs=[cov.reward, recorder])
    assert isinstance(cov.iid, IidBaseline) and cov.iid.estimated
    iid_curves = cov.iid.curves(4, n_boot=0)
    assert iid_curves.samples == 4 * 16 and iid_curves.n_inputs == 4  # 4 K samples for each of 4 prompts
    cost = cov.reference_cost
    assert (cost["samples"], cost["reused"], cost["cached"], cost["drawn"]) == (64, 8, 0, 56)
    # The same draw, redone by hand: the first batch's 8 completions (2 prompts x 4), then 16 - reused
    # fresh samples per prompt from the initial weights (lr = 0 keeps them), GRPO's settings, train mode.
    labeler = cov.reward.labeler
    first = {}
    for pid, text in seen[:8]:
        first.setdefault(pid, []).append(labeler(None, text).strategy_matches)
    prompts = {x.id: task.prompt(x) for x in inputs}
    ids = sorted(prompts)
    fresh, calls = generate_ids(
        model,
        prompt_token_ids(tok, [prompts[i] for i in ids]),
        [16 - len(first.get(i, [])) for i in ids],
        generation_config(trainer.args, model, tok),
        seed=cost["seed"],
        training=True,
    )
    assert calls == cost["generate_calls"] == 1
    labels = {
        i: first.get(i, [])
        + [labeler(None, tok.decode(c, skip_special_tokens=True)).strategy_matches for c in row]
        for i, row in zip(ids, fresh, strict=True)
    }
    assert {i: [sorted(m) for m in v] for i, v in labels.items()} == cov.reference["sets"]
    again = IidBaseline.from_samples(labels, strategies=labeler.strategies).curves(4, n_boot=0)
    np.testing.assert_allclose(again.coverage, iid_curves.coverage, atol=1e-12)
    comp = json.loads((tmp_path / "g" / "report.json").read_text())["comparisons"][0]
    gain = comp["policies"][0]["gain"]
    assert 0.05 < comp["iid"]["auc"] < 0.95  # informative: the rubric neither always nor never matches
    assert gain["lo"] <= 0.0 <= gain["hi"], gain
    assert len(seen) == 8 * 8


def test_drawing_the_reference_does_not_move_trainings_random_stream(hanoi, tmp_path):
    """iid="reference" and iid="task" train on identical completions (fork_rng)."""
    task, inputs = hanoi
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    runs = {}
    for mode in ("reference", "task"):
        seen = []

        def recorder(prompts, completions, input_id, _seen=seen, **kwargs):
            _seen.extend(completions)
            return [0.0] * len(completions)

        model, tok = tiny_causal_lm(task, seed=0)
        cov = GRPOCoverage(task, inputs, out_dir=tmp_path / mode, n_boot=0, plots=False, iid=mode)
        _grpo(model, tok, ds, cov, tmp_path / mode, lr=1e-3, steps=2, reward_funcs=[cov.reward, recorder])
        runs[mode] = (seen, cov)
    assert runs["reference"][0] == runs["task"][0] and len(runs["task"][0]) == 16
    assert runs["reference"][1].iid.estimated and runs["task"][1].iid == "task"


def _count_rows(model):
    """Wrap ``model.generate`` to record the rows of every call (TRL's and the reference's)."""
    generate, rows = model.generate, []

    def counted(*args, **kwargs):
        rows.append(int(kwargs["input_ids"].shape[0]))
        return generate(*args, **kwargs)

    model.generate = counted
    return rows


def _grpo6(model, tok, ds, cov, out, *, steps=2, per_device=12, reward_funcs=None):
    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        num_generations=6,
        per_device_train_batch_size=per_device,
        max_completion_length=12,
        max_steps=steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        learning_rate=1e-3,
        seed=0,
        disable_tqdm=True,
        **cpu_training(),
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs or [cov.reward],
        args=args,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[cov.callback],
    )
    trainer.train()
    return trainer


def test_misspelt_argument_is_refused_with_the_arguments_it_takes(hanoi, tmp_path):
    task, inputs = hanoi
    takes = r"unknown argument\(s\) rewrd; .*: labeler, strategies, id_column, reward,"
    with pytest.raises(SeffiError, match=takes):
        GRPOCoverage(task, inputs, rewrd="diversity", out_dir=tmp_path / "g")
    cov = GRPOCoverage(task, inputs, reward="diversity", diversity_weight=0.25, out_dir=tmp_path / "g")
    assert (cov.reward.mode, cov.reward.weight, cov.reward.task) == ("diversity", 0.25, task)


def test_budget_that_does_not_divide_num_generations_is_refused_at_train_begin(hanoi, tmp_path):
    task, inputs = hanoi
    model, tok = tiny_causal_lm(task, seed=0)
    rows = _count_rows(model)
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    cov = GRPOCoverage(task, inputs, budget=4, out_dir=tmp_path / "g", n_boot=0, plots=False)
    with pytest.raises(SeffiError, match=r"budget=4 does not fit num_generations=6.*one of \[1, 2, 3, 6\]"):
        _grpo6(model, tok, ds, cov, tmp_path / "out")
    assert rows == [] and cov.monitor is None  # refused before anything was generated or recorded


def test_budget_dividing_num_generations_records_each_group_as_runs_of_k(hanoi, tmp_path):
    """K = 3 with G = 6: each group is 2 runs of 3 consecutive completions; the reward sees all 6."""
    task, inputs = hanoi
    by_id = {x.id: x for x in inputs}
    model, tok = tiny_causal_lm(task, seed=0)
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    seen = []

    def recorder(prompts, completions, input_id, **kwargs):
        seen.append(list(zip(input_id, completions, strict=True)))
        return [0.0] * len(completions)

    cov = GRPOCoverage(task, inputs, budget=3, iid="task", out_dir=tmp_path / "g", n_boot=0, plots=False)
    _grpo6(model, tok, ds, cov, tmp_path / "out", reward_funcs=[cov.reward, recorder])
    assert cov.budget == 3 and cov.reward.group_size == 6 and cov.group_sizes == {6: 4}
    ref = CoverageTracker(strategies=task.strategies())
    stream = 0
    for batch in seen:
        for start in range(0, len(batch), 3):  # runs of 3 in TRL's order
            for pid, text in batch[start : start + 3]:
                res = task.validate_y_text(by_id[pid], text)
                ref.update(pid, res.strategy_matches, valid=res.valid, stream=stream)
            stream += 1
    tracker = cov.monitor.tracker
    assert tracker.n_samples == 24 and len(tracker) == len(ref) == 8
    np.testing.assert_allclose(
        tracker.curves(3, n_boot=0).coverage, ref.curves(3, n_boot=0).coverage, atol=1e-12
    )
    # the diversity reward scores whole groups of 6, not the runs of 3
    div = GRPOCoverage(
        task, inputs, budget=3, reward="diversity", out_dir=tmp_path / "d", n_boot=0, plots=False
    )
    div.configure_groups(6)
    x = inputs[0]
    texts = [task.solve(x, "recursive")] * 3 + [task.solve(x, s) for s in task.strategies()[:3]]
    got = div.reward(["p"] * 6, texts, input_id=[x.id] * 6)
    results = [task.validate_y_text(x, t) for t in texts]
    records = [(x.id, tuple(sorted(r.strategy_matches)), r.valid) for r in results]
    assert got == pytest.approx(diversity_rewards(records, 0.5))
    assert got != pytest.approx(diversity_rewards(records[:3], 0.5) + diversity_rewards(records[3:], 0.5))


def test_reference_prompts_cap_draws_a_seeded_subsample_and_records_only_those(tmp_path, capsys):
    from seffi._seeding import seed_of
    from seffi.callbacks.trl_model import subsample_ids

    task = get_task("hanoi", max_disks=3)
    inputs = task.make_inputs(6, seed=2)
    model, tok = tiny_causal_lm(task, seed=0)
    rows = _count_rows(model)
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    cov = GRPOCoverage(
        task, inputs, reference_prompts=2, out_dir=tmp_path / "g", n_boot=0, plots=False, seed=3
    )
    _grpo(model, tok, ds, cov, tmp_path, lr=1e-3, steps=3)
    picked = subsample_ids([x.id for x in inputs], 2, seed_of(3, 3))
    assert cov.reference["ids"] == picked and len(picked) == 2 and cov.monitored == set(picked)
    assert set(cov.monitor.inputs) <= set(picked)  # the other prompts' groups train but are not recorded
    cost = cov.reference_cost
    assert (cost["prompts"], cost["of_prompts"], cost["samples"]) == (2, 6, 2 * 16)
    assert sum(rows) == 3 * 8 + cost["drawn"]  # TRL's 3 steps x 8, then the reference's rows
    out = capsys.readouterr().out
    assert "[seffi] reference iid: 2 prompts x 16 samples = 32" in out and "prompts capped at 2 of 6" in out
    # 6 groups in 3 steps: one epoch over the 6 prompts, so each recorded prompt's group once
    assert cov.monitor.tracker.n_samples == 2 * 4 and sum(cov.group_sizes.values()) == 6
    comp = json.loads((tmp_path / "g" / "report.json").read_text())["comparisons"][0]
    assert comp["policies"][0]["gain"]["value"] is not None  # over the same 2 prompts as the iid


def test_reference_cache_serves_a_second_run_with_the_same_weights(hanoi, tmp_path):
    task, inputs = hanoi
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    runs = []
    for seed in (0, 0, 1):  # the same weights twice, then other weights
        model, tok = tiny_causal_lm(task, seed=seed)
        rows = _count_rows(model)
        cov = GRPOCoverage(
            task,
            inputs,
            reference_cache=tmp_path / "cache",
            out_dir=tmp_path / f"g{len(runs)}",
            n_boot=0,
            plots=False,
        )
        _grpo(model, tok, ds, cov, tmp_path / f"o{len(runs)}", lr=1e-3, steps=1)
        runs.append((cov, rows))
    (a, _), (b, rows_b), (c, _) = runs
    assert a.reference_cost["drawn"] == 3 * 16 - 8 and a.reference_cost["cached"] == 0
    assert b.reference_cost["drawn"] == 0 and b.reference_cost["cached"] == a.reference_cost["drawn"]
    assert rows_b == [8]  # TRL's one step: nothing generated for the reference
    assert b.reference == a.reference and b.reference_cost["cache"] == a.reference_cost["cache"]
    assert c.reference_cost["cached"] == 0 and c.reference_cost["cache"] != a.reference_cost["cache"]


def test_resume_without_seffi_state_never_draws_the_reference_from_trained_weights(hanoi, tmp_path):
    task, inputs = hanoi
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})

    def trainer_for(model, tok, cov, steps, callbacks):
        args = GRPOConfig(
            output_dir=str(tmp_path / "out"),
            use_cpu=True,
            num_generations=4,
            per_device_train_batch_size=8,
            max_completion_length=12,
            max_steps=steps,
            logging_steps=1,
            report_to="none",
            save_strategy="steps",
            save_steps=1,
            learning_rate=1e-3,
            seed=0,
            disable_tqdm=True,
            **cpu_training(),
        )
        return GRPOTrainer(
            model=model,
            reward_funcs=[cov.reward],
            args=args,
            train_dataset=ds,
            processing_class=tok,
            callbacks=callbacks,
        )

    model, tok = tiny_causal_lm(task, seed=0)
    plain = GRPOCoverage(task, inputs, out_dir=tmp_path / "plain", n_boot=0, plots=False)
    trainer_for(model, tok, plain, 1, []).train()  # a checkpoint written without seffi's callback
    model, tok = tiny_causal_lm(task, seed=0)
    rows = _count_rows(model)
    cov = GRPOCoverage(task, inputs, out_dir=tmp_path / "g", n_boot=0, plots=False)
    with pytest.warns(RuntimeWarning, match="holds no seffi state: the reference iid is not drawn"):
        trainer_for(model, tok, cov, 2, [cov.callback]).train(resume_from_checkpoint=True)
    assert rows == [8] and cov.reference is None and cov.iid is None  # only TRL's step 2 generated


def test_reuse_first_batch_off_draws_every_reference_sample_at_train_begin(hanoi, tmp_path):
    task, inputs = hanoi
    model, tok = tiny_causal_lm(task, seed=0)
    rows = _count_rows(model)
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    cov = GRPOCoverage(task, inputs, reuse_first_batch=False, out_dir=tmp_path / "g", n_boot=0, plots=False)
    _grpo(model, tok, ds, cov, tmp_path, lr=1e-3, steps=2)
    cost = cov.reference_cost
    assert (cost["drawn"], cost["reused"], cost["cached"]) == (3 * 16, 0, 0)
    assert rows == [3 * 16, 8, 8]  # the reference first (train begin), then TRL's two steps


def test_a_checkpoint_copied_from_another_training_never_writes_into_its_folder(hanoi, tmp_path, monkeypatch):
    """Training B resumes from a checkpoint copied out of training A: refused, A's folder untouched."""
    import shutil

    task, inputs = hanoi
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    monkeypatch.chdir(tmp_path)  # out_dir=None: runs/seffi-grpo-<timestamp> under here

    def trainer_for(output_dir, cov, steps):
        args = GRPOConfig(output_dir=str(output_dir), use_cpu=True, num_generations=4,
                          per_device_train_batch_size=8, max_completion_length=12, max_steps=steps,
                          logging_steps=1, report_to="none", save_strategy="steps", save_steps=1,
                          learning_rate=1e-3, seed=0, disable_tqdm=True, **cpu_training())  # fmt: skip
        model, tok = tiny_causal_lm(task, seed=0)
        return GRPOTrainer(model=model, reward_funcs=[cov.reward], args=args, train_dataset=ds,
                           processing_class=tok, callbacks=[cov.callback])  # fmt: skip

    first = GRPOCoverage(task, inputs, iid="task", n_boot=0, plots=False)
    trainer_for(tmp_path / "a", first, 2).train()
    folder = first.monitor.out_dir
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert len((folder / "metrics.jsonl").read_text().splitlines()) == 2
    (tmp_path / "b").mkdir()
    shutil.copytree(tmp_path / "a" / "checkpoint-1", tmp_path / "b" / "checkpoint-1")
    second = GRPOCoverage(task, inputs, iid="task", n_boot=0, plots=False)
    with pytest.raises(SeffiError, match=r"seffi_coverage\.json was saved by the training in .*a, not"):
        trainer_for(tmp_path / "b", second, 2).train(resume_from_checkpoint=True)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before

"""Exploration-method rewards on the TRL GRPO path: direct calls against the group rules, tiny GRPO runs."""

from __future__ import annotations

import copy
import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from tests.helpers import require

require("trl", "trl")
torch = require("torch", "trl")

from datasets import Dataset  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from seffi import group_scoring as rewards  # noqa: E402
from seffi.callbacks import trl_model  # noqa: E402
from seffi.callbacks.trl import GRPOCoverage  # noqa: E402
from seffi.callbacks.trl_model import policy_logprobs  # noqa: E402
from seffi.errors import SeffiError  # noqa: E402
from seffi.labelers import RegexRubric  # noqa: E402
from seffi.models.grpo import cpu_training  # noqa: E402
from seffi.tasks import get_task  # noqa: E402
from tests.callbacks.tiny_lm import tiny_causal_lm  # noqa: E402

pytestmark = pytest.mark.integration

#: Options of each method in the direct-call tests (every key of rewards.METHODS must be here).
OPTIONS = {
    "valid": {},
    "diversity": {"weight": 0.5},
    "unlikeliness": {"beta": 0.25},
    "passk": {"k": 2},
    "outcome_ucb": {"c": 0.5},
    "outcome_batch": {"c": 0.5},
}
#: One log-probability per completion of the hand-built batch (completion i has completion_ids [i]).
LOGPROBS = [-3.0, -1.0, -2.0, -5.0, -4.0, -4.0, -1.0, -2.0]
#: A rubric over frequent words of the hanoi vocabulary: the random tiny LM's word salad follows these
#: "strategies" often, and is "valid" about half the time.
RUBRIC = {"move": r"\bmove\b", "answer": r"\banswer\b", "to": r"\bto\b", "hanoi": r"\bhanoi\b"}
VALID = r"\bmove\b|\bfrom\b"


@pytest.fixture(autouse=True)
def _one_thread_own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SEFFI_CACHE", str(tmp_path / "seffi-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def grid():
    """grid_routes (rung 3's task): two prompts x G = 4 completions with known strategies."""
    task = get_task("grid_routes")
    x0, x1 = task.make_inputs(2, seed=0)
    texts = [
        task.solve(x0, "down_first"),  # valid, {down_first}
        task.solve(x0, "down_first"),  # valid, {down_first}
        task.solve(x0, "staircase"),  # valid, {staircase}
        "banana",  # junk: invalid, {}
        task.solve(x1, "right_first"),  # valid, {right_first, wall_following}
        "right\ndown\nright\ndown\nright\ndown\nanswer 3 2",  # staircase with a wrong answer: invalid
        "",  # junk
        "down\nright\nanswer 1 1",  # parses, wrong: invalid, {}
    ]
    ids = [x0.id] * 4 + [x1.id] * 4
    by_id = {x0.id: x0, x1.id: x1}
    results = [task.validate_y_text(by_id[i], t) for i, t in zip(ids, texts, strict=True)]
    records = [
        (i, tuple(sorted(r.strategy_matches)), bool(r.valid)) for i, r in zip(ids, results, strict=True)
    ]
    assert [v for _, _, v in records] == [True, True, True, False, True, False, False, False]
    assert records[5][1] == ("staircase",) and records[4][1] == ("right_first", "wall_following")
    return task, [x0, x1], ids, texts, records


def _coverage(task, inputs, method, tmp_path, **kw):
    cov = GRPOCoverage(
        task,
        inputs,
        reward=method,
        reward_options=OPTIONS[method],
        iid="task",
        out_dir=tmp_path / method,
        n_boot=0,
        plots=False,
        logprob_fn=lambda prompts, cids: [LOGPROBS[c[0]] for c in cids],
        **kw,
    )
    cov.configure_groups(4)
    return cov


def _expected(method, records, counts=None):
    opts = dict(OPTIONS[method])
    return rewards.batch_rewards(
        method, records, 4, logprobs=LOGPROBS, k=opts.pop("k", None), counts=counts, **opts
    )


def test_registry_methods_are_reward_modes_of_the_trl_path():
    assert set(rewards.METHODS) <= set(rewards.REWARD_MODES) and set(OPTIONS) == set(rewards.METHODS)


@pytest.mark.parametrize("method", sorted(rewards.METHODS))
def test_each_method_rewards_a_batch_exactly_as_its_group_rule(grid, tmp_path, method):
    task, inputs, ids, texts, records = grid
    cov = _coverage(task, inputs, method, tmp_path)
    got = cov.reward(["p"] * 8, texts, completion_ids=[[i] for i in range(8)], input_id=ids)
    counts = rewards.OutcomeCounts() if method == "outcome_ucb" else None
    assert got == pytest.approx(_expected(method, records, counts), abs=1e-12)
    assert cov.monitor.tracker.n_samples == 8  # the batch is recorded too
    if method == "outcome_ucb":  # the counts persist: a second batch gets the bonus of a seen outcome
        again = cov.reward(["p"] * 8, texts, completion_ids=[[i] for i in range(8)], input_id=ids)
        assert again == pytest.approx(_expected(method, records, counts), abs=1e-12)
        assert again[0] == pytest.approx(1.0 + 0.5 / math.sqrt(1 + 2))  # {down_first} seen twice before
        assert cov.reward.method.counts.as_dict() == counts.as_dict()


def test_passk_and_unlikeliness_give_the_hand_computed_rewards(grid, tmp_path):
    task, inputs, ids, texts, _ = grid
    got = _coverage(task, inputs, "passk", tmp_path).reward(["p"] * 8, texts, input_id=ids)
    # x0: 3 of 4 valid, every 2-subset holds a valid one: 0 everywhere. x1: 1 of 4 valid with k = 2:
    # R = 1 - C(3,2)/C(4,2) = 1/2, sigma = 1/2, A_valid = 1, A_invalid = (1/2 - C(2,1)/C(3,1)) / (1/2).
    assert got == pytest.approx([0, 0, 0, 0, 1, -1 / 3, -1 / 3, -1 / 3], abs=1e-12)
    got = _coverage(task, inputs, "unlikeliness", tmp_path).reward(
        ["p"] * 8, texts, completion_ids=[[i] for i in range(8)], input_id=ids
    )
    # x0: log-probs -3, -1, -2, -5 have ascending ranks 1, 3, 2, 0: 1 - 0.25 u / 4 for the valid ones.
    # x1: -4, -4, -1, -2: the only valid completion ties with the other least likely one for ranks 0
    # and 1, so takes mid-rank 0.5: 1 - 0.25 * 0.5 / 4.
    assert got == pytest.approx([1 - 1 / 16, 1 - 3 / 16, 1 - 2 / 16, 0, 1 - 0.5 / 16, 0, 0, 0], abs=1e-12)


def test_unlikeliness_log_probabilities_travel_with_records_across_ranks(grid, tmp_path):
    """Rank 0 holds 6 completions, rank 1 the last 2 of x1's group: the rule sees the whole group."""
    task, inputs, ids, texts, records = grid
    rank1 = [(1, records[i], LOGPROBS[i]) for i in (6, 7)]
    cov = _coverage(task, inputs, "unlikeliness", tmp_path, gather=lambda local: local + rank1)
    got = cov.reward(["p"] * 6, texts[:6], completion_ids=[[i] for i in range(6)], input_id=ids[:6])
    assert got == pytest.approx(_expected("unlikeliness", records)[:6], abs=1e-12)
    assert cov.group_sizes == {4: 2} and cov.reward.last_logprobs == LOGPROBS[:6]


def test_outcome_counts_survive_a_checkpoint_and_skip_evaluation_batches(grid, tmp_path):
    task, inputs, ids, texts, records = grid
    cov = _coverage(task, inputs, "outcome_ucb", tmp_path)
    cov.reward(["p"] * 8, texts, input_id=ids)
    before = cov.reward.method.counts.as_dict()
    cov.reward.score(ids, ["p"] * 8, texts, training=False)  # an evaluation batch: history unchanged
    assert cov.reward.method.counts.as_dict() == before
    state = json.loads(json.dumps(cov.state_dict()))
    resumed = _coverage(task, inputs, "outcome_ucb", tmp_path).load_state_dict(state, step=1)
    assert resumed.reward.method.counts.as_dict() == before
    counts = rewards.OutcomeCounts(before)
    got = resumed.reward(["p"] * 8, texts, input_id=ids)
    assert got == pytest.approx(_expected("outcome_ucb", records, counts), abs=1e-12)
    assert got != pytest.approx(_expected("outcome_ucb", records, rewards.OutcomeCounts()))


def test_method_options_are_checked_when_the_coverage_is_built(grid, tmp_path):
    task, inputs, ids, texts, _ = grid

    def build(reward, options):
        return GRPOCoverage(
            task, inputs, reward=reward, reward_options=options, out_dir=tmp_path, plots=False
        )

    with pytest.raises(SeffiError, match=r"reward 'passk' needs reward_options=\{'k': k\}.*got k=None"):
        build("passk", None)
    with pytest.raises(SeffiError, match=r"got k=2.5"):
        build("passk", {"k": 2.5})
    with pytest.raises(SeffiError, match=r"takes options \['beta', 'reduction'\], got \['c'\]"):
        build("unlikeliness", {"c": 1.0})
    with pytest.raises(SeffiError, match=r"unlikeliness beta must be in \[0, 1\]"):
        build("unlikeliness", {"beta": 2.0})
    with pytest.raises(SeffiError, match="outcome bonus c must be >= 0"):
        build("outcome_ucb", {"c": -1})
    with pytest.raises(SeffiError, match="reward 'valid' takes no reward_options"):
        build("valid", {"beta": 0.1})
    with pytest.raises(SeffiError, match=r"k=8 but each group holds num_generations=4"):
        build("passk", {"k": 8}).configure_groups(4)
    plain = build("unlikeliness", None)
    with pytest.raises(SeffiError, match=r"needs the policy's log-probabilities.*logprob_fn"):
        plain.reward(["p"] * 8, texts, input_id=ids)


# -- tiny GRPOTrainer runs ----------------------------------------------------------------------------


def _hanoi_run(tmp_path, method, options, *, steps=2, **config):
    """A tiny GRPOTrainer run (2 prompts, both in every step, G = 4) recording what the reward saw, returned.

    Each step revisits both prompts, so outcome_ucb's second batch reads the first batch's counts.
    """
    task = get_task("hanoi", max_disks=3)
    inputs = task.make_inputs(2, seed=1)
    model, tok = tiny_causal_lm(task, seed=3)
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    cov = GRPOCoverage(
        labeler=RegexRubric(RUBRIC, valid=VALID),
        reward=method,
        reward_options=options,
        iid=None,
        out_dir=tmp_path / "g",
        n_boot=0,
        plots=False,
    )
    batches = []
    score = cov.reward.score

    def recording_score(*args, **kwargs):
        out = score(*args, **kwargs)
        batches[-1]["returned"] = list(out)
        batches[-1]["used"] = cov.reward.last_logprobs
        return out

    cov.reward.score = recording_score

    def recorder(prompts, completions, completion_ids, input_id, log_metric, **kwargs):
        batches[-1].update(
            ids=list(input_id),
            prompts=list(prompts),
            texts=list(completions),
            completion_ids=[list(c) for c in completion_ids],
            weights=copy.deepcopy(log_metric.__self__.model.state_dict()),  # the policy that sampled them
        )
        return [0.0] * len(completions)

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=12,
        max_steps=steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        learning_rate=1e-2,
        seed=0,
        disable_tqdm=True,
        reward_weights=[1.0, 0.0],
        **cpu_training(),
        **config,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[cov.reward, recorder],
        args=args,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[cov.callback],
    )
    generate = trainer._generate

    def recorded_generate(prompts):
        out = generate(prompts)
        batches.append({"trl_prompt_ids": [list(p) for p in out[0]]})
        return out

    trainer._generate = recorded_generate
    return task, tok, cov, trainer, batches


def _hand_records(batch):
    """(input id, sorted matches, valid) of each completion, labelled here with ``re`` directly."""
    out = []
    for pid, text in zip(batch["ids"], batch["texts"], strict=True):
        matches = tuple(sorted(s for s, pat in RUBRIC.items() if re.search(pat, text)))
        out.append((pid, matches, re.search(VALID, text) is not None))
    return out


def _recomputed_logprobs(task, batch, weights, *, temperature=1.0, mean=True):
    """Each completion's log-probability (mean or sum over its tokens), one unpadded sequence at a time."""
    model, _ = tiny_causal_lm(task, seed=3)
    model.load_state_dict(weights)
    model.eval()
    out = []
    with torch.no_grad():
        for p, c in zip(batch["trl_prompt_ids"], batch["completion_ids"], strict=True):
            seq = torch.tensor([p + c])
            logp = torch.log_softmax(model(input_ids=seq).logits[0].float() / temperature, dim=-1)
            per_token = [logp[len(p) - 1 + t, tok].item() for t, tok in enumerate(c)]
            out.append(float(np.mean(per_token) if mean else np.sum(per_token)))
    return out


def test_policy_log_probabilities_divide_logits_by_the_sampling_temperature():
    """As GRPOTrainer scores its policy: logits / GRPOConfig.temperature; the model's mode is restored."""
    task = get_task("hanoi", max_disks=3)
    model, tok = tiny_causal_lm(task, seed=3)
    model.train()
    prompts = [task.prompt(x) for x in task.make_inputs(2, seed=1)]
    batch = {
        "trl_prompt_ids": [tok(text=[p])["input_ids"][0] for p in prompts],
        "completion_ids": [[8, 9, 10, 1], [7]],  # "move answer 0 <eos>", "to"
    }
    trainer = SimpleNamespace(model=model, processing_class=tok, args=SimpleNamespace(temperature=0.5))
    got = policy_logprobs(trainer, prompts, batch["completion_ids"], "sum")
    weights = model.state_dict()
    np.testing.assert_allclose(
        got, _recomputed_logprobs(task, batch, weights, temperature=0.5, mean=False), atol=1e-5
    )
    untempered = _recomputed_logprobs(task, batch, weights, mean=False)
    assert np.max(np.abs(np.array(got) - untempered)) > 0.1 and model.training


def test_unlikeliness_ranks_completions_by_the_sampling_policys_log_probability(tmp_path):
    task, tok, cov, trainer, batches = _hanoi_run(tmp_path, "unlikeliness", {"beta": 0.5})
    trainer.train()
    assert len(batches) == 2 and cov.reward.logprob_cost["batches"] == 2
    for b in batches:
        assert b["trl_prompt_ids"] == trl_model.prompt_token_ids(tok, b["prompts"])  # TRL's tokenisation
        expected = _recomputed_logprobs(task, b, b["weights"])
        np.testing.assert_allclose(b["used"], expected, atol=1e-5)
        records = _hand_records(b)
        assert b["returned"] == pytest.approx(
            rewards.batch_rewards("unlikeliness", records, 4, logprobs=expected, beta=0.5), abs=1e-5
        )
    stale = _recomputed_logprobs(task, batches[1], batches[0]["weights"])
    # the second batch was scored after an update: the first batch's weights give other numbers
    assert np.max(np.abs(np.array(stale) - np.array(batches[1]["used"]))) > 1e-4
    assert any(0 < sum(v for *_, v in _hand_records(b)[i : i + 4]) for b in batches for i in (0, 4))


def test_passk_with_scaled_rewards_is_refused_at_train_begin(tmp_path):
    *_, cov, trainer, batches = _hanoi_run(tmp_path, "passk", {"k": 2})
    assert trainer.args.scale_rewards == "group"  # TRL's default
    with pytest.raises(SeffiError) as caught:
        trainer.train()
    message = str(caught.value)
    assert "scale_rewards='none'" in message and "scale_rewards='group'" in message and "\n" not in message
    assert batches == [] and cov.monitor is None  # refused before anything was generated


@pytest.mark.parametrize(
    ("method", "options", "config"),
    [
        ("unlikeliness", {"beta": 0.25}, {}),
        ("passk", {"k": 2}, {"scale_rewards": "none"}),
        ("outcome_ucb", {"c": 0.5}, {}),
    ],
)
def test_two_step_grpo_run_with_method_reward_records_coverage(tmp_path, method, options, config):
    *_, cov, trainer, batches = _hanoi_run(tmp_path, method, options, **config)
    trainer.train()
    assert len(batches) == 2 and all(len(b["ids"]) == 8 for b in batches)
    counts = rewards.OutcomeCounts() if method == "outcome_ucb" else None
    runs: dict[str, list[list[tuple[str, ...]]]] = {}
    for b in batches:
        records = _hand_records(b)
        opts = dict(options)
        expected = rewards.batch_rewards(
            method, records, 4, logprobs=b["used"], k=opts.pop("k", None), counts=counts, **opts
        )
        assert b["returned"] == pytest.approx(expected, abs=1e-12)
        for start in range(0, 8, 4):  # each prompt's group of 4 is one run of K = 4
            runs.setdefault(records[start][0], []).append([m for _, m, _ in records[start : start + 4]])
    # each step holds both prompts: 2 runs of each (equal runs per prompt: the mean over runs is C(k))
    assert sorted(runs) == sorted(cov.monitor.inputs) and [len(r) for r in runs.values()] == [2, 2]
    hand = [
        np.mean([len(set().union(*run[:k])) / len(RUBRIC) for rs in runs.values() for run in rs])
        for k in range(1, 5)
    ]
    tracker = cov.monitor.tracker
    assert tracker.n_samples == 16
    np.testing.assert_allclose(tracker.curves(4, n_boot=0).coverage, hand, atol=1e-12)
    assert cov.metrics()["seffi/coverage/k=4"] == pytest.approx(hand[-1], abs=1e-12)
    if method == "outcome_ucb":
        assert cov.reward.method.counts.as_dict() == counts.as_dict()
        assert sum(cov.reward.method.counts.total(i) for i in runs) == 16
        # the second batch's bonuses come from the first batch's counts: some outcome was seen before
        second = batches[1]["returned"]
        assert min(r - v for r, (*_, v) in zip(second, _hand_records(batches[1]), strict=True)) < 0.5 - 1e-9
    if method == "passk":
        assert any(abs(r) > 0.1 for b in batches for r in b["returned"])  # groups of mixed validity

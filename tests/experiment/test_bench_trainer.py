"""The bench's TRL hooks (`seffi.experiment.bench_trainer`): the surface bonus and reward by hand, and the
advantages a tiny GRPOTrainer trains on under an advantage rule against a hand computation."""

from __future__ import annotations

import re
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from tests.helpers import require

require("trl", "trl")
torch = require("torch", "trl")

from datasets import Dataset  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from seffi.callbacks import trl_model  # noqa: E402
from seffi.callbacks.trl import GRPOCoverage  # noqa: E402
from seffi.experiment.bench_trainer import (  # noqa: E402
    GroupAdvantages,
    SurfaceReward,
    advantage_trainer,
    surface_bonus,
)
from seffi.labelers import RegexRubric  # noqa: E402
from seffi.models.grpo import cpu_training  # noqa: E402
from seffi.tasks import get_task  # noqa: E402
from tests.callbacks.tiny_lm import tiny_causal_lm  # noqa: E402

#: Strategies over frequent words of the hanoi vocabulary: the random tiny LM's word salad follows these
#: often and is "valid" about half the time, so its groups have mixed rewards and shared clusters.
RUBRIC = {"move": r"\bmove\b", "answer": r"\banswer\b", "to": r"\bto\b"}
VALID = r"\bmove\b|\bfrom\b"


@pytest.fixture(autouse=True)
def _one_thread(tmp_path, monkeypatch):
    monkeypatch.setenv("SEFFI_CACHE", str(tmp_path / "seffi-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_surface_bonus_is_novel_ngrams_and_edit_distance_against_the_rest() -> None:
    """ "a b" twice and "c": each "a b" has no n-gram the others lack (u = 0) and is at token distance 0
    and 2/2 from the others (e = 0.5): 0.25; "c" is new (u = 1) and at distance 1 from both: 1."""
    assert surface_bonus(["a b", "a b", "c"]) == pytest.approx([0.25, 0.25, 1.0])
    # "a b c" vs "a b d": novel 1-grams 1/3, 2-grams 1/2, 3-grams 1/1 -> u = 11/18; distance 1/3.
    assert surface_bonus(["a b c", "a b d"]) == pytest.approx([(11 / 18 + 1 / 3) / 2] * 2)
    assert surface_bonus(["a"]) == [0.0] and surface_bonus(["", "a"]) == pytest.approx([0.5, 1.0])


def _result(valid: bool, matches: tuple[str, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(valid=valid, strategy_matches=frozenset(matches))


def test_surface_reward_scores_each_group_of_the_batch_by_hand() -> None:
    """Two groups of 3: r = valid (0.5 + 0.5 b) with b from the group's own texts only."""
    texts = ["a b", "a b", "c", "x", "y", "x"]
    results = [_result(v) for v in (True, True, False, True, True, True)]
    scorer = SimpleNamespace(id_column="input_id", decode=None, last_results=results)
    reward = SurfaceReward(scorer, 0.5, 3, gather=lambda rows: rows)
    got = reward(["p"] * 6, texts, completion_ids=None, input_id=["i"] * 3 + ["j"] * 3)
    # group j: "x" twice (u = 0, e = 1/2 -> b = 1/4), "y" (u = 1, e = 1 -> b = 1)
    assert got == pytest.approx([0.625, 0.625, 0.0, 0.625, 1.0, 0.625])
    assert reward.__name__ == "surface"


def test_uarl_with_a_second_labeler_clusters_by_its_labels_and_keeps_the_validators_validity() -> None:
    """The classifier puts completions 0 and 1 apart (the validator joins them) and 2 with 0."""
    results = [_result(True, ("a",)), _result(True, ("a",)), _result(True, ("b",)), _result(False)]
    scorer = SimpleNamespace(
        id_column="input_id", decode=lambda ids: " ".join(map(str, ids)), last_results=results
    )
    labels = {"0": ("x",), "1": ("y",), "2": ("x",), "3": ("x",)}
    labeler = lambda x, text: _result(True, labels[text])  # noqa: E731  (its validity is never read)
    hook = GroupAdvantages("uarl", None, scorer, 4, labeler, {"p": object()}, gather=lambda rows: rows)
    batch = [{"input_id": "p", "prompt": "q"}] * 4
    got = hook(None, batch, [[0], [1], [2], [3]], [0.5, 0.5, 0.5, -1.5])
    assert got == pytest.approx([0.5 / 3, 0.5, 0.5 / 3, -1.5 / 3])  # clusters {x} x 3, {y}
    assert [r[2] for r in hook.last[0]] == [True, True, True, False]
    by_validator = GroupAdvantages("uarl", None, scorer, 4, gather=lambda rows: rows)
    assert by_validator(None, batch, [[0], [1], [2], [3]], [0.5, 0.5, 0.5, -1.5]) == pytest.approx(
        [0.25, 0.25, 0.5, -1.5]
    )


def _expected(rule: str, records: list[tuple], logprobs: list[float] | None) -> list[float]:
    """TRL's GRPO advantage (group mean, unbiased std + 1e-4), then the rule, computed here by hand."""
    out = []
    for g in range(0, len(records), 4):
        group = records[g : g + 4]
        v = np.array([float(r[2]) for r in group])
        base = (v - v.mean()) / (v.std(ddof=1) + 1e-4)
        sizes = Counter(r[1] for r in group)
        if rule == "ucpo" and v.sum() >= 2:  # q: softmax of the valid ones' log-probabilities
            q = np.exp(np.array(logprobs[g : g + 4]))[v == 1]
            q /= q.sum()
            factor = iter(0.8 + 0.2 * v.sum() * (1 / q) / np.sum(1 / q))
            base = np.array([a * next(factor) if r[2] else a for r, a in zip(group, base, strict=True)])
        for r, a in zip(group, base, strict=True):
            if rule == "uarl":
                out.append(a / sizes[r[1]])
            elif rule == "w_reinforce":
                out.append(0.1 if r[2] else -1.0)
            else:
                out.append(a)
    return out


@pytest.mark.parametrize("rule", ["uarl", "w_reinforce", "ucpo"])
def test_tiny_grpo_trains_on_the_rules_advantages(tmp_path, rule) -> None:
    """A GRPOTrainer step on a tiny LM: the advantages its loss receives are the rule's, computed by hand
    from the completions' regex labels (matched through their token ids: TRL shuffles the batch)."""
    task = get_task("hanoi", max_disks=3)
    inputs = task.make_inputs(2, seed=1)
    model, tok = tiny_causal_lm(task, seed=3)
    ds = Dataset.from_dict({"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]})
    cov = GRPOCoverage(
        labeler=RegexRubric(RUBRIC, valid=VALID), iid=None, out_dir=tmp_path / "g", n_boot=0, plots=False
    )
    seen: dict = {}

    def recorder(prompts, completions, completion_ids, input_id, **kwargs):
        seen.update(prompts=list(prompts), texts=list(completions), ids=[list(c) for c in completion_ids])
        return [0.0] * len(completions)

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, num_generations=4, per_device_train_batch_size=8,
        max_completion_length=12, max_steps=1, logging_steps=1, report_to="none", save_strategy="no",
        learning_rate=1e-2, seed=0, disable_tqdm=True, reward_weights=[1.0, 0.0], **cpu_training(),
    )  # fmt: skip
    options = {"w_reinforce": {"weight": 0.1}, "ucpo": {"tau": 0.2}}.get(rule)
    hook = GroupAdvantages(rule, options, cov.reward, 4)
    trainer = advantage_trainer(
        hook, model=model, reward_funcs=[cov.reward, recorder], args=args, train_dataset=ds,
        processing_class=tok, callbacks=[cov.callback],
    )  # fmt: skip
    trained = []
    compute_loss = trainer._compute_loss

    def recording_loss(model, batch):
        trained.append(batch)
        return compute_loss(model, batch)

    trainer._compute_loss = recording_loss
    trainer.train()
    ids = [x.id for x in inputs for _ in range(4)]
    records = [
        (i, tuple(sorted(s for s, p in RUBRIC.items() if re.search(p, t))), re.search(VALID, t) is not None)
        for i, t in zip(ids, seen["texts"], strict=True)
    ]
    assert [r[0] for r in records] == [r[0] for r in hook.last[0]]  # TRL's order: 4 per prompt
    expected = _expected(rule, hook.last[0], hook.last[3])
    assert [r[1:] for r in records] == [r[1:] for r in hook.last[0]]  # the hook's labels are the rubric's
    prompt_ids = trl_model.prompt_token_ids(tok, seen["prompts"])
    want: dict = {}
    for p, c, e in zip(prompt_ids, seen["ids"], expected, strict=True):
        assert want.setdefault((tuple(p), tuple(c)), e) == pytest.approx(e)
    got = {}
    (batch,) = trained
    for row in range(len(batch["advantages"])):
        p = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()].tolist()
        c = batch["completion_ids"][row][batch["completion_mask"][row].bool()].tolist()
        got[(tuple(p), tuple(c))] = float(batch["advantages"][row])
    assert got.keys() == want.keys()
    assert [got[k] for k in want] == pytest.approx([want[k] for k in want], abs=1e-5)
    # the group's rewards were mixed and a cluster was shared: the rule moved TRL's own advantages
    assert hook.last[2] != pytest.approx(hook.last[1], abs=1e-6)

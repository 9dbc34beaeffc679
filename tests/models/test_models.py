"""Rung 2's models: tokenizer, SFT, save/load, cache, hard EM and purity measures on tiny configs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from tests.helpers import require

# The imports below need the lm extra: require() skips (or, in CI, fails) first.
# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")

import torch

from seffi.errors import SeffiError
from seffi.models.cache import build_task, train_base, train_ladder_models, training_rows
from seffi.models.config import LMConfig, MixtureConfig
from seffi.models.evaluate import nmi, purity, split_ceiling, strategy_frequencies, tv
from seffi.models.lm import Example, Layout, TaskLM, build_tokenizer, examples_from_rows
from seffi.models.mixture import balanced_argmax, code_scores, freeze_to_codes, train_mixture
from seffi.tasks import get_task
from tests.models import tiny
from tests.models.tiny import tiny_cfg


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory):
    return tiny.tiny_models(tmp_path_factory)


def _weights(lm: TaskLM) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in lm.model.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_tokenizer_ids_equal_task_vocabulary_ids() -> None:
    """The word-level HF tokenizer built from task.vocabulary() agrees with it."""
    task = get_task("edit_script")
    layout = Layout(task.vocabulary())
    tok = build_tokenizer(layout)
    rows = list(task.training_rows(5, 2, seed=0))
    for r in rows:
        text = f"{r.prompt} <sep> {r.y_text}"
        assert tok(text)["input_ids"] == [*layout.prefix(r.prompt), *layout.target(r.y_text)[:-1]]
        assert layout.decode(layout.target(r.y_text)) == r.y_text
    assert tok.convert_tokens_to_ids("<z3>") == layout.code(3)
    assert tok.eos_token_id == 1 and tok.pad_token_id == 0


def test_sft_loss_goes_down_and_same_seed_gives_identical_weights() -> None:
    """SFT mechanics (loss goes down) and same seed => same weights (bit-exact)."""
    cfg = tiny_cfg()
    task = build_task(cfg)
    rows = training_rows(cfg, task)
    a = train_base(cfg, task, rows)
    b = train_base(cfg, task, rows)
    assert a.meta["loss_last"] < a.meta["loss_first"] - 0.5
    assert _same(_weights(a), _weights(b))
    c = train_base(cfg.model_copy(update={"seed": 1}), task, rows)
    assert not _same(_weights(a), _weights(c))


def test_saved_folder_loads_with_auto_classes(tiny_models) -> None:
    """save_pretrained folders load with AutoModelForCausalLM / AutoTokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = tiny_models.base_dir
    assert (folder / "model.safetensors").is_file()
    model = AutoModelForCausalLM.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    ids = torch.tensor([tok("edit a b to b <sep> del 0")["input_ids"]])
    with torch.no_grad():
        expected = tiny_models.base.model(input_ids=ids).logits
        assert torch.allclose(model(input_ids=ids).logits, expected)


def test_cache_reuses_folders_keyed_by_config(tiny_models) -> None:
    """A second run with the same (task, config, seed) loads instead of training."""
    again = train_ladder_models(tiny_cfg(), tiny_models.base_dir.parent)
    assert again.cached == {"base": True, "mixture": True}
    assert _same(_weights(again.mixture), _weights(tiny_models.mixture))
    assert again.prior.tolist() == tiny_models.prior.tolist()
    assert tiny_cfg(seed=1).base_key() != tiny_cfg().base_key()
    other_mixture = tiny_cfg(mixture={"rounds": 3})
    assert other_mixture.base_key() == tiny_cfg().base_key()
    assert other_mixture.mixture_key() != tiny_cfg().mixture_key()
    meta = json.loads((tiny_models.mixture_dir / "seffi_meta.json").read_text())
    assert meta["n_codes"] == 8 and len(meta["prior"]) == 8 and meta["base_key"] == tiny_cfg().base_key()


@dataclass(frozen=True)
class _Row:
    input_id: str
    prompt: str
    y_text: str


def _separable_modes() -> tuple[TaskLM, list[_Row], list[int]]:
    """Rows of 40 edit_script inputs, each answered in three fixed hidden modes; a base LM trained on
    them; and each row's mode."""
    task = get_task("edit_script")
    modes = ["del 0\nanswer a", "sub 1 b\nsub 2 b\nanswer b b", "ins 0 c\nins 1 c\nins 2 c\nanswer c c c"]
    xs = task.make_inputs(40, seed=0)
    rows = [_Row(x.id, task.prompt(x), modes[k]) for x in xs for k in range(3)]
    hidden = [k for _ in xs for k in range(3)]
    cfg = LMConfig(task="edit_script", d_model=32, n_layer=1, n_head=2, epochs=2, batch_size=32, lr=3e-3)
    return train_base(cfg, task, rows), rows, hidden


def test_em_assignments_change_then_stabilise_on_separable_modes() -> None:
    """EM assignments change, then stabilise; codes recover hidden modes (NMI 1)."""
    base, rows, hidden = _separable_modes()
    em = MixtureConfig(
        mode="batch", rounds=3, epochs_per_round=1, folds=1, lr=3e-3, capacity=1.0, code_init_std=1.0
    )
    result = train_mixture(base, rows, 3, em)
    changed = [h["changed"] for h in result.history]
    assert changed[0] == 1.0  # first assignment
    assert changed[1] > 0.05  # the first M-step moved rows
    assert changed[-1] == 0.0 and changed[-2] == 0.0  # stable
    assert nmi(result.assignments.tolist(), hidden) == pytest.approx(1.0)
    assert result.prior.tolist() == pytest.approx([1 / 3] * 3)


def test_online_cross_fitted_em_recovers_separable_modes() -> None:
    """Online hard EM with cross-fitted E-steps puts each hidden mode on its own code."""
    base, rows, hidden = _separable_modes()
    em = MixtureConfig(
        mode="online",
        rounds=12,
        epochs_per_round=1,
        folds=2,
        final_epochs=0.5,
        lr=1e-2,
        code_init_std=0.02,
        capacity=1.0,
    )
    result = train_mixture(base, rows, 3, em)
    assert nmi(result.assignments.tolist(), hidden) > 0.9
    assert len(result.history) == 13  # twelve online epochs and the final E-step


def test_no_strategy_label_is_read_scrambled_labels_give_identical_models() -> None:
    """Rows whose strategy/kind labels are scrambled train identical base and mixture."""
    mixture = {"rounds": 1, "epochs_per_round": 0.5, "final_epochs": 0.5, "lr": 3e-3, "prior": "input"}
    cfg = tiny_cfg(mixture=mixture)  # the ladder's kind of mixture: it learns p(z | x) too
    task = build_task(cfg)
    rows = training_rows(cfg, task)
    rng = np.random.default_rng(5)
    strategies = list(task.strategies())
    scrambled = [
        dataclasses.replace(r, strategy=strategies[int(rng.integers(4))], kind="off_strategy") for r in rows
    ]
    assert any(a.strategy != b.strategy for a, b in zip(rows, scrambled, strict=True))
    base_a, base_b = train_base(cfg, task, rows), train_base(cfg, task, scrambled)
    assert _same(_weights(base_a), _weights(base_b))
    mix_a = train_mixture(base_a, rows, 8, cfg.mixture)
    mix_b = train_mixture(base_b, scrambled, 8, cfg.mixture)
    assert mix_a.assignments.tolist() == mix_b.assignments.tolist()
    assert _same(_weights(mix_a.model), _weights(mix_b.model))


def test_balanced_argmax_caps_codes_and_keeps_confident_rows() -> None:
    """Collapse guard: a code better for every row cannot take every row."""
    scores = np.array([[0.0, -5.0], [0.0, -0.1], [0.0, -3.0], [0.0, -0.2]])
    assert balanced_argmax(scores, 0.0).tolist() == [0, 0, 0, 0]  # plain argmax collapses
    assert balanced_argmax(scores, 1.0).tolist() == [0, 1, 0, 1]  # least confident rows move


def test_nmi_tv_and_purity_values() -> None:
    """Purity diagnostics: NMI, TV and the per-code strategy mix on known inputs."""
    assert nmi([0, 0, 1, 1], ["a", "a", "b", "b"]) == pytest.approx(1.0)
    assert nmi([0, 1, 0, 1], ["a", "a", "b", "b"]) == pytest.approx(0.0, abs=1e-12)
    assert tv(np.array([0.5, 0.5]), np.array([1.0, 0.0])) == pytest.approx(0.5)
    freq = strategy_frequencies([["a"], ["a", "b"], []], ["a", "b"])
    assert freq.tolist() == pytest.approx([0.75, 0.25])

    class R:
        def __init__(self, matches: set[str], valid: bool) -> None:
            self.strategy_matches, self.valid = frozenset(matches), valid

    res = [R({"a"}, True), R({"a"}, True), R(set(), False), R({"b"}, True)]
    p = purity(np.array([0, 0, 1, 1]), res, ["a", "b"], 2)
    np.testing.assert_allclose(p["matrix"], [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    assert p["valid"].tolist() == [1.0, 0.5]
    assert p["nmi"] == pytest.approx(1.0)


def test_sampling_is_per_row_reproducible_whatever_the_batch(tiny_models) -> None:
    """A row's trace depends on its own uniforms only (batched == one at a time)."""
    lm = tiny_models.mixture
    task = tiny_models.task
    xs = task.make_inputs(6, seed=3)
    prefixes = [lm.layout.prefix(task.prompt(x), i % 8) for i, x in enumerate(xs)]
    streams = [np.random.default_rng(i).random(200) for i in range(len(xs))]

    def draw(rows_of_batch: list[int]):
        pos = dict.fromkeys(rows_of_batch, 0)

        def uniforms(idx: np.ndarray) -> np.ndarray:
            out = []
            for j in idx.tolist():
                r = rows_of_batch[j]
                out.append(streams[r][pos[r]])
                pos[r] += 1
            return np.array(out)

        return lm.sample([prefixes[r] for r in rows_of_batch], uniforms)

    batched = draw(list(range(len(xs))))
    single = [draw([r])[0] for r in range(len(xs))]
    assert batched == single
    assert len({tuple(s) for s in batched}) > 1


def test_load_rejects_folders_of_other_tasks(tiny_models) -> None:
    """Loading a model folder for the wrong task is one readable error."""
    with pytest.raises(SeffiError, match="edit_script"):
        TaskLM.load(tiny_models.base_dir, get_task("hanoi"))
    with pytest.raises(SeffiError, match="not a seffi model folder"):
        TaskLM.load(tiny_models.base_dir.parent, get_task("edit_script"))


def test_missing_lm_extra_is_one_line_naming_it() -> None:
    """Without torch, require_lm() raises a SeffiError naming the 'lm' extra."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from seffi.models import require_lm, MissingExtraError\n"
        "try:\n    require_lm()\nexcept MissingExtraError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'lm' extra" in out and "torch" in out and len(out.strip().splitlines()) == 1


def test_examples_read_only_text_fields() -> None:
    """Training sequences are built from input_id, prompt and y_text only."""
    layout = Layout(get_task("edit_script").vocabulary())
    ex = examples_from_rows(layout, [_Row("i", "edit a to b", "sub 0 b\nanswer b")], [2])
    assert ex[0].prefix[-1] == layout.code(2) and ex[0].target[-1] == 1


def test_mixture_max_rows_subsets_rows_and_unset_leaves_the_cache_key() -> None:
    """EM on a seeded subset of rows (max_rows); unset, it is left out of the cache key."""
    from seffi.models.cache import mixture_row_index

    cfg = tiny_cfg(mixture={"max_rows": 50})
    idx = mixture_row_index(cfg, 200)
    assert len(idx) == 50 and len(set(idx.tolist())) == 50 and idx.tolist() == sorted(idx.tolist())
    assert mixture_row_index(cfg, 200).tolist() == idx.tolist()
    assert mixture_row_index(tiny_cfg(), 200).tolist() == list(range(200))
    assert tiny_cfg(mixture={"max_rows": 50}).mixture_key() != tiny_cfg().mixture_key()
    # A config without max_rows hashes as if the field did not exist (cached models stay valid).
    from seffi._seeding import stable_id

    old = tiny_cfg().mixture.model_dump(mode="json")
    for late in ("max_rows", "trainable", "code_slot", "init", "prior", "warm_epochs", "warm_lr"):
        del old[late]
    expected = f"edit_script-mixture-{stable_id({**tiny_cfg().base_fields(), 'mixture': old}, length=16)}"
    assert tiny_cfg().mixture_key() == expected


def test_mixture_fields_at_their_defaults_are_left_out_of_the_cache_key() -> None:
    """Frozen-base mixture fields: trainable="all" and no warm-up hash as a config without the fields."""
    plain = tiny_cfg()
    defaults = {"trainable": "all", "code_slot": "after_sep", "warm_epochs": 0, "warm_lr": 1}
    same = tiny_cfg(mixture={**tiny.TINY["mixture"], **defaults})
    assert same.mixture_key() == plain.mixture_key()
    codes = tiny_cfg(mixture={**tiny.TINY["mixture"], "trainable": "codes"})
    warm = tiny_cfg(mixture={**tiny.TINY["mixture"], "warm_epochs": 1})
    slot = tiny_cfg(mixture={**tiny.TINY["mixture"], "code_slot": "sep"})
    learned = tiny_cfg(mixture={**tiny.TINY["mixture"], "prior": "input"})
    assert tiny_cfg(mixture={**tiny.TINY["mixture"], "prior": "global"}).mixture_key() == plain.mixture_key()
    keys = {c.mixture_key() for c in (plain, codes, warm, slot, learned)}
    assert len(keys) == 5
    assert codes.base_key() == plain.base_key()  # the base LM is shared


def test_codes_only_em_keeps_every_base_weight_and_moves_only_code_embeddings() -> None:
    """Frozen-base mixture: with trainable="codes" after a warm-up, EM changes only the
    L code-token embedding rows; the warm-up alone moves the transformer (it learns the code slot)."""
    cfg = tiny_cfg()
    task = build_task(cfg)
    rows = training_rows(cfg, task)[:96]
    base = train_base(cfg, task, rows)
    warm_only = MixtureConfig(warm_epochs=1, rounds=1, epochs_per_round=0.01, lr=1e-9, trainable="codes")
    frozen = MixtureConfig(warm_epochs=1, rounds=2, epochs_per_round=1, lr=3e-2, trainable="codes")
    a = _weights(train_mixture(base, rows, 4, warm_only).model)
    result = train_mixture(base, rows, 4, frozen)
    b = _weights(result.model)
    emb = "transformer.wte.weight"
    code0 = base.layout.code0
    assert all(torch.equal(a[k], b[k]) for k in a if k != emb)  # EM left every transformer weight alone
    moved = (a[emb] - b[emb]).abs().sum(dim=1).nonzero().flatten().tolist()
    assert moved and set(moved) <= set(range(code0, code0 + 4))  # only code rows (an unused code stays)
    attn = "transformer.h.0.attn.c_attn.weight"
    assert not torch.equal(a[attn], _weights(base)[attn])
    assert all(p.requires_grad for p in result.model.model.parameters())  # unfrozen for later fine-tuning


def test_freeze_to_codes_masks_gradients_and_undoes() -> None:
    """freeze_to_codes leaves one trainable tensor whose gradient is zero off the codes."""
    cfg = tiny_cfg()
    task = build_task(cfg)
    rows = training_rows(cfg, task)[:8]
    lm = TaskLM.create(cfg, task, examples_from_rows(Layout(task.vocabulary()), rows))
    undo = freeze_to_codes(lm, 3)
    trainable = [p for p in lm.model.parameters() if p.requires_grad]
    assert len(trainable) == 1
    out = lm.model(**dict(zip(("input_ids", "attention_mask", "labels"), _batch_of(lm, rows), strict=True)))
    out.loss.backward()
    grad = trainable[0].grad.abs().sum(dim=1)
    codes = set(range(lm.layout.code0, lm.layout.code0 + 3))
    assert set(grad.nonzero().flatten().tolist()) == codes  # every used code row, and nothing else
    undo()
    assert all(p.requires_grad for p in lm.model.parameters())


def _batch_of(lm: TaskLM, rows: list) -> tuple:
    from seffi.models.lm import _batch

    return _batch(examples_from_rows(lm.layout, rows, [i % 3 for i in range(len(rows))]))


def test_code_scores_batched_equal_one_code_at_a_time(tiny_models) -> None:
    """Scoring every code in one batch gives each code's own log-likelihoods."""
    mixture = tiny_models.mixture
    rows = training_rows(tiny_models.cfg, tiny_models.task)[:20]
    got = code_scores(mixture, rows, 3)
    for z in range(3):
        own = mixture.score(examples_from_rows(mixture.layout, rows, [z] * len(rows)))
        np.testing.assert_allclose(got[:, z], own, rtol=1e-5, atol=1e-4)
    # Batches that split codes and mix lengths (the E-step's batch size is a speed setting only).
    np.testing.assert_allclose(code_scores(mixture, rows, 3, batch_size=7), got, rtol=1e-5, atol=1e-4)
    # Copies of a row get the same floats wherever they land: hard EM breaks ties by position.
    doubled = code_scores(mixture, rows + rows[::-1], 3, batch_size=7)
    np.testing.assert_array_equal(doubled[:20], doubled[20:][::-1])


def test_nmi_weights_and_split_ceiling_values() -> None:
    """NMI ceiling: a pure latent split over 2 codes per strategy scores 2/3 at best."""
    assert nmi([0, 0, 1], ["a", "a", "b"], weights=[0.5, 0.5, 1.0]) == pytest.approx(1.0)
    assert nmi([0, 0, 1, 1], ["a", "b", "a", "b"], weights=[1, 0, 0, 1]) == pytest.approx(1.0)
    pairs = [("a", ("a",))] * 400 + [("b", ("b",))] * 400
    assert split_ceiling(pairs, 2) == pytest.approx(1.0)
    # L = 2M, two codes per strategy: I = log 2, H(latent) = log 4, H(strategy) = log 2 -> 2/3.
    assert split_ceiling(pairs, 4) == pytest.approx(2 / 3, abs=0.01)
    # Ambiguity lowers it: half of a's traces also match b, a category of its own. H(latent) = 1 bit,
    # H(match set) = 1.5 bits, I = 1 bit -> 2 / 2.5.
    ambiguous = [("a", ("a",))] * 200 + [("a", ("a", "b"))] * 200 + [("b", ("b",))] * 400
    assert split_ceiling(ambiguous, 2) == pytest.approx(0.8)


def test_code_in_the_separator_slot_starts_as_the_base_lm(tiny_models, tmp_path) -> None:
    """Mixture validity: with code_slot="sep" the code replaces <sep>, the trace keeps
    the base LM's positions, and codes initialised at the separator's embedding give the base LM's own
    log-likelihoods (the untrained mixture is the base LM); the slot is saved with the model."""
    from seffi.models.mixture import init_codes

    base = tiny_models.base
    layout = Layout(base.layout.vocab, "sep")
    assert layout.prefix("edit a to b", 3) == [*base.layout.prefix("edit a to b")[:-1], layout.code(3)]
    assert layout.prefix("edit a to b") == base.layout.prefix("edit a to b")
    rows = training_rows(tiny_models.cfg, tiny_models.task)[:16]
    mix = base.copy()
    mix.layout, mix.meta["code_slot"] = layout, "sep"
    init_codes(mix, 3, 0.0, seed=0)
    own = base.score(examples_from_rows(base.layout, rows))
    np.testing.assert_allclose(code_scores(mix, rows, 3), np.repeat(own[:, None], 3, axis=1), atol=1e-4)
    old = base.copy()  # a code after the separator shifts the trace: not the base LM's likelihoods
    init_codes(old, 3, 0.0, seed=0)
    assert np.abs(code_scores(old, rows, 3)[:, 0] - own).max() > 0.1
    mix.save(tmp_path / "m")
    assert TaskLM.load(tmp_path / "m", tiny_models.task).layout.code_slot == "sep"
    with pytest.raises(SeffiError, match="code_slot"):
        Layout(base.layout.vocab, "front")


def test_kmeans_init_finds_separable_modes_from_trace_features() -> None:
    """K-means code init: clusters of the base LM's trace features recover hidden modes
    without labels; init="kmeans" without a warm-up to teach them is refused."""
    from pydantic import ValidationError

    from seffi.models.mixture import kmeans, kmeans_codes

    pts = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0], [0.0, 9.0], [0.1, 9.1]])
    assert nmi(kmeans(pts, 3, seed=0).tolist(), [0, 0, 1, 1, 2, 2]) == pytest.approx(1.0)
    task = get_task("edit_script")
    modes = ["del 0\nanswer a", "sub 1 b\nsub 2 b\nanswer b b", "ins 0 c\nins 1 c\nins 2 c\nanswer c c c"]
    xs = task.make_inputs(30, seed=0)
    rows = [_Row(x.id, task.prompt(x), modes[k]) for x in xs for k in range(3)]
    cfg = LMConfig(task="edit_script", d_model=32, n_layer=1, n_head=2, epochs=2, batch_size=32, lr=3e-3)
    base = train_base(cfg, task, rows)
    codes = kmeans_codes(base, rows, 3, seed=0)
    assert nmi(codes.tolist(), [k for _ in xs for k in range(3)]) == pytest.approx(1.0)
    with pytest.raises(ValidationError, match="warm_epochs"):
        MixtureConfig(init="kmeans")
    assert MixtureConfig(init="kmeans", warm_epochs=1).init == "kmeans"


def test_learned_prior_follows_the_input_and_matches_the_scores() -> None:
    """Per-input latent prior: with prior="input" the code token is trained too, so
    the mixture's p(z | x) is the codes' assignment frequencies *per input*: on a prompt whose rows take
    two modes it splits between their codes, on a prompt with one mode it picks that mode's code. The
    batched read-out equals exp(score) of the single code token, renormalised (an independent path)."""
    task = get_task("edit_script")
    modes = ["del 0\nanswer a", "sub 1 b\nsub 2 b\nanswer b b", "ins 0 c\nins 1 c\nins 2 c\nanswer c c c"]
    xs = task.make_inputs(2, seed=0)
    two, one = task.prompt(xs[0]), task.prompt(xs[1])
    rows = [_Row(f"a{i}", two, modes[i % 2]) for i in range(60)]
    rows += [_Row(f"b{i}", one, modes[2]) for i in range(30)]
    hidden = [i % 2 for i in range(60)] + [2] * 30
    cfg = LMConfig(task="edit_script", d_model=32, n_layer=1, n_head=2, epochs=2, batch_size=32, lr=3e-3)
    base = train_base(cfg, task, rows)
    em = MixtureConfig(
        mode="batch", rounds=3, epochs_per_round=20, lr=1e-2, capacity=1.0, code_init_std=1.0, prior="input"
    )
    result = train_mixture(base, rows, 3, em)
    assert nmi(result.assignments.tolist(), hidden) == pytest.approx(1.0)
    code_of = {h: int(result.assignments[hidden.index(h)]) for h in range(3)}
    dist = result.model.code_distribution([two, one], 3)
    assert dist.sum(axis=1) == pytest.approx([1.0, 1.0])
    assert dist[1, code_of[2]] > 0.9
    assert 0.3 < dist[0, code_of[0]] < 0.7 and 0.3 < dist[0, code_of[1]] < 0.7
    # Independent path: log p(z | x) as the score of a one-token target after the prompt's prefix.
    layout = result.model.layout
    singles = [Example("x", tuple(layout.prefix(p)), (layout.code(z),)) for p in (two, one) for z in range(3)]
    by_score = np.exp(result.model.score(singles)).reshape(2, 3)
    np.testing.assert_allclose(dist, by_score / by_score.sum(axis=1, keepdims=True), atol=1e-6)
    assert result.model.meta["prior_kind"] == "input"


def test_learned_prior_examples_put_the_code_in_the_target() -> None:
    """learn_code moves the code token from the prefix to the front of the target."""
    layout = Layout(get_task("edit_script").vocabulary())
    row = _Row("i", "edit a to b", "sub 0 b\nanswer b")
    plain = examples_from_rows(layout, [row], [2])[0]
    learned = examples_from_rows(layout, [row], [2], learn_code=True)[0]
    assert learned.prefix == plain.prefix[:-1] and learned.target == (layout.code(2), *plain.target)
    assert examples_from_rows(layout, [row], learn_code=True) == examples_from_rows(layout, [row])


def test_global_prior_models_give_the_same_prior_to_every_input(tiny_models) -> None:
    """A mixture without a learned prior keeps the codes' frequencies for every input."""
    assert not tiny_models.per_input_prior
    prior = tiny_models.input_prior(["edit a to b", "edit b to c"])
    np.testing.assert_allclose(prior, np.tile(tiny_models.prior, (2, 1)))


def test_purity_joint_nmi_weighs_samples_by_the_prior() -> None:
    """NMI under the model's own joint: weights that drop a code's samples drop the code."""

    class R:
        def __init__(self, matches: set[str]) -> None:
            self.strategy_matches, self.valid = frozenset(matches), True

    # Code 0 -> a, code 1 -> b, code 2 -> a or b: uniform codes mix; weight 0 on code 2 gives a pure latent.
    res = [R({"a"}), R({"a"}), R({"b"}), R({"b"}), R({"a"}), R({"b"})]
    codes = np.array([0, 0, 1, 1, 2, 2])
    uniform = purity(codes, res, ["a", "b"], 3, weights=np.full(6, 1 / 6))
    dropped = purity(codes, res, ["a", "b"], 3, weights=np.array([1, 1, 1, 1, 0, 0]) / 4)
    assert uniform["nmi_joint"] == pytest.approx(uniform["nmi"])
    assert dropped["nmi_joint"] == pytest.approx(1.0)
    assert uniform["nmi"] < 0.8

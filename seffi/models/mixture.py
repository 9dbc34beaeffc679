"""A mixture of generators over L latent codes, learned by hard EM without strategy labels.

One network shared by all codes and conditioned on a code token (Shen et al. 2019, *Mixture Models
for Diverse Machine Translation: Tricks of the Trade*). The E-step assigns each row to its most
likely code, ``argmax_z log p(y | x, z)`` under a uniform prior; the M-step trains on the rows with
their codes. On top of that, `seffi.models.config.MixtureConfig` sets:

* a warm start from the base LM, so the mixture learns only what the code changes;
* random code embeddings before the first E-step (``code_init_std``), so the first assignment is
  not a tie;
* cross-fitted E-steps (``folds``): the model that scores a fold of inputs never trained on it;
* a balanced E-step (``capacity``): no code takes more than ``capacity * R / L`` rows, confident rows
  first, so one code cannot absorb every row;
* dead-code revival (``revive_below``): a code left with almost no rows takes a random half of the
  largest code's rows;
* a per-input latent prior (``prior="input"``): the code token is part of every M-step's target, so
  the LM also learns ``p(z | x)`` and a code whose strategy is infeasible on an input stays rare there;
* a settling pass (``final_epochs``) over the final assignments with a decaying learning rate.

What the mixture finds on the ladder's tasks, over model seeds: ``docs/ladder.md`` and
``docs/ladder-seeds.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from seffi._seeding import seed_from_text

from .config import MixtureConfig
from .lm import Example, Layout, TaskLM, _batch, examples_from_rows, torch_setup

#: Called with (phase description, done, total) during EM.
EMHook = Callable[[str, int, int], None]

#: Rows per M-step minibatch.
_BATCH = 64


@dataclass
class EMResult:
    """The trained mixture and how EM went.

    Attributes:
        model: The final mixture LM (trained on all rows with the final assignments).
        assignments: int array, shape (R,): final code of each row.
        prior: float array, shape (L,): share of rows per code (the latent prior).
        history: One dict per E-step: ``changed`` (share of rows whose code changed), ``shares``,
            ``loglik`` (mean best log-likelihood per row, nats), ``revived`` (codes re-seeded).
    """

    model: TaskLM
    assignments: np.ndarray
    prior: np.ndarray
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _EMRun:
    """What every EM phase reads: one model per fold, the rows and their folds, the settings.

    Attributes:
        models: One model per fold; model ``j`` scores fold ``j`` and trains on the others.
        rows: The EM rows.
        folds: int array, shape (R,): cross-fitting fold of each row.
        n_codes: L.
        cfg: EM settings.
        rng: The EM's random generator (revivals, online batch order).
        hook: Progress callback (phase, done, total).
        history: One dict per E-step (see `EMResult.history`).
    """

    models: list[TaskLM]
    rows: Sequence[Any]
    folds: np.ndarray
    n_codes: int
    cfg: MixtureConfig
    rng: np.random.Generator
    hook: EMHook | None
    history: list[dict[str, Any]] = field(default_factory=list)


def fold_of(input_ids: Sequence[str], folds: int) -> np.ndarray:
    """Cross-fitting fold of each row, from its input id (rows of one input share a fold)."""
    return np.array([seed_from_text("em-fold", i) % folds for i in input_ids], dtype=np.int64)


def init_codes(lm: TaskLM, n_codes: int, std: float, seed: int) -> None:
    """Fresh input embeddings for the first ``n_codes`` code tokens (seeded).

    ``N(0, std)`` with the code after the separator; with ``code_slot="sep"`` the separator's embedding
    plus ``N(0, std)`` noise, so that each code starts as the base LM (up to the noise).
    """
    emb = lm.model.get_input_embeddings().weight
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        start = lm.layout.code0
        centre = emb[lm.layout.sep].clone() if lm.layout.code_slot == "sep" else torch.zeros(emb.shape[1])
        emb[start : start + n_codes] = centre + torch.randn((n_codes, emb.shape[1]), generator=gen) * std


def code_scores(lm: TaskLM, rows: Sequence[Any], n_codes: int, batch_size: int = 128) -> np.ndarray:
    """Log p(y | x, z) of every row under every code: float array, shape (R, L).

    The E-step, most of EM's cost: `TaskLM.score_codes` runs each distinct row's prompt once for
    its L codes, ``batch_size`` sequences per forward pass (small batches keep a layer's activations
    small). Measured with ``benchmarks/em_step.py`` on grid_routes: one EM round takes 0.39x the time of
    scoring every row's L sequences whole, 512 per pass, with the same assignments and weights.
    """
    targets = [lm.layout.target(r.y_text) for r in rows]
    return lm.score_codes([r.prompt for r in rows], targets, n_codes, batch_size=batch_size)


def freeze_to_codes(lm: TaskLM, n_codes: int) -> Callable[[], None]:
    """Make only the first ``n_codes`` code-token embeddings trainable; returns the undo function.

    Every other weight gets ``requires_grad = False``; the input-embedding matrix stays trainable but
    its gradient is masked to the code rows (AdamW without weight decay then never moves other rows:
    their moments stay 0).
    """
    params = list(lm.model.parameters())
    before = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    emb = lm.model.get_input_embeddings().weight
    emb.requires_grad_(True)
    mask = torch.zeros((emb.shape[0], 1), dtype=emb.dtype)
    mask[lm.layout.code0 : lm.layout.code0 + n_codes] = 1.0
    handle = emb.register_hook(lambda grad: grad * mask)

    def undo() -> None:
        handle.remove()
        for p, flag in zip(params, before, strict=True):
            p.requires_grad_(flag)

    return undo


def train_mixture(
    base: TaskLM, rows: Sequence[Any], n_codes: int, cfg: MixtureConfig, hook: EMHook | None = None
) -> EMResult:
    """Hard EM over ``n_codes`` latent codes on ``rows`` (see the module docstring).

    Args:
        base: The trained base LM (copied, never modified).
        rows: Objects with ``input_id``, ``prompt`` and ``y_text`` (e.g. ``TrainingRow``).
        n_codes: L.
        cfg: EM settings.
        hook: Progress callback (phase, done, total).
    """
    torch_setup()
    rng = np.random.default_rng(cfg.seed)
    n_folds = cfg.folds
    folds = fold_of([r.input_id for r in rows], n_folds)
    models = []
    for j in range(n_folds):
        m = base.copy()
        if cfg.code_slot != "after_sep":
            m.layout = Layout(base.layout.vocab, cfg.code_slot)
            m.meta["code_slot"] = cfg.code_slot
        init_codes(m, n_codes, cfg.code_init_std, cfg.seed + 1000 * j)
        models.append(m)
    em = _EMRun(models, rows, folds, n_codes, cfg, rng, hook)
    if cfg.warm_epochs > 0:
        _warm_up(em)
    undo = [freeze_to_codes(m, n_codes) for m in models] if cfg.trainable == "codes" else []
    try:
        return _online(em) if cfg.mode == "online" else _train(em)
    finally:
        for u in undo:
            u()


def _warm_up(em: _EMRun) -> None:
    """SFT of each model on its rows with uniformly random codes (see ``MixtureConfig.warm_epochs``)."""
    cfg, hook = em.cfg, em.hook
    codes = kmeans_codes(em.models[0], em.rows, em.n_codes, cfg.seed) if cfg.init == "kmeans" else None
    codes = em.rng.integers(em.n_codes, size=len(em.rows)) if codes is None else codes
    for j, m in enumerate(em.models):
        idx = np.flatnonzero(em.folds != j) if len(em.models) > 1 else np.arange(len(em.rows))
        m.train(
            _examples(m.layout, em.rows, codes, idx, cfg),
            epochs=cfg.warm_epochs,
            batch_size=_BATCH,
            lr=cfg.warm_lr,
            seed=cfg.seed + 31337 + j,
            schedule="cosine",
            hook=None if hook is None else (lambda s, t, _loss: hook("warm-up", s, t)),
        )


@torch.no_grad()
def trace_features(lm: TaskLM, rows: Sequence[Any], batch_size: int = 256) -> np.ndarray:
    """Mean last hidden state of ``lm`` over the positions that predict each row's trace: shape (R, d)."""
    examples = examples_from_rows(lm.layout, rows)
    out = []
    for b in range(0, len(examples), batch_size):
        ids, mask, labels = _batch(examples[b : b + batch_size])
        hidden = lm.model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
        predicts = torch.zeros(labels.shape, dtype=hidden.dtype)
        predicts[:, :-1] = (labels[:, 1:] >= 0).to(hidden.dtype)  # position t predicts token t + 1
        out.append(((hidden * predicts[..., None]).sum(1) / predicts.sum(1, keepdim=True)).double().numpy())
    return np.concatenate(out)


def kmeans(x: np.ndarray, k: int, seed: int, iters: int = 50) -> np.ndarray:
    """Lloyd's k-means with k-means++ seeding: the cluster of each row of ``x`` (int array)."""
    rng = np.random.default_rng(seed)
    centres = [x[rng.integers(len(x))]]
    for _ in range(k - 1):
        d = np.min(((x[:, None, :] - np.array(centres)[None]) ** 2).sum(-1), axis=1)
        centres.append(x[rng.choice(len(x), p=d / d.sum())] if d.sum() > 0 else x[rng.integers(len(x))])
    c = np.array(centres)
    assign = np.zeros(len(x), dtype=np.int64)
    for _ in range(iters):
        new = ((x[:, None, :] - c[None]) ** 2).sum(-1).argmin(axis=1)
        if (new == assign).all() and _ > 0:
            break
        assign = new
        c = np.array([x[assign == j].mean(0) if (assign == j).any() else c[j] for j in range(k)])
    return assign


def kmeans_codes(lm: TaskLM, rows: Sequence[Any], n_codes: int, seed: int) -> np.ndarray:
    """Initial codes: k-means clusters of the (warm-started) LM's trace features (no label read)."""
    return kmeans(trace_features(lm, rows), n_codes, seed)


def _train(em: _EMRun) -> EMResult:
    """Batch EM on the prepared (warm-started, code-initialised) models."""
    models, rows, cfg = em.models, em.rows, em.cfg
    n_folds = len(models)
    total = cfg.rounds * (n_folds + 1) + 1 + (n_folds > 1)
    done = 0

    def tick(phase: str) -> None:
        nonlocal done
        done += 1
        if em.hook is not None:
            em.hook(phase, done, total)

    assign = _e_step(em, np.full(len(rows), -1, dtype=np.int64))
    tick("E-step 0")
    for r in range(cfg.rounds):
        for j, m in enumerate(models):
            train_idx = np.flatnonzero(em.folds != j) if n_folds > 1 else np.arange(len(rows))
            ex = _examples(models[0].layout, rows, assign, train_idx, cfg)
            m.train(
                ex,
                epochs=cfg.epochs_per_round,
                batch_size=_BATCH,
                lr=cfg.lr,
                seed=cfg.seed + 7919 * (r + 1) + j,
                schedule="constant",
            )
            tick(f"M-step {r + 1} (model {j + 1}/{n_folds})")
        assign = _e_step(em, assign)
        tick(f"E-step {r + 1}")
    if n_folds > 1 and cfg.final_epochs > 0:
        # Model 0 already knows the codes from the other folds; one pass over every row with the
        # final assignments makes it the mixture of the whole data.
        _settle(em, assign)
        tick("final M-step")
    return _result(em, assign)


def balanced_argmax(scores: np.ndarray, capacity: float) -> np.ndarray:
    """Each row's likeliest code, no code taking more than ``capacity * R / L`` rows (0: plain argmax).

    Rows are served in order of confidence (their best score minus their second best): a row goes to
    its likeliest code that still has room. With ``capacity = 1`` the codes get equal shares (SwAV's
    equipartition, made hard), so a code that is better for *every* row — the one trained on the most
    rows — cannot take them all, while each row still goes where it is relatively likeliest.
    """
    if capacity <= 0:
        return scores.argmax(axis=1)
    r, n_codes = scores.shape
    room = np.full(n_codes, int(np.ceil(capacity * r / n_codes)))
    ranked = np.argsort(-scores, axis=1, kind="stable")
    top = np.take_along_axis(scores, ranked[:, :2], axis=1) if n_codes > 1 else scores
    gap = top[:, 0] - (top[:, 1] if n_codes > 1 else 0.0)
    assign = np.empty(r, dtype=np.int64)
    for i in np.argsort(-gap, kind="stable").tolist():
        for z in ranked[i]:
            if room[z] > 0:
                room[z] -= 1
                assign[i] = z
                break
    return assign


def align_codes(models: list[TaskLM], rows: Sequence[Any], n_codes: int) -> list[list[int]]:
    """Relabel the codes of models 1.. so that they agree with model 0 on ``rows``; returns the maps.

    Cross-fitted models each learn the code labelling of the other, so nothing stops them from ending up
    with permuted labels (they then swap labellings every step). Both models take their likeliest code
    on each row; codes are matched greedily by co-occurrence and model j's code embeddings reordered.
    """
    ref = code_scores(models[0], rows, n_codes).argmax(axis=1)
    maps = []
    for m in models[1:]:
        own = code_scores(m, rows, n_codes).argmax(axis=1)
        counts = np.zeros((n_codes, n_codes))
        np.add.at(counts, (ref, own), 1.0)
        perm = np.full(n_codes, -1)
        used = np.zeros(n_codes, dtype=bool)
        for flat in np.argsort(-counts, axis=None, kind="stable").tolist():
            p, q = divmod(flat, n_codes)
            if perm[p] < 0 and not used[q]:
                perm[p], used[q] = q, True
        emb = m.model.get_input_embeddings().weight
        start = m.layout.code0
        with torch.no_grad():
            emb[start : start + n_codes] = emb[start : start + n_codes][torch.from_numpy(perm)].clone()
        maps.append(perm.tolist())
    return maps


class _Trainer:
    """A persistent AdamW on one model, one step per call (online EM)."""

    def __init__(self, lm: TaskLM, lr: float) -> None:
        self.lm = lm
        self.params = [p for p in lm.model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=lr, weight_decay=0.0, betas=(0.9, 0.98))

    def step(self, examples: list[Example]) -> float:
        model = self.lm.model
        model.train()
        ids, mask, labels = _batch(examples)
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        model.eval()
        return float(out.loss.detach())


def _online(em: _EMRun) -> EMResult:
    """Online hard EM (Shen et al.'s hard EM with the E-step per minibatch; multiple-choice learning).

    Each minibatch of rows of fold ``f`` is scored under every code by model ``f`` (which never trains on
    fold ``f``), each row takes its likeliest code (balanced within the batch), and the *other* model
    takes one gradient step on the rows with those codes. With one fold the same model scores and
    trains. A final E-step over all rows gives the assignments; model 0 then trains on every row.
    """
    models, rows, n_codes, cfg, rng, hook = em.models, em.rows, em.n_codes, em.cfg, em.rng, em.hook
    n_folds = len(models)
    trainers = [_Trainer(m, cfg.lr) for m in models]
    layout = models[0].layout
    batch = _BATCH
    by_fold = [np.flatnonzero(em.folds == f) for f in range(n_folds)]
    steps_per_epoch = sum(int(np.ceil(len(ix) / batch)) for ix in by_fold)
    total_steps = max(1, round(steps_per_epoch * cfg.rounds * cfg.epochs_per_round))
    total = total_steps + 1 + (cfg.final_epochs > 0)
    assign = np.full(len(rows), -1, dtype=np.int64)
    step = 0
    epoch_assign = assign.copy()
    probe = [rows[i] for i in rng.permutation(len(rows))[:256].tolist()]
    align_every = max(1, steps_per_epoch // 4)
    while step < total_steps:
        plan = []
        for f, ix in enumerate(by_fold):
            perm = rng.permutation(ix)
            plan += [(f, perm[b : b + batch]) for b in range(0, len(perm), batch)]
        for j in rng.permutation(len(plan)).tolist():
            if step >= total_steps:
                break
            f, idx = plan[j]
            part = [rows[i] for i in idx.tolist()]
            scores = code_scores(models[f], part, n_codes)
            z = balanced_argmax(scores, cfg.capacity)
            assign[idx] = z
            trainers[(f + 1) % n_folds].step(_examples(layout, part, z, np.arange(len(part)), cfg))
            step += 1
            if n_folds > 1 and step % align_every == 0:
                align_codes(models, probe, n_codes)
            if hook is not None:
                hook("online EM", step, total)
        seen = epoch_assign >= 0
        em.history.append(
            {
                "changed": float(np.mean(assign[seen] != epoch_assign[seen])) if seen.any() else 1.0,
                "shares": (np.bincount(assign[assign >= 0], minlength=n_codes) / max(1, (assign >= 0).sum()))
                .round(6)
                .tolist(),
                "loglik": float("nan"),
                "revived": [],
            }
        )
        epoch_assign = assign.copy()
    if n_folds > 1:
        align_codes(models, probe, n_codes)
    assign = _e_step(em, epoch_assign)
    if hook is not None:
        hook("final E-step", total_steps + 1, total)
    if cfg.final_epochs > 0:
        _settle(em, assign)
        if hook is not None:
            hook("final M-step", total, total)
    return _result(em, assign)


def _settle(em: _EMRun, assign: np.ndarray) -> None:
    """Settling pass: model 0 trains on every row with the final codes (``MixtureConfig.final_epochs``)."""
    cfg = em.cfg
    em.models[0].train(
        _examples(em.models[0].layout, em.rows, assign, np.arange(len(em.rows)), cfg),
        epochs=cfg.final_epochs,
        batch_size=_BATCH,
        lr=cfg.lr,
        seed=cfg.seed + 104729,
        schedule="cosine",
    )


def _result(em: _EMRun, assign: np.ndarray) -> EMResult:
    """The EM result; the global latent prior is the codes' assignment frequencies, stored with the model.

    With ``prior="input"`` the meta also says so (``prior_kind``): the env then reads ``p(z | x)`` from
    the model (`TaskLM.code_distribution`), which fitted these frequencies per input.
    """
    final = em.models[0]
    prior = np.bincount(assign, minlength=em.n_codes).astype(np.float64)
    prior /= prior.sum()
    final.meta["n_codes"] = em.n_codes
    final.meta["prior"] = prior.tolist()
    final.meta["prior_kind"] = em.cfg.prior
    final.meta["em_history"] = em.history
    return EMResult(final, assign, prior, em.history)


def _examples(
    layout: Layout, rows: Sequence[Any], assign: np.ndarray, idx: np.ndarray, cfg: MixtureConfig
) -> list[Example]:
    """M-step sequences of rows ``idx`` with their codes (the code learned too with ``prior="input"``)."""
    return examples_from_rows(
        layout, [rows[i] for i in idx], assign[idx].tolist(), learn_code=cfg.prior == "input"
    )


def _e_step(em: _EMRun, previous: np.ndarray) -> np.ndarray:
    """Each row to its most likely code under the model of its fold (uniform prior), plus revivals.

    Args:
        em: The EM run; the step's statistics are appended to ``em.history``.
        previous: int array, shape (R,): the codes before this step (-1: none yet).
    """
    rows, n_codes, cfg = em.rows, em.n_codes, em.cfg
    scores = np.zeros((len(rows), n_codes))
    for j, m in enumerate(em.models):
        idx = np.flatnonzero(em.folds == j)
        if idx.size:
            scores[idx] = code_scores(m, [rows[i] for i in idx], n_codes)
    assign = balanced_argmax(scores, cfg.capacity)
    counts = np.bincount(assign, minlength=n_codes)
    revived = []
    for z in np.flatnonzero(counts < cfg.revive_below * len(rows)).tolist():
        big = int(np.argmax(counts))
        members = np.flatnonzero(assign == big)
        take = em.rng.permutation(members)[: members.size // 2]
        assign[take] = z
        counts = np.bincount(assign, minlength=n_codes)
        revived.append(int(z))
    em.history.append(
        {
            "changed": float(np.mean(assign != previous)),
            "shares": (counts / max(len(rows), 1)).round(6).tolist(),
            "loglik": float(scores.max(axis=1).mean()),
            "revived": revived,
        }
    )
    return assign

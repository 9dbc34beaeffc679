"""Measurements of the ladder's models on held-out inputs, with the validator as the only labeller.

* **Base LM vs its training law.** Valid rate of temperature-1 samples against the training rows' own
  valid rate (both judged by ``validate_y_text``), and the total variation between pooled strategy
  frequencies: each sample's match set spreads weight 1 over its matched strategies (1/|matches|
  each); samples that match nothing are left out, so the TV compares *which* strategies are followed,
  while the valid rate compares *how often* the trace is correct. The training law is the task's exact
  base law on the same inputs (``base_match_distribution``).
* **Latent purity.** Per code, the strategy mix of its samples (plus the share that matched nothing),
  and NMI(latent, strategy) over the samples that matched a strategy, the strategy being the match set
  (an ambiguous trace's set is its own category): ``nmi_joint`` under the mixture's own joint law (x
  uniform over the inputs, z from its latent prior ``p(z | x)``: each (x, z) sample weighted by it) and
  ``nmi`` with every code equally likely. Computed only after training.
  Also over the unambiguous samples only (one strategy each), and the *ceiling*: the NMI between the
  training rows' own strategy labels and their match sets — what a latent equal to the true strategy
  would score with L = M codes; ambiguity alone keeps it below 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from seffi._seeding import spawn
from seffi.models.cache import mixture_rows
from seffi.tasks.base import Task, TaskInput

from .cache import LadderModels, training_rows
from .lm import TaskLM


def nmi(a: Sequence[Any], b: Sequence[Any], weights: Sequence[float] | None = None) -> float:
    """Normalised mutual information 2 I(A;B) / (H(A) + H(B)) of two label sequences (0 if both constant).

    ``weights`` (default 1 each) weigh the pairs, e.g. to give every value of ``a`` the same total mass.
    """
    if len(a) != len(b) or (weights is not None and len(weights) != len(a)):
        raise ValueError("nmi needs sequences of equal length")
    if not len(a):
        return float("nan")
    ka = {v: i for i, v in enumerate(dict.fromkeys(a))}
    kb = {v: i for i, v in enumerate(dict.fromkeys(b))}
    joint = np.zeros((len(ka), len(kb)))
    w = np.ones(len(a)) if weights is None else np.asarray(weights, dtype=np.float64)
    for x, y, wi in zip(a, b, w, strict=True):
        joint[ka[x], kb[y]] += wi
    joint /= joint.sum()
    pa, pb = joint.sum(1), joint.sum(0)

    def h(p: np.ndarray) -> float:
        p = p[p > 0]
        return float(-(p * np.log(p)).sum())

    nz = joint > 0
    mi = float((joint[nz] * np.log(joint[nz] / np.outer(pa, pb)[nz])).sum())
    denom = h(pa) + h(pb)
    return 0.0 if denom <= 0 else max(0.0, 2 * mi / denom)


def strategy_frequencies(match_sets: Sequence[Sequence[str]], strategies: Sequence[str]) -> np.ndarray:
    """Pooled strategy frequencies: each non-empty match set spreads weight 1 evenly over its members."""
    index = {s: i for i, s in enumerate(strategies)}
    f = np.zeros(len(strategies))
    for ms in match_sets:
        if ms:
            for s in ms:
                f[index[s]] += 1.0 / len(ms)
    return f / f.sum() if f.sum() > 0 else f


def law_frequencies(task: Task[Any, Any], inputs: Sequence[TaskInput]) -> np.ndarray:
    """Pooled strategy frequencies of the task's exact base law on ``inputs`` (see strategy_frequencies)."""
    strategies = task.strategies()
    index = {s: i for i, s in enumerate(strategies)}
    f = np.zeros(len(strategies))
    for x in inputs:
        for ms, p in task.base_match_distribution(x).items():
            for s in ms:
                f[index[s]] += p / len(ms)
    return f / f.sum()


def tv(p: np.ndarray, q: np.ndarray) -> float:
    """Total variation distance of two distributions."""
    return float(0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum())


def validate_all(task: Task[Any, Any], xs: Sequence[TaskInput], texts: Sequence[str]) -> list[Any]:
    """``validate_y_text`` of each (x, text) pair."""
    return [task.validate_y_text(x, t) for x, t in zip(xs, texts, strict=True)]


def sample_base(
    lm: TaskLM, task: Task[Any, Any], inputs: Sequence[TaskInput], n: int, seed: int
) -> dict[str, list[Any]]:
    """``n`` temperature-1 samples per input from ``lm`` with their validation results, by input id."""
    rng = np.random.default_rng(seed)
    xs = [x for x in inputs for _ in range(n)]
    texts = lm.sample_texts([task.prompt(x) for x in xs], rng)
    results = validate_all(task, xs, texts)
    out: dict[str, list[Any]] = {x.id: [] for x in inputs}
    for x, r in zip(xs, results, strict=True):
        out[x.id].append(r)
    return out


def split_ceiling(pairs: Sequence[tuple[str, Any]], n_codes: int, seed: int = 0) -> float:
    """NMI of an ideal latent with ``n_codes`` codes, scored the way `purity` scores samples.

    The ideal latent knows each row's true strategy: the ``n_codes`` codes are dealt to the strategies in
    proportion to their row counts (largest remainder, at least one each while codes last) and a
    strategy's rows are split at random among its codes. Like the sample NMI (codes drawn uniformly) every
    code gets the same total weight. With ``L = 2 M`` this is what a perfectly pure mixture could reach
    at best against match sets: splitting a strategy over two codes adds latent entropy no strategy
    explains, and ambiguous traces merge strategies.

    Args:
        pairs: (true strategy, match set) of attributed rows.
        n_codes: L.
        seed: Seed of the random split.
    """
    labels = sorted({s for s, _ in pairs})
    counts = np.array([sum(1 for s, _ in pairs if s == lab) for lab in labels], dtype=np.float64)
    share = counts / counts.sum() * n_codes
    deal = np.maximum(np.floor(share), 1).astype(np.int64)
    while deal.sum() > n_codes:
        deal[np.argmax(deal)] -= 1
    for i in np.argsort(-(share - np.floor(share)), kind="stable"):
        if deal.sum() >= n_codes:
            break
        deal[i] += 1
    first = np.concatenate([[0], np.cumsum(deal)[:-1]])
    rng = np.random.default_rng(seed)
    index = {lab: i for i, lab in enumerate(labels)}
    codes = [int(first[index[s]] + rng.integers(deal[index[s]])) for s, _ in pairs]
    per_code = np.bincount(codes, minlength=n_codes).astype(np.float64)
    return nmi(codes, [m for _, m in pairs], weights=[1.0 / per_code[c] for c in codes])


def training_row_stats(models: LadderModels, max_rows: int = 5000) -> dict[str, Any]:
    """Valid rate and strategy frequencies of (up to ``max_rows``) training rows, by the validator."""
    cfg, task = models.cfg, models.task
    n_codes = models.n_codes
    rows = training_rows(cfg, task)[:max_rows]
    input_seed, _ = spawn(cfg.data_seed, 2)
    by_id = {x.id: x for x in task.make_inputs(cfg.n_train_inputs, input_seed)}
    results = validate_all(task, [by_id[r.input_id] for r in rows], [r.y_text for r in rows])
    # What NMI a perfect latent could reach here: the rows' own strategy labels against the match sets
    # the validator gives their traces (ambiguous traces merge strategies into one category).
    pairs = [(r.strategy, tuple(sorted(v.strategy_matches))) for r, v in zip(rows, results, strict=True)]
    pairs = [p for p in pairs if p[0] is not None and p[1]]
    return {
        "rows": len(rows),
        "nmi_ceiling": nmi(*zip(*pairs, strict=True)) if pairs else float("nan"),
        "nmi_ceiling_split": split_ceiling(pairs, n_codes, seed=cfg.data_seed) if pairs else float("nan"),
        "valid_rate": float(np.mean([r.valid for r in results])),
        "frequencies": strategy_frequencies([sorted(r.strategy_matches) for r in results], task.strategies()),
    }


def latent_samples(
    mixture: TaskLM, task: Task[Any, Any], inputs: Sequence[TaskInput], n_codes: int, per_code: int, seed: int
) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """``per_code`` samples of every code on every input: (codes, input index, validation results)."""
    rng = np.random.default_rng(seed)
    xs, codes, where = [], [], []
    for n, x in enumerate(inputs):
        for z in range(n_codes):
            xs += [x] * per_code
            codes += [z] * per_code
            where += [n] * per_code
    texts = mixture.sample_texts([task.prompt(x) for x in xs], rng, codes=codes)
    return np.array(codes), np.array(where), validate_all(task, xs, texts)


def purity(
    codes: np.ndarray,
    results: Sequence[Any],
    strategies: Sequence[str],
    n_codes: int,
    weights: np.ndarray | None = None,
) -> dict[str, Any]:
    """Per-code strategy mix and NMI(latent, strategy) of latent samples (see the module docstring).

    Args:
        codes: int array, shape (S,): each sample's code.
        results: Each sample's validation result.
        strategies: The task's strategies.
        n_codes: L.
        weights: float array, shape (S,): each sample's probability under the model's own joint
            (``p(x) p(z | x)`` over the number of samples of that (x, z)); gives ``nmi_joint``. ``None``:
            every code equally likely.

    Returns:
        ``matrix``: float array, shape (L, M + 1): per code, the pooled strategy frequencies of its
        samples scaled by their attributed share, last column the share that matched nothing;
        ``valid``: valid rate per code; ``nmi``: over attributed samples, codes equally likely;
        ``nmi_joint``: the same with ``weights``; ``nmi_valid``: over valid attributed samples.
    """
    m = len(strategies)
    matrix = np.zeros((n_codes, m + 1))
    valid = np.zeros(n_codes)
    for z in range(n_codes):
        sel = [r for c, r in zip(codes, results, strict=True) if c == z]
        if not sel:
            continue
        sets = [sorted(r.strategy_matches) for r in sel]
        attributed = np.mean([bool(s) for s in sets])
        matrix[z, :m] = strategy_frequencies(sets, strategies) * attributed
        matrix[z, m] = 1.0 - attributed
        valid[z] = np.mean([r.valid for r in sel])
    keep = [i for i, r in enumerate(results) if r.strategy_matches]
    attributed = [(int(codes[i]), tuple(sorted(results[i].strategy_matches))) for i in keep]
    valid_attr = [a for i, a in zip(keep, attributed, strict=True) if results[i].valid]
    single = [(c, s) for c, s in attributed if len(s) == 1]
    nmi_joint = float("nan")
    if weights is not None and attributed:
        nmi_joint = nmi(*zip(*attributed, strict=True), weights=np.asarray(weights)[keep])
    return {
        "nmi_joint": nmi_joint,
        "nmi_unambiguous": nmi(*zip(*single, strict=True)) if single else float("nan"),
        "unambiguous_share": len(single) / len(attributed) if attributed else float("nan"),
        "matrix": matrix,
        "valid": valid,
        "nmi": nmi(*zip(*attributed, strict=True)) if attributed else float("nan"),
        "nmi_valid": nmi(*zip(*valid_attr, strict=True)) if valid_attr else float("nan"),
    }


def measure_models(
    models: LadderModels, inputs: Sequence[TaskInput], *, n_base: int = 16, per_code: int = 4, seed: int = 0
) -> dict[str, Any]:
    """Everything the ladder reports about the two models on held-out ``inputs`` (JSON-ready dict)."""
    task = models.task
    strategies = task.strategies()
    rows = training_row_stats(models)
    base = sample_base(models.base, task, inputs, n_base, seed)
    flat = [r for rs in base.values() for r in rs]
    base_freq = strategy_frequencies([sorted(r.strategy_matches) for r in flat], strategies)
    law_freq = law_frequencies(task, inputs)
    codes, where, results = latent_samples(models.mixture, task, inputs, models.n_codes, per_code, seed + 1)
    # The model's own joint: x uniform over the held-out inputs, z from the latent prior of x.
    prior = models.input_prior([task.prompt(x) for x in inputs])
    joint = prior[where, codes] / (per_code * len(inputs))
    pur = purity(codes, results, strategies, models.n_codes, weights=joint)
    train_nmi = float("nan")
    assign_file = models.mixture_dir / "assignments.npy"
    if assign_file.is_file():
        labels = [
            r.strategy or "off_strategy" for r in mixture_rows(models.cfg, training_rows(models.cfg, task))
        ]
        assign = np.load(assign_file)
        if len(assign) == len(labels):
            train_nmi = nmi(assign.tolist(), labels)
    return {
        "task": task.name,
        "n_inputs": len(inputs),
        "n_base_samples": n_base,
        "rows_valid_rate": rows["valid_rate"],
        "base_valid_rate": float(np.mean([r.valid for r in flat])),
        "base_parse_rate": float(np.mean([r.parse_ok for r in flat])),
        "valid_gap": float(np.mean([r.valid for r in flat]) - rows["valid_rate"]),
        "tv_vs_law": tv(base_freq, law_freq),
        "tv_vs_rows": tv(base_freq, rows["frequencies"]),
        "base_frequencies": dict(zip(strategies, base_freq.round(4).tolist(), strict=True)),
        "law_frequencies": dict(zip(strategies, law_freq.round(4).tolist(), strict=True)),
        "n_codes": models.n_codes,
        "prior": prior.mean(axis=0).round(4).tolist(),
        "prior_kind": "input" if models.per_input_prior else "global",
        "prior_entropy_per_input": float(np.mean(-(prior * np.log(np.maximum(prior, 1e-300))).sum(1))),
        "nmi": pur["nmi"],
        "nmi_joint": pur["nmi_joint"],
        "nmi_valid": pur["nmi_valid"],
        "nmi_unambiguous": pur["nmi_unambiguous"],
        "unambiguous_share": pur["unambiguous_share"],
        "nmi_ceiling_rows": rows["nmi_ceiling"],
        "nmi_ceiling_split": rows["nmi_ceiling_split"],
        "nmi_train_assignments": train_nmi,
        "code_valid_rate": pur["valid"].round(4).tolist(),
        "mixture_valid_rate": float(np.dot(joint, [r.valid for r in results])),
        "purity": pur["matrix"].round(4).tolist(),
        "purity_columns": [*strategies, "none"],
        "base_n_params": models.base.n_params(),
        "base_train_seconds": models.base.meta.get("train_seconds"),
        "mixture_train_seconds": models.mixture.meta.get("train_seconds"),
        "em_history": [
            {k: v for k, v in h.items() if k != "shares"} | {"max_share": max(h["shares"])}
            for h in models.mixture.meta.get("em_history", [])
        ],
        "base_loss_first_last": [models.base.meta.get("loss_first"), models.base.meta.get("loss_last")],
        "heldout_nan_free": not math.isnan(pur["nmi"]),
    }

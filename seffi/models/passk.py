"""Base vs trained, the way RL-for-reasoning papers compare them: valid@k (pass@k) and C(k) up to n.

From n samples per held-out prompt: valid@k (pass@k, Chen et al. 2021) and C(k) by the unbiased at-k
estimators (`unbiased_at_k`), the crossover k from which the reference model's valid@k leads beyond
noise (`crossover_k`), the share of prompts some sample solves, and the gain vs the reference with
its interval over prompts and its fragility flag (`gain_vs_base`). Definitions and why:
docs/statistics.md, "Held-out pass@k against the base model".

`PassAtKEval` is a ``TrainerCallback`` (TRL's GRPO has no ``compute_metrics``). It labels
completions with a seffi task or any labeler ([`seffi.labelers`][seffi.labelers]), with prompts from the
task or given as text or as conversational messages (rendered with the tokenizer's chat template, as
TRL renders them). It samples the reference model once at train begin and the current policy every
``every`` steps, adds the scalars to the trainer's logs (``seffi/eval/...``; W&B:
``train/seffi/eval/...``), logs the curves as W&B ``line_series`` to the active run, and writes
``eval.json`` + ``eval_passk.png`` to ``out_dir``. Prompts are split over ranks and the per-prompt
counts gathered, so every rank logs the same keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from transformers import TrainerCallback

from seffi._io import write_atomic
from seffi._seeding import seed_of
from seffi.callbacks import trl_model
from seffi.coverage import OracleBaseline
from seffi.coverage.gain import ratio_interval
from seffi.coverage.resampling import t_quantile
from seffi.coverage.summaries import UNBOUNDED_NOTE, Gain, inputs_holding
from seffi.errors import SeffiError
from seffi.labelers import as_labeler
from seffi.tasks.base import Task

from . import grpo


def unbiased_at_k(n: int, counts: Sequence[int] | np.ndarray, ks: Sequence[int] | np.ndarray) -> np.ndarray:
    """``1 - C(n - c, k) / C(n, k)`` for each count ``c`` (rows) and budget ``k <= n`` (columns).

    Computed as a product of ratios ``prod_{j<k} (n - c - j) / (n - j)`` (no huge binomials).
    """
    c = np.asarray(counts, dtype=np.int64)
    kk = np.asarray(ks, dtype=np.int64)
    if c.size and (c.min() < 0 or c.max() > n):
        raise SeffiError(f"counts must lie in 0..{n}")
    if kk.size and (kk.min() < 1 or kk.max() > n):
        raise SeffiError(f"k must lie in 1..{n} (n samples per prompt)")
    j = np.arange(n)
    ratio = np.clip((n - c[:, None] - j[None, :]) / (n - j[None, :]), 0.0, None)  # (rows, n)
    miss = np.cumprod(ratio, axis=1)  # miss[:, k-1] = C(n - c, k) / C(n, k)
    return 1.0 - miss[:, kk - 1]


@dataclass
class EvalResult:
    """One model's evaluation on the held-out prompts.

    Attributes:
        n: Samples per prompt.
        valid_at_k: float array, shape (n,): valid@k for k = 1..n, mean over prompts.
        coverage: float array, shape (n,): C(k) for k = 1..n, mean over prompts.
        valid_rate: Share of valid samples.
        solvable: Share of prompts with at least one valid sample (valid@n per prompt).
        per_prompt_coverage: float array, shape (prompts, n): C(k) of each prompt.
        prompt_ids: The prompts' input ids (row order).
        per_prompt_valid_at_k: float array, shape (prompts, n): valid@k of each prompt.
        sample_sets: bool array, shape (prompts, n, M): which strategies each sample matched; None when
            not recorded.
    """

    n: int
    valid_at_k: np.ndarray
    coverage: np.ndarray
    valid_rate: float
    solvable: float
    per_prompt_coverage: np.ndarray
    prompt_ids: list[str]
    per_prompt_valid_at_k: np.ndarray | None = None
    sample_sets: np.ndarray | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields (curves as lists)."""
        return {
            "n": self.n,
            "valid_at_k": self.valid_at_k.tolist(),
            "coverage": self.coverage.tolist(),
            "valid_rate": self.valid_rate,
            "solvable": self.solvable,
        }


def match_tensor(
    sets: Mapping[str, Sequence[Any]], ids: Sequence[str], strategies: Sequence[str]
) -> np.ndarray:
    """Which strategies each sample matched: bool array, shape (len(ids), n, M), samples in order."""
    index = {s: j for j, s in enumerate(strategies)}
    x = np.zeros((len(ids), len(sets[ids[0]]), len(strategies)), dtype=bool)
    for r, i in enumerate(ids):
        for t, ms in enumerate(sets[i]):
            for s in ms:
                x[r, t, index[s]] = True
    return x


def evaluate_samples(
    sets: Mapping[str, Sequence[frozenset[str]]],
    valid: Mapping[str, Sequence[bool]],
    strategies: Sequence[str],
) -> EvalResult:
    """valid@k and C(k) for k = 1..n from ``{prompt id: n match sets}`` and ``{prompt id: n flags}``."""
    ids = sorted(sets)
    if not ids:
        raise SeffiError("no prompts to evaluate")
    n = len(sets[ids[0]])
    if n < 1 or any(len(sets[i]) != n or len(valid[i]) != n for i in ids):
        raise SeffiError("every prompt needs the same number n >= 1 of samples and validity flags")
    ks = np.arange(1, n + 1)
    c = np.array([sum(bool(v) for v in valid[i]) for i in ids])
    x = match_tensor(sets, ids, strategies)
    y = x.sum(axis=1)  # (prompts, M): samples matching each strategy
    per_s = unbiased_at_k(n, y.reshape(-1), ks).reshape(len(ids), len(strategies), n)
    cov = per_s.mean(axis=1)  # (prompts, n)
    valid_at_k = unbiased_at_k(n, c, ks)  # (prompts, n)
    return EvalResult(
        n=n,
        valid_at_k=valid_at_k.mean(axis=0),
        coverage=cov.mean(axis=0),
        valid_rate=float(c.sum() / (n * len(ids))),
        solvable=float((c > 0).mean()),
        per_prompt_coverage=cov,
        prompt_ids=ids,
        per_prompt_valid_at_k=valid_at_k,
        sample_sets=x,
    )


def crossover_k(base: Any, policy: Any, tol: float = 1e-3, level: float = 0.95) -> int | None:
    """Smallest k (1-based) at which the base leads the policy; None when it never does.

    Args:
        base: Shape (n,): the base's curve (mean over prompts), or (prompts, n): per prompt.
        policy: The policy's curve, the same shape (per prompt: the same prompts, same row order).
        tol: The lead must exceed this (curves saturating at 1 differ by rounding noise).
        level: With per-prompt curves (at least 2 prompts), the lead must also be significant: the
            one-sided ``(1 + level) / 2`` lower bound of the paired mean difference (Student t over
            prompts) above 0.
    """
    # Why a bound: without one, the lr = 0 sanity run of the ladder (the base model itself, resampled)
    # "crossed" at k = 1 on 32 held-out prompts (valid@1 0.878 vs 0.887). The tol margin: two curves
    # that both saturate at 1 differ by ~1e-6.
    b, p = np.asarray(base, dtype=np.float64), np.asarray(policy, dtype=np.float64)
    if b.shape != p.shape:
        raise SeffiError(f"base and policy curves differ in shape: {b.shape} vs {p.shape}")
    if b.ndim == 1 or b.shape[0] < 2:
        lead = np.atleast_2d(b - p).mean(axis=0)
        ahead = np.flatnonzero(lead > tol)
    else:
        d = b - p  # (prompts, n)
        lead = d.mean(axis=0)
        se = d.std(axis=0, ddof=1) / np.sqrt(d.shape[0])
        ahead = np.flatnonzero((lead > tol) & (lead - t_quantile(level, d.shape[0] - 1) * se > 0))
    return int(ahead[0]) + 1 if ahead.size else None


def per_prompt(result: EvalResult, attr: str) -> np.ndarray:
    """``result``'s per-prompt curve of ``attr`` (``"valid_at_k"`` or ``"coverage"``), shape (prompts, n).

    Falls back to the mean curve, shape (n,), for a result without per-prompt valid@k.
    """
    rows = result.per_prompt_valid_at_k if attr == "valid_at_k" else result.per_prompt_coverage
    return rows if rows is not None else getattr(result, attr)


def auc_table(n: int, budget: int) -> np.ndarray:
    """AUC@K share of one strategy matched by ``y`` of ``n`` samples, for y = 0..n.

    ``mean_{k <= K} [1 - C(n - y, k) / C(n, k)]``: a prompt's AUC@K is the mean of this over its M
    strategies (C(k) is a mean over strategies, the AUC a mean over k).
    """
    return unbiased_at_k(n, np.arange(n + 1), np.arange(1, budget + 1)).mean(axis=1)


def gain_vs_base(
    policy: EvalResult,
    base: EvalResult,
    oracle_auc: Mapping[str, float],
    budget: int,
    *,
    level: float = 0.95,
) -> Gain:
    """Gain at budget K of the policy's samples over the base model's, with its interval over prompts.

    Per prompt p: a_p, the policy's AUC@K, and i_p, the base's, each estimated without bias from its own
    n samples, and o_p, the oracle's, exact. The gain is (mean a − mean i) / (mean o − mean i) and its
    interval Fieller's over the prompts (`seffi.coverage.gain.ratio_interval`, Student's t on P − 1
    degrees of freedom), the interval of ``Curves.gain``: the spread of the per-prompt estimates across
    prompts already holds each prompt's sampling noise, so the prompts are resampled once. Measured by
    ``benchmarks/passk_calibration.py``; docs/statistics.md, "Gain against the base model".

    Args:
        policy: The trained model's evaluation.
        base: The reference model's evaluation (same prompts).
        oracle_auc: ``{prompt id: AUC@K of the no-repeat oracle}``.
        budget: K (<= n).
        level: Interval level.

    Returns:
        A `Gain` over the prompts: value None (with its reason) when the oracle does not exceed the base;
        lo/hi None with one prompt, or when the interval is unbounded (``unbounded``); ``room``,
        ``held_by`` and ``n_inputs`` (prompts) set, so ``fragile`` says whether to trust it.

    Raises:
        SeffiError: Different prompts, or a budget outside 1..n.
    """
    if policy.prompt_ids != base.prompt_ids:
        raise SeffiError("policy and base were evaluated on different prompts")
    if not 1 <= budget <= min(policy.n, base.n):
        raise SeffiError(f"budget {budget} must be within 1..n")
    a = policy.per_prompt_coverage[:, :budget].mean(axis=1)
    i = base.per_prompt_coverage[:, :budget].mean(axis=1)
    o = np.array([oracle_auc[p] for p in policy.prompt_ids], dtype=np.float64)
    room = float(o.mean() - i.mean())
    if room <= 1e-12:
        return Gain(reason=f"the oracle's AUC@{budget} does not exceed the base's: the gain is undefined")
    facts = {"room": room, "held_by": inputs_holding(o - i), "n_inputs": int(a.size)}
    value = float((a.mean() - i.mean()) / room)
    if a.size < 2:
        return Gain(value=value, reason="one prompt: no interval", **facts).flagged()
    bounds = ratio_interval(a - i, o - i, level)
    if bounds is None:
        return Gain(value=value, reason=UNBOUNDED_NOTE, **facts).flagged()
    return Gain(value=value, lo=bounds[0], hi=bounds[1], **facts).flagged()


def is_conversational(prompt: Any) -> bool:
    """Whether ``prompt`` is a list of chat messages (TRL's conversational format)."""
    listed = isinstance(prompt, list) and bool(prompt)
    return listed and all(isinstance(m, Mapping) and "role" in m for m in prompt)


def render_prompt(prompt: Any, tokenizer: Any, args: Any = None) -> str:
    """The text a prompt is sampled from: text as it is, messages through the tokenizer's chat template.

    Messages are rendered the way TRL's GRPO renders them (``trl.data_utils.maybe_apply_chat_template``
    with the generation prompt after a final user turn, and ``args.chat_template_kwargs``).

    Raises:
        SeffiError: Neither text nor messages, or messages for a tokenizer without a chat template.
    """
    if isinstance(prompt, str):
        return prompt
    if not is_conversational(prompt):
        raise SeffiError(
            f"a prompt must be text or a list of {{'role', 'content'}} messages, got {type(prompt).__name__}"
        )
    if not getattr(tokenizer, "chat_template", None):
        raise SeffiError("conversational prompts need a tokenizer with a chat template (chat_template)")
    from trl.data_utils import maybe_apply_chat_template

    kwargs = getattr(args, "chat_template_kwargs", None) or {}
    return maybe_apply_chat_template({"prompt": prompt}, tokenizer, **kwargs)["prompt"]


class PassAtKEval(TrainerCallback):
    """Periodic base-vs-policy evaluation on held-out prompts (see the module docstring).

    Args:
        labeler: Who labels completions: a seffi ``Task`` (its ``validate_y_text``; its prompts and
            reference traces are the defaults below) or any labeler
            ([`seffi.labelers.as_labeler`][seffi.labelers.as_labeler]: a ``Labeler``, a ``{strategy: regex}``
            rubric, or ``fn(x, text)`` with ``strategies``).
        inputs: The held-out prompts (never GRPO's training prompts): task inputs (objects with an
            ``id``; the labeler gets the input), or ``{prompt id: prompt}`` with each prompt a text or a
            list of chat messages (the labeler gets the prompt as given).
        strategies: Declared strategy ids for a bare labeling function.
        prompt: ``prompt(labeler, x) -> text or messages`` for task inputs (default ``task.prompt``).
        oracle: ``{prompt id: {strategy: match set of its reference trace}}`` for the gain's no-repeat
            oracle (default: a task's ``reference_match_sets``; with a labeler, every declared strategy
            feasible and matched alone by its reference, C_oracle(k) = min(k, M) / M).
        n: Samples per prompt (k runs up to n).
        every: Evaluate the policy every ``every`` optimizer steps (and at the end).
        budget: K of the gain (default: ``num_generations``).
        decode: ``decode(completion_ids) -> text`` (a task LM's decoder; default: the tokenizer's).
        out_dir: Where ``eval.json`` and ``eval_passk.png`` go (main process; None: nowhere).
        seed: Seed of the samples and the bootstrap.
        gather: ``gather(list) -> list`` over ranks (default: accelerate's when several processes run).
        base: A reference evaluation already made (same prompts, n and seed): reused, not redrawn.

    Attributes:
        base: The reference model's `EvalResult` (after train begin).
        history: ``[(step, EvalResult, scalars), ...]`` of the policy's evaluations.

    Raises:
        SeffiError: No inputs, no labeler, prompts of the wrong kind, or oracle sets missing a prompt.
    """

    def __init__(
        self,
        labeler: Any,
        inputs: Sequence[Any] | Mapping[str, Any],
        *,
        strategies: Sequence[str] | None = None,
        prompt: Callable[[Any, Any], Any] | None = None,
        oracle: Mapping[str, Mapping[str, Any]] | None = None,
        n: int = 64,
        every: int = 20,
        budget: int | None = None,
        decode: Callable[[Sequence[int]], str] | None = None,
        out_dir: str | Path | None = None,
        seed: int = 0,
        gather: Callable[[list[Any]], list[Any]] | None = None,
        base: EvalResult | None = None,
    ) -> None:
        if n < 1 or every < 1:
            raise SeffiError(f"n and every must be >= 1, got n={n}, every={every}")
        self.task = labeler if isinstance(labeler, Task) else None
        try:
            self.labeler = as_labeler(labeler, strategies)
        except ValueError as exc:
            raise SeffiError(f"PassAtKEval: {exc}") from None
        self.strategies = tuple(self.labeler.strategies)
        if isinstance(inputs, Mapping):
            if prompt is not None:
                raise SeffiError("prompt= applies to task inputs; {prompt id: prompt} inputs are the prompts")
            if self.task is not None:
                raise SeffiError(
                    "a Task labels its own inputs: pass them as a list (prompt= for chat messages), or "
                    "label {prompt id: prompt} with a labeler"
                )
            self.ids = [str(k) for k in inputs]
            self.inputs: list[Any] = list(inputs.values())
            self._texts: list[Any] = self.inputs
            for pid, p in zip(self.ids, self.inputs, strict=True):
                if not (isinstance(p, str) or is_conversational(p)):
                    raise SeffiError(f"prompt {pid!r} must be text or a list of chat messages, got {p!r:.80}")
        elif isinstance(inputs, Sequence) and all(hasattr(x, "id") for x in inputs):
            if prompt is None and self.task is None:
                raise SeffiError("task inputs need prompt=(labeler, x) -> prompt, or pass {id: prompt}")
            self.inputs = list(inputs)
            self.ids = [str(x.id) for x in self.inputs]
            self._texts = []  # rendered at evaluation (prompt may be a method of a model wrapper)
        else:
            raise SeffiError("inputs must be task inputs (with .id) or a {prompt id: prompt} mapping")
        if not self.inputs:
            raise SeffiError("PassAtKEval needs at least one held-out input")
        if len(set(self.ids)) != len(self.ids):
            raise SeffiError("held-out inputs must have distinct ids")
        self.oracle = {str(k): v for k, v in oracle.items()} if oracle is not None else None
        if self.oracle is not None and not set(self.ids) <= set(self.oracle):
            raise SeffiError(f"oracle= has no reference sets for {sorted(set(self.ids) - set(self.oracle))}")
        self.prompt = prompt or (lambda t, x: t.prompt(x))
        self.n, self.every, self.budget, self.decode, self.seed = n, every, budget, decode, seed
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self._gather = gather or trl_model.default_gather
        self.base: EvalResult | None = base
        self.history: list[tuple[int, EvalResult, dict[str, float]]] = []
        self._pending: dict[str, float] = {}
        self._oracle: dict[int, dict[str, float]] = {}

    def prompt_texts(self, tokenizer: Any, args: Any = None) -> list[str]:
        """The text each held-out prompt is sampled from (chat messages rendered as TRL renders them)."""
        raw = self._texts or [self.prompt(self.task or self.labeler, x) for x in self.inputs]
        return [render_prompt(p, tokenizer, args) for p in raw]

    def evaluate(self, model: Any, tokenizer: Any, args: Any, salt: int) -> EvalResult:
        """Sample ``n`` completions per prompt (this rank's share), gather, and evaluate them."""
        rank, world = trl_model.rank_and_world()
        texts = self.prompt_texts(tokenizer, args)[rank::world]
        gen = trl_model.generation_config(args, model, tokenizer)
        seed = seed_of(self.seed, 10 + rank, salt)
        samples = grpo.sample_completions(model, tokenizer, texts, self.n, gen, seed=seed, decode=self.decode)
        ids, mine = self.ids[rank::world], self.inputs[rank::world]
        sets, valid = grpo.label_samples(self.labeler, ids, mine, samples)
        rows = self._gather([(i, [sorted(s) for s in sets[i]], valid[i]) for i in sets])
        all_sets = {i: [frozenset(s) for s in ss] for i, ss, _ in rows}
        return evaluate_samples(all_sets, {i: v for i, _, v in rows}, self.strategies)

    def oracle_aucs(self, budget: int) -> dict[str, float]:
        """``{prompt id: AUC@K of the no-repeat oracle}`` (the gain's top; computed once per K)."""
        if budget not in self._oracle:
            self._oracle[budget] = {}
            for pid, x in zip(self.ids, self.inputs, strict=True):
                if self.oracle is not None:
                    refs: Any = {pid: self.oracle[pid]}
                elif self.task is not None:
                    refs = {pid: self.task.reference_match_sets(x)}
                else:
                    refs = None  # every declared strategy feasible, each matched alone
                curve = OracleBaseline(refs, strategies=self.strategies, seed=self.seed).curves(budget)
                self._oracle[budget][pid] = float(curve.auc)
        return self._oracle[budget]

    def scalars(self, result: EvalResult, budget: int) -> dict[str, float]:
        """The logged numbers of one policy evaluation against the base."""
        assert self.base is not None
        n, k = result.n, min(budget, result.n)
        out = {
            "seffi/eval/valid_rate": result.valid_rate,
            "seffi/eval/valid@1": float(result.valid_at_k[0]),
            f"seffi/eval/valid@{k}": float(result.valid_at_k[k - 1]),
            f"seffi/eval/valid@{n}": float(result.valid_at_k[-1]),
            f"seffi/eval/coverage@{k}": float(result.coverage[k - 1]),
            f"seffi/eval/coverage@{n}": float(result.coverage[-1]),
            "seffi/eval/solvable": result.solvable,
            "seffi/eval/base_solvable": self.base.solvable,
        }
        cross = crossover_k(per_prompt(self.base, "valid_at_k"), per_prompt(result, "valid_at_k"))
        out["seffi/eval/crossover_found"] = float(cross is not None)
        out["seffi/eval/crossover_k"] = float(cross if cross is not None else n + 1)  # n + 1: none within n
        g = gain_vs_base(result, self.base, self.oracle_aucs(k), k)
        for name, v in (("", g.value), ("_lo", g.lo), ("_hi", g.hi), ("_room", g.room)):
            if v is not None:
                out[f"seffi/eval/gain_vs_base{name}"] = float(v)
        if g.value is not None:  # every logged gain says whether it is fragile
            out["seffi/eval/gain_vs_base_fragile"] = float(g.fragile)
        return out

    # -- trainer events ------------------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Evaluate the reference model (the policy before any update)."""
        self.budget = self.budget or int(getattr(args, "num_generations", 8) or 8)
        tok = kwargs.get("processing_class") or kwargs.get("tokenizer")
        self._tok = tok
        if self.base is None:
            self.base = self.evaluate(model, tok, args, salt=0)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Evaluate the policy every ``every`` steps (every rank: the gather is a collective)."""
        step = int(state.global_step)
        if step % self.every == 0 or step >= int(state.max_steps):
            self._run(step, model, args, state)

    def _run(self, step: int, model: Any, args: Any, state: Any) -> None:
        if self.history and self.history[-1][0] == step:
            return
        result = self.evaluate(model, self._tok, args, salt=step)
        scalars = self.scalars(result, int(self.budget or 8))
        self.history.append((step, result, scalars))
        self._pending.update(scalars)
        if state.is_world_process_zero:
            self._wandb_curves(step, result)
            self.write()

    #: Moved ahead of the reporting integrations by ``GRPOCoverage`` (they read ``logs`` after us).
    adds_to_logs = True

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        """Add the latest evaluation's scalars to the next log (every rank) and to its history entry."""
        if logs is None or not self._pending:
            return
        logs.update(self._pending)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(self._pending)  # the trainer copied logs before on_log
        self._pending = {}

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Evaluate the final policy unless the last step was just evaluated."""
        self._run(int(state.global_step), model, args, state)

    # -- sinks ---------------------------------------------------------------------------------------

    def _wandb_curves(self, step: int, result: EvalResult) -> None:
        """valid@k and C(k) of base vs policy as W&B ``line_series`` in the active (TRL's) run."""
        try:
            import wandb
        except ImportError:
            return
        if wandb.run is None or self.base is None:
            return
        ks = list(range(1, result.n + 1))
        data = {
            f"seffi/eval/{name}_curve": wandb.plot.line_series(
                xs=ks,
                ys=[getattr(self.base, attr).tolist(), getattr(result, attr).tolist()],
                keys=["reference (base)", f"policy @ step {step}"],
                title=f"{label} vs k, step {step}",
                xname="k",
            )
            for name, attr, label in (
                ("valid_at_k", "valid_at_k", "valid@k"),
                ("coverage", "coverage", "C(k)"),
            )
        }
        try:  # a failing W&B never stops training
            wandb.run.log(data, commit=False)
        except Exception:
            pass

    def summary(self) -> dict[str, Any]:
        """Base and per-step policy evaluations, JSON-ready."""
        return {
            "n": self.n,
            "budget": self.budget,
            "prompts": len(self.inputs),
            "gain_interval": "Fieller over prompts (t on prompts - 1 degrees of freedom)",
            "base": self.base.to_json() if self.base else None,
            "history": [{"step": s, **r.to_json(), "scalars": sc} for s, r, sc in self.history],
        }

    def write(self) -> None:
        """``eval.json`` and ``eval_passk.png`` (base vs the latest policy) in ``out_dir``."""
        if self.out_dir is None or self.base is None:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(
            self.summary(), indent=1, default=lambda v: None if isinstance(v, float) else str(v)
        )
        write_atomic(self.out_dir / "eval.json", text)
        if self.history:
            plot_passk(
                self.out_dir / "eval_passk.png",
                self.base,
                {f"step {self.history[-1][0]}": self.history[-1][1]},
            )


def plot_passk(path: Path, base: EvalResult, policies: Mapping[str, EvalResult]) -> Path:
    """valid@k and C(k), base vs each policy, k = 1..n (log-scaled k), with each crossover marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    ks = np.arange(1, base.n + 1)
    for ax, attr, label in ((axes[0], "valid_at_k", "valid@k (pass@k)"), (axes[1], "coverage", "C(k)")):
        ax.plot(ks, getattr(base, attr), "k--", label="reference (base)")
        for i, (name, res) in enumerate(policies.items()):
            cross = crossover_k(per_prompt(base, attr), per_prompt(res, attr))
            tag = f"crossover k={cross}" if cross else f"no crossover within n={base.n}"
            ax.plot(ks, getattr(res, attr), color=f"C{i}", label=f"{name} ({tag})")
            if cross:
                ax.axvline(cross, color=f"C{i}", ls=":", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k (samples per prompt)")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

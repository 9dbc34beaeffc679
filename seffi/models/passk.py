"""Base vs trained, the way RL-for-reasoning papers compare them: valid@k (pass@k) and C(k) up to n.

From n samples per held-out prompt (``c`` of them valid; ``Y_s`` of them matching strategy ``s``):

* **valid@k** (pass@k, Chen et al. 2021): ``1 - C(n - c, k) / C(n, k)`` per prompt, averaged — the
  unbiased estimate of "some of k samples is correct".
* **C(k)**: ``(1/M) sum_s [1 - C(n - Y_s, k) / C(n, k)]`` per prompt (rarefaction, the same
  U-statistic as ``IidBaseline.from_samples``), averaged.
* **crossover k**: the smallest k <= n at which the reference (base) model's valid@k is ahead of the
  trained model's beyond noise (Yue et al. 2025 find one for every RLVR model): the paired mean
  difference over prompts, base minus policy, exceeds 0.001 and its one-sided 97.5 % lower bound
  (Student t over prompts) is above 0. ``None`` when there is none within n; 1 when the base is ahead
  from the start. Why a bound: without one, the lr = 0 sanity run (the base model itself, resampled)
  "crossed" at k = 1 on 32 held-out prompts (valid@1 0.878 vs 0.887). The 0.001 margin keeps two
  curves that both saturate at 1 (differences ~1e-6) from crossing on rounding noise.
* **solvable share**: the share of prompts some of the n samples solves (valid@n per prompt is 1).
* **gain vs the reference**: ``(AUC_policy - AUC_base) / (AUC_oracle - AUC_base)`` at budget K from
  the same per-prompt C(k) estimates, with a bootstrap CI over prompts.

:class:`PassAtKEval` is a ``TrainerCallback`` (TRL's GRPO has no ``compute_metrics``): it samples the
reference model once at train begin and the current policy every ``every`` steps, adds the scalars to
the trainer's logs (``seffi/eval/...``; W&B: ``train/seffi/eval/...``), logs the curves as W&B
``line_series`` to the active run, and writes ``eval.json`` + ``eval_passk.png`` to ``out_dir``.
Prompts are split over ranks and the per-prompt counts gathered, so every rank logs the same keys.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from transformers import TrainerCallback

from seffi.coverage.resampling import t_quantile
from seffi.errors import SeffiError

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
    """

    n: int
    valid_at_k: np.ndarray
    coverage: np.ndarray
    valid_rate: float
    solvable: float
    per_prompt_coverage: np.ndarray
    prompt_ids: list[str]
    per_prompt_valid_at_k: np.ndarray | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields (curves as lists)."""
        return {
            "n": self.n,
            "valid_at_k": self.valid_at_k.tolist(),
            "coverage": self.coverage.tolist(),
            "valid_rate": self.valid_rate,
            "solvable": self.solvable,
        }


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
    index = {s: j for j, s in enumerate(strategies)}
    y = np.zeros((len(ids), len(strategies)), dtype=np.int64)
    for r, i in enumerate(ids):
        for ms in sets[i]:
            for s in ms:
                y[r, index[s]] += 1
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


def gain_vs_base(
    policy: EvalResult,
    base: EvalResult,
    oracle_auc: Mapping[str, float],
    budget: int,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, float | None]:
    """Gain at budget K of the policy's samples over the base model's, with a bootstrap CI over prompts.

    Args:
        policy: The trained model's evaluation.
        base: The reference model's evaluation (same prompts).
        oracle_auc: ``{prompt id: AUC@K of the no-repeat oracle}``.
        budget: K (<= n).
        n_boot: Bootstrap replicates (prompts resampled with replacement).
        seed: Bootstrap seed.
        level: CI level.
    """
    if policy.prompt_ids != base.prompt_ids:
        raise SeffiError("policy and base were evaluated on different prompts")
    if not 1 <= budget <= min(policy.n, base.n):
        raise SeffiError(f"budget {budget} must be within 1..n")
    a = policy.per_prompt_coverage[:, :budget].mean(axis=1)
    i = base.per_prompt_coverage[:, :budget].mean(axis=1)
    o = np.array([oracle_auc[p] for p in policy.prompt_ids])

    def gain(idx: np.ndarray) -> float:
        den = o[idx].mean() - i[idx].mean()
        return float((a[idx].mean() - i[idx].mean()) / den) if den > 1e-12 else float("nan")

    point = gain(np.arange(len(a)))
    rng = np.random.default_rng(seed)
    reps = np.array([gain(rng.integers(0, len(a), len(a))) for _ in range(n_boot)])
    reps = reps[np.isfinite(reps)]
    if not np.isfinite(point):
        return {"value": None, "lo": None, "hi": None}
    if reps.size < 10:
        return {"value": point, "lo": None, "hi": None}
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return {"value": point, "lo": float(lo), "hi": float(hi)}


class PassAtKEval(TrainerCallback):
    """Periodic base-vs-policy evaluation on held-out prompts (see the module docstring).

    Args:
        task: The seffi task (validator, strategies, reference traces for the oracle).
        inputs: Held-out task inputs (never GRPO's training prompts).
        prompt: ``prompt(task, x) -> str``, the text the policy is prompted with (default ``task.prompt``).
        n: Samples per prompt (k runs up to n).
        every: Evaluate the policy every ``every`` optimizer steps (and at the end).
        budget: K of the gain (default: ``num_generations``).
        decode: ``decode(completion_ids) -> text`` (a task LM's decoder; default: the tokenizer's).
        out_dir: Where ``eval.json`` and ``eval_passk.png`` go (main process; None: nowhere).
        seed: Seed of the samples and the bootstrap.
        gather: ``gather(list) -> list`` over ranks (default: accelerate's when several processes run).
        base: A reference evaluation already made (same prompts, n and seed): reused, not redrawn.

    Attributes:
        base: The reference model's :class:`EvalResult` (after train begin).
        history: ``[(step, EvalResult, scalars), ...]`` of the policy's evaluations.
    """

    def __init__(
        self,
        task: Any,
        inputs: Sequence[Any],
        *,
        prompt: Callable[[Any, Any], str] | None = None,
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
        self.task, self.inputs = task, list(inputs)
        if not self.inputs:
            raise SeffiError("PassAtKEval needs at least one held-out input")
        self.prompt = prompt or (lambda t, x: t.prompt(x))
        self.n, self.every, self.budget, self.decode, self.seed = n, every, budget, decode, seed
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self._gather = gather or grpo.default_gather
        self.strategies = tuple(task.strategies())
        self.base: EvalResult | None = base
        self.history: list[tuple[int, EvalResult, dict[str, float]]] = []
        self._pending: dict[str, float] = {}
        self._oracle: dict[str, float] = {}

    def evaluate(self, model: Any, tokenizer: Any, args: Any, salt: int) -> EvalResult:
        """Sample ``n`` completions per prompt (this rank's share), gather, and evaluate them."""
        rank, world = grpo.rank_and_world()
        mine = self.inputs[rank::world]
        gen = grpo.generation_config(args, model, tokenizer)
        texts = grpo.sample_completions(
            model,
            tokenizer,
            [self.prompt(self.task, x) for x in mine],
            self.n,
            gen,
            seed=grpo.seed_of(self.seed, 10 + rank, salt),
            decode=self.decode,
        )
        sets, valid = grpo.label_samples(self.task.validate_y_text, [x.id for x in mine], mine, texts)
        rows = self._gather([(i, [sorted(s) for s in sets[i]], valid[i]) for i in sets])
        all_sets = {i: [frozenset(s) for s in ss] for i, ss, _ in rows}
        return evaluate_samples(all_sets, {i: v for i, _, v in rows}, self.strategies)

    def _oracle_aucs(self, budget: int) -> dict[str, float]:
        if not self._oracle:
            from seffi.coverage import OracleBaseline

            for x in self.inputs:
                refs = {x.id: self.task.reference_match_sets(x)}
                curve = OracleBaseline(refs, strategies=self.strategies, seed=self.seed).curves(budget)
                self._oracle[x.id] = float(curve.auc)
        return self._oracle

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
        g = gain_vs_base(result, self.base, self._oracle_aucs(k), k, seed=self.seed)
        for name, v in (("", g["value"]), ("_lo", g["lo"]), ("_hi", g["hi"])):
            if v is not None:
                out[f"seffi/eval/gain_vs_base{name}"] = float(v)
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
        (self.out_dir / "eval.json").write_text(text)
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


def finite_or_none(value: Any) -> Any:
    """NaN/inf -> None (strict JSON)."""
    return value if not isinstance(value, float) or math.isfinite(value) else None

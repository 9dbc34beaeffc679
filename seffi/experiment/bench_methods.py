"""The methods of ``seffi bench exploration``: how each policy samples, trains and is measured.

Every method runs on the same TRL GRPO path (`trl.GRPOTrainer`, same seed, prompts, steps and
K) and differs in one reward or one sampling rule (`METHOD_SLUGS`):

* GRPO on the base LM with a reward of `seffi.group_scoring.METHODS` (validity, unlikeliness,
  unlikeliness with two updates per batch, pass@k, outcome UCB, outcome batch penalty, seffi's group
  diversity), with an advantage rule of `seffi.experiment.bench_rewards.ADVANTAGE_METHODS` (UARL with the
  validator's or the classifier's clusters, UCPO, W-REINFORCE; `seffi.experiment.bench_trainer`), with
  a surface-diversity reward, and a learning-rate-0 run (the sanity check: the policy stays the base);
* the base LM sampled at temperature 1.3, no training (measured like the others);
* **the factorised explorer**: GRPO with the validity reward on rung 2's latent mixture
  (``prompt <sep> <z> trace``). A router picks each completion's code ``z`` and the generator writes
  the trace: ``mixture_distinct`` gives the K completions of a group K distinct codes in the order of
  the mixture's prior ``p(z | x)`` (rung 2's round-robin, cycling when K > L), ``mixture_iid`` draws
  each code iid from that prior. The prior is the untrained mixture's, fixed for the run (the router
  does not learn). The code is forced as the completion's first token through TRL's ``rollout_func``
  and masked out of the loss (``env_mask``), so GRPO trains the generator given the code, never the
  router's choice. ``mixture_router`` takes each group's codes from rung 2's REINFORCE router
  (`seffi.experiment.learner`), trained on the untrained mixture before GRPO (the ladder's learner
  settings; features: log p(z | x) and the run's codes tried, strategies found, samples used, so it
  acts on prompts it never saw) and fixed during it: it chooses a group's codes one completion at a
  time, its "found" features from the validator's labels of the group's completions so far.

Measurement (`BenchEval`, `measure_pool`): held-out valid@k and C(k) up to n every
``eval_every`` steps with the surface metrics of each group of K; after training, ``pool_runs`` runs
of K per pool prompt labelled by every labeler (the task's validator and the classifier). Samples of
a policy whose codes are distinct within a run are not exchangeable, so their held-out curves come from
`ordered_eval` (the first k samples of runs of K, every cyclic order of the runs), not from the
rarefaction estimator, and their held-out gain interval resamples prompts only.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from seffi._seeding import seed_of
from seffi.callbacks import trl_model
from seffi.callbacks.trl import GRPOCoverage
from seffi.errors import SeffiError
from seffi.experiment.bench_rewards import UCPO_TAU, W_REINFORCE_LAMBDA
from seffi.experiment.bench_sampling import CodeRouter, Sampler, group_surface, ordered_eval
from seffi.experiment.bench_trainer import GroupAdvantages, SurfaceReward, advantage_trainer
from seffi.experiment.ladder_rung3 import grpo_config, label_rollout, progress_callback
from seffi.models import grpo
from seffi.models.passk import EvalResult, PassAtKEval, evaluate_samples

#: Every method of the bench, in table order.
METHOD_SLUGS = (
    "validity",
    "unlikeliness",
    "unlikeliness_x2",
    "passk",
    "outcome_ucb",
    "outcome_batch",
    "diversity",
    "uarl",
    "uarl_classifier",
    "ucpo",
    "w_reinforce",
    "surface",
    "lr0",
    "temperature",
    "mixture_distinct",
    "mixture_iid",
    "mixture_router",
)


@dataclass(frozen=True)
class Method:
    """One row of the bench.

    Attributes:
        slug: Short name (files, W&B keys, ``--methods``).
        label: Table label.
        kind: ``"grpo"`` (GRPO on the base LM), ``"temperature"`` (the base sampled hotter, no training)
            or ``"mixture"`` (GRPO on the latent mixture, codes chosen by a router).
        reward: The reward method (`seffi.group_scoring.METHODS`).
        options: The reward's options (an advantage method's: the rule's options).
        lr_factor: Multiplies the bench's learning rate (0: the sanity run).
        num_iterations: GRPO updates per generation batch (TRL's ``num_iterations``).
        scale_rewards: TRL's ``scale_rewards`` (None: TRL's default).
        codes: ``"distinct"``, ``"iid"`` or ``"router"`` for a mixture method.
        temperature: Sampling temperature of a temperature method.
        advantage: An advantage rule of `seffi.experiment.bench_rewards.ADVANTAGE_METHODS` replacing TRL's
            advantage (`seffi.experiment.bench_trainer.advantage_trainer`), with ``options`` as its options.
        clusters: Whose match sets the advantage rule reads: ``"validator"`` or ``"classifier"``
            (validity is always the validator's).
        surface_weight: ``w`` of the surface-diversity reward (`bench_trainer.SurfaceReward`), the
            reward in place of validity; None: no surface reward.
    """

    slug: str
    label: str
    kind: str
    reward: str = "valid"
    options: dict[str, Any] = field(default_factory=dict)
    lr_factor: float = 1.0
    num_iterations: int = 1
    scale_rewards: str | None = None
    codes: str | None = None
    temperature: float = 1.0
    advantage: str | None = None
    clusters: str = "validator"
    surface_weight: float | None = None


def bench_methods(cfg: Any) -> list[Method]:
    """The bench's methods with the settings of ``cfg`` (a `BenchConfig`)."""
    k = cfg.passk_k or max(1, cfg.budget // 2)
    beta = {"beta": cfg.unlikeliness_beta}
    table = {
        "validity": Method("validity", "GRPO validity reward", "grpo"),
        "unlikeliness": Method(
            "unlikeliness",
            f"GRPO unlikeliness (beta {cfg.unlikeliness_beta:g})",
            "grpo",
            "unlikeliness",
            beta,
        ),
        "unlikeliness_x2": Method(
            "unlikeliness_x2",
            f"GRPO unlikeliness (beta {cfg.unlikeliness_beta:g}), 2 updates per batch",
            "grpo",
            "unlikeliness",
            beta,
            num_iterations=2,
        ),
        "passk": Method(
            "passk", f"GRPO pass@k advantage (k = {k})", "grpo", "passk", {"k": k}, scale_rewards="none"
        ),
        "outcome_ucb": Method(
            "outcome_ucb",
            f"GRPO outcome UCB (c = {cfg.outcome_c:g})",
            "grpo",
            "outcome_ucb",
            {"c": cfg.outcome_c},
        ),
        "outcome_batch": Method(
            "outcome_batch",
            f"GRPO outcome batch penalty (c = {cfg.outcome_c:g})",
            "grpo",
            "outcome_batch",
            {"c": cfg.outcome_c},
        ),
        "diversity": Method(
            "diversity",
            f"GRPO seffi diversity (w = {cfg.grpo.diversity_weight:g})",
            "grpo",
            "diversity",
            {"weight": cfg.grpo.diversity_weight},
        ),
        "uarl": Method("uarl", "GRPO UARL (1 / cluster size, exact clusters)", "grpo", advantage="uarl"),
        "uarl_classifier": Method(
            "uarl_classifier",
            "GRPO UARL (1 / cluster size, classifier clusters)",
            "grpo",
            advantage="uarl",
            clusters="classifier",
        ),
        "ucpo": Method(
            "ucpo", f"GRPO UCPO (tau = {UCPO_TAU:g})", "grpo", options={"tau": UCPO_TAU}, advantage="ucpo"
        ),
        "w_reinforce": Method(
            "w_reinforce",
            f"W-REINFORCE (lambda = {W_REINFORCE_LAMBDA:g}, no baseline)",
            "grpo",
            options={"weight": W_REINFORCE_LAMBDA},
            advantage="w_reinforce",
        ),
        "surface": Method(
            "surface",
            f"GRPO surface diversity (w = {cfg.grpo.diversity_weight:g})",
            "grpo",
            surface_weight=cfg.grpo.diversity_weight,
        ),
        "lr0": Method("lr0", "GRPO lr = 0 (sanity)", "grpo", lr_factor=0.0),
        "temperature": Method(
            "temperature",
            f"base at T = {cfg.temperature:g} (no training)",
            "temperature",
            temperature=cfg.temperature,
        ),
        "mixture_distinct": Method(
            "mixture_distinct",
            "GRPO on the mixture, distinct codes (prior order)",
            "mixture",
            codes="distinct",
        ),
        "mixture_iid": Method(
            "mixture_iid", "GRPO on the mixture, codes iid from the prior", "mixture", codes="iid"
        ),
        "mixture_router": Method(
            "mixture_router",
            "GRPO on the mixture, codes from rung 2's trained router",
            "mixture",
            codes="router",
        ),
    }
    return [table[s] for s in cfg.methods]


class BenchEval(PassAtKEval):
    """`PassAtKEval` sampling through a `Sampler`, with surface metrics.

    Args:
        task: The task (its validator labels the held-out samples).
        held_out: Held-out task inputs.
        sampler: The method's sampler.
        **kwargs: ``n``, ``every``, ``budget``, ``out_dir``, ``seed``, ``base`` of PassAtKEval.

    Attributes:
        surface: ``{step: surface metrics of the groups of K}`` of each evaluation (salt = step).
        samples: ``{step: (texts per prompt, match sets, validity)}`` of the latest evaluation only.
    """

    def __init__(self, task: Any, held_out: Sequence[Any], sampler: Sampler, **kwargs: Any) -> None:
        super().__init__(task, held_out, prompt=sampler.policy.prompt, decode=sampler.decode, **kwargs)
        self.sampler = sampler
        self.surface: dict[int, dict[str, float]] = {}
        self.samples: dict[int, Any] = {}

    def evaluate(self, model: Any, tokenizer: Any, args: Any, salt: int) -> EvalResult:
        """Sample ``n`` completions per held-out prompt with the method's sampler and evaluate them."""
        texts = self.prompt_texts(tokenizer, args)
        gen = trl_model.generation_config(args, model, tokenizer)
        samples = self.sampler.texts(model, tokenizer, texts, self.n, gen, seed=seed_of(self.seed, 10, salt))
        sets, valid = grpo.label_samples(self.labeler, self.ids, self.inputs, samples)
        budget = int(self.budget or 8)
        self.surface[int(salt)] = group_surface(samples, budget)
        self.samples = {int(salt): (samples, sets, valid)}
        if self.sampler.ordered:
            return ordered_eval(sets, valid, self.strategies, budget)
        return evaluate_samples(sets, valid, self.strategies)

    def _wandb_curves(self, step: int, result: EvalResult) -> None:
        """Nothing: the bench writes its own W&B run after training."""

    def write(self) -> None:
        """Nothing: the bench's records hold every evaluation (a plot per evaluation costs seconds)."""


# -- the pool -------------------------------------------------------------------------------------------


@dataclass
class PoolSamples:
    """A policy's fresh runs of K on the pool, labelled by every labeler.

    Attributes:
        rollouts: ``{labeler: Rollout}`` (`seffi.experiment.runner.Rollout`).
        texts: Completions per pool prompt (``pool_runs`` runs of K, in order).
        surface: Surface metrics of the runs (groups of K), averaged.
    """

    rollouts: dict[str, Any]
    texts: list[list[str]]
    surface: dict[str, float]


def measure_pool(
    sampler: Sampler,
    model: Any,
    tokenizer: Any,
    task: Any,
    pool: Sequence[Any],
    labelers: dict[str, Any],
    budget: int,
    runs: int,
    gen: Any,
    seed: int,
) -> PoolSamples:
    """``runs`` fresh runs of K completions per pool prompt, labelled by each labeler."""
    prompts = [sampler.policy.prompt(task, x) for x in pool]
    texts = sampler.texts(model, tokenizer, prompts, runs * budget, gen, seed=seed)
    rollouts = {name: label_rollout(task, pool, texts, lab, budget) for name, lab in labelers.items()}
    return PoolSamples(rollouts, texts, group_surface(texts, budget))


# -- one method -----------------------------------------------------------------------------------------


@dataclass
class MethodRun:
    """What one method produced.

    Attributes:
        method: The method.
        pool: Its pool samples after training.
        history: ``[(step, EvalResult, scalars)]`` of the held-out evaluations.
        surface: ``{step: surface metrics}`` of those evaluations.
        final_samples: ``(texts, sets, valid)`` of the last held-out evaluation.
        seconds: Wall time (training, evaluations, pool measurement).
        cpu_seconds: This process's CPU time over the same span (steadier than wall time on a shared
            machine).
        train: Training facts (train-stream AUC and valid rate, log-probability cost).
    """

    method: Method
    pool: PoolSamples
    history: list[tuple[int, EvalResult, dict[str, float]]]
    surface: dict[int, dict[str, float]]
    final_samples: Any
    seconds: float
    cpu_seconds: float
    train: dict[str, Any]


def grpo_args(
    s: Any, cfg: Any, out: Path, method: Method, max_new: int, suppress: list[int], seed: int
) -> Any:
    """The ``GRPOConfig`` of a method (every method: the same seed, steps, batch and K)."""
    extra: dict[str, Any] = {"num_iterations": method.num_iterations}
    if method.surface_weight is not None:
        extra["reward_weights"] = [0.0, 1.0]  # the coverage reward labels; the surface reward trains
    if method.scale_rewards is not None:
        extra["scale_rewards"] = method.scale_rewards
    return grpo_config(
        cfg, s, out, lr=s.lr * method.lr_factor, max_new=max_new, suppress=suppress, seed=seed, **extra
    )


@dataclass
class SeedContext:
    """What every method of one seed shares.

    Attributes:
        cfg: The bench config.
        task: The task.
        pool: Pool inputs (GRPO's prompts).
        held_out: Held-out inputs.
        labelers: ``{"validator": ..., "classifier": ...}``.
        iid: ``{labeler: IidBaseline}`` of the base's own samples on the pool.
        oracle: ``{labeler: OracleBaseline}`` on the pool.
        base_eval: The base's held-out evaluation (reused by every method).
        base_dir: Base LM folder.
        mixture_dir: Mixture folder (None without a mixture method).
        priors: ``{dataset prompt: p(z | x)}`` of the untrained mixture, pool and held-out prompts.
        seed: Seed of every method's training and measurement.
        out: This seed's folder.
        router: Rung 2's router trained on the mixture (None without ``mixture_router``).
    """

    cfg: Any
    task: Any
    pool: list[Any]
    held_out: list[Any]
    labelers: dict[str, Any]
    iid: dict[str, Any]
    oracle: dict[str, Any]
    base_eval: EvalResult
    base_dir: Path
    mixture_dir: Path | None
    priors: dict[str, np.ndarray]
    seed: int
    out: Path
    router: CodeRouter | None = None


def method_sampler(ctx: SeedContext, method: Method) -> Sampler:
    """A fresh policy and its sampler for ``method``."""
    from seffi.models.lm import Layout

    if method.kind != "mixture":
        return Sampler(grpo.trl_policy(ctx.base_dir, ctx.task))
    if ctx.mixture_dir is None:
        raise SeffiError(f"method {method.slug} needs the latent mixture")
    policy = grpo.trl_policy(ctx.mixture_dir, ctx.task)
    code0 = Layout(ctx.task.vocabulary()).code0
    routed: dict[str, Any] = {}
    if method.codes == "router":
        inputs = {policy.prompt(ctx.task, x): x for x in [*ctx.pool, *ctx.held_out]}
        routed = {"router": ctx.router, "labeler": ctx.labelers["validator"], "inputs": inputs}
    return Sampler(policy, method.codes, ctx.priors, code0=code0, budget=ctx.cfg.budget, **routed)


def run_method(ctx: SeedContext, method: Method, progress: Any) -> MethodRun:
    """Train (or not) one method from the seed's models, then evaluate it on held-out prompts and the pool."""
    cfg, s = ctx.cfg, ctx.cfg.grpo
    started, cpu = time.perf_counter(), time.process_time()
    sampler = method_sampler(ctx, method)
    policy = sampler.policy
    out = ctx.out / method.slug
    max_new = policy.max_new_tokens + (1 if method.kind == "mixture" else 0)
    args = grpo_args(s, cfg, out, method, max_new, policy.suppress, ctx.seed)
    evaluation = BenchEval(
        ctx.task,
        ctx.held_out,
        sampler,
        n=s.eval_samples,
        every=s.eval_every,
        budget=cfg.budget,
        seed=ctx.seed,
        base=ctx.base_eval,
    )
    bar = progress.add_task(f"{method.slug}", total=s.steps, status="starting")
    train: dict[str, Any] = {}
    if method.kind == "temperature":
        hot = copy.copy(args)
        hot.temperature = method.temperature
        evaluation.budget = cfg.budget
        result = evaluation.evaluate(policy.model, policy.tokenizer, hot, salt=s.steps)
        evaluation.history.append((s.steps, result, evaluation.scalars(result, cfg.budget)))
        gen = trl_model.generation_config(hot, policy.model, policy.tokenizer)
    else:
        train = _train(ctx, method, sampler, args, evaluation, progress, bar)
        if sampler.router is not None:
            train["router"] = sampler.router.facts
        gen = trl_model.generation_config(args, policy.model, policy.tokenizer)
    progress.update(bar, completed=s.steps, status="measuring the pool")
    pool = measure_pool(
        sampler,
        policy.model,
        policy.tokenizer,
        ctx.task,
        ctx.pool,
        ctx.labelers,
        cfg.budget,
        s.pool_runs,
        gen,
        seed_of(ctx.seed, 100),
    )
    progress.update(bar, status="done")
    last = max(evaluation.samples) if evaluation.samples else None
    return MethodRun(
        method,
        pool,
        list(evaluation.history),
        dict(evaluation.surface),
        evaluation.samples.get(last),
        time.perf_counter() - started,
        time.process_time() - cpu,
        train,
    )


def _train(
    ctx: SeedContext,
    method: Method,
    sampler: Sampler,
    args: Any,
    evaluation: BenchEval,
    progress: Any,
    bar: Any,
) -> dict[str, Any]:
    """GRPO with the method's reward (and, for the mixture, its router's codes)."""
    import gc
    import os

    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOTrainer

    policy, task = sampler.policy, ctx.task
    cov = GRPOCoverage(
        task,
        ctx.pool,
        reward=method.reward,
        reward_options=(method.options or None) if method.advantage is None else None,
        decode=sampler.decode,
        iid=ctx.iid["validator"],
        oracle=ctx.oracle["validator"],
        reference_cache=False,
        reuse_first_batch=False,
        out_dir=ctx.out / method.slug / "train",
        n_boot=0,
        seed=ctx.seed,
        plots=False,
    )
    rewards: list[Any] = [cov.reward]
    if method.surface_weight is not None:
        rewards.append(SurfaceReward(cov.reward, method.surface_weight, ctx.cfg.budget))
    rows = {"prompt": [policy.prompt(task, x) for x in ctx.pool], "input_id": [x.id for x in ctx.pool]}
    kwargs: dict[str, Any] = {}
    if method.kind == "mixture":
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's documented hook
        kwargs["rollout_func"] = sampler.rollout_func(ctx.seed)
    progress.update(bar, status="GRPO")
    if method.advantage is not None:
        labeler = ctx.labelers["classifier"] if method.clusters == "classifier" else None
        hook = GroupAdvantages(
            method.advantage, method.options, cov.reward, ctx.cfg.budget, labeler, {x.id: x for x in ctx.pool}
        )
        kwargs["advantages"] = hook
    make = advantage_trainer if method.advantage is not None else GRPOTrainer
    with grpo.quiet_trainer():
        trainer = make(
            model=policy.model,
            processing_class=policy.tokenizer,
            reward_funcs=rewards,
            callbacks=[cov.callback, evaluation, progress_callback(progress, bar)],
            train_dataset=Dataset.from_dict(rows),
            args=args,
            **kwargs,
        )
        trainer.remove_callback(PrinterCallback)
        # accelerate runs gc.collect() when training ends: 1-2 s over this process's millions of objects
        # (the libraries' and the bench's). Frozen, the objects alive now are skipped;
        # run_exploration_bench unfreezes.
        gc.freeze()
        trainer.train()
    m = cov.monitor
    comp = m.report().comparisons[0] if m is not None else None
    return {
        "train_auc": comp.policies[0].curves.auc if comp is not None else None,
        "train_valid_rate": m.last_scalars.get("seffi/valid_rate") if m is not None else None,
        "logprob_seconds": cov.reward.logprob_cost["seconds"],
    }

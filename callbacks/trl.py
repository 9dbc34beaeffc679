"""TRL GRPO: a coverage-recording reward function and a logging ``TrainerCallback``.

Each prompt's group of G = ``num_generations`` completions is one run with K = G (or G / K runs when
``budget`` K divides G). The default iid is the reference model's own sampling, drawn at the first
training batch. Each TRL checkpoint gets ``seffi_coverage.json`` (``resume_from_checkpoint``
continues); under accelerate rank 0 writes the report. Example: ``docs/custom-llm.md``.
"""

from __future__ import annotations

import inspect
import json
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import TrainerCallback

from seffi._cache import default_cache_dir, numerics_stack
from seffi._convert import plain
from seffi._io import drop_lines_after, write_atomic
from seffi._seeding import seed_of
from seffi.callbacks import trl_model
from seffi.callbacks.core import CoverageMonitor
from seffi.callbacks.interrupts import StopOnSignal
from seffi.coverage import IidBaseline, OracleBaseline
from seffi.episodes import EpisodeRejected, parse_generation
from seffi.errors import SeffiError
from seffi.group_scoring import Record, RewardMethod, diversity_rewards, reward_function, split_groups
from seffi.labelers import as_labeler
from seffi.report.run_folder import claim_run_folder, fresh_out_dir, refuse_links
from seffi.report.sinks import NullSink, closing_lines, default_sinks
from seffi.tasks.base import Task, TaskInput

__all__ = [
    "CHECKPOINT_FILE",
    "CoverageReward",
    "CoverageTrainerCallback",
    "GRPOCoverage",
    "checkpoint_state_path",
    "completion_text",
]

#: Keyword arguments TRL passes to every reward function (not dataset columns).
_TRL_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments")
#: The file seffi adds to each TRL checkpoint folder.
CHECKPOINT_FILE = "seffi_coverage.json"


def check_scaling(method: Any, args: Any) -> None:
    """Refuse a ``GRPOConfig`` that would normalise pass@k's advantage a second time."""
    if method is None or method.name != "passk":
        return
    scale_rewards = getattr(args, "scale_rewards", None)
    aggregation = getattr(args, "multi_objective_aggregation", None)
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)  # TRL's aliases
    if scale not in (None, "none"):
        raise SeffiError(
            f"reward='passk' returns the pass@k advantage itself: set GRPOConfig(scale_rewards='none') (this "
            f"config has scale_rewards={scale_rewards!r}, which divides it again by a standard deviation)"
        )
    if aggregation not in (None, "sum_then_normalize"):
        raise SeffiError(
            "reward='passk' returns the pass@k advantage itself: keep GRPOConfig(multi_objective_aggregation="
            f"'sum_then_normalize') (this config has {aggregation!r}, which normalises each reward per group)"
        )


def checkpoint_state_path(output_dir: str | Path, step: int) -> Path:
    """Where the seffi state of TRL's checkpoint at ``step`` lives (``<output_dir>/checkpoint-<step>/``)."""
    return Path(output_dir) / f"checkpoint-{int(step)}" / CHECKPOINT_FILE


def _jsonable(obj: Any) -> Any:
    converted = plain(obj)
    return str(obj) if converted is obj else converted


def completion_text(completion: Any) -> Any:
    """The text of one TRL completion: a string, or the last message's ``content`` (text parts joined)."""
    if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
        content = completion[-1].get("content")
        if isinstance(content, list):
            texts = [
                p.get("text") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            ]
            return "".join(texts) if texts else content
        return content
    return completion


STATE_FORMAT = "seffi.callbacks.groups/1"
REFERENCE_PROMPTS = 256  # default cap on the prompts of the reference iid


class CoverageReward:
    """A GRPO reward function: labels completions, records the gathered batch, returns rewards.

    Args:
        task: The seffi task (its ``validate_y_text`` labels completions unless ``labeler`` is given).
        inputs: The task inputs behind the prompt ids (without them the labeler gets the prompt).
        labeler: A Labeler, a ``{strategy: regex}`` rubric or ``fn(x, text) -> ids`` (+ ``strategies``).
        strategies: Declared strategy ids for a bare labeling callable.
        id_column: Dataset column holding each prompt's input id.
        reward: ``"valid"``, ``"matched"``, a method of `seffi.group_scoring.METHODS`
            (see `seffi.group_scoring.RewardMethod`) or ``callable(ValidationResult) -> float``.
        reward_options: The method's options, e.g. ``{"beta": 0.25}``, ``{"k": 4}``, ``{"c": 0.5}``.
        diversity_weight: ``w`` of the diversity reward (``reward_options={"weight": w}`` wins).
        logprob_fn: ``fn(prompts, completion_ids) -> log-probabilities`` for ``"unlikeliness"``
            (default: the trainer's current model).
        decode: ``decode(completion_ids) -> text`` instead of the library's decoded text.
        gather: ``gather(list) -> list`` of every rank's list in rank order (default: accelerate's).

    Attributes:
        sink: Receives each gathered batch of records ``[(input_id, matches, valid), ...]``.
        last_results: Validation results of the latest local batch (``last_logprobs``: their scores).
        logprob_cost: ``batches``, ``rows`` and ``seconds`` spent computing log-probabilities.
    """

    def __init__(
        self,
        task: Task | None = None,
        inputs: Iterable[TaskInput] | None = None,
        *,
        labeler: Any = None,
        strategies: Iterable[str] | None = None,
        id_column: str = "input_id",
        reward: Any = "valid",
        reward_options: Mapping[str, Any] | None = None,
        diversity_weight: float = 0.5,
        decode: Callable[[Sequence[int]], str] | None = None,
        gather: Callable[[list[Any]], list[Any]] | None = None,
        logprob_fn: Callable[[Sequence[Any], Any], Sequence[float]] | None = None,
    ) -> None:
        if labeler is None and task is None:
            raise ValueError("CoverageReward needs a task or a labeler")
        if not isinstance(id_column, str) or not id_column:
            raise ValueError(f"id_column must be a non-empty column name, got {id_column!r}")
        self.labeler = as_labeler(labeler if labeler is not None else task, strategies)
        self.task, self.id_column, self.decode, self.mode = task, id_column, decode, reward
        self.inputs: dict[str, TaskInput] = {x.id: x for x in (inputs or ())}
        self._reward = reward_function(reward)
        diversity_rewards([], diversity_weight)  # refuses a bad weight now, not mid-training
        self.weight = diversity_weight
        self.method: RewardMethod | None = None
        if self._reward is not None and reward_options:
            raise SeffiError(f"reward {reward!r} takes no reward_options, got {dict(reward_options)}")
        if self._reward is None:
            if reward == "diversity" and (reward_options is None or isinstance(reward_options, Mapping)):
                reward_options = {"weight": diversity_weight, **(reward_options or {})}
            self.method = RewardMethod(reward, reward_options)
        self.logprob_fn = logprob_fn
        self.group_size: int | None = None  # the trainer's num_generations
        self._gather = gather or trl_model.default_gather
        self.sink: Callable[[list[Record]], None] | None = None
        self.last_results: list[Any] = []
        self.last_logprobs: list[float] | None = None
        self.logprob_cost = {"batches": 0, "rows": 0, "seconds": 0.0}
        self.trainer: Any = None
        self.on_trainer: Any = None
        self.__name__ = "seffi_coverage"  # TRL names reward columns after it: rewards/seffi_coverage/mean

    def score(
        self,
        ids: Sequence[Any],
        prompts: Sequence[Any],
        texts: Sequence[Any],
        training: bool,
        *,
        completion_ids: Any = None,
        policy_logprobs: Callable[[], Sequence[float]] | None = None,
    ) -> list[float]:
        """Label one local batch, record the gathered batch (when training), return local rewards."""
        if not len(ids) == len(prompts) == len(texts):
            raise SeffiError(
                f"{len(ids)} ids, {len(prompts)} prompts, {len(texts)} texts: one each per completion"
            )
        get = self.inputs.get
        xs = [get(str(i), p) for i, p in zip(ids, prompts, strict=True)] if self.inputs else prompts
        # The previous batch's results die before this batch allocates: kept alive through its
        # labeling they would be promoted to the oldest GC generation and bring full collections.
        self.last_results = []
        results = self.last_results = list(map(self.labeler, xs, texts))
        if not training and self._reward is not None:
            return list(map(float, map(self._reward, results)))
        lps = None
        if self.method is not None and self.method.needs_logprobs:
            lps = self.last_logprobs = self._logprobs(prompts, completion_ids, policy_logprobs)
        rank = trl_model.rank_and_world()[0]
        records = [
            (str(i), tuple(sorted(r.strategy_matches)), bool(r.valid))
            for i, r in zip(ids, results, strict=True)
        ]
        # A collective (every rank calls it); log-probabilities travel with their records.
        if lps is None:
            tagged = self._gather([(rank, rec) for rec in records])
        else:
            tagged = self._gather([(rank, rec, lp) for rec, lp in zip(records, lps, strict=True)])
        gathered = [t[1] for t in tagged]
        if training and self.sink is not None:
            self.sink(gathered)
        if self.method is None:
            return list(map(float, map(self._reward, results)))  # type: ignore[arg-type]
        gathered_lps = [t[2] for t in tagged] if lps is not None else None
        scores = self.method.score(gathered, self.group_size, gathered_lps, training)
        return [s for t, s in zip(tagged, scores, strict=True) if t[0] == rank]

    def _logprobs(
        self, prompts: Sequence[Any], completion_ids: Any, policy: Callable[[], Sequence[float]] | None
    ) -> list[float]:
        fn = (lambda: self.logprob_fn(prompts, completion_ids)) if self.logprob_fn is not None else policy
        if fn is None:
            raise SeffiError(
                "reward 'unlikeliness' needs the policy's log-probabilities: call it from TRL's GRPOTrainer "
                "(its model scores the batch) or pass logprob_fn=fn(prompts, completion_ids)"
            )
        started = time.perf_counter()
        values = np.asarray(fn(), dtype=np.float64).reshape(-1)
        cost, n = self.logprob_cost, len(prompts)
        cost["seconds"] += time.perf_counter() - started
        cost["batches"], cost["rows"] = cost["batches"] + 1, cost["rows"] + n
        if len(values) != n:
            raise SeffiError(f"the log-probability function gave {len(values)} values for {n} completions")
        if np.isnan(values).any():
            raise SeffiError(f"the log-probability function returned NaN: {values.tolist()}")
        return values.tolist()

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float]:
        """Score one (local) batch, record the gathered batch, and return one reward per completion."""
        ids = kwargs.get(self.id_column)
        if ids is None:
            cols = sorted(k for k in kwargs if k not in _TRL_KWARGS)
            raise SeffiError(
                f"the reward function needs the prompt-id column {self.id_column!r} in the dataset (TRL "
                f"passed columns {cols}); add it, or set id_column=... (and keep remove_unused_columns=False)"
            )
        if len(ids) != len(completions):
            raise SeffiError(f"{len(completions)} completions but {len(ids)} values of {self.id_column!r}")
        # TRL passes ``log_metric``, a bound method of the trainer: the one handle on it we get.
        trainer = getattr(kwargs.get("log_metric"), "__self__", None)
        if trainer is not None and trainer is not self.trainer:
            check_scaling(self.method, getattr(trainer, "args", None))
            self.trainer = trainer
            if self.on_trainer is not None:
                self.on_trainer(trainer)
        if self.decode is not None and completion_ids is not None:
            texts = [self.decode(c) for c in completion_ids]
        else:
            texts = list(map(completion_text, completions))
        training = bool(getattr(getattr(self.trainer, "model", None), "training", True))
        policy = None
        if self.trainer is not None and self.method is not None and self.method.needs_logprobs:
            reduction = self.method.reduction
            policy = lambda: trl_model.policy_logprobs(self.trainer, prompts, completion_ids, reduction)  # noqa: E731
        return self.score(
            ids, prompts, texts, training, completion_ids=completion_ids, policy_logprobs=policy
        )


SCORER_OPTIONS = tuple(
    p.name for p in inspect.signature(CoverageReward).parameters.values() if p.kind == p.KEYWORD_ONLY
)


class GRPOCoverage:
    """Coverage of GRPO's completion groups: a reward function (``reward``) plus a ``callback``.

    A group of G completions (GRPO's ``num_generations``) is G / K runs of K = ``budget`` consecutive
    completions: K must divide G. A group reward always scores the whole group of G.

    Args:
        task: The seffi task (see `CoverageReward`).
        inputs: The task inputs behind the prompt ids (see `CoverageReward`).
        budget: K (default: the group size, e.g. GRPO's ``num_generations``).
        iid: ``"reference"`` (the policy's own samples before training: `draw_reference_iid`; until
            drawn, the task's sampler), ``"task"`` (the task's base sampler), a baseline object
            (``.curves(K)``, e.g. ``IidBaseline.from_samples``) or None.
        iid_samples: Reference samples per prompt (default 4 K: the baseline interpolates at k <= K).
        iid_prompts: ``{input id: prompt}`` for the reference samples (default: the train dataset's).
        reference_prompts: At most this many prompts get reference samples (drawn from ``seed``;
            None: every prompt); with ``iid="reference"`` only their groups are recorded.
        reference_cache: Folder of the on-disk cache of reference completions (True: ``$SEFFI_CACHE``
            or ``~/.cache/seffi/models``, subfolder ``reference-iid``; False/None: no cache).
        reuse_first_batch: Count the first training batch's completions as reference samples.
        oracle: A user oracle (default: the task's reference traces).
        out_dir: Local report folder (one holding a run gets a fresh sibling, with one warning).
        n_boot: Bootstrap replicates for logged CIs.
        seed: Seed of the bootstrap, the prompt subsample and the reference samples.
        plots: PNG plots at the end.
        **scoring: The keyword-only settings of `CoverageReward` (``labeler``, ``reward``, ...).

    Attributes:
        reward: The reward function for ``reward_funcs``; ``callback``: the ``TrainerCallback``.
        monitor: The [`CoverageMonitor`][seffi.callbacks.CoverageMonitor] (after the first batch).
        reference: The reference samples ``{"ids", "n", "sets", "valid"}`` once drawn (or restored).
        reference_cost: ``prompts`` (of ``of_prompts``), ``samples_per_prompt``, ``samples`` =
            ``drawn`` + ``reused`` + ``cached``, ``generate_calls``, ``seconds``, ``seed``, ``cache``.
        monitored: The prompt ids the monitor records (None: every prompt).
    """

    def __init__(
        self,
        task: Task | None = None,
        inputs: Iterable[TaskInput] | None = None,
        *,
        budget: int | None = None,
        iid: Any = "reference",
        iid_samples: int | None = None,
        iid_prompts: Mapping[str, Any] | None = None,
        reference_prompts: int | None = REFERENCE_PROMPTS,
        reference_cache: str | Path | bool | None = True,
        reuse_first_batch: bool = True,
        oracle: Any = None,
        out_dir: str | Path | None = None,
        n_boot: int = 200,
        seed: int = 0,
        plots: bool = True,
        **scoring: Any,
    ) -> None:
        for name, value in (("budget", budget), ("reference_prompts", reference_prompts)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise SeffiError(f"{name} must be a positive int or None, got {value!r}")
        if not (iid in ("reference", "task", None) or hasattr(iid, "curves")):
            raise SeffiError(
                f"iid must be 'reference', 'task', None or a baseline with .curves(K), got {iid!r}"
            )
        if unknown := sorted(set(scoring) - set(SCORER_OPTIONS)):
            raise SeffiError(
                f"{type(self).__name__} got unknown argument(s) {', '.join(unknown)}; besides its own it "
                f"takes the reward's: {', '.join(SCORER_OPTIONS)}"
            )
        self.reward = CoverageReward(task, inputs, **scoring)
        self.reward.sink, self.reward.on_trainer = self._ingest, self._place_callback
        self.callback = CoverageTrainerCallback(self)
        self.budget, self.iid, self.iid_samples, self.iid_prompts = budget, iid, iid_samples, iid_prompts
        self.reference_prompts, self.reuse_first_batch = reference_prompts, bool(reuse_first_batch)
        self.reference_cache = reference_cache
        self.oracle, self.out_dir, self.n_boot, self.seed, self.plots = oracle, out_dir, n_boot, seed, plots
        own_parser = scoring.get("labeler") is None or getattr(self.reward.labeler, "task", None) is task
        self.facts = TaskFacts(task, self.reward.inputs) if task is not None and own_parser else None
        self.monitor: Any = None
        self._occurrences: dict[str, int] = {}
        self.group_sizes: dict[int, int] = {}
        self.reference: dict[str, Any] | None = None
        self.reference_cost: dict[str, Any] | None = None
        self.monitored: frozenset[str] | None = None
        self._pending: tuple[Any, ...] | None = None  # a reference draw waiting for the first batch
        self._resumed = False

    def _place_callback(self, trainer: Any) -> None:
        # Callbacks that add to ``logs`` (ours, and any flagged ``adds_to_logs`` such as
        # seffi.models.passk.PassAtKEval) must run before the reporting integrations (W&B, ...) read it.
        cbs = getattr(getattr(trainer, "callback_handler", None), "callbacks", None)
        if not isinstance(cbs, list) or self.callback not in cbs:
            return
        ours = [cb for cb in cbs if cb is self.callback or getattr(cb, "adds_to_logs", False)]
        rest = [cb for cb in cbs if cb not in ours]
        first = next(
            (i for i, cb in enumerate(rest) if type(cb).__name__ != "DefaultFlowCallback"), len(rest)
        )
        cbs[:] = rest[:first] + ours + rest[first:]

    def configure_groups(self, group_size: int | None) -> None:
        """Set G (the trainer's completions per prompt); K defaults to it and must divide it."""
        if group_size is None:
            return
        g = int(group_size)
        if self.budget is None:
            self.budget = g
        if self.budget > g or g % self.budget:
            divisors = [d for d in range(1, g + 1) if g % d == 0]
            raise SeffiError(
                f"budget={self.budget} does not fit num_generations={g}: each group of {g} completions of "
                f"one prompt is recorded as {g}/K runs of K consecutive completions, so K must divide {g} "
                f"(one of {divisors}); leave budget unset for K = num_generations"
            )
        method = self.reward.method
        if method is not None and method.name == "passk" and method.k > g:  # type: ignore[operator]
            raise SeffiError(
                f"reward 'passk' has k={method.k} but each group holds num_generations={g} "
                f"completions: choose 1 <= k <= {g}"
            )
        self.reward.group_size = g

    def _ingest(self, records: list[Record]) -> None:
        """Feed one gathered generation batch: each group of G completions is G / K runs of K."""
        if self._pending is not None:  # the first batch: the model is still the reference
            self.draw_reference_iid(first_batch=records)
        groups = split_groups(records, self.reward.group_size or self.budget)
        if not groups:
            return
        for g in groups:
            self.group_sizes[len(g)] = self.group_sizes.get(len(g), 0) + 1
        self.budget = self.budget or max(len(g) for g in groups)
        monitor = self._ensure_monitor(self.budget)
        kept, ks, runs = [], [], []  # every completion of the step, recorded in one batch
        for g in groups:
            pid = records[g[0]][0]
            if self.monitored is not None and pid not in self.monitored:
                continue
            for start in range(g[0], g[-1] + 1, self.budget):
                run = self._occurrences[pid] = self._occurrences.get(pid, -1) + 1
                part = records[start : min(start + self.budget, g[-1] + 1)]
                kept += part
                ks += range(1, len(part) + 1)
                runs += [run] * len(part)
        if kept:
            ids, matches, valid = zip(*kept, strict=True)
            try:
                batch = parse_generation(ids, matches, monitor.coder, valid, sample_index=ks, run_index=runs)
            except EpisodeRejected as exc:  # the good completions are recorded first
                raise exc.recorded_as(monitor.update(exc.batch)) from None
            monitor.update(batch)

    def _ensure_monitor(self, budget: int) -> Any:
        if self.monitor is None:
            main = trl_model.rank_and_world()[0] == 0
            if main and not self._resumed:  # decided once: a folder holding an earlier run gets a sibling
                self.out_dir = fresh_out_dir(self.out_dir, "seffi-grpo")
            self.monitor = CoverageMonitor(
                budget,
                strategies=self.reward.labeler.strategies,
                env=self.facts,
                iid=None if isinstance(self.iid, str) else self.iid,  # "task": the facts' exact law
                oracle=self.oracle,
                # W&B goes through the trainer's own logging; locally a folder (main process only).
                sinks=default_sinks(Path(self.out_dir), wandb="disabled", plots=self.plots)
                if main
                else NullSink(),
                out_dir=Path(self.out_dir) if main else None,
                n_boot=self.n_boot,
                seed=self.seed,
                task_name=getattr(self.reward.task, "name", None) or "labeled",
                env_name="trl-grpo",
            )
        return self.monitor

    def _reference_context(self, model: Any, tokenizer: Any, args: Any, dataset: Any) -> tuple[Any, ...]:
        r = self.reward
        prompts = trl_model.resolve_prompts(self.iid_prompts, dataset, r.id_column, r.task, r.inputs)
        ids = trl_model.subsample_ids(list(prompts), self.reference_prompts, seed_of(self.seed, 3))
        return model, tokenizer, args, {i: prompts[i] for i in ids}, len(prompts)

    def prepare_reference(self, model: Any, tokenizer: Any, args: Any, dataset: Any = None) -> None:
        """Resolve the reference prompts now (errors before training); draw at the first batch (or now)."""
        self._pending = self._reference_context(model, tokenizer, args, dataset)
        if not self.reuse_first_batch:
            self.draw_reference_iid()

    def draw_reference_iid(
        self,
        model: Any = None,
        tokenizer: Any = None,
        args: Any = None,
        dataset: Any = None,
        *,
        first_batch: Sequence[Record] | None = None,
        trainer: Any = None,
    ) -> Any:
        """Sample the reference model (``iid_samples`` per prompt, GRPO's generation) into the iid.

        Each prompt's samples are its ``first_batch`` completions (when ``reuse_first_batch``), then
        cached ones, then fresh ones; the task oracle (unless given) covers the same prompts. Without
        ``model`` it draws what `prepare_reference` prepared.
        """
        if model is not None:
            self._pending = self._reference_context(model, tokenizer, args, dataset)
        ctx, self._pending = self._pending, None
        if ctx is None:
            raise SeffiError("draw_reference_iid needs the model, tokenizer and trainer args")
        started = time.perf_counter()
        r, trainer = self.reward, trainer or self.reward.trainer
        model, tokenizer, args, prompts, total = ctx
        ids = list(prompts)
        n = self.iid_samples or 4 * int(self.budget or getattr(args, "num_generations", 8))
        reused: dict[str, list[tuple[tuple[str, ...], bool]]] = {i: [] for i in ids}
        for pid, matches, ok in first_batch if self.reuse_first_batch and first_batch else ():
            if pid in reused and len(reused[pid]) < n:
                reused[pid].append((matches, ok))
        prompt_ids = trl_model.trainer_prompt_ids(tokenizer, [prompts[i] for i in ids], trainer, args)
        gen = trl_model.generation_config(args, model, tokenizer)
        keys = [trl_model.digest(p) for p in prompt_ids]
        cache = self._cache(model, gen)
        cached = [cache.get(k, n - len(reused[i])) if cache else [] for i, k in zip(ids, keys, strict=True)]
        need = [n - len(reused[i]) - len(c) for i, c in zip(ids, cached, strict=True)]
        # The seed depends on what is drawn: a draw topping up cached samples never repeats them.
        salt = int(trl_model.digest([[k, n - m, m] for k, m in zip(keys, need, strict=True)])[:7], 16)
        draw_seed = seed_of(self.seed, 1, salt)
        fresh, calls = trl_model.generate_ids(
            model,
            prompt_ids,
            need,
            gen,
            seed=draw_seed,
            training=True,
            checkpointing_kwargs=getattr(args, "gradient_checkpointing_kwargs", None),
        )
        main = trl_model.rank_and_world()[0] == 0
        if cache is not None and any(need):
            for k, rows in zip(keys, fresh, strict=True):
                cache.put(k, rows)
            if main:
                cache.save()
        sets: dict[str, list[list[str]]] = {}
        valid: dict[str, list[bool]] = {}
        for i, old, new in zip(ids, cached, fresh, strict=True):
            x = r.inputs.get(i, prompts[i])
            labels = [r.labeler(x, trl_model.decode_completion(tokenizer, c, r.decode)) for c in old + new]
            sets[i] = [list(m) for m, _ in reused[i]] + [sorted(v.strategy_matches) for v in labels]
            valid[i] = [v for _, v in reused[i]] + [bool(v.valid) for v in labels]
        self.reference = {"ids": ids, "n": n, "sets": sets, "valid": valid}
        self._set_reference_baselines()
        self.reference_cost = {
            "prompts": len(ids),
            "of_prompts": total,
            "samples_per_prompt": n,
            "samples": n * len(ids),
            "drawn": sum(need),
            "reused": sum(map(len, reused.values())),
            "cached": sum(map(len, cached)),
            "generate_calls": calls,
            "seconds": time.perf_counter() - started,
            "seed": draw_seed,
            "cache": str(cache.path) if cache else None,
        }
        if main:
            print(_cost_line(self.reference_cost), flush=True)
        return self.iid

    def _cache(self, model: Any, gen: Any) -> trl_model.ReferenceCache | None:
        if self.reference_cache in (None, False):
            return None
        ref = self.reference_cache
        folder = default_cache_dir() / "reference-iid" if ref is True else Path(ref)
        # The same weights sample other tokens on another library stack: its samples are its own.
        key = {
            "format": trl_model.ReferenceCache.FORMAT,
            "weights": trl_model.weights_digest(model),
            "generation": gen.to_dict(),
            "seed": self.seed,
            "mode": "train",
            "stack": numerics_stack(),
        }
        return trl_model.ReferenceCache(folder, trl_model.digest(key))

    def _set_reference_baselines(self) -> None:
        ref = self.reference
        assert ref is not None
        self.iid = IidBaseline.from_samples(
            {i: [frozenset(m) for m in ref["sets"][i]] for i in ref["ids"]},
            strategies=self.reward.labeler.strategies,
            valid={i: list(ref["valid"][i]) for i in ref["ids"]},
        )
        self.monitored = frozenset(ref["ids"])
        if self.oracle is None and self.facts is not None:
            refs = {i: self.facts.reference_match_sets(i) for i in ref["ids"] if i in self.reward.inputs}
            self.oracle = OracleBaseline(refs, strategies=self.facts.strategies, seed=seed_of(self.seed, 2))

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs (JSON-safe): reference samples, monitor state, outcome counts."""
        m = self.monitor
        return {
            "format": STATE_FORMAT,
            "out_dir": str(self.out_dir) if self.out_dir is not None else None,
            "budget": self.budget,
            "group_size": self.reward.group_size,
            "reference": self.reference,
            "reference_cost": self.reference_cost,
            "monitored": sorted(self.monitored) if self.monitored is not None else None,
            "monitor": m.state_dict() if m is not None else None,
            "schedule": {"n_logs": m.schedule.n_logs, "last_step": m.schedule.last_step} if m else None,
            "last_scalars": dict(m.last_scalars) if m is not None else {},
            "occurrences": dict(self._occurrences),
            "group_sizes": {str(k): v for k, v in self.group_sizes.items()},
            "outcome_counts": self.reward.method.state() if self.reward.method is not None else None,
        }

    def load_state_dict(self, state: Mapping[str, Any], step: int | None = None) -> GRPOCoverage:
        """Continue from `state_dict` (same reference samples, monitor and folder), logs cut after ``step``.

        Raises:
            SeffiError: Not such a state, another K, another folder than ``out_dir``, or another live
                process writes into the folder.
        """
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise SeffiError(f"not a GRPOCoverage state (expected format {STATE_FORMAT!r})")
        if self.budget is not None and state.get("budget") not in (None, self.budget):
            raise SeffiError(
                f"the checkpoint's budget K={state['budget']} differs from this run's K={self.budget}"
            )
        recorded = state.get("out_dir")
        if self.out_dir is not None and recorded is not None and not _same_folder(self.out_dir, recorded):
            raise SeffiError(
                f"the checkpoint's seffi state belongs to the run writing to {recorded}, not to this run's "
                f"out_dir={str(self.out_dir)!r}: resume from this run's own checkpoint, or pass "
                f"out_dir={recorded!r} to continue that run"
            )
        chosen = self.out_dir if self.out_dir is not None else recorded
        folder = Path(chosen) if chosen is not None else None
        if trl_model.rank_and_world()[0] == 0 and folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise SeffiError(f"cannot write to {folder}: {exc.strerror or exc}") from None
            claim_run_folder(folder)  # also removes the temporary files of a killed run's writes
            refuse_links(folder)
            if step is not None:
                for name, key in (("metrics.jsonl", "seffi/step"), ("snapshots.jsonl", "step")):
                    drop_lines_after(folder / name, key, step)
        self.budget = self.budget or state.get("budget")
        self._pending, self._resumed = None, True
        self.out_dir = folder
        self.reference, self.reference_cost = state.get("reference"), state.get("reference_cost")
        if self.reference is not None and self.iid == "reference":
            self._set_reference_baselines()
        if state.get("monitored") is not None:
            self.monitored = frozenset(state["monitored"])
        self._occurrences = {str(k): int(v) for k, v in state.get("occurrences", {}).items()}
        self.group_sizes = {int(k): int(v) for k, v in state.get("group_sizes", {}).items()}
        if self.reward.method is not None:  # outcome_ucb's history continues where it stopped
            self.reward.method.load_state(state.get("outcome_counts"))
        if state.get("monitor") is not None and self.budget is not None:
            monitor = self._ensure_monitor(self.budget)
            monitor.load_state_dict(state["monitor"])
            logged = state.get("schedule") or {}
            n_logs, last_step = int(logged.get("n_logs") or 0), logged.get("last_step")
            monitor.schedule.resume(n_logs, last_step, monitor.episodes)
            monitor.last_scalars = {str(k): float(v) for k, v in (state.get("last_scalars") or {}).items()}
        return self

    def metrics(self) -> dict[str, float]:
        """A copy of the latest logged ``seffi/*`` scalars (``{}`` before the first log)."""
        return self.monitor.metrics() if self.monitor is not None else {}

    def curves(self) -> Any:
        """The policy's current [`Curves`][seffi.coverage.Curves] (k = 1..K; none before a completion)."""
        return self._recorded().curves()

    def to_dataframe(self) -> Any:
        """Policy, iid and oracle curves as a long pandas DataFrame (none before a completion)."""
        return self._recorded().to_dataframe()

    def _recorded(self) -> CoverageMonitor:
        if self.monitor is None:
            raise SeffiError("no completion recorded yet: the curves exist after the first training batch")
        return self.monitor


class CoverageTrainerCallback(TrainerCallback):
    """``GRPOCoverage.callback``: reference iid, ``seffi/*`` in TRL's logs (``last_logged``), checkpoints."""

    def __init__(self, coverage: GRPOCoverage) -> None:
        self.coverage = coverage
        self.last_logged: dict[str, float] = {}
        self._logged_episodes = -1
        self._stop = StopOnSignal()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Ask the trainer to stop after a Ctrl-C or SIGTERM (the report is written at train end)."""
        if self._stop.requested:
            control.should_training_stop = True

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Check K against ``num_generations``; restore a resumed run, else prepare the reference draw."""
        cov = self.coverage
        check_scaling(cov.reward.method, args)
        cov.configure_groups(getattr(args, "num_generations", None))
        if state.is_world_process_zero:  # Ctrl-C / SIGTERM: stop at the next step, write, then stop
            self._stop.install(loop=("_inner_training_loop", "train"))
        step = int(getattr(state, "global_step", 0) or 0)
        if step > 0:
            self._resume(args, step)
            return
        tokenizer = kwargs.get("processing_class") or kwargs.get("tokenizer")
        if cov.iid == "reference" and model is not None and tokenizer is not None:
            loader = kwargs.get("train_dataloader")
            cov.prepare_reference(model, tokenizer, args, getattr(loader, "dataset", None))

    def _resume(self, args: Any, step: int) -> None:
        cov = self.coverage
        path = checkpoint_state_path(args.output_dir, step)
        if path.is_file():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise SeffiError(f"cannot read the seffi state {path}: {exc}") from exc
            saved_by = state.get("output_dir") if isinstance(state, Mapping) else None
            if cov.out_dir is None and saved_by is not None and not _same_folder(saved_by, args.output_dir):
                # A checkpoint copied in from another training names that training's report folder.
                raise SeffiError(
                    f"{path} was saved by the training in {saved_by}, not by this one in {args.output_dir}: "
                    f"pass out_dir=... to choose where this run's coverage report goes"
                )
            cov.load_state_dict(state, step)
            return
        fallback = "the task's base sampler" if cov.facts is not None else "none (no gain is computed)"
        warnings.warn(
            f"resumed at step {step}, but {path} holds no seffi state: the reference iid is not drawn from "
            f"the trained weights, the iid baseline is {fallback}, and coverage restarts from this step",
            RuntimeWarning,
            stacklevel=2,
        )
        if cov.iid == "reference":
            cov.iid = None

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write the seffi state into the new checkpoint (main process)."""
        if not state.is_world_process_zero:
            return
        path = checkpoint_state_path(args.output_dir, int(state.global_step))
        if not path.parent.is_dir():
            return  # a custom save location: nothing to put it next to
        state = {**self.coverage.state_dict(), "output_dir": str(args.output_dir)}
        write_atomic(path, json.dumps(state, default=_jsonable))

    def metrics(self) -> dict[str, float]:
        """As `GRPOCoverage.metrics`."""
        return self.coverage.metrics()

    def curves(self) -> Any:
        """As `GRPOCoverage.curves`."""
        return self.coverage.curves()

    def to_dataframe(self) -> Any:
        """As `GRPOCoverage.to_dataframe`."""
        return self.coverage.to_dataframe()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        """Put the ``seffi/*`` scalars into ``logs`` — on every rank, so all ranks log the same keys."""
        monitor = self.coverage.monitor
        step = int(state.global_step)
        if logs is None or monitor is None or (monitor.last_step is not None and step <= monitor.last_step):
            return  # e.g. the end-of-training summary log at the same step
        scalars = {k: float(v) for k, v in (monitor.log(step) or {}).items() if v is not None}
        logs.update(scalars)
        self._logged_episodes = monitor.episodes
        if scalars and state.log_history and state.log_history[-1].get("step") == step:
            state.log_history[-1].update(scalars)
        self.last_logged = scalars

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write the report and print its folder (main process)."""
        try:
            self._finish(state)
        finally:
            self._stop.reraise()  # KeyboardInterrupt after a Ctrl-C; nothing otherwise

    def _finish(self, state: Any) -> None:
        monitor = self.coverage.monitor
        if monitor is None or not state.is_world_process_zero or monitor.finalized:
            return
        step: int | None = int(state.global_step)
        if monitor.last_step is not None and step is not None and step <= monitor.last_step:
            # a last log only for completions recorded after the latest one (at a step of its own)
            step = monitor.last_step + 1 if monitor.episodes != self._logged_episodes else None
        monitor.finalize(step, interrupted=self._stop.requested)
        # W&B is TRL's own run (its integration prints the sync footer); seffi names its local folder.
        for line in closing_lines(
            monitor.out_dir, prefix="[seffi] ", unwritten=monitor.write_error is not None
        ):
            print(line, flush=True)


def _cost_line(cost: Mapping[str, Any]) -> str:
    line = (
        f"[seffi] reference iid: {cost['prompts']} prompts x {cost['samples_per_prompt']} samples = "
        f"{cost['samples']} ({cost['drawn']} drawn in {cost['generate_calls']} generate calls, "
        f"{cost['reused']} reused from the first training batch, {cost['cached']} from the cache) "
        f"in {cost['seconds']:.1f} s"
    )
    if cost["prompts"] < cost["of_prompts"]:
        line += (
            f"; prompts capped at {cost['prompts']} of {cost['of_prompts']} (reference_prompts): coverage "
            "and gain are over these"
        )
    return line


def _same_folder(a: str | Path, b: str | Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


class TaskFacts:
    """The env facts a monitor's baselines read, answered from a task and its inputs."""

    def __init__(self, task: Task[Any, Any], inputs: Mapping[str, TaskInput]) -> None:
        self.task, self._inputs = task, inputs
        self.strategies, self.input_ids = tuple(task.strategies()), list(inputs)

    def base_match_distribution(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        return self.task.base_match_distribution(self._inputs[input_id], valid_only=valid_only)

    def reference_match_sets(self, input_id: str) -> dict[str, frozenset[str]]:
        return self.task.reference_match_sets(self._inputs[input_id])

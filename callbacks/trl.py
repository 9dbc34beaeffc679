"""TRL GRPO integration: a coverage-recording reward function and a logging ``TrainerCallback``.

GRPO samples ``num_generations`` completions per prompt: exactly a per-input sample budget. seffi
turns each prompt's group into one *run* of that prompt (its sample sequence at the current policy),
so coverage C(k), novelty and gain vs iid describe how well the group explores the strategy space —
and how that changes while GRPO trains.

Usage (5 lines on top of a normal GRPO script; the dataset has a prompt-id column)::

    from seffi.callbacks.trl import GRPOCoverage

    cov = GRPOCoverage(task, inputs, id_column="input_id", out_dir="runs/grpo")
    trainer = GRPOTrainer(model=model, args=GRPOConfig(num_generations=8, ...), train_dataset=ds,
                          reward_funcs=[cov.reward], callbacks=[cov.callback], processing_class=tok)
    trainer.train()          # seffi/* keys land in TRL's logs (so in its W&B run) + runs/grpo/report.*

**Labeling.** Each completion is attributed by ``task.validate_y_text`` — or, where strategies cannot
be parsed from text, by a labeler (:mod:`seffi.callbacks.labelers`: a regex rubric or any callable
returning strategy ids). Non-string, empty and non-UTF-8 completions are junk: reward 0, no match.

**Groups straddle processes.** Under multi-process training (accelerate/DeepSpeed) TRL splits each
generation batch across ranks, so one prompt's ``num_generations`` completions may be scored on
several processes. The reward function therefore *gathers* the records of the whole batch from all
ranks (``accelerate.utils.gather_object``, a collective every rank reaches at the same point, since
TRL calls reward functions on every rank) before feeding the tracker; every rank then holds the same
tracker, built from the batch in global order (rank 0's completions first). Without the gather a
rank would see a fragment of a group and count a budget-8 run as two runs of 4.

**Logging.** The callback puts the seffi scalars (``seffi/coverage/k=<k>``, ``seffi/auc``,
``seffi/gain_vs_iid``, novelty, ...) into TRL's ``logs`` dict on every logging step, ahead of the
reporting integrations, so they reach the same W&B run as ``loss`` and ``reward`` (W&B shows them as
``train/seffi/...``, TRL's prefix). The local report (metrics.jsonl, report.json/md, plots) is always
written to ``out_dir``. Evaluation generations are not recorded (they are not the training process).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from seffi.callbacks.labelers import Labeler, as_labeler
from seffi.errors import SeffiError
from seffi.tasks.base import Task, TaskInput, ValidationResult

__all__ = [
    "CoverageReward",
    "CoverageTrainerCallback",
    "GRPOCoverage",
    "completion_text",
    "tiny_causal_lm",
]

RewardSpec = str | Callable[[ValidationResult], float]


def completion_text(completion: Any) -> Any:
    """The text of one TRL completion.

    Standard completions are strings; conversational ones are a list of messages whose last
    ``content`` is the generated text (a string or a list of ``{"type": "text", "text": ...}`` parts).
    Anything else is returned unchanged and the labeler rejects it as junk.
    """
    if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
        content = completion[-1].get("content")
        if isinstance(content, list):
            parts = [
                p.get("text") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            ]
            return "".join(parts) if parts else content
        return content
    return completion


def _reward_fn(spec: RewardSpec) -> Callable[[ValidationResult], float]:
    if spec == "valid":
        return lambda r: 1.0 if r.valid else 0.0
    if spec == "matched":  # reward following any strategy, correct or not (a shaping option)
        return lambda r: 1.0 if r.strategy_matches else 0.0
    if callable(spec):
        return spec
    raise ValueError(
        f"reward must be 'valid', 'matched' or a callable(ValidationResult) -> float, got {spec!r}"
    )


def _rank_and_world() -> tuple[int, int]:
    """(rank, world size) of an initialised ``torch.distributed`` group, else (0, 1).

    Read-only on purpose: calling ``accelerate``'s ``PartialState()`` here would *create* its
    process-global singleton as a side effect (outside a trainer, with default settings), which then
    leaks into whatever builds an ``Accelerator`` later in the process (a trainer, another test).
    Under a multi-process launch the trainer initialises ``torch.distributed`` before any reward
    function runs, so this sees the real rank and world size.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _default_gather(records: list[Any]) -> list[Any]:
    """All ranks' records in rank order (identity on one process)."""
    if _rank_and_world()[1] <= 1:
        return records
    from accelerate.utils import gather_object  # the group exists: accelerate's state is the trainer's

    return list(gather_object(records))


Record = tuple[str, tuple[str, ...], bool]


class CoverageReward:
    """A GRPO reward function that validates completions and records their match sets.

    Args:
        task: The seffi task (its ``validate_y_text`` labels completions unless ``labeler`` is given).
            May be None when a ``labeler`` is given.
        inputs: The task inputs the dataset's prompts were made from (the labeler gets the input
            whose id is in the ``id_column``); without them the labeler receives the prompt.
        labeler: A :class:`~seffi.callbacks.labelers.Labeler`, a ``{strategy: regex}`` rubric, or a
            callable ``fn(x, text) -> strategy ids`` (then ``strategies`` is required).
        strategies: Declared strategy ids for a bare labeling callable.
        id_column: Dataset column holding each prompt's input id.
        reward: "valid" (1 for a correct completion, else 0 — the env's default reward), "matched"
            (1 for following any strategy) or ``callable(ValidationResult) -> float``.
        gather: ``gather(list) -> list`` concatenating every rank's list in rank order; the default
            uses ``accelerate.utils.gather_object`` when more than one process runs.

    Attributes:
        sink: Callable receiving each gathered batch of records ``[(input_id, matches, valid), ...]``
            (set by :class:`GRPOCoverage`; None records nothing).
        last_results: The validation results of the latest local call (for inspection).
    """

    def __init__(
        self,
        task: Task | None = None,
        inputs: Iterable[TaskInput] | None = None,
        *,
        labeler: Labeler | Mapping[str, str] | Callable[..., Any] | None = None,
        strategies: Iterable[str] | None = None,
        id_column: str = "input_id",
        reward: RewardSpec = "valid",
        gather: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        if labeler is None and task is None:
            raise ValueError("CoverageReward needs a task or a labeler")
        self.labeler: Labeler = as_labeler(labeler if labeler is not None else task, strategies)
        self.task = task
        self.inputs: dict[str, TaskInput] = {x.id: x for x in (inputs or ())}
        if not isinstance(id_column, str) or not id_column:
            raise ValueError(f"id_column must be a non-empty column name, got {id_column!r}")
        self.id_column = id_column
        self._reward = _reward_fn(reward)
        self._gather = gather or _default_gather
        self.sink: Callable[[list[Record]], None] | None = None
        self.last_results: list[ValidationResult] = []
        self.trainer: Any = None
        # TRL names reward columns after the function: "rewards/seffi_coverage/mean".
        self.__name__ = "seffi_coverage"

    def _input_for(self, input_id: str, prompt: Any) -> Any:
        return self.inputs.get(input_id, prompt)

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float]:
        """Score one (local) batch, record it, and return one reward per completion.

        Raises:
            SeffiError: The dataset has no ``id_column`` (named with the columns TRL passed).
        """
        ids = kwargs.get(self.id_column)
        if ids is None:
            cols = sorted(
                k for k in kwargs if k not in ("trainer_state", "log_extra", "log_metric", "environments")
            )
            raise SeffiError(
                f"the reward function needs the prompt-id column {self.id_column!r} in the dataset "
                f"(TRL passed columns {cols}); add it, or set id_column=... (and keep "
                "remove_unused_columns=False)"
            )
        if len(ids) != len(completions):
            raise SeffiError(f"{len(completions)} completions but {len(ids)} values of {self.id_column!r}")
        self._find_trainer(kwargs.get("log_metric"))
        results = [
            self.labeler(self._input_for(str(pid), p), completion_text(c))
            for pid, p, c in zip(ids, prompts, completions, strict=True)
        ]
        self.last_results = results
        if self._training():
            records: list[Record] = [
                (str(pid), tuple(sorted(r.strategy_matches)), bool(r.valid))
                for pid, r in zip(ids, results, strict=True)
            ]
            gathered = self._gather(records)
            if self.sink is not None:
                self.sink(gathered)
        return [float(self._reward(r)) for r in results]

    def _find_trainer(self, log_metric: Any) -> None:
        # TRL passes ``log_metric``, a bound method of the trainer: the one handle on it a reward
        # function gets. GRPOCoverage uses it to run its callback before the reporting integrations.
        trainer = getattr(log_metric, "__self__", None)
        if trainer is not None and trainer is not self.trainer:
            self.trainer = trainer
            if self.on_trainer is not None:
                self.on_trainer(trainer)

    on_trainer: Callable[[Any], None] | None = None

    def _training(self) -> bool:
        model = getattr(self.trainer, "model", None)
        return bool(getattr(model, "training", True))


class _TaskFacts:
    """What the monitor's baselines read from an env, answered from a task and its inputs."""

    def __init__(self, task: Task, inputs: Mapping[str, TaskInput]) -> None:
        self.task = task
        self._inputs = inputs
        self.strategies = tuple(task.strategies())
        self.input_ids = list(inputs)

    def base_match_distribution(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        return self.task.base_match_distribution(self._inputs[input_id], valid_only=valid_only)

    def reference_match_sets(self, input_id: str) -> dict[str, frozenset[str]]:
        return self.task.reference_match_sets(self._inputs[input_id])


def _is_main_process() -> bool:
    return _rank_and_world()[0] == 0


class GRPOCoverage:
    """Coverage of GRPO's completion groups: a reward function plus a ``TrainerCallback``.

    Each prompt occurrence in a generation batch is one run of that prompt whose samples are its
    ``num_generations`` completions (in global batch order), so C(k) for k <= ``num_generations`` is
    "how many strategies do k completions of the current policy cover".

    Args:
        task: The seffi task the prompts come from (labels completions and gives the exact iid and
            oracle baselines). Optional with a ``labeler``.
        inputs: The task inputs behind the dataset rows (ids in ``id_column``). Needed for the
            task's validator and baselines.
        labeler: Replaces ``task.validate_y_text`` (a rubric, a callable, a Labeler). With a
            labeler other than the task's own parser, the task's base law no longer describes the
            labels, so baselines come only from ``iid``/``oracle``.
        strategies: Declared strategy ids for a bare labeling callable.
        id_column: Dataset column with each prompt's input id.
        budget: K; default: the trainer's ``num_generations``.
        reward: See :class:`CoverageReward`.
        iid: A user iid baseline (e.g. ``IidBaseline.from_samples`` over the base model's samples).
        oracle: A user oracle baseline.
        out_dir: Local report folder (default ``runs/seffi-grpo-<timestamp>``); written by the main
            process only. If it already holds a seffi run, this run goes to ``out_dir-2`` (``-3``, ...)
            with one warning.
        n_boot: Bootstrap replicates for logged CIs.
        seed: Bootstrap seed.
        plots: Render PNG plots at the end of training.
        gather: See :class:`CoverageReward` (tests inject a fake multi-process gather).

    Attributes:
        reward: The reward function to put in ``reward_funcs``.
        callback: The ``TrainerCallback`` to put in ``callbacks``.
        monitor: The :class:`~seffi.callbacks.core.CoverageMonitor` (after the first batch).
    """

    def __init__(
        self,
        task: Task | None = None,
        inputs: Iterable[TaskInput] | None = None,
        *,
        labeler: Any = None,
        strategies: Iterable[str] | None = None,
        id_column: str = "input_id",
        budget: int | None = None,
        reward: RewardSpec = "valid",
        iid: Any = None,
        oracle: Any = None,
        out_dir: str | Path | None = None,
        n_boot: int = 200,
        seed: int = 0,
        plots: bool = True,
        gather: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise SeffiError(f"budget must be a positive int, got {budget!r}")
        self.reward = CoverageReward(
            task,
            inputs,
            labeler=labeler,
            strategies=strategies,
            id_column=id_column,
            reward=reward,
            gather=gather,
        )
        self.reward.sink = self._ingest
        self.reward.on_trainer = self._place_callback
        self.budget = budget
        self.iid, self.oracle = iid, oracle
        self.out_dir, self.n_boot, self.seed, self.plots = out_dir, n_boot, seed, plots
        self._out_dir_fresh = False
        own_parser = labeler is None or getattr(as_labeler(labeler, strategies), "task", None) is task
        self._facts = _TaskFacts(task, self.reward.inputs) if task is not None and own_parser else None
        self.monitor: Any = None
        self.callback = CoverageTrainerCallback(self)
        self._occurrences: dict[str, int] = {}
        self.batches = 0
        self.group_sizes: dict[int, int] = {}

    # -- recording ---------------------------------------------------------------------------------------

    def _ensure_monitor(self, budget: int) -> Any:
        if self.monitor is None:
            from seffi.callbacks.core import CoverageMonitor
            from seffi.report.sinks import default_sinks

            main = _is_main_process()
            self.monitor = CoverageMonitor(
                budget,
                strategies=self.reward.labeler.strategies,
                env=self._facts,
                iid=self.iid,
                oracle=self.oracle,
                # W&B goes through TRL's own logging (the callback adds to its logs); locally a folder.
                sinks=default_sinks(self._out_dir(), wandb="disabled", plots=self.plots) if main else _Null(),
                out_dir=self._out_dir() if main else None,
                n_boot=self.n_boot,
                seed=self.seed,
                task_name=getattr(self.reward.task, "name", None) or "labeled",
                env_name="trl-grpo",
            )
        return self.monitor

    def _out_dir(self) -> Path:
        if not self._out_dir_fresh:
            from seffi.callbacks.core import fresh_out_dir

            # decided once: a folder holding an earlier run gets a fresh sibling (one warning)
            self.out_dir = fresh_out_dir(self.out_dir, "seffi-grpo")
            self._out_dir_fresh = True
        return Path(self.out_dir)

    def _ingest(self, records: list[Record]) -> None:
        """Feed one gathered generation batch: each prompt's completions form one run."""
        from seffi.callbacks.core import EpisodeEnd

        groups: dict[str, list[Record]] = {}
        for rec in records:
            groups.setdefault(rec[0], []).append(rec)
        if not groups:
            return
        for size in (len(g) for g in groups.values()):
            self.group_sizes[size] = self.group_sizes.get(size, 0) + 1
        if self.budget is None:
            self.budget = max(len(g) for g in groups.values())
        monitor = self._ensure_monitor(self.budget)
        for pid, group in groups.items():
            run = self._occurrences.get(pid, 0)
            self._occurrences[pid] = run + 1
            for k, (_, matches, valid) in enumerate(group, start=1):
                monitor.ingest_end(EpisodeEnd(pid, matches, valid, sample_index=k, run_index=run))
        self.batches += 1

    def _place_callback(self, trainer: Any) -> None:
        # Our on_log must run before the reporting integrations (W&B, ...) read ``logs``.
        handler = getattr(trainer, "callback_handler", None)
        cbs = getattr(handler, "callbacks", None)
        if not isinstance(cbs, list) or self.callback not in cbs:
            return
        cbs.remove(self.callback)
        first = next((i for i, cb in enumerate(cbs) if type(cb).__name__ != "DefaultFlowCallback"), len(cbs))
        cbs.insert(first, self.callback)


class _Null:
    def log(self, data: Any, step: int) -> None:
        """Drop (non-main processes keep a tracker replica but write nothing)."""

    def log_snapshot(self, comparison: Any, step: int, scope: str | None = None) -> None:
        """Drop."""

    def finish(self, report: Any = None, tracker_state: Any = None) -> None:
        """Drop."""


class CoverageTrainerCallback(TrainerCallback):
    """Adds seffi's coverage scalars to TRL's logs and writes the local report at the end.

    Created by :class:`GRPOCoverage` (``cov.callback``); pass it in ``callbacks=[...]``.
    """

    def __init__(self, coverage: GRPOCoverage) -> None:
        self.coverage = coverage
        self.last_logged: dict[str, float] = {}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Take K from ``num_generations`` unless given."""
        if self.coverage.budget is None and getattr(args, "num_generations", None):
            self.coverage.budget = int(args.num_generations)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        """Compute the curves and put ``seffi/*`` scalars into ``logs`` (main process)."""
        monitor = self.coverage.monitor
        if logs is None or monitor is None or not state.is_world_process_zero:
            return
        step = int(state.global_step)
        if monitor.last_step is not None and step <= monitor.last_step:
            return  # e.g. the end-of-training summary log at the same step
        scalars = monitor.log(step)
        if not scalars:
            return
        scalars = {k: float(v) for k, v in scalars.items() if v is not None}
        logs.update(scalars)
        if state.log_history and state.log_history[-1].get("step") == step:
            state.log_history[-1].update(scalars)
        self.last_logged = scalars

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write report.json/md, plots and the tracker state, and print the folder (main process)."""
        monitor = self.coverage.monitor
        if monitor is None or not state.is_world_process_zero or monitor.finalized:
            return
        monitor.finalize(
            int(state.global_step) + 1 if monitor.last_step is not None else int(state.global_step)
        )
        from seffi.report.sinks import closing_lines

        # W&B is TRL's own run (its integration prints the sync footer); seffi names its local folder.
        for line in closing_lines(monitor.out_dir, prefix="[seffi] "):
            print(line, flush=True)


def tiny_causal_lm(task: Task, *, hidden: int = 16, layers: int = 1, seed: int = 0) -> tuple[Any, Any]:
    """A tiny randomly initialised Llama-style causal LM and a word-level tokenizer for ``task``.

    Built locally from a config (nothing is downloaded); meant for smoke tests and examples — its
    completions are near-random word salad, which is exactly junk the validator must survive. The
    tokenizer splits on spaces, keeps newlines as tokens and uses the task vocabulary's ids
    (``<pad>`` = 0, ``<eos>`` = 1, ``<unk>`` = 2, newline = 3).

    Args:
        task: The task whose ``vocabulary()`` defines the tokens.
        hidden: Hidden size (a multiple of 4).
        layers: Number of decoder layers.
        seed: ``torch.manual_seed`` for the weights.

    Returns:
        ``(model, tokenizer)``: a ``LlamaForCausalLM`` and a ``PreTrainedTokenizerFast``.
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = task.vocabulary()
    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab.tokens)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(" ", "removed"), pre_tokenizers.Split("\n", "isolated")]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        pad_token_id=vocab.PAD,
        eos_token_id=vocab.EOS,
        bos_token_id=vocab.EOS,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config), tokenizer

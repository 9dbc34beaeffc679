"""Coverage of grouped policy samples (GRPO's completion groups), independent of the trainer library.

:class:`GroupScorer` labels a batch of completions, gathers every process's records, feeds them to a
sink and returns rewards (:mod:`seffi.models.grpo` reward modes). :class:`GroupCoverage` turns each
prompt's group into one run of a :class:`~seffi.callbacks.CoverageMonitor` and holds the baselines:
by default the *reference model's* own samples drawn before training (``IidBaseline.from_samples``).
:mod:`seffi.callbacks.trl` adapts both to TRL (reward-function kwargs, a ``TrainerCallback``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from seffi.callbacks.labelers import as_labeler
from seffi.errors import SeffiError
from seffi.tasks.base import Task, TaskInput

from . import grpo


class GroupScorer:
    """Labels completions, records the gathered batch and scores it.

    Args:
        task: The seffi task (its ``validate_y_text`` labels completions unless ``labeler`` is given).
        inputs: The task inputs behind the prompt ids (without them the labeler gets the prompt).
        labeler: A Labeler, a ``{strategy: regex}`` rubric or ``fn(x, text) -> ids`` (+ ``strategies``).
        strategies: Declared strategy ids for a bare labeling callable.
        id_column: Dataset column holding each prompt's input id.
        reward: ``"valid"``, ``"matched"``, ``"diversity"`` or ``callable(ValidationResult) -> float``.
        diversity_weight: ``w`` of the diversity reward.
        decode: ``decode(completion_ids) -> text`` used instead of the library's decoded text (a task
            LM's tokenizer drops its special newline token when decoding).
        gather: ``gather(list) -> list`` of every rank's list in rank order (default: accelerate's).

    Attributes:
        sink: Receives each gathered batch of records ``[(input_id, matches, valid), ...]``.
        group_size: Completions per group (set from the trainer's ``num_generations``).
        last_results: Validation results of the latest local batch.
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
        diversity_weight: float = 0.5,
        decode: Callable[[Sequence[int]], str] | None = None,
        gather: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        if labeler is None and task is None:
            raise ValueError("CoverageReward needs a task or a labeler")
        if not isinstance(id_column, str) or not id_column:
            raise ValueError(f"id_column must be a non-empty column name, got {id_column!r}")
        self.labeler = as_labeler(labeler if labeler is not None else task, strategies)
        self.task, self.id_column, self.decode, self.mode = task, id_column, decode, reward
        self.inputs: dict[str, TaskInput] = {x.id: x for x in (inputs or ())}
        self._reward = grpo.reward_function(reward)
        grpo.diversity_rewards([], diversity_weight)  # refuses a bad weight now, not mid-training
        self.weight = diversity_weight
        self.group_size: int | None = None
        self._gather = gather or grpo.default_gather
        self.sink: Callable[[list[grpo.Record]], None] | None = None
        self.last_results: list[Any] = []

    def score(
        self, ids: Sequence[Any], prompts: Sequence[Any], texts: Sequence[Any], training: bool
    ) -> list[float]:
        """Label one local batch, record the gathered batch (when training), return local rewards."""
        results = [
            self.labeler(self.inputs.get(str(i), p), t) for i, p, t in zip(ids, prompts, texts, strict=True)
        ]
        self.last_results = results
        if not training and self._reward is not None:
            return [float(self._reward(r)) for r in results]
        rank = grpo.rank_and_world()[0]
        records = [
            (str(i), tuple(sorted(r.strategy_matches)), bool(r.valid))
            for i, r in zip(ids, results, strict=True)
        ]
        tagged = self._gather([(rank, rec) for rec in records])  # a collective: every rank calls it
        if training and self.sink is not None:
            self.sink([rec for _, rec in tagged])
        if self._reward is not None:
            return [float(self._reward(r)) for r in results]
        scores = grpo.group_rewards([rec for _, rec in tagged], self.group_size, self.weight)
        return [s for (r, _), s in zip(tagged, scores, strict=True) if r == rank]


class GroupCoverage:
    """Each prompt's group of completions as one run of a coverage monitor, with its baselines.

    Args:
        task, inputs, labeler, strategies, id_column, reward, diversity_weight, decode, gather: See
            :class:`GroupScorer`.
        budget: K (default: the group size, e.g. GRPO's ``num_generations``).
        iid: ``"reference"`` (the policy's own samples before training: :meth:`draw_reference_iid`),
            ``"task"`` (the task's synthetic base sampler), a baseline object (``.curves(K)``, e.g.
            ``IidBaseline.from_samples``) or None. Until the reference is drawn, ``"reference"``
            falls back to the task's sampler.
        iid_samples: Reference samples per prompt (default 4 K: the baseline interpolates at k <= K).
        iid_prompts: ``{input id: prompt}`` for the reference samples (default: the train dataset's).
        oracle: A user oracle (default: the task's reference traces).
        out_dir: Local report folder (one holding a run gets a fresh sibling, with one warning).
        n_boot: Bootstrap replicates for logged CIs.
        seed: Seed of the bootstrap and of the reference samples.
        plots: PNG plots at the end.

    Attributes:
        reward: The reward function (``reward_class``).
        monitor: The :class:`~seffi.callbacks.CoverageMonitor` (after the first batch).
        group_sizes: ``{group size: count}`` of the groups seen.
    """

    reward_class: ClassVar[type[GroupScorer]] = GroupScorer

    def __init__(
        self,
        task: Task | None = None,
        inputs: Iterable[TaskInput] | None = None,
        *,
        labeler: Any = None,
        strategies: Iterable[str] | None = None,
        id_column: str = "input_id",
        budget: int | None = None,
        reward: Any = "valid",
        diversity_weight: float = 0.5,
        decode: Callable[[Sequence[int]], str] | None = None,
        iid: Any = "reference",
        iid_samples: int | None = None,
        iid_prompts: Mapping[str, str] | None = None,
        oracle: Any = None,
        out_dir: str | Path | None = None,
        n_boot: int = 200,
        seed: int = 0,
        plots: bool = True,
        gather: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise SeffiError(f"budget must be a positive int, got {budget!r}")
        if not (iid in ("reference", "task", None) or hasattr(iid, "curves")):
            raise SeffiError(
                f"iid must be 'reference', 'task', None or a baseline with .curves(K), got {iid!r}"
            )
        self.reward = self.reward_class(
            task, inputs, labeler=labeler, strategies=strategies, id_column=id_column, reward=reward,
            diversity_weight=diversity_weight, decode=decode, gather=gather,
        )  # fmt: skip
        self.reward.sink = self._ingest
        self.budget, self.iid, self.iid_samples, self.iid_prompts = budget, iid, iid_samples, iid_prompts
        self.oracle, self.out_dir, self.n_boot, self.seed, self.plots = oracle, out_dir, n_boot, seed, plots
        own_parser = labeler is None or getattr(self.reward.labeler, "task", None) is task
        self.facts = grpo.TaskFacts(task, self.reward.inputs) if task is not None and own_parser else None
        self.monitor: Any = None
        self._occurrences: dict[str, int] = {}
        self.batches = 0
        self.group_sizes: dict[int, int] = {}

    def draw_reference_iid(self, model: Any, tokenizer: Any, args: Any, dataset: Any = None) -> Any:
        """Sample ``model`` (``iid_samples`` per prompt, ``args``' generation settings) into the iid.

        Also sets the oracle from the task's reference traces over the same prompts (unless given),
        so both baselines cover every prompt from the first log on.
        """
        r = self.reward
        prompts = grpo.resolve_prompts(self.iid_prompts, dataset, r.id_column, r.task, r.inputs)
        ids = sorted(prompts)
        n = self.iid_samples or 4 * int(self.budget or getattr(args, "num_generations", 8))
        xs = [r.inputs.get(i, prompts[i]) for i in ids]
        texts = [prompts[i] for i in ids]
        self.iid = grpo.reference_iid(
            model,
            tokenizer,
            args,
            r.labeler,
            ids,
            xs,
            texts,
            n,
            seed=grpo.seed_of(self.seed, 1),
            decode=r.decode,
        )
        if self.oracle is None and self.facts is not None:
            from seffi.coverage import OracleBaseline

            refs = {i: self.facts.reference_match_sets(i) for i in ids if i in r.inputs}
            self.oracle = OracleBaseline(
                refs, strategies=self.facts.strategies, seed=grpo.seed_of(self.seed, 2)
            )
        return self.iid

    def _ensure_monitor(self, budget: int) -> Any:
        if self.monitor is None:
            from seffi.callbacks import CoverageMonitor
            from seffi.report.run_folder import fresh_out_dir
            from seffi.report.sinks import default_sinks

            main = grpo.rank_and_world()[0] == 0
            if main:  # decided once: a folder holding an earlier run gets a fresh sibling
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
                else grpo.NullSinks(),
                out_dir=Path(self.out_dir) if main else None,
                n_boot=self.n_boot,
                seed=self.seed,
                task_name=getattr(self.reward.task, "name", None) or "labeled",
                env_name="trl-grpo",
            )
        return self.monitor

    def _ingest(self, records: list[grpo.Record]) -> None:
        """Feed one gathered generation batch: each prompt's group of completions is one run."""
        from seffi.callbacks.core import EpisodeEnd

        groups = grpo.split_groups(records, self.budget)
        if not groups:
            return
        for g in groups:
            self.group_sizes[len(g)] = self.group_sizes.get(len(g), 0) + 1
        self.budget = self.budget or max(len(g) for g in groups)
        monitor = self._ensure_monitor(self.budget)
        for g in groups:
            pid = records[g[0]][0]
            run = self._occurrences[pid] = self._occurrences.get(pid, -1) + 1
            for k, i in enumerate(g, start=1):
                monitor.ingest_end(
                    EpisodeEnd(pid, records[i][1], records[i][2], sample_index=k, run_index=run)
                )
        self.batches += 1

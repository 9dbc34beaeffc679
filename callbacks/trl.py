"""TRL GRPO: a coverage-recording reward function and a logging ``TrainerCallback``.

Each prompt's group of G = ``num_generations`` completions is one run with K = G (or G / K runs when
``budget`` K divides G), so C(k), novelty and the gain vs iid describe how the groups explore:

```python
from seffi.callbacks.trl import GRPOCoverage

cov = GRPOCoverage(task, inputs, id_column="input_id", out_dir="runs/grpo")
trainer = GRPOTrainer(model=model, args=GRPOConfig(num_generations=8, ...), train_dataset=ds,
                      reward_funcs=[cov.reward], callbacks=[cov.callback], processing_class=tok)
trainer.train()          # seffi/* keys land in TRL's logs (so in its W&B run) + runs/grpo/report.*
cov.metrics(), cov.curves(), cov.to_dataframe()   # the numbers in code
```

The default iid is the reference model's own sampling, drawn at the first training batch. Each TRL
checkpoint gets ``seffi_coverage.json`` (``resume_from_checkpoint`` continues); under accelerate
every rank's records are gathered and rank 0 writes the report. More: ``docs/custom-llm.md``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from seffi._convert import plain
from seffi._io import write_atomic
from seffi.callbacks.groups import GroupCoverage, GroupScorer, same_folder
from seffi.callbacks.interrupts import StopOnSignal
from seffi.callbacks.trl_model import policy_logprobs
from seffi.errors import SeffiError
from seffi.report.sinks import closing_lines

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


class CoverageReward(GroupScorer):
    """A GRPO reward function: labels completions, records their match sets, returns rewards.

    Arguments: see [`GroupScorer`][seffi.callbacks.groups.GroupScorer] (``"unlikeliness"`` scores
    with the trainer's current model unless ``logprob_fn`` is given).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trainer: Any = None
        self.on_trainer: Any = None
        self.__name__ = "seffi_coverage"  # TRL names reward columns after it: rewards/seffi_coverage/mean

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
            policy = lambda: policy_logprobs(self.trainer, prompts, completion_ids, reduction)  # noqa: E731
        return self.score(
            ids, prompts, texts, training, completion_ids=completion_ids, policy_logprobs=policy
        )


class GRPOCoverage(GroupCoverage):
    """Coverage of GRPO's completion groups: a reward function plus a ``TrainerCallback``.

    Arguments: see [`GroupCoverage`][seffi.callbacks.groups.GroupCoverage]. Read the numbers with
    `metrics`, `curves` and `to_dataframe`.

    Attributes:
        reward: The reward function to put in ``reward_funcs``.
        callback: The ``TrainerCallback`` to put in ``callbacks``.
    """

    reward_class = CoverageReward

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reward.on_trainer = self._place_callback
        self.callback = CoverageTrainerCallback(self)

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


class CoverageTrainerCallback(TrainerCallback):
    """Draws or restores the reference iid, adds seffi's scalars to TRL's logs, saves with checkpoints.

    ``GRPOCoverage.callback``; ``last_logged`` holds the ``seffi/*`` scalars of the latest log.
    """

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
            if cov.out_dir is None and saved_by is not None and not same_folder(saved_by, args.output_dir):
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

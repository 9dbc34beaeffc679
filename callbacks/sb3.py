"""Stable-Baselines3 adapter: `CoverageCallback`, a drop-in ``BaseCallback`` (examples: docs/integrations.md).

Streaming mode (default) records the training episodes; evaluation mode (``eval_env`` given) lets
the policy spend ``budget`` samples on each eval input every ``eval_freq`` calls, like SB3's
``EvalCallback``; ``mode="both"`` logs both into one W&B run and ``<out_dir>/stream``, ``/eval``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.core import CoverageMonitor
from seffi.callbacks.evaluator import CoverageEvaluator
from seffi.callbacks.interrupts import StopOnSignal
from seffi.errors import SeffiError
from seffi.report.assemble import curves_dataframe
from seffi.report.run_folder import default_out_dir, fresh_out_dir
from seffi.report.sinks import closing_lines, default_sinks
from seffi.report.wandb_run import wandb_mode

__all__ = ["CoverageCallback"]


class LoggerSink:
    """SB3's own logger as a sink: ``seffi/*`` scalars go to SB3's outputs (per-k keys not to stdout)."""

    takes_tracker = True  # and ignores it

    def __init__(self, callback: BaseCallback) -> None:
        self.callback, self.pending = callback, False

    def log(self, data: Mapping[str, Any], step: int) -> None:
        logger = self.callback.logger
        for key, value in data.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                logger.record(key, value, exclude="stdout" if "/k=" in key else None)
                self.pending = True

    def log_snapshot(self, comparison: Any, step: int, scope: str | None = None) -> None:
        pass  # curves go to the report and W&B

    def finish(self, report: Any = None, tracker_state: Any = None) -> None:  # no SB3 dump follows
        if self.pending:
            self.callback.logger.dump(self.callback.num_timesteps)
            self.pending = False


class CoverageCallback(BaseCallback):
    """Log strategy coverage, novelty and gain vs iid while an SB3 model trains.

    The exact baselines come from the training env (subprocess envs too); W&B reuses the active run
    or starts an offline one; a local report folder is always written.

    Args:
        budget: Per-input sample budget K (default: ``config.budget``).
        mode: ``"stream"``, ``"eval"`` or ``"both"``; default: ``"eval"`` when ``eval_env`` is
            given, else ``"stream"``.
        eval_env: A *single* seffi Gymnasium env for evaluation mode (not the training env).
        eval_freq: Evaluate every this many callback calls (``VecEnv.step`` calls, ``n_envs`` timesteps).
        eval_inputs: Eval input ids (default: the eval env's pool).
        deterministic: Use the deterministic policy in evaluation (default ``False``: an exploration
            policy explores by sampling; a deterministic one repeats itself).
        log_at: ``"rollout"`` (default): a due log is written at the end of a rollout, one point per
            policy update (points inside a rollout would all describe one frozen policy; its episodes
            are read and checked together there); ``"step"``: at the first ``VecEnv.step`` where
            ``log_every`` is reached.
        config: The monitor options ([`MonitorConfig`][seffi.callbacks.MonitorConfig]). An ``out_dir``
            holding a seffi run gives ``out_dir-2`` (`out_dir` names the folder used);
            ``log_unit="steps"`` counts ``num_timesteps``; ``seed`` also seeds evaluation resets.
        **options: [`MonitorConfig`][seffi.callbacks.MonitorConfig] fields on top of ``config``.
    """

    def __init__(
        self,
        budget: int | None = None,
        *,
        mode: str | None = None,
        eval_env: Any = None,
        eval_freq: int = 1000,
        eval_inputs: Sequence[str] | None = None,
        deterministic: bool = False,
        log_at: str = "rollout",
        config: MonitorConfig | None = None,
        **options: Any,
    ) -> None:
        if budget is not None:
            options["budget"] = budget
        cfg = self.config = MonitorConfig.build(config, **options)
        super().__init__(verbose=cfg.verbose)
        mode = mode or ("eval" if eval_env is not None else "stream")
        if cfg.budget is None:
            raise SeffiError("CoverageCallback needs budget=K (a positive int)")
        if mode not in ("stream", "eval", "both"):
            raise SeffiError(f"mode must be 'stream', 'eval' or 'both', got {mode!r}")
        if mode != "stream" and eval_env is None:
            raise SeffiError(f"mode {mode!r} needs an eval_env (a single seffi env)")
        if mode == "both" and cfg.sink_names() is None:
            raise SeffiError("mode 'both' writes two report folders: give out_dir, not sinks")
        if log_at not in ("rollout", "step"):
            raise SeffiError(f"log_at must be 'rollout' or 'step', got {log_at!r}")
        if isinstance(eval_freq, bool) or not isinstance(eval_freq, int) or eval_freq < 1:
            raise SeffiError(f"eval_freq must be a positive int, got {eval_freq!r}")
        self.budget, self.mode, self.log_at = cfg.budget, mode, log_at
        self.eval_env, self.eval_freq, self.eval_inputs = eval_env, eval_freq, eval_inputs
        self.deterministic = deterministic
        own = cfg.sink_names() is not None  # sinks the callback makes (the default, or named ones)
        folder = cfg.out_dir if cfg.out_dir is not None or not own else default_out_dir()
        self.out_dir: Path | None = Path(folder) if folder is not None else None
        self._requested_out_dir = self.out_dir  # later runs are numbered from it (-2, -3, ...)
        self.monitor: CoverageMonitor | None = None
        self._stop = StopOnSignal()
        # log_at="rollout": the (infos, dones) of the rollout's steps, read in one batch at its end
        self._steps: list[tuple[Any, Any]] | None = None
        self.evaluator: CoverageEvaluator | None = None
        self.report: Any = None
        self.eval_report: Any = None

    def _part(self, part: str | None) -> CoverageMonitor | None:
        part = part or ("eval" if self.mode == "eval" else "stream")
        if part not in ("stream", "eval"):
            raise SeffiError(f"part must be 'stream' or 'eval', got {part!r}")
        if self.mode != "both" and part != self.mode:
            raise SeffiError(f"this callback runs mode {self.mode!r}: it has no {part!r} part")
        return self.monitor if part == "stream" else (self.evaluator.monitor if self.evaluator else None)

    def metrics(self, part: str | None = None) -> dict[str, float]:
        """A copy of the latest logged scalars of ``part`` (``{}`` before the first log).

        Args:
            part: ``"stream"`` (keys ``seffi/...``) or ``"eval"`` (the latest evaluation, keys
                ``seffi/eval/...``); ``None``: the stream's, in mode ``"eval"`` the evaluation's.
        """
        monitor = self._part(part)
        return monitor.metrics() if monitor is not None else {}

    def curves(self, part: str | None = None) -> Any:
        """The policy [`Curves`][seffi.coverage.Curves] of ``part`` (as `metrics`; not before training)."""
        monitor = self._part(part)
        if monitor is None:
            raise SeffiError("no coverage recorded yet: curves() is available once training has started")
        return monitor.curves()

    def to_dataframe(self, part: str | None = None) -> Any:
        """Policy, iid and oracle curves of ``part`` (as `metrics`), long format (empty before training)."""
        monitor = self._part(part)
        return monitor.to_dataframe() if monitor is not None else curves_dataframe({})

    def _init_callback(self) -> None:
        # A Ctrl-C / SIGTERM stops training at the next step; the report is written, then it is delivered.
        self._stop = StopOnSignal()
        self._stop.install(loop=("learn",))
        own = self.config.sink_names() is not None
        if own and self.config.resume_from is not None and self.config.out_dir is None:
            self.out_dir = Path(self.config.resume_from)  # a resumed run continues its own folder
        elif own:  # at every learn(): a folder holding an earlier run (or its sub-folders) is never reused
            self.out_dir = fresh_out_dir(self._requested_out_dir, nested=("stream", "eval"))
        run = None
        if self.mode in ("stream", "both"):
            self.monitor = CoverageMonitor(env=self.training_env, config=self._part_config("stream"))
            self._steps = [] if self.log_at == "rollout" else None
            if own:  # the plots' child process loads matplotlib while the model trains
                self.monitor.sinks.start_renderer()
            wandb = getattr(self.monitor.sinks, "wandb", None)
            if wandb is not None and wandb.enabled:
                run = wandb.run.run  # the raw wandb run, reused (not finished) by the evaluation
        if self.mode in ("eval", "both"):
            # Shares the W&B run with the streaming monitor: one run, two key scopes.
            cfg = self._part_config("eval", run).replace(scope="eval", label="eval")
            self.evaluator = CoverageEvaluator(self.eval_env, input_ids=self.eval_inputs, config=cfg)

    def _part_config(self, part: str, run: Any = None) -> MonitorConfig:
        cfg = self.config
        names = cfg.sink_names()
        if names is None:
            return cfg
        assert self.out_dir is not None
        folder = self.out_dir / part if self.mode == "both" else self.out_dir
        default = {"seffi_budget": self.budget, "algo": type(self.model).__name__}
        kwargs = {"run": run} if run is not None else {"config": default, **cfg.wandb_kwargs}
        sinks = default_sinks(
            folder,
            wandb=wandb_mode(cfg.wandb) if "wandb" in names else "disabled",  # type: ignore[arg-type]
            plots=cfg.plots,
            log_curves_every=1,  # the monitor decides which logs are curve snapshots
            tensorboard="tensorboard" in names,
            **kwargs,
        )
        sinks.sinks.append(LoggerSink(self))
        return cfg.replace(sinks=sinks, out_dir=folder)

    def _on_step(self) -> bool:
        steps = self._steps
        if steps is not None:
            # Nothing reads the episodes before the rollout ends: a step costs one check, the rollout's
            # episodes are parsed together. count_nonzero: a C loop (ndarray.any() is ~3x the time).
            dones = self.locals["dones"]
            if np.count_nonzero(dones):
                steps.append((self.locals["infos"], dones))
        elif self.monitor is not None:
            self.monitor.update_infos(self.locals["infos"], self.locals["dones"])
            if self.log_at == "step":
                self.monitor.maybe_log(self.num_timesteps)
        if self.evaluator is not None and self.n_calls % self.eval_freq == 0:
            self._evaluate()
        return not self._stop.requested

    def _on_rollout_end(self) -> None:
        # The policy is about to change (train() follows): the points of one rollout go out together.
        if self.monitor is not None and self.log_at == "rollout":
            self._ingest_steps()
            self.monitor.maybe_log(self.num_timesteps)
        total = getattr(self.model, "_total_timesteps", None)
        if self.monitor is not None and total is not None and self.num_timesteps >= total:
            # The last rollout: the report's plots are drawn in a child process during the last update.
            self.monitor.prepare_finalize()

    def _ingest_steps(self) -> None:
        steps, self._steps = self._steps, []
        if steps and self.monitor is not None:  # one list of steps' lists, dones of shape (steps, envs)
            self.monitor.update_infos([i for i, _ in steps], np.stack([d for _, d in steps]))

    def _evaluate(self) -> None:
        assert self.evaluator is not None
        model, deterministic = self.model, self.deterministic
        self.evaluator.evaluate(
            lambda obs: model.predict(obs, deterministic=deterministic)[0], self.num_timesteps
        )

    def _on_training_end(self) -> None:
        stopped = self._stop.requested
        # Evaluation first: in "both" mode it logs into the run the streaming monitor owns and finishes.
        if self.evaluator is not None:
            due = self.evaluator.n_evals == 0 or self.evaluator.last_step != self.num_timesteps
            if due and not stopped:  # a stop request is answered without a last evaluation
                self._evaluate()
            self.eval_report = self.evaluator.finalize(interrupted=stopped)
        if self.monitor is not None:
            if self._steps:  # training stopped inside a rollout
                self._ingest_steps()
            self.report = self.monitor.finalize(self.num_timesteps, interrupted=stopped)
        if self.config.sink_names() is not None:  # sinks the caller passed in are the caller's to announce
            self._print_closing()
        self._stop.reraise()  # KeyboardInterrupt after a Ctrl-C; nothing otherwise

    def _print_closing(self) -> None:
        contents = "report.json, report.md" + (", plots" if self.config.plots else "")
        if self.mode == "both":
            contents = f"stream/ and eval/: {contents}"
        sinks = self._wandb_sinks()
        # The sink that started the shared run knows its folder and its failures.
        wandb = next((s for s in sinks if s.run.owns_run), sinks[0] if sinks else None)
        unwritten = any(getattr(owner, "write_error", None) for owner in self._owners())
        for line in closing_lines(
            self.out_dir, wandb, contents=contents, prefix="[seffi] ", unwritten=unwritten
        ):
            print(line, flush=True)

    def _owners(self) -> tuple[CoverageMonitor | None, ...]:
        return (self.monitor, self.evaluator.monitor if self.evaluator else None)

    def _wandb_sinks(self) -> list[Any]:
        sinks = (getattr(getattr(owner, "sinks", None), "wandb", None) for owner in self._owners())
        return [sink for sink in sinks if sink is not None]

    @property
    def wandb_run_dir(self) -> Path | None:
        """Local folder of the W&B run, or None."""
        sinks = self._wandb_sinks()
        return sinks[0].run.run_dir if sinks else None

"""Stable-Baselines3 adapter: :class:`CoverageCallback`, a drop-in ``BaseCallback``.

Example:
    >>> import gymnasium as gym, seffi.envs                           # doctest: +SKIP
    >>> from stable_baselines3 import PPO
    >>> from seffi.callbacks.sb3 import CoverageCallback
    >>> model = PPO("MultiInputPolicy", "seffi/HanoiRouter-v0", n_steps=64)
    >>> model.learn(4096, callback=CoverageCallback(budget=8))        # streaming mode
    >>> eval_env = gym.make("seffi/HanoiRouter-v0", budget=8)
    >>> model.learn(4096, callback=CoverageCallback(budget=8, eval_env=eval_env, eval_freq=1024))

Streaming mode (default) treats the training episodes as the exploration process: every finished
episode of every sub-env is a sample of its input's current run. Evaluation mode (``eval_env`` given)
lets the current policy spend ``budget`` samples on each eval input every ``eval_freq`` calls, like
SB3's ``EvalCallback`` (one call = one ``VecEnv.step``, i.e. ``n_envs`` timesteps). Both can run in one
callback: streaming keys are ``seffi/...``, evaluation keys ``seffi/eval/...``, and both share one W&B
run; each writes its own local report folder (``<out_dir>/stream`` and ``<out_dir>/eval``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from seffi.callbacks.core import CoverageMonitor, LogUnit, default_out_dir, fresh_out_dir
from seffi.callbacks.evaluator import CoverageEvaluator
from seffi.errors import SeffiError

__all__ = ["CoverageCallback"]


class CoverageCallback(BaseCallback):
    """Log strategy coverage, novelty and gain vs iid while an SB3 model trains.

    With only ``budget`` it works on any seffi env: the exact iid baseline and the oracle come from
    the training env (through ``VecEnv.get_attr`` / ``env_method``, so subprocess envs work too), W&B
    reuses the active run or starts an offline one, and a local report folder is always written.

    Args:
        budget: Per-input sample budget K.
        mode: ``"stream"``, ``"eval"`` or ``"both"``; default: ``"eval"`` when ``eval_env`` is
            given, else ``"stream"``.
        eval_env: A *single* seffi Gymnasium env for evaluation mode (not the training env).
        eval_freq: Evaluate every this many callback calls (``VecEnv.step`` calls).
        eval_inputs: Eval input ids (default: the eval env's pool).
        deterministic: Use the deterministic policy in evaluation (default ``False``: an exploration
            policy explores by sampling; a deterministic one repeats itself).
        iid: A user iid baseline (e.g. ``IidBaseline.from_samples``) for envs without a known base law.
        oracle: A user oracle baseline.
        strategies: Strategy ids, for non-seffi envs (seffi envs expose them).
        out_dir: Local report folder (default ``runs/seffi-<timestamp>``). If it already holds a seffi
            run when training starts, this run goes to ``out_dir-2`` (``-3``, ...) with one warning;
            :attr:`out_dir` then names the folder used.
        wandb: ``"offline"`` (default unless ``WANDB_MODE`` says otherwise), ``"online"``, ``"disabled"``.
        wandb_kwargs: Extra ``wandb.init`` arguments (project, name, config, ...) or ``run``.
        log_every: Streaming mode logs after this many new episodes.
        log_unit: ``"episodes"`` or ``"steps"`` (``num_timesteps``) for ``log_every``.
        log_at: When a due streaming log is written. ``"rollout"`` (default): at the end of each
            rollout (``_on_rollout_end``), at most once per rollout, so coverage gets one W&B point
            per policy update, on the same steps as SB3's own ``rollout/*`` and ``train/*`` metrics;
            points inside a rollout would all describe the same frozen policy. ``"step"``: at the
            first ``VecEnv.step`` where ``log_every`` is reached (finer curves, more logs).
        log_curves_every: Curve snapshots (W&B tables/images, bootstrap intervals) every this many
            streaming logs (each evaluation is a snapshot).
        n_boot: Bootstrap replicates of the logged CIs.
        seed: Seed of bootstraps and evaluation resets.
        plots: Render PNG plots into the local report folder at the end.
        verbose: 1 prints one line per log.
    """

    def __init__(
        self,
        budget: int,
        *,
        mode: str | None = None,
        eval_env: Any = None,
        eval_freq: int = 1000,
        eval_inputs: Sequence[str] | None = None,
        deterministic: bool = False,
        iid: Any = None,
        oracle: Any = None,
        strategies: Sequence[str] | None = None,
        out_dir: str | Path | None = None,
        wandb: str | None = None,
        wandb_kwargs: Mapping[str, Any] | None = None,
        log_every: int = 256,
        log_unit: LogUnit = "episodes",
        log_at: str = "rollout",
        log_curves_every: int = 10,
        n_boot: int = 200,
        seed: int = 0,
        plots: bool = True,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose=verbose)
        mode = mode or ("eval" if eval_env is not None else "stream")
        if mode not in ("stream", "eval", "both"):
            raise SeffiError(f"mode must be 'stream', 'eval' or 'both', got {mode!r}")
        if mode != "stream" and eval_env is None:
            raise SeffiError(f"mode {mode!r} needs an eval_env (a single seffi env)")
        if log_at not in ("rollout", "step"):
            raise SeffiError(f"log_at must be 'rollout' or 'step', got {log_at!r}")
        if isinstance(eval_freq, bool) or not isinstance(eval_freq, int) or eval_freq < 1:
            raise SeffiError(f"eval_freq must be a positive int, got {eval_freq!r}")
        self.budget, self.mode = int(budget), mode
        self.eval_env, self.eval_freq, self.eval_inputs = eval_env, eval_freq, eval_inputs
        self.deterministic = deterministic
        self.out_dir = Path(out_dir) if out_dir is not None else default_out_dir()
        self._requested_out_dir = self.out_dir  # later runs are numbered from it (-2, -3, ...)
        self._common: dict[str, Any] = {
            "iid": iid,
            "oracle": oracle,
            "strategies": strategies,
            "log_curves_every": log_curves_every,
            "n_boot": n_boot,
            "seed": seed,
            "verbose": verbose,
        }
        self._wandb, self._wandb_kwargs = wandb, dict(wandb_kwargs or {})
        self._plots = plots
        self._log_every, self._log_unit, self.log_at = log_every, log_unit, log_at
        self.monitor: CoverageMonitor | None = None
        self.evaluator: CoverageEvaluator | None = None
        self.report: Any = None
        self.eval_report: Any = None

    # -- SB3 hooks -----------------------------------------------------------------------------------

    def _init_callback(self) -> None:
        from seffi.report.sinks import default_sinks

        # Decided when training starts (every learn() call): a folder that holds an earlier run, even
        # one in the "both" layout's sub-folders, is never written into again (one warning, a fresh
        # out_dir-2, -3, ...).
        self.out_dir = fresh_out_dir(self._requested_out_dir, nested=("stream", "eval"))
        wandb_run = None
        if self.mode in ("stream", "both"):
            stream_dir = self.out_dir / "stream" if self.mode == "both" else self.out_dir
            sinks = default_sinks(
                stream_dir,
                wandb=self._mode(),
                plots=self._plots,
                log_curves_every=1,  # the monitor decides which logs are curve snapshots
                **self._run_kwargs(),
            )
            if sinks.wandb is not None and sinks.wandb.enabled:
                wandb_run = sinks.wandb.run.run  # the raw wandb run, reused (not finished) by eval
            self.monitor = CoverageMonitor(
                self.budget,
                env=self.training_env,
                sinks=sinks,
                out_dir=stream_dir,
                log_every=self._log_every,
                log_unit=self._log_unit,
                **self._common,
            )
        if self.mode in ("eval", "both"):
            eval_dir = self.out_dir / "eval" if self.mode == "both" else self.out_dir
            # Share the W&B run with the streaming monitor: one run, two key scopes.
            kwargs = {"run": wandb_run} if wandb_run is not None else self._run_kwargs()
            sinks = default_sinks(
                eval_dir,
                wandb=self._mode(),
                plots=self._plots,
                log_curves_every=1,  # the monitor decides which logs are curve snapshots
                **kwargs,
            )
            self.evaluator = CoverageEvaluator(
                self.eval_env,
                self.budget,
                input_ids=self.eval_inputs,
                sinks=sinks,
                out_dir=eval_dir,
                **self._common,
            )

    def _mode(self) -> Any:
        from seffi.callbacks.core import _wandb_mode

        return _wandb_mode(self._wandb)

    def _run_kwargs(self) -> dict[str, Any]:
        kwargs = dict(self._wandb_kwargs)
        kwargs.setdefault("config", {"seffi_budget": self.budget, "algo": type(self.model).__name__})
        return kwargs

    def _on_step(self) -> bool:
        if self.monitor is not None:
            # SB3 VecEnvs put the finished episode's info in infos[i] at the done step.
            self.monitor.ingest_infos(self.locals["infos"], self.locals["dones"])
            if self.log_at == "step":
                self.monitor.maybe_log(self.num_timesteps)
        if self.evaluator is not None and self.n_calls % self.eval_freq == 0:
            self._evaluate()
        return True

    def _on_rollout_end(self) -> None:
        # The policy is about to change (train() follows): the points of one rollout go out together.
        if self.monitor is not None and self.log_at == "rollout":
            self.monitor.maybe_log(self.num_timesteps)

    def _evaluate(self) -> None:
        assert self.evaluator is not None
        model, deterministic = self.model, self.deterministic

        def act(obs: Any) -> Any:
            action, _ = model.predict(obs, deterministic=deterministic)
            return action

        self.evaluator.evaluate(act, self.num_timesteps)

    def _on_training_end(self) -> None:
        # Evaluation first: in "both" mode it logs into the run the streaming monitor owns and finishes.
        if self.evaluator is not None:
            if self.evaluator.n_evals == 0 or self.evaluator.last_step != self.num_timesteps:
                self._evaluate()
            self.eval_report = self.evaluator.finalize()
        if self.monitor is not None:
            self.report = self.monitor.finalize(self.num_timesteps)
        self._print_closing()

    def _print_closing(self) -> None:
        """Say once where the report went and how to upload an offline W&B run (as ``seffi run`` does)."""
        from seffi.report.sinks import closing_lines

        contents = "report.json, report.md, plots"
        if self.mode == "both":
            contents = f"stream/ and eval/: {contents}"
        wandb = None
        for owner in (self.monitor, self.evaluator.monitor if self.evaluator else None):
            sink = getattr(getattr(owner, "sinks", None), "wandb", None)
            if sink is not None and (wandb is None or sink.run.owns_run):
                wandb = sink  # the sink that started the shared run knows its folder and its failures
        for line in closing_lines(self.out_dir, wandb, contents=contents, prefix="[seffi] "):
            print(line, flush=True)

    # -- conveniences ------------------------------------------------------------------------------

    @property
    def wandb_run_dir(self) -> Path | None:
        """Local folder of the W&B run (``wandb leet inspect <dir> --summary --json`` reads it)."""
        for owner in (self.monitor, self.evaluator.monitor if self.evaluator else None):
            sink = getattr(getattr(owner, "sinks", None), "wandb", None)
            if sink is not None:
                return sink.run.run_dir
        return None

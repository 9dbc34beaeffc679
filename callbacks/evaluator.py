"""Periodic evaluation: the current policy spends K samples on every eval input of a separate env."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.core import CoverageMonitor
from seffi.episodes import EpisodeBatch, MatchCoder, parse_info
from seffi.errors import SeffiError

__all__ = ["CoverageEvaluator", "rollout_episodes"]


Act = Callable[[Any], Any]


def rollout_episodes(
    env: Any,
    act: Act,
    input_ids: Sequence[str],
    budget: int,
    strategies: Sequence[str] | MatchCoder,
    *,
    seed: int | None = None,
    max_steps_per_episode: int = 100_000,
) -> EpisodeBatch:
    """``budget`` consecutive episodes of policy ``act`` on each input of a single Gymnasium env.

    ``reset(seed=seed)`` first, then ``reset(options={"input_id": x})`` per episode; the batch's
    ``run_index`` is the position of the input.
    """
    ends: list[EpisodeBatch] = []
    name = getattr(getattr(env, "spec", None), "id", None)
    if seed is not None:
        env.reset(seed=seed)
    for x in input_ids:
        for _ in range(budget):
            obs, _ = env.reset(options={"input_id": x})
            for _ in range(max_steps_per_episode):
                obs, _, terminated, truncated, info = env.step(act(obs))
                if terminated or truncated:
                    ends.append(parse_info(info, strategies, env_name=name))
                    break
            else:
                raise SeffiError(
                    f"an evaluation episode on {name or 'the env'} did not end within "
                    f"{max_steps_per_episode} steps"
                )
    if not ends:
        return EpisodeBatch.empty(strategies.strategies if isinstance(strategies, MatchCoder) else strategies)
    batch = EpisodeBatch.concat(ends)
    runs = np.repeat(np.arange(len(input_ids), dtype=np.int64), budget)  # the env's own k is ignored
    return dataclasses.replace(batch, run_index=runs, sample_index=np.full(len(batch), -1, dtype=np.int64))


class CoverageEvaluator:
    """Periodic evaluation of exploration efficiency, like SB3's ``EvalCallback``.

    Each `evaluate` starts a fresh tracker, lets the policy spend ``budget`` samples on every eval
    input and logs that evaluation's curves (keys ``seffi/eval/...``) at the training step. The final
    report holds the last evaluation and, as extra lines, earlier ones.

    Args:
        eval_env: A single seffi env (not vector), separate from the training env.
        budget: Samples per eval input, K (default: ``config.budget``).
        input_ids: Eval inputs (default: the env's whole pool).
        keep_history: Evaluations kept as report lines (evenly spaced; None: all, else a warning).
        config: The monitor options ([`MonitorConfig`][seffi.callbacks.MonitorConfig]; default
            ``n_boot=100``). Scope and label default to ``"eval"``; every evaluation is a curve
            snapshot without window; evaluation i resets the env with ``seed + i``.
        **options: [`MonitorConfig`][seffi.callbacks.MonitorConfig] fields on top of ``config``.
    """

    def __init__(
        self,
        eval_env: Any,
        budget: int | None = None,
        *,
        input_ids: Sequence[str] | None = None,
        keep_history: int | None = None,
        config: MonitorConfig | None = None,
        **options: Any,
    ) -> None:
        if hasattr(eval_env, "num_envs") or hasattr(eval_env, "env_method"):
            raise SeffiError("the evaluation env must be a single Gymnasium env, not a vector env")
        if budget is not None:
            options["budget"] = budget
        options["log_curves_every"] = 1  # every evaluation's comparison goes into the history
        cfg = MonitorConfig.build(config if config is not None else MonitorConfig(n_boot=100), **options)
        # Evaluation keys never mix with training keys in a shared W&B run; no streaming window.
        cfg = cfg.replace(
            scope=cfg.scope or "eval", label="eval" if cfg.label == "policy" else cfg.label, window=None
        )
        self.monitor = CoverageMonitor(env=eval_env, config=cfg)
        self.env, self.budget, access = eval_env, self.monitor.budget, self.monitor.access
        if input_ids is None:
            if not access.has("input_ids"):
                raise SeffiError("pass input_ids: the evaluation env does not expose its input pool")
            input_ids = access.get("input_ids")
        self.input_ids = tuple(str(x) for x in input_ids)
        env_budget = access.get("budget") if access.has("budget") else None
        if env_budget is not None and int(env_budget) < self.budget:
            warnings.warn(
                f"eval env budget {env_budget} < K={self.budget}: samples past {env_budget} start a new "
                "env run (history cleared); make the eval env with budget >= K",
                RuntimeWarning,
                stacklevel=2,
            )
        self.seed = cfg.seed
        self.keep_history = None if keep_history is None else int(keep_history)
        self.history: list[tuple[int, Any]] = []  # (step, policy CurveSet) per evaluation
        self.n_evals = 0
        self.last_step: int | None = None

    def evaluate(self, act: Act, step: int) -> dict[str, float] | None:
        """Evaluate policy ``act`` now and log the curves at training ``step`` (the scalars, or None)."""
        self.monitor.reset_tracker()
        batch = rollout_episodes(
            self.env, act, self.input_ids, self.budget, self.monitor.coder, seed=self.seed + self.n_evals
        )
        self.monitor.update(batch)
        self.n_evals += 1
        self.last_step = int(step)
        scalars = self.monitor.log(step)
        if scalars is not None:
            self.history.append((int(step), self.monitor.last_comparison.policies[0]))
        return scalars

    def metrics(self) -> dict[str, float]:
        """A copy of the latest evaluation's logged scalars (``{}`` before one)."""
        return self.monitor.metrics()

    def curves(self) -> Any:
        """The latest evaluation's policy [`Curves`][seffi.coverage.Curves]."""
        return self.monitor.curves()

    def to_dataframe(self) -> Any:
        """The latest evaluation's curves, long format."""
        return self.monitor.to_dataframe()

    def finalize(self, *, interrupted: bool = False) -> Any:
        """Write the report (last evaluation + earlier ones as extra lines) and close the sinks."""
        if self.monitor.finalized:
            return None
        earlier = self.history[:-1]
        n = len(earlier) if self.keep_history is None else min(self.keep_history - 1, len(earlier))
        picks = sorted({round(float(i)) for i in np.linspace(0, len(earlier) - 1, n)}) if n > 0 else []
        dropped = [step for i, (step, _) in enumerate(earlier) if i not in picks]
        if dropped:  # never silently: the report's table would look complete
            warnings.warn(
                f"keep_history={self.keep_history}: the report leaves out the evaluations at steps "
                f"{', '.join(map(str, dropped))}",
                RuntimeWarning,
                stacklevel=2,
            )
        label = self.monitor.label
        self.monitor.extra_policies = [
            result.model_copy(
                update={"curves": result.curves.model_copy(update={"label": f"{label}@{step}"})}
            )
            for step, result in (earlier[i] for i in picks)
        ]
        return self.monitor.finalize(interrupted=interrupted)

    close = finalize

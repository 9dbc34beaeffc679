"""Exploration-method rewards of a group scorer: the rules of `seffi.group_scoring.METHODS`.

`RewardMethod` binds one method name and its options to a scorer
(`seffi.callbacks.groups.GroupScorer`): it checks the options when the scorer is built, owns
the method's state across steps (the outcome counts of ``"outcome_ucb"``) and scores a whole gathered
generation batch with `seffi.group_scoring.batch_rewards`, group by group.

What each method needs from the trainer (TRL's ``GRPOConfig``):

* ``"valid"``, ``"diversity"``, ``"outcome_batch"``: nothing; options ``weight`` (diversity),
  ``c`` and ``valid_only`` (outcome_batch).
* ``"unlikeliness"``: the policy's sequence log-probability of each completion. On the TRL path
  `seffi.callbacks.trl_model.policy_logprobs` computes it inside the reward call from the trainer's
  current model: one extra no-grad forward pass over the batch's prompts + completions per
  generation batch (the generation itself is the dominant cost: a forward per generated token).
  Options ``beta`` and ``reduction`` (``"mean"``, the default and what He et al. rank by, or
  ``"sum"``). He et al.'s companion of more updates per batch is TRL's ``num_iterations``; nothing
  here depends on it.
* ``"passk"``: option ``k`` (required, 1 <= k <= ``num_generations``). The reward *is* the analytic
  advantage, so the trainer must not normalise it again: ``GRPOConfig(scale_rewards="none")`` (and
  the default ``multi_objective_aggregation="sum_then_normalize"``); `check_scaling` refuses
  any other setting.
* ``"outcome_ucb"``: options ``c`` and ``valid_only``; the historical counts live on the method
  (`RewardMethod.counts`), survive across steps and are part of the coverage object's
  checkpoint state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from seffi.errors import SeffiError
from seffi.group_scoring import METHODS, OutcomeCounts, Record, batch_rewards

#: Options the scorer takes besides the rule's own (`seffi.group_scoring.Method.options`).
EXTRA_OPTIONS = {"unlikeliness": ("reduction",), "passk": ("k",)}


class RewardMethod:
    """One method of `METHODS` with its options and state.

    Args:
        name: A key of `METHODS`.
        options: The method's options, e.g. ``{"beta": 0.25}``, ``{"k": 4}``, ``{"c": 0.5}``.

    Attributes:
        name: The method name.
        options: The rule's keyword options (passed to `batch_rewards`).
        k: pass@k's k (``"passk"`` only).
        reduction: How a completion's token log-probabilities are combined (``"unlikeliness"`` only).
        counts: The run's `OutcomeCounts` (``"outcome_ucb"`` only).
        needs_logprobs: Whether scoring needs the policy's log-probabilities.

    Raises:
        SeffiError: An unknown method or option, or an option value the rule refuses.
    """

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        spec = METHODS.get(name)
        if spec is None:
            raise SeffiError(f"unknown reward method {name!r}; choose one of {sorted(METHODS)}")
        if options is not None and not isinstance(options, Mapping):
            raise SeffiError(f"reward_options must be a mapping of option names, got {options!r}")
        opts = dict(options or {})
        allowed = (*spec.options, *EXTRA_OPTIONS.get(name, ()))
        unknown = sorted(set(opts) - set(allowed))
        if unknown:
            raise SeffiError(f"reward {name!r} takes options {list(allowed)}, got {unknown}")
        self.name, self.needs_logprobs = name, "logprobs" in spec.needs
        self.k: int | None = opts.pop("k", None)
        self.reduction: str = opts.pop("reduction", "mean")
        self.options = opts
        self.counts = OutcomeCounts() if name == "outcome_ucb" else None
        if name == "passk":
            k = self.k
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
                raise SeffiError(
                    "reward 'passk' needs reward_options={'k': k} with 1 <= k <= num_generations, "
                    f"got k={k!r}"
                )
            self.k = int(k)
        if self.reduction not in ("sum", "mean"):
            raise SeffiError(f"unlikeliness reduction must be 'sum' or 'mean', got {self.reduction!r}")
        self._check_values()

    @classmethod
    def of(
        cls, reward: Any, options: Mapping[str, Any] | None, diversity_weight: float, *, per_completion: Any
    ) -> RewardMethod | None:
        """The scorer's method: None for a per-completion reward (``"valid"``, ``"matched"``, a callable).

        ``diversity_weight`` is the diversity reward's ``weight`` unless ``options`` names one.

        Raises:
            SeffiError: ``options`` given to a per-completion reward, or a method's own errors.
        """
        if per_completion is not None:
            if options:
                raise SeffiError(f"reward {reward!r} takes no reward_options, got {dict(options)}")
            return None
        if reward == "diversity" and (options is None or isinstance(options, Mapping)):
            options = {"weight": diversity_weight, **(options or {})}
        return cls(reward, options)

    def _check_values(self) -> None:
        """Run the rule on a tiny group so a bad option fails when the scorer is built, not mid-training."""
        probe = [("x", (), True)]
        batch_rewards(self.name, probe, None, logprobs=[0.0], k=1, counts=OutcomeCounts(), **self.options)

    def check_group_size(self, group_size: int) -> None:
        """Refuse a pass@k ``k`` larger than the trainer's group (``num_generations``).

        Raises:
            SeffiError: ``k`` > ``group_size``.
        """
        if self.name == "passk" and int(self.k) > int(group_size):  # type: ignore[arg-type]
            raise SeffiError(
                f"reward 'passk' has k={self.k} but each group holds num_generations={group_size} "
                f"completions: choose 1 <= k <= {group_size}"
            )

    def score(
        self,
        records: Sequence[Record],
        size: int | None,
        logprobs: Sequence[float] | None,
        training: bool,
    ) -> list[float]:
        """Rewards of one gathered batch; the outcome counts advance on training batches only."""
        counts = self.counts
        if counts is not None and not training:
            counts = OutcomeCounts(counts.as_dict())  # an evaluation batch leaves the history alone
        return batch_rewards(
            self.name, records, size, logprobs=logprobs, k=self.k, counts=counts, **self.options
        )

    def state(self) -> list[list[Any]] | None:
        """The outcome counts as JSON rows ``[input id, [strategies...], N]`` (None without counts)."""
        if self.counts is None:
            return None
        return [[x, list(o), n] for x, row in sorted(self.counts.as_dict().items()) for o, n in row.items()]

    def load_state(self, rows: Sequence[Sequence[Any]] | None) -> None:
        """Restore `state` (ignored by a method without counts)."""
        if self.counts is None or rows is None:
            return
        table: dict[str, dict[tuple[str, ...], int]] = {}
        for x, outcome, n in rows:
            table.setdefault(str(x), {})[tuple(str(s) for s in outcome)] = int(n)
        self.counts = OutcomeCounts(table)


def check_scaling(method: RewardMethod | None, scale_rewards: Any, aggregation: Any = None) -> None:
    """Refuse a trainer that would normalise pass@k's advantage a second time.

    Args:
        method: The scorer's method (None: a per-completion reward, nothing to check).
        scale_rewards: ``GRPOConfig.scale_rewards`` (True/False are TRL's aliases of "group"/"none").
        aggregation: ``GRPOConfig.multi_objective_aggregation`` (None when the trainer has none).

    Raises:
        SeffiError: ``reward="passk"`` with rewards scaled by a standard deviation.
    """
    if method is None or method.name != "passk":
        return
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)
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


def local_logprobs(
    scorer: Any,
    prompts: Sequence[Any],
    completion_ids: Any,
    policy: Callable[[], Sequence[float]] | None,
) -> list[float]:
    """The log-probabilities of a scorer's local batch, timed into ``scorer.logprob_cost``.

    ``scorer.logprob_fn(prompts, completion_ids)`` when given, else ``policy()`` (on the TRL path the
    trainer's current model, `seffi.callbacks.trl_model.policy_logprobs`).

    Raises:
        SeffiError: Neither is available; the function returned another number of values, or a NaN.
    """
    n = len(prompts)
    fn = (lambda: scorer.logprob_fn(prompts, completion_ids)) if scorer.logprob_fn is not None else policy
    if fn is None:
        raise SeffiError(
            "reward 'unlikeliness' needs the policy's log-probabilities: call it from TRL's GRPOTrainer "
            "(its model scores the batch) or pass logprob_fn=fn(prompts, completion_ids)"
        )
    cost = scorer.logprob_cost
    started = time.perf_counter()
    values = np.asarray(fn(), dtype=np.float64).reshape(-1)
    cost["seconds"] += time.perf_counter() - started
    cost["batches"] += 1
    cost["rows"] += n
    if len(values) != n:
        raise SeffiError(f"the log-probability function returned {len(values)} values for {n} completions")
    if np.isnan(values).any():
        raise SeffiError(f"the log-probability function returned NaN: {values.tolist()}")
    return values.tolist()

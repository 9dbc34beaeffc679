"""The bench's own group rules: advantage rules (UARL, UCPO, W-REINFORCE) and a surface-diversity reward.

Pure numpy over `seffi.group_scoring.Record` groups, like the rewards of `seffi.group_scoring`, but
used only by ``seffi bench exploration``: TRL's GRPO subtracts each group's mean reward, so a rule that
scales that advantage (UARL, UCPO) or drops the baseline (W-REINFORCE) replaces the trainer's advantage
(`batch_advantages`, through `seffi.experiment.bench_trainer`); the surface reward scores a bonus the
caller computes from the texts. Formulas and sources: docs/statistics.md, "Group rewards of the
exploration methods".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from seffi.errors import SeffiError
from seffi.group_scoring import Method, Record, check_scale, split_groups, valid_of

#: W-REINFORCE's weight of the positive samples (Zhu et al. 2025: lambda = 0.1).
W_REINFORCE_LAMBDA = 0.1
#: UCPO's interpolation toward the inverse-probability weights (the authors' released recipe: tau = 0.2).
UCPO_TAU = 0.2


def cluster_sizes(group: Sequence[Record]) -> np.ndarray:
    """How many completions of the group share each completion's match set (its own included).

    Args:
        group: G records of one prompt.

    Returns:
        Float array of shape (G,): ``n_i = #{j : A_j = A_i}`` over every completion, valid or not, the
        empty match set being a cluster of its own.
    """
    counts = Counter(tuple(rec[1]) for rec in group)
    return np.array([counts[tuple(rec[1])] for rec in group], dtype=np.float64)


def _check_advantages(group: Sequence[Record], advantages: Sequence[float]) -> np.ndarray:
    """``advantages`` as a finite float array aligned with ``group``, else one readable SeffiError."""
    a = np.asarray(advantages, dtype=np.float64).reshape(-1)
    if len(a) != len(group):
        raise SeffiError(f"{len(a)} advantages for a group of {len(group)} completions")
    if not np.isfinite(a).all():
        raise SeffiError(f"advantages must be finite, got {a.tolist()}")
    return a


def uarl_advantages(group: Sequence[Record], advantages: Sequence[float]) -> list[float]:
    """UARL's advantage: each completion's GRPO advantage divided by the size of its strategy cluster.

    ``A'_i = A_i / n_i`` (Hu et al. 2026, "Rewarding the Rare", inverse cluster-size weighting), with
    ``A_i`` the GRPO advantage the trainer computed and ``n_i`` the number of the group's completions in
    completion i's cluster (`cluster_sizes`: exact match sets here, where the paper asks an LLM judge).
    A correct completion on a strategy no other completion took keeps its whole advantage; one of c
    completions sharing a strategy gets 1/c of it. Form: docs/statistics.md, "Group rewards of the
    exploration methods".

    Args:
        group: G records of one prompt (their match sets are the clusters).
        advantages: Shape (G,): the trainer's advantages of the group, aligned with ``group``.

    Returns:
        G advantages.

    Raises:
        SeffiError: ``advantages`` of another length or not finite.
    """
    a = _check_advantages(group, advantages)
    return (a / cluster_sizes(group)).tolist() if len(group) else []


def ucpo_advantages(
    group: Sequence[Record], advantages: Sequence[float], logprobs: Sequence[float], tau: float = UCPO_TAU
) -> list[float]:
    """UCPO's advantage: GRPO's advantage of the correct completions spread toward a uniform policy.

    Our reading of Lochab, Li & Zhang (2026), "Uniform-Correct Policy Optimization", following the
    estimator of the authors' released code (``adv_estimator=iq``, ``tau = 0.2``): among the c valid
    completions of a group, ``q_i = softmax(l)_i`` is the policy's distribution over them, from each
    one's mean per-token log-probability ``l_i``; when ``c >= 2`` a valid completion's advantage becomes

        ``A'_i = A_i * ((1 - tau) + tau * c * w_i)``,  ``w_i = (1 / q_i) / sum_j (1 / q_j)``

    (``q`` floored at 1e-6), so the valid completions keep their total advantage while the less likely
    ones get more of it: the penalty on a non-uniform distribution over the correct answers. Invalid
    completions keep ``A_i``. ``tau = 0`` is GRPO. Form: docs/statistics.md, "Group rewards of the
    exploration methods".

    Args:
        group: G records of one prompt.
        advantages: Shape (G,): the trainer's advantages, aligned with ``group``.
        logprobs: Shape (G,): the policy's mean per-token log-probability of each completion.
        tau: Interpolation toward the inverse-probability weights, in [0, 1].

    Returns:
        G advantages.

    Raises:
        SeffiError: ``tau`` outside [0, 1]; ``advantages`` or ``logprobs`` of another length, or not finite.
    """
    tau = check_scale("ucpo tau", tau, 0.0, 1.0)
    a = _check_advantages(group, advantages)
    lp = np.asarray(logprobs, dtype=np.float64).reshape(-1)
    if len(lp) != len(group) or not np.isfinite(lp).all():
        raise SeffiError(f"ucpo needs one finite log-probability per completion, got {lp.tolist()}")
    valid = valid_of(group).astype(bool)
    c = int(valid.sum())
    if c < 2:
        return a.tolist()
    shifted = lp[valid] - lp[valid].max()  # softmax without overflow
    q = np.maximum(np.exp(shifted) / np.sum(np.exp(shifted)), 1e-6)
    w = (1.0 / q) / np.sum(1.0 / q)
    out = a.copy()
    out[valid] = a[valid] * ((1.0 - tau) + tau * c * w)
    return out.tolist()


def w_reinforce_advantages(group: Sequence[Record], weight: float = W_REINFORCE_LAMBDA) -> list[float]:
    """W-REINFORCE's advantage: ``+lambda`` for a valid completion, ``-1`` for an invalid one.

    Zhu et al. (2025), "The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning":
    REINFORCE with rewards +1 / -1, the positive samples' term weighted by ``lambda`` and no group
    baseline, so the advantage is the weighted reward itself and does not depend on the rest of the group.

    Args:
        group: G records of one prompt.
        weight: ``lambda``, in [0, 1].

    Returns:
        G advantages.

    Raises:
        SeffiError: ``weight`` outside [0, 1].
    """
    weight = check_scale("w_reinforce weight", weight, 0.0, 1.0)
    return [weight if rec[2] else -1.0 for rec in group]


def surface_rewards(group: Sequence[Record], bonus: Sequence[float], weight: float = 0.5) -> list[float]:
    """A surface-diversity reward: validity with a bonus for text unlike the rest of the group.

    ``r_i = valid_i * ((1 - w) + w * b_i)``: the form of `diversity_rewards` with the surface bonus
    ``b_i`` in [0, 1] (how unlike the group's other completions completion i's text is: distinct n-grams
    and token edit distance, computed by the caller from the texts, e.g.
    `seffi.experiment.bench_trainer.surface_bonus`) in place of the exact strategy set's uniqueness.

    Args:
        group: G records of one prompt.
        bonus: Shape (G,): each completion's surface bonus, in [0, 1].
        weight: ``w``, in [0, 1].

    Returns:
        G rewards in [0, 1].

    Raises:
        SeffiError: ``weight`` outside [0, 1]; ``bonus`` of another length or outside [0, 1].
    """
    weight = check_scale("surface weight", weight, 0.0, 1.0)
    b = np.asarray(bonus, dtype=np.float64).reshape(-1)
    if len(b) != len(group) or not ((b >= 0) & (b <= 1)).all():
        raise SeffiError(f"surface needs one bonus in [0, 1] per completion, got {b.tolist()}")
    return (valid_of(group) * ((1.0 - weight) + weight * b)).tolist()


#: Every advantage rule by name (`batch_advantages`): rules that replace the trainer's advantage.
ADVANTAGE_METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("uarl"),  # Hu et al. 2026, Rewarding the Rare
        Method("ucpo", ("logprobs",), ("tau",)),  # Lochab, Li & Zhang 2026
        Method("w_reinforce", options=("weight",)),  # Zhu et al. 2025
    )
}


def batch_advantages(
    method: str,
    records: Sequence[Record],
    size: int | None,
    advantages: Sequence[float],
    *,
    logprobs: Sequence[float] | None = None,
    **options: Any,
) -> list[float]:
    """Advantages of a whole (gathered) generation batch under an advantage rule, group by group.

    The trainer's advantages (GRPO's: each reward minus its group's mean, over the group's standard
    deviation) go in; the rule's come out. Groups are `split_groups`.

    Args:
        method: A key of `ADVANTAGE_METHODS`.
        records: The batch's records, in the trainer's order.
        size: Group size (``num_generations``), or None for maximal runs of one input id.
        advantages: Shape (len(records),): the trainer's advantages.
        logprobs: Shape (len(records),): each completion's mean per-token log-probability (``"ucpo"``).
        **options: The rule's options (``tau``, ``weight``).

    Returns:
        One advantage per record, in record order.

    Raises:
        SeffiError: An unknown rule or option, a missing input, inputs of another length.
    """
    spec = ADVANTAGE_METHODS.get(method)
    if spec is None:
        raise SeffiError(f"unknown advantage method {method!r}; choose one of {sorted(ADVANTAGE_METHODS)}")
    if unknown := sorted(set(options) - set(spec.options)):
        raise SeffiError(f"advantage method {method!r} takes options {list(spec.options)}, got {unknown}")
    if len(advantages) != len(records):
        raise SeffiError(f"{len(advantages)} advantages for a batch of {len(records)} completions")
    if "logprobs" in spec.needs and (logprobs is None or len(logprobs) != len(records)):
        raise SeffiError(f"advantage method {method!r} needs one log-probability per completion")
    out = [0.0] * len(records)
    for idx in split_groups(records, size):
        group = [records[i] for i in idx]
        a = [advantages[i] for i in idx]
        if method == "uarl":
            new = uarl_advantages(group, a)
        elif method == "ucpo":
            new = ucpo_advantages(group, a, [logprobs[i] for i in idx], **options)  # type: ignore[index]
        else:
            new = w_reinforce_advantages(group, **options)
        for i, v in zip(idx, new, strict=True):
            out[i] = v
    return out

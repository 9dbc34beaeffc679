"""The bench's hooks into TRL's GRPOTrainer: an advantage rule, and a surface-diversity reward.

TRL's ``GRPOTrainer`` computes the advantage inline in ``_generate_and_score_completions``: the summed
rewards minus their group's mean (over the group's standard deviation under ``scale_rewards="group"``).
No reward can express a rule that scales that advantage by something of the group (UARL) or drops
the baseline (W-REINFORCE), so `advantage_trainer` subclasses the trainer: after TRL has computed its
advantages for a generation batch, the subclass gathers them with the batch's records and replaces them
with `seffi.experiment.bench_rewards.batch_advantages` before the batch is split into update steps.
`GroupAdvantages` builds the records (input id, match set, validity) from the reward function's own
validator labels, or from a second labeler's match sets with the validator's validity.

The surface-diversity reward is a reward, so it is a second reward function (`SurfaceReward`) and
TRL normalises it as any other: `surface_bonus` scores each completion's text against the rest of its
group with the definitions of `seffi.models.surface`, `seffi.experiment.bench_rewards.surface_rewards` turns
the bonus into the reward.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from seffi.callbacks import trl_model
from seffi.experiment.bench_rewards import ADVANTAGE_METHODS, batch_advantages, surface_rewards
from seffi.group_scoring import Record, split_groups
from seffi.models.surface import pairwise_edit_distance

#: n-gram lengths of the surface bonus (those of the bench's distinct-n columns).
SURFACE_NGRAMS = (1, 2, 3, 4)


def _novel_share(tokens: list[str], others: list[list[str]], n: int) -> float | None:
    """Share of a text's n-grams that no other text of the group has (None: the text has none)."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    if not grams:
        return None
    seen = {tuple(t[i : i + n]) for t in others for i in range(len(t) - n + 1)}
    return sum(g not in seen for g in grams) / len(grams)


def surface_bonus(texts: Sequence[str]) -> list[float]:
    """Each completion's surface novelty against the rest of its group, in [0, 1].

    ``b_i = (u_i + e_i) / 2``: ``u_i`` is the mean over n = 1..4 of the share of completion i's word
    n-grams that no other completion of the group contains (the n with no n-gram in i left out; 0 when
    i has no token), ``e_i`` the mean normalised token edit distance from i to each other completion (the
    pair distance of `seffi.models.surface.pairwise_edit_distance`). A group of one scores 0.

    Args:
        texts: The group's completion strings.

    Returns:
        One bonus per completion.
    """
    tokens = [t.split() for t in texts]
    g = len(texts)
    dist = np.zeros((g, g))
    for i in range(g):
        for j in range(i + 1, g):
            dist[i, j] = dist[j, i] = pairwise_edit_distance([texts[i], texts[j]])
    out = []
    for i, mine in enumerate(tokens):
        others = [t for j, t in enumerate(tokens) if j != i]
        if not others:
            out.append(0.0)
            continue
        shares = [s for n in SURFACE_NGRAMS if (s := _novel_share(mine, others, n)) is not None]
        novel = float(np.mean(shares)) if shares else 0.0
        edit = float(dist[i].sum() / (g - 1))
        out.append((novel + edit) / 2.0)
    return out


def _records(
    ids: Sequence[Any], results: Sequence[Any], matches: Sequence[Any] | None = None
) -> list[Record]:
    """Records of a local batch: validity from ``results``, match sets from ``matches`` (else ``results``)."""
    sets = matches if matches is not None else [r.strategy_matches for r in results]
    return [(str(i), tuple(sorted(m)), bool(r.valid)) for i, r, m in zip(ids, results, sets, strict=True)]


class SurfaceReward:
    """A second GRPO reward function: `seffi.experiment.bench_rewards.surface_rewards` of each gathered group.

    Put it after the coverage reward in ``reward_funcs`` with ``reward_weights=[0, 1]``: the coverage
    reward labels the batch (its validity is read here) and records coverage; this one is the reward.

    Args:
        scorer: The coverage reward function (`seffi.callbacks.trl.CoverageReward`).
        weight: ``w`` of `seffi.experiment.bench_rewards.surface_rewards`.
        group_size: Completions per group (``num_generations``).
        gather: ``gather(list) -> list`` over ranks (default: accelerate's).
    """

    def __init__(
        self,
        scorer: Any,
        weight: float,
        group_size: int,
        gather: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        self.scorer, self.weight, self.group_size = scorer, weight, group_size
        self._gather = gather or trl_model.default_gather
        self.__name__ = "surface"  # TRL's column: rewards/surface/mean

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float]:
        """Rewards of the local batch, scored over the gathered groups."""
        ids = kwargs[self.scorer.id_column]
        decode = self.scorer.decode
        texts = [decode(c) for c in completion_ids] if decode is not None else list(completions)
        rank = trl_model.rank_and_world()[0]
        local = _records(ids, self.scorer.last_results)
        tagged = self._gather([(rank, rec, text) for rec, text in zip(local, texts, strict=True)])
        records = [t[1] for t in tagged]
        rewards = [0.0] * len(records)
        for idx in split_groups(records, self.group_size):
            bonus = surface_bonus([tagged[i][2] for i in idx])
            for i, r in zip(idx, surface_rewards([records[i] for i in idx], bonus, self.weight), strict=True):
                rewards[i] = r
        return [r for t, r in zip(tagged, rewards, strict=True) if t[0] == rank]


class GroupAdvantages:
    """The advantage rule of one method, as `advantage_trainer`'s ``advantages`` hook.

    Args:
        rule: A key of `seffi.experiment.bench_rewards.ADVANTAGE_METHODS`.
        options: The rule's options.
        scorer: The coverage reward function: its validator labels of the latest local batch
            (``last_results``), its ``id_column`` and ``decode``.
        group_size: Completions per group (``num_generations``).
        labeler: A second labeler ``labeler(x, text) -> ValidationResult`` whose match sets form the
            clusters (validity stays the validator's); None: the validator's.
        inputs: ``{input id: task input}`` for ``labeler``.
        gather: ``gather(list) -> list`` over ranks (default: accelerate's).

    Attributes:
        last: ``(records, trainer advantages, rule advantages, log-probabilities or None)`` of the
            latest gathered batch.
    """

    def __init__(
        self,
        rule: str,
        options: Mapping[str, Any] | None,
        scorer: Any,
        group_size: int,
        labeler: Any = None,
        inputs: Mapping[str, Any] | None = None,
        gather: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        self.rule, self.options, self.scorer, self.group_size = rule, dict(options or {}), scorer, group_size
        self.needs_logprobs = "logprobs" in ADVANTAGE_METHODS[rule].needs
        self.labeler, self.inputs = labeler, dict(inputs or {})
        self._gather = gather or trl_model.default_gather
        self.last: tuple[list[Record], list[float], list[float], list[float] | None] | None = None

    def __call__(
        self, trainer: Any, batch: Sequence[Mapping[str, Any]], completion_ids: Sequence[Sequence[int]],
        advantages: Sequence[float],
    ) -> list[float]:  # fmt: skip
        """The rule's advantages of the gathered batch from the trainer's (``advantages``, gathered)."""
        scorer = self.scorer
        ids = [row[scorer.id_column] for row in batch]
        matches = None
        if self.labeler is not None:
            texts = [scorer.decode(c) for c in completion_ids]
            label = self.labeler
            matches = [
                label(self.inputs[str(i)], t).strategy_matches for i, t in zip(ids, texts, strict=True)
            ]
        local: list[Any] = _records(ids, scorer.last_results, matches)
        if self.needs_logprobs:
            prompts = [row["prompt"] for row in batch]
            lps = trl_model.policy_logprobs(trainer, prompts, completion_ids, "mean")
            local = list(zip(local, lps.tolist(), strict=True))
            gathered = self._gather(local)
            records, logprobs = [g[0] for g in gathered], [g[1] for g in gathered]
        else:
            records, logprobs = self._gather(local), None
        out = batch_advantages(
            self.rule, records, self.group_size, list(advantages), logprobs=logprobs, **self.options
        )
        self.last = (records, list(advantages), out, logprobs)
        return out


@functools.cache
def _trainer_class() -> type:
    """``GRPOTrainer`` with the ``advantages`` hook (defined once: trl is imported on first use)."""
    import torch
    from trl import GRPOTrainer

    class AdvantageGRPOTrainer(GRPOTrainer):
        """A ``GRPOTrainer`` whose training advantages come from ``advantages(...)``."""

        def __init__(self, *args: Any, advantages: Callable[..., list[float]], **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.seffi_advantages = advantages
            self._seffi_ids: list[list[int]] = []

        def _calculate_rewards(
            self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
        ) -> Any:
            # The completions' token ids as the reward functions get them (before any masking).
            self._seffi_ids = [list(c) for c in completion_ids_list]
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            out = super()._generate_and_score_completions(inputs)
            if not self.model.training:
                return out
            local = out["advantages"]
            gathered = self.accelerator.gather(local).tolist()
            new = self.seffi_advantages(self, inputs, self._seffi_ids, gathered)
            start = self.accelerator.process_index * len(inputs)
            out["advantages"] = torch.tensor(
                new[start : start + len(inputs)], dtype=local.dtype, device=local.device
            )
            return out

    return AdvantageGRPOTrainer


def advantage_trainer(advantages: Callable[..., list[float]], **kwargs: Any) -> Any:
    """A ``GRPOTrainer`` (``**kwargs``) training on ``advantages(trainer, batch, completion_ids, gathered)``.

    Args:
        advantages: Called once per training generation batch with the trainer, the local batch's rows
            (TRL's inputs, one per completion), their completion token ids and TRL's advantages of the
            gathered batch; returns the gathered batch's advantages to train on (e.g. `GroupAdvantages`).
        **kwargs: ``GRPOTrainer``'s arguments.
    """
    return _trainer_class()(advantages=advantages, **kwargs)

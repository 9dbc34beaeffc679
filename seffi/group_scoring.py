"""Group scoring: the rewards of GRPO's completion groups, as pure functions (numpy only).

A *group* is the `Record`s ``(input id, sorted match set, valid)`` of one prompt's G completions
(`split_groups`); a completion's *outcome* is its sorted match set. Each rule returns one reward per
record, in order. `batch_rewards` applies a rule of `METHODS` to a gathered batch; `RewardMethod`
binds one to its options and state. Formulas and sources: docs/statistics.md ("Group rewards of the
exploration methods").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from seffi.errors import SeffiError
from seffi.tasks.base import ValidationResult

#: Record of one completion: (input id, sorted match set, valid).
Record = tuple[str, tuple[str, ...], bool]
#: Group reward rules (`METHODS`, ``"valid"`` aside): scored over a whole group.
GROUP_MODES = ("diversity", "unlikeliness", "passk", "outcome_ucb", "outcome_batch")
REWARD_MODES = ("valid", "matched", *GROUP_MODES)


def split_groups(records: Sequence[Record], size: int | None) -> list[list[int]]:
    """Indices of each GRPO group: a maximal run of one input id in TRL's order, cut every ``size``."""
    groups: list[list[int]] = []
    for i, rec in enumerate(records):
        last = groups[-1] if groups else None
        if last is None or records[last[0]][0] != rec[0] or (size is not None and len(last) >= size):
            groups.append([i])
        else:
            last.append(i)
    return groups


def diversity_rewards(group: Sequence[Record], weight: float = 0.5) -> list[float]:
    """The group-diversity reward of each completion of one group.

    ``r_i = valid_i * ((1 - w) + w * [A_i != {}] / c_i)`` with ``c_i = #{j : valid_j and A_j = A_i}``
    and ``A_i`` completion i's match set: a valid completion with a strategy set of its own scores 1,
    a valid off-strategy one ``1 - w`` (an off-strategy trace is never the cheapest way to be unique).
    """
    if not 0.0 <= weight <= 1.0:
        raise SeffiError(f"diversity weight must be in [0, 1], got {weight!r}")
    counts = Counter(matches for _, matches, valid in group if valid)
    return [(1.0 - weight) + (weight / counts[m] if m else 0.0) if v else 0.0 for _, m, v in group]


def reward_function(spec: Any) -> Callable[[ValidationResult], float] | None:
    """The per-completion reward of ``spec``; None for a group mode (`GROUP_MODES`)."""
    if spec == "valid":
        return lambda r: 1.0 if r.valid else 0.0
    if spec == "matched":  # following any strategy, correct or not (a shaping option)
        return lambda r: 1.0 if r.strategy_matches else 0.0
    if isinstance(spec, str) and spec in GROUP_MODES:
        return None
    if callable(spec):
        return spec
    raise SeffiError(
        f"reward must be one of {REWARD_MODES} or a callable(ValidationResult) -> float, got {spec!r}"
    )


#: He, Fried & Welleck's rank penalty (``lean.rank_penalty=0.25`` in their released GRPO recipe).
UNLIKELINESS_BETA = 0.25
#: Outcome-bonus scale: half the validity reward, as seffi's diversity weight (not from Song et al.).
OUTCOME_C = 0.5

Outcome = tuple[str, ...]


def valid_of(group: Sequence[Record]) -> np.ndarray:
    """The validity of each record, float (G,)."""
    return np.array([1.0 if rec[2] else 0.0 for rec in group], dtype=np.float64)


def check_scale(name: str, value: float, low: float, high: float | None = None) -> float:
    """``value`` as a float in [low, high], else one readable SeffiError."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SeffiError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x) or x < low or (high is not None and x > high):
        bound = f"in [{low:g}, {high:g}]" if high is not None else f">= {low:g}"
        raise SeffiError(f"{name} must be {bound}, got {value!r}")
    return x


def ascending_ranks(values: Sequence[float]) -> np.ndarray:
    """Ascending rank (0 = smallest) of each of ``values``; ties share their mean rank."""
    ordered = np.sort(x := np.asarray(values, dtype=np.float64))
    return (np.searchsorted(ordered, x, "left") + np.searchsorted(ordered, x, "right") - 1) / 2.0


def unlikeliness_rewards(
    group: Sequence[Record], logprobs: Sequence[float], beta: float = UNLIKELINESS_BETA
) -> list[float]:
    """The unlikeliness reward of each completion of one group: ``valid_i * (1 - beta * u_i / G)``.

    He, Fried & Welleck (2025). ``u_i`` ranks every completion of the group by the policy's
    log-probability ``logprobs`` (G,), 0 for the *least* likely one; ``beta`` is in [0, 1].
    """
    beta = check_scale("unlikeliness beta", beta, 0.0, 1.0)
    lp = np.asarray(logprobs, dtype=np.float64).reshape(-1)
    if len(lp) != len(group):
        raise SeffiError(f"unlikeliness needs one log-probability per completion: {len(lp)} for {len(group)}")
    if np.isnan(lp).any() or np.isposinf(lp).any():
        raise SeffiError(f"log-probabilities must be finite or -inf, got {lp.tolist()}")
    if not len(group):
        return []
    u = ascending_ranks(lp)
    return (valid_of(group) * (1.0 - beta * u / len(group))).tolist()


def passk_advantages(group: Sequence[Record], k: int) -> list[float]:
    """The analytic pass@k advantage of each completion of one group (Chen et al. 2025).

    With N completions, c valid, R = 1 - C(N-c, k) / C(N, k) and sigma = sqrt(R (1 - R)): a valid one
    gets (1 - R) / sigma, an invalid one (1 - R - C(N-c-1, k-1) / C(N-1, k-1)) / sigma (0 when sigma
    = 0). They sum to zero over the group: use them with TRL's ``scale_rewards="none"``.
    """
    n = len(group)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise SeffiError(f"pass@k needs an integer k, got {k!r}")
    k = int(k)
    if not 1 <= k <= n:
        raise SeffiError(f"pass@k needs 1 <= k <= group size, got k={k} for a group of {n}")
    c = sum(1 for rec in group if rec[2])
    if c == 0 or n - c < k:
        return [0.0] * n
    mean = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))  # exact: no cancellation near 0 or 1
    sigma = math.sqrt(mean * (1 - mean))
    a_valid = float(1 - mean) / sigma
    a_invalid = float(1 - mean - Fraction(math.comb(n - c - 1, k - 1), math.comb(n - 1, k - 1))) / sigma
    return [a_valid if rec[2] else a_invalid for rec in group]


class OutcomeCounts:
    """Historical counts N(x, o) of `historical_bonus`: completions of input x with outcome o."""

    def __init__(self, counts: Mapping[str, Mapping[Outcome, int]] | None = None) -> None:
        self._counts: dict[str, dict[Outcome, int]] = {}
        for x, row in (counts or {}).items():
            for o, n in row.items():
                if int(n) < 0:
                    raise SeffiError(f"an outcome count must be >= 0, got {n!r} for {x!r}, {o!r}")
                self._counts.setdefault(str(x), {})[tuple(o)] = int(n)

    def count(self, input_id: str, outcome: Iterable[str]) -> int:
        """N(x, o): completions of ``input_id`` seen with match set ``outcome``."""
        return self._counts.get(input_id, {}).get(tuple(outcome), 0)

    def total(self, input_id: str) -> int:
        """Completions of ``input_id`` seen so far."""
        return sum(self._counts.get(input_id, {}).values())

    def update(self, records: Iterable[Record]) -> None:
        """Count each record's outcome under its input id."""
        for x, outcome, _ in records:
            row = self._counts.setdefault(x, {})
            row[tuple(outcome)] = row.get(tuple(outcome), 0) + 1

    def as_dict(self) -> dict[str, dict[Outcome, int]]:
        """A copy of the counts, ``{input id: {outcome: N}}`` (what the constructor takes)."""
        return {x: dict(row) for x, row in self._counts.items()}


def historical_bonus(
    group: Sequence[Record],
    counts: OutcomeCounts,
    c: float = OUTCOME_C,
    *,
    valid_only: bool = False,
    update: bool = True,
) -> list[float]:
    """Validity plus a UCB-style bonus on rarely seen outcomes, for each completion of one group.

    ``r_i = valid_i + c / sqrt(1 + N(x, o_i))`` (Song, Kempe & Munos 2025, historical exploration),
    ``N`` read before the group is counted (then counted unless ``update=False``); ``valid_only``:
    the bonus goes to valid completions only.
    """
    c = check_scale("outcome bonus c", c, 0.0)
    out = []
    for x, outcome, valid in group:
        bonus = c / math.sqrt(1 + counts.count(x, outcome)) if (valid or not valid_only) else 0.0
        out.append((1.0 if valid else 0.0) + bonus)
    if update:
        counts.update(group)
    return out


def batch_penalty_rewards(
    group: Sequence[Record], c: float = OUTCOME_C, *, valid_only: bool = False
) -> list[float]:
    """Validity minus a penalty on outcomes repeated within the group, for each completion.

    ``r_i = valid_i - c * (n_{o_i} - 1) / (G - 1)`` (Song, Kempe & Munos 2025, batch exploration),
    ``n_{o_i}`` the group's completions with completion i's outcome (valid ones only, and only those
    penalised, with ``valid_only``).
    """
    c = check_scale("outcome penalty c", c, 0.0)
    g = len(group)
    seen = Counter(tuple(outcome) for _, outcome, valid in group if valid or not valid_only)
    out = []
    for _, outcome, valid in group:
        penalised = g > 1 and (valid or not valid_only)
        penalty = c * (seen[tuple(outcome)] - 1) / (g - 1) if penalised else 0.0
        out.append((1.0 if valid else 0.0) - penalty)
    return out


@dataclass(frozen=True)
class Method:
    """A reward rule: what `batch_rewards` needs for it, its options, `RewardMethod`'s ``extra`` options."""

    name: str
    needs: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()


#: Every rule by name; sources in docs/statistics.md, "Group rewards of the exploration methods".
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("valid"),
        Method("diversity", options=("weight",)),  # seffi
        Method("unlikeliness", ("logprobs",), ("beta",), ("reduction",)),  # He, Fried & Welleck 2025
        Method("passk", ("k",), extra=("k",)),  # Chen et al. 2025, Pass@k Training
        Method("outcome_ucb", ("counts",), ("c", "valid_only")),  # Song, Kempe & Munos 2025, historical
        Method("outcome_batch", options=("c", "valid_only")),  # Song, Kempe & Munos 2025, batch
    )
}


def batch_rewards(
    method: str,
    records: Sequence[Record],
    size: int | None,
    *,
    logprobs: Sequence[float] | None = None,
    k: int | None = None,
    counts: OutcomeCounts | None = None,
    **options: Any,
) -> list[float]:
    """Rewards of a gathered batch under ``method`` (a key of `METHODS`), group by group.

    ``logprobs`` (one per record) serve ``"unlikeliness"``, ``k`` ``"passk"`` and ``counts``
    ``"outcome_ucb"``, which reads every group's bonus from the counts as they stood before the batch
    and counts the batch after. ``size``: the group size (None: maximal runs of one input id).
    """
    spec = METHODS.get(method)
    if spec is None:
        raise SeffiError(f"unknown reward method {method!r}; choose one of {sorted(METHODS)}")
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise SeffiError(f"reward method {method!r} takes options {list(spec.options)}, got {unknown}")
    given = {"logprobs": logprobs, "k": k, "counts": counts}
    missing = [name for name in spec.needs if given[name] is None]
    if missing:
        raise SeffiError(f"reward method {method!r} needs {', '.join(missing)}")
    if logprobs is not None and len(logprobs) != len(records):
        raise SeffiError(f"{len(logprobs)} log-probabilities for a batch of {len(records)} completions")
    lp = np.asarray(logprobs, dtype=np.float64) if logprobs is not None else None
    before = OutcomeCounts(counts.as_dict()) if method == "outcome_ucb" and counts is not None else None

    def rule(group: list[Record], idx: list[int]) -> list[float]:
        if method == "valid":
            return valid_of(group).tolist()
        if method == "diversity":
            return diversity_rewards(group, **options)
        if method == "unlikeliness":
            return unlikeliness_rewards(group, lp[idx], **options)  # type: ignore[index]
        if method == "passk":
            return passk_advantages(group, k)  # type: ignore[arg-type]
        if method == "outcome_ucb":
            return historical_bonus(group, before, update=False, **options)  # type: ignore[arg-type]
        return batch_penalty_rewards(group, **options)

    out = [0.0] * len(records)
    for idx in split_groups(records, size):
        for i, r in zip(idx, rule([records[i] for i in idx], idx), strict=True):
            out[i] = r
    if method == "outcome_ucb":
        counts.update(records)  # type: ignore[union-attr]
    return out


class RewardMethod:
    """One method of `METHODS` with its options (checked now) and its state across steps.

    ``"unlikeliness"`` takes option ``reduction`` (``"mean"`` per token, the default, or ``"sum"``),
    ``"passk"`` needs ``k`` (its reward *is* the advantage) and ``"outcome_ucb"`` keeps its `counts`.

    Args:
        name: A key of `METHODS`.
        options: The method's options, e.g. ``{"beta": 0.25}``, ``{"k": 4}``, ``{"c": 0.5}``.
    """

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        spec = METHODS.get(name)
        if spec is None:
            raise SeffiError(f"unknown reward method {name!r}; choose one of {sorted(METHODS)}")
        if options is not None and not isinstance(options, Mapping):
            raise SeffiError(f"reward_options must be a mapping of option names, got {options!r}")
        opts = dict(options or {})
        allowed = (*spec.options, *spec.extra)
        if unknown := sorted(set(opts) - set(allowed)):
            raise SeffiError(f"reward {name!r} takes options {list(allowed)}, got {unknown}")
        self.name, self.needs_logprobs = name, "logprobs" in spec.needs
        self.k: int | None = opts.pop("k", None)
        self.reduction: str = opts.pop("reduction", "mean")
        self.options = opts
        self.counts = OutcomeCounts() if name == "outcome_ucb" else None
        if name == "passk":
            if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 1:
                raise SeffiError(
                    "reward 'passk' needs reward_options={'k': k} with 1 <= k <= num_generations, "
                    f"got k={self.k!r}"
                )
            self.k = int(self.k)
        if self.reduction not in ("sum", "mean"):
            raise SeffiError(f"unlikeliness reduction must be 'sum' or 'mean', got {self.reduction!r}")
        # A bad option fails when the scorer is built, not mid-training.
        batch_rewards(name, [("x", (), True)], None, logprobs=[0.0], k=1, counts=OutcomeCounts(), **opts)

    def score(
        self, records: Sequence[Record], size: int | None, logprobs: Sequence[float] | None, training: bool
    ) -> list[float]:
        """Rewards of one gathered batch; the counts advance on training batches only."""
        counts = self.counts
        if counts is not None and not training:
            counts = OutcomeCounts(counts.as_dict())  # an evaluation batch leaves the history alone
        return batch_rewards(
            self.name, records, size, logprobs=logprobs, k=self.k, counts=counts, **self.options
        )

    def state(self) -> list[list[Any]] | None:
        """The outcome counts as JSON rows ``[input id, [strategies...], N]`` (None without)."""
        if self.counts is None:
            return None
        return [[x, list(o), n] for x, row in sorted(self.counts.as_dict().items()) for o, n in row.items()]

    def load_state(self, rows: Sequence[Sequence[Any]] | None) -> None:
        """Restore `state` (ignored by a method without counts)."""
        if self.counts is not None and rows is not None:
            table: dict[str, dict[tuple[str, ...], int]] = {}
            for x, outcome, n in rows:
                table.setdefault(str(x), {})[tuple(str(s) for s in outcome)] = int(n)
            self.counts = OutcomeCounts(table)

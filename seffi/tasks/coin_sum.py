"""Pay a target amount with coins: greedy, minimum-coin, ascending and fewest-denominations."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from seffi.tasks._steps import Answer, Step, StepTask
from seffi.tasks.base import TaskConfig, TaskInput, Vocabulary, register_task

Counts = tuple[int, ...]  # coins used per denomination, ascending denominations


class CoinSumConfig(TaskConfig):
    """``num_coins`` denominations from ``1..max_coin``; targets ``min_target..max_target``."""

    num_coins: int = Field(3, ge=2, le=5)
    max_coin: int = Field(9, ge=2, le=20)
    min_target: int = Field(6, ge=1, le=60)
    max_target: int = Field(16, ge=1, le=60)
    include_one: float = Field(0.5, ge=0.0, le=1.0, description="probability that coin 1 is in the set")

    ordered_fields = (("min_target", "max_target"), ("num_coins", "max_coin"))  # distinct denominations


class CoinSumInput(TaskInput):
    """Pay exactly ``target`` with any number of coins of the denominations ``coins`` (ascending)."""

    coins: tuple[int, ...]
    target: int


def _representations(coins: tuple[int, ...], target: int) -> list[Counts]:
    """Every way to pay ``target``: count vectors over ``coins``, lexicographic."""
    if len(coins) == 1:
        return [] if target % coins[0] else [(target // coins[0],)]
    first, rest = coins[0], coins[1:]
    return [
        (k, *tail) for k in range(target // first + 1) for tail in _representations(rest, target - k * first)
    ]


def _lines(coins: tuple[int, ...], counts: Counts, descending: bool) -> list[Step]:
    order = range(len(coins) - 1, -1, -1) if descending else range(len(coins))
    return [("take", coins[i], counts[i]) for i in order if counts[i]]


@register_task
class CoinSum(StepTask[CoinSumInput, CoinSumConfig]):
    """Coin change with four payment procedures."""

    name = "coin_sum"
    strategy_names = ("greedy", "min_coin", "ascending", "fewest_denominations")
    command = ("take", 2)
    step_format = "take <coin> <count>"
    answer_format = "answer <number of coins>"

    def _draw(self, rng: np.random.Generator) -> dict[str, Any]:
        cfg = self.config
        one = int(rng.random() < cfg.include_one)
        rest = rng.choice(np.arange(2, cfg.max_coin + 1), size=cfg.num_coins - one, replace=False)
        coins = [1] * one + rest.tolist()
        target = int(rng.integers(cfg.min_target, cfg.max_target + 1))
        return {"coins": tuple(sorted(int(c) for c in coins)), "target": target}

    def prompt(self, x: CoinSumInput) -> str:
        return f"coins {' '.join(map(str, x.coins))} target {x.target}"

    def vocabulary(self) -> Vocabulary:
        top = max(self.config.max_coin, self.config.max_target + 1)
        return Vocabulary(("coins", "target", "take", "answer", *map(str, range(top + 1))))

    def _strategy_steps(self, x: CoinSumInput, strategy: str) -> list[Step] | None:
        coins = x.coins
        if strategy == "greedy":
            counts, rest = [0] * len(coins), x.target
            for i in range(len(coins) - 1, -1, -1):
                counts[i], rest = divmod(rest, coins[i])
            return None if rest else _lines(coins, tuple(counts), descending=True)
        reps = _representations(coins, x.target)
        if not reps:
            return None

        def larger_first(c: Counts) -> tuple[int, ...]:  # more of the large coins sorts first
            return tuple(-k for k in reversed(c))

        if strategy == "min_coin":
            best = min(reps, key=lambda c: (sum(c), larger_first(c)))
        elif strategy == "fewest_denominations":
            best = min(reps, key=lambda c: (sum(k > 0 for k in c), sum(c), larger_first(c)))
        else:  # ascending: fewest of the smallest coin, then of the next, ...
            best = min(reps)
        return _lines(coins, best, descending=strategy != "ascending")

    def _check(self, x: CoinSumInput, steps: list[Step]) -> str | None:
        total = 0
        for k, (_, coin, count) in enumerate(steps, 1):
            if coin not in x.coins:
                return f"step {k}: there is no coin {coin}"
            if count < 1:
                return f"step {k}: take at least one coin"
            total += coin * count
        if total != x.target:
            return f"the coins sum to {total}, not {x.target}"
        return None

    def _answer(self, x: CoinSumInput, steps: list[Step]) -> Answer:
        return (sum(s[2] for s in steps),)

    def _wrong_answer(self, x: CoinSumInput, steps: list[Step], rng: np.random.Generator) -> Answer:
        (n,) = self._answer(x, steps)
        return (n + 1 if n == 1 else n + int(rng.choice([-1, 1])),)

    def _max_steps(self, x: CoinSumInput) -> int:
        return x.target + 1  # every legal line pays at least 1

    def _off_candidates(self, x: CoinSumInput) -> list[list[Step]]:
        # Every payment both ways, and with its first multi-coin line split (no strategy splits one).
        out: list[list[Step]] = []
        for counts in _representations(x.coins, x.target):
            for descending in (True, False):
                lines = _lines(x.coins, counts, descending)
                out.append(lines)
                split = next((i for i, s in enumerate(lines) if s[2] > 1), None)
                if split is not None:
                    _, coin, count = lines[split]
                    halves = [("take", coin, 1), ("take", coin, count - 1)]
                    out.append([*lines[:split], *halves, *lines[split + 1 :]])
        return out

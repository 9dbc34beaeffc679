"""How far two labelers agree on the same samples: per strategy, Cohen's kappa and the 2x2 confusion."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["Agreement", "cohen_kappa"]


def cohen_kappa(confusion: np.ndarray) -> float | None:
    """Cohen's kappa of a 2x2 confusion ``[first says no/yes, second says no/yes]``; None when undefined.

    Args:
        confusion: int array, shape (2, 2): counts of (first's verdict, second's verdict).

    Returns:
        (p_o - p_e) / (1 - p_e), with p_o the observed agreement and p_e the agreement of two
        independent labelers with the same rates; None without samples or when p_e = 1.

    Examples:
        >>> cohen_kappa(np.array([[40, 10], [5, 45]]))
        0.7
    """
    c = np.asarray(confusion, dtype=np.float64)
    n = c.sum()
    if n == 0:
        return None
    p_first, p_second = c[1].sum() / n, c[:, 1].sum() / n
    expected = p_first * p_second + (1 - p_first) * (1 - p_second)
    if expected >= 1:
        return None
    return round(float(((c[0, 0] + c[1, 1]) / n - expected) / (1 - expected)), 12)


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


class Agreement:
    """Counts, per declared strategy, how the main labeler's match sets and a second one's compare.

    Args:
        second: ``samples -> [(match set, valid, reason)]`` of the second labeler.
        strategies: The declared strategy ids.
        names: What to call the two labelers in the summary.
    """

    def __init__(self, second: Callable, strategies: Sequence[str], names: tuple[str, str]) -> None:
        self.second, self.strategies, self.names = second, list(strategies), names
        self.confusion = np.zeros((len(self.strategies), 2, 2), dtype=np.int64)
        self.same = 0

    def add(self, first_sets: Sequence[frozenset[str]], samples: Sequence[Any]) -> None:
        """Compare the main labeler's match sets of ``samples`` with the second labeler's."""
        second_sets = [m for m, _, _ in self.second(samples)]
        for a, b in zip(first_sets, second_sets, strict=True):
            self.same += a == b
            for i, s in enumerate(self.strategies):
                self.confusion[i, int(s in a), int(s in b)] += 1

    def summary(self) -> dict[str, Any]:
        """Samples compared, the share with the same match set, and per strategy kappa and confusion."""
        n = int(self.confusion[0].sum()) if self.strategies else 0
        first, second = self.names
        return {
            "labelers": [first, second],
            "samples": n,
            "same_match_set": self.same / n if n else None,
            "strategies": {
                s: {
                    "kappa": cohen_kappa(self.confusion[i]),
                    f"{first}_only": int(self.confusion[i, 1, 0]),
                    f"{second}_only": int(self.confusion[i, 0, 1]),
                    "both": int(self.confusion[i, 1, 1]),
                    "neither": int(self.confusion[i, 0, 0]),
                }
                for i, s in enumerate(self.strategies)
            },
        }

    def line(self) -> str:
        """The summary in one line."""
        summary = self.summary()
        kappas = ", ".join(f"{s} {_fmt(v['kappa'])}" for s, v in summary["strategies"].items())
        same = summary["same_match_set"]
        return (
            f"agreement of {self.names[0]} and {self.names[1]} over {summary['samples']} samples: "
            f"same match set {_fmt(same)}; Cohen's kappa {kappas}"
        )

"""`BaselineAucSums`: each input's baseline AUCs by input code, against hand-set per-input AUCs."""

from __future__ import annotations

import math

import numpy as np

from seffi.coverage.env_baselines import BaselineAucSums

AUCS = {"a": (0.25, 0.75), "b": (0.5, 0.625), "c": (0.125, 1.0), "d": (None, 0.5)}
KEYS = [("t", x) for x in "abcd"]  # input code -> (task, input_id)


class Asked:
    """Per-input AUCs as an `EnvBaselines` gives them, counting each id asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def input_aucs(self, x: str) -> tuple[float | None, float | None]:
        self.asked.append(x)
        return AUCS[x]


def test_aucs_by_code_are_each_inputs_own_read_once_nan_where_unavailable() -> None:
    base, sums = Asked(), BaselineAucSums()
    got = sums.of(base, np.array([2, 0, 2]), KEYS)  # type: ignore[arg-type]
    assert got.tolist() == [[0.125, 1.0], [0.25, 0.75], [0.125, 1.0]]
    got = sums.of(base, np.array([3, 1, 0]), KEYS)  # type: ignore[arg-type]
    assert math.isnan(got[0, 0]) and got[0, 1] == 0.5 and got[1:].tolist() == [[0.5, 0.625], [0.25, 0.75]]
    assert sorted(base.asked) == ["a", "b", "c", "d"]  # every id asked once


def test_running_means_grow_with_the_inputs_and_stop_at_one_without_an_auc() -> None:
    base, sums = Asked(), BaselineAucSums()
    assert sums.mean(base, np.array([0, 2]), KEYS) == (0.1875, 0.875)  # type: ignore[arg-type]
    assert sums.mean(base, np.array([0, 2, 1]), KEYS) == ((0.25 + 0.125 + 0.5) / 3, (0.75 + 1.0 + 0.625) / 3)  # type: ignore[arg-type]
    assert sums.mean(base, np.array([0, 2, 1, 3]), KEYS) == (None, None)  # type: ignore[arg-type]
    assert sums.mean(base, np.array([0, 2, 1, 3, 3]), KEYS) == (None, None)  # type: ignore[arg-type]
    assert base.asked == ["a", "c", "b", "d"]  # nothing asked after the input without an AUC
    sums.restart()  # new input codes: every input read anew
    assert sums.mean(base, np.array([1]), KEYS) == (0.5, 0.625)  # type: ignore[arg-type]
    assert base.asked[-1] == "b"

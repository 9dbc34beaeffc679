"""Surface diversity metrics and Spearman's rho, against hand counts, a plain-Python DP and scipy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from seffi.errors import SeffiError
from seffi.models import surface
from seffi.models.surface import (
    SURFACE_KEYS,
    distinct_n,
    distinct_rate,
    pairwise_edit_distance,
    rank_correlation,
    surface_metrics,
)


def levenshtein(a: list[str], b: list[str]) -> int:
    """Textbook Levenshtein DP over token lists, one cell at a time (the reference)."""
    prev = list(range(len(b) + 1))
    for i, ta in enumerate(a, 1):
        cur = [i]
        for j, tb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ta != tb)))
        prev = cur
    return prev[-1]


def brute_edit_distance(texts: list[str]) -> float:
    pairs = list(itertools.combinations(texts, 2))
    if not pairs:
        return 0.0
    total = 0.0
    for s, t in pairs:
        a, b = s.split(), t.split()
        longer = max(len(a), len(b))
        total += levenshtein(a, b) / longer if longer else 0.0
    return total / len(pairs)


def test_distinct_n_counts_pooled_ngrams_and_texts_shorter_than_n_add_none() -> None:
    group = ["a b a b", "a b c", "x"]
    # unigrams: 4 + 3 + 1 = 8, distinct {a, b, c, x} = 4
    assert distinct_n(group, 1) == pytest.approx(4 / 8)
    # bigrams: (a b)(b a)(a b) + (a b)(b c) + none from "x" = 5, distinct {ab, ba, bc} = 3
    assert distinct_n(group, 2) == pytest.approx(3 / 5)
    # trigrams: (a b a)(b a b) + (a b c) = 3, all distinct
    assert distinct_n(group, 3) == pytest.approx(1.0)
    assert distinct_n(group, 4) == pytest.approx(1.0)  # (a b a b) only
    assert distinct_n(group, 5) == 0.0  # no text has 5 tokens: no n-gram at all
    assert distinct_n([], 1) == 0.0
    assert distinct_n(["", "  \n "], 1) == 0.0
    # newlines separate tokens like spaces: a trace's lines are its words
    assert distinct_n(["right\ndown", "right down"], 2) == pytest.approx(1 / 2)


def test_distinct_rate_is_exact_distinct_strings_over_group_size() -> None:
    assert distinct_rate(["a", "a", "b", "a b", "a  b"]) == pytest.approx(4 / 5)
    assert distinct_rate(["same"] * 8) == pytest.approx(1 / 8)
    assert distinct_rate([]) == 0.0


def test_pairwise_edit_distance_hand_case() -> None:
    # (a b c | a c): one deletion / 3; (a b c | ""): 3 / 3; (a c | ""): 2 / 2
    assert pairwise_edit_distance(["a b c", "a c", ""]) == pytest.approx((1 / 3 + 1 + 1) / 3)
    # (right down answer 1 1 | down right answer 1 1): two substitutions / 5
    assert pairwise_edit_distance(["right down answer 1 1", "down right answer 1 1"]) == pytest.approx(0.4)
    assert pairwise_edit_distance(["", ""]) == 0.0
    assert pairwise_edit_distance(["only one"]) == 0.0
    assert pairwise_edit_distance([]) == 0.0
    assert pairwise_edit_distance(["x y z", "x y z"]) == 0.0
    assert pairwise_edit_distance(["a b", "c d e"]) == pytest.approx(1.0)  # 2 substitutions + 1 insertion


@pytest.mark.parametrize("seed", range(4))
def test_pairwise_edit_distance_equals_a_cell_by_cell_dp_on_random_groups(seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = ["right", "down", "left", "up", "answer", "1", "2"]
    group = [
        " ".join(rng.choice(words, size=int(rng.integers(0, 15)))) for _ in range(int(rng.integers(2, 12)))
    ]
    group.append(group[0])  # a duplicate pair at distance 0
    assert pairwise_edit_distance(group) == pytest.approx(brute_edit_distance(group), abs=1e-12)


def test_pairwise_edit_distance_is_the_same_when_pairs_are_split_into_chunks(monkeypatch) -> None:
    rng = np.random.default_rng(7)
    group = [" ".join(rng.choice(list("abcd"), size=int(rng.integers(1, 9)))) for _ in range(9)]
    whole = pairwise_edit_distance(group)
    monkeypatch.setattr(surface, "_DP_CELLS", 20)  # a handful of pairs per chunk
    assert pairwise_edit_distance(group) == pytest.approx(whole, abs=1e-12)
    assert whole == pytest.approx(brute_edit_distance(group), abs=1e-12)


def test_surface_metrics_holds_every_metric_of_the_group() -> None:
    group = ["right down answer 1 1", "down right answer 1 1", "right down answer 1 1"]
    got = surface_metrics(group)
    assert tuple(got) == SURFACE_KEYS
    for n in (1, 2, 3, 4):
        assert got[f"distinct_{n}"] == distinct_n(group, n)
    assert got["distinct_1"] == pytest.approx(4 / 15)  # right down answer 1
    # bigrams: (right down)(down answer)(answer 1)(1 1) x2 + (down right)(right answer)... = 12, distinct 6
    assert got["distinct_2"] == pytest.approx(6 / 12)
    assert got["edit_distance"] == pytest.approx((0.4 + 0.0 + 0.4) / 3)
    assert got["distinct_rate"] == pytest.approx(2 / 3)


def test_surface_metrics_reject_what_is_not_a_group_of_strings() -> None:
    with pytest.raises(SeffiError, match="not one string"):
        surface_metrics("right down")
    with pytest.raises(SeffiError, match="element 1 is NoneType"):
        distinct_rate(["a", None])
    with pytest.raises(SeffiError, match="sequence of strings"):
        pairwise_edit_distance(3)
    with pytest.raises(SeffiError, match="positive int"):
        distinct_n(["a"], 0)


def test_rank_correlation_hand_case_with_ties() -> None:
    # ranks of a: 1, 2.5, 2.5, 4; of b: 1, 3, 2, 4. Centred: (-1.5, 0, 0, 1.5) and (-1.5, .5, -.5, 1.5).
    # rho = 4.5 / sqrt(4.5 * 5)
    assert rank_correlation([1, 2, 2, 3], [10, 30, 20, 40]) == pytest.approx(4.5 / np.sqrt(22.5))
    assert rank_correlation([1, 2, 3], [5, 50, 500]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(rank_correlation([1, 1, 1], [1, 2, 3]))
    assert np.isnan(rank_correlation([1], [2]))
    assert np.isnan(rank_correlation([1, float("nan"), 2], [1, 2, 3]))
    with pytest.raises(SeffiError, match="of one length"):
        rank_correlation([1, 2], [1, 2, 3])
    with pytest.raises(SeffiError, match="numbers"):
        rank_correlation(["a", "b"], [1, 2])


def test_rank_correlation_equals_scipy_spearmanr_with_ties() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for size in (3, 7, 20, 61):
        a = rng.integers(0, 5, size=size).astype(float)  # many ties
        b = a + rng.normal(0, 2, size=size)
        b[: size // 3] = np.round(b[: size // 3])
        assert rank_correlation(a, b) == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)

"""The fast periodic log path gives the numbers the plain definitions give.

Each test pins a fast path to a reference computed independently: per-run statistics summed by hand,
one score interval per block, a fresh ``point_from_totals``, the dict of env columns.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from seffi.coverage import CoverageTracker
from seffi.coverage import sums as sums_mod
from seffi.coverage.assign import RunAssigner
from seffi.coverage.curves import TAUS
from seffi.coverage.sums import BASE_STATS, N_STATS, GroupTotals, sums_from_runs
from seffi.coverage.sums_curves import point_from_totals
from seffi.episodes import EpisodeBatch


def _reference_sums(fh, lengths, unit, m, K, fvh, fv):
    """Per-input sums, sums of squares and A_r^2 sums, one run and one k at a time (plain Python)."""
    U = len(m)
    sums = np.zeros((U, K, N_STATS), dtype=np.int64)
    sq = np.zeros_like(sums)
    auc_sq = np.zeros((U, 2), dtype=np.int64)
    n_runs = np.zeros(U, dtype=np.int64)
    S = {name: j for j, name in enumerate(BASE_STATS)}
    for r in range(len(fh)):
        if lengths[r] < K:
            continue
        u = unit[r]
        n_runs[u] += 1
        a = [0, 0]
        for k in range(1, K + 1):
            cov = sum(1 for f in fh[r] if 0 <= f < k)
            before = sum(1 for f in fh[r] if 0 <= f < k - 1)
            vcov = sum(1 for f in fvh[r] if 0 <= f < k)
            row = np.zeros(N_STATS, dtype=np.int64)
            row[S["runs"]] = 1
            row[S["covered"]] = cov
            row[S["novel"]] = cov > before
            row[S["new"]] = cov - before
            row[S["full"]] = cov >= m[u]
            row[S["valid_covered"]] = vcov
            row[S["valid_any"]] = 0 <= fv[r] < k
            for t, tau in enumerate(TAUS):
                need = math.ceil(m[u] * tau - 1e-9)
                row[7 + 2 * t] = before < need
                row[8 + 2 * t] = before < need <= cov
            sums[u, k - 1] += row
            sq[u, k - 1] += row * row
            a[0] += cov
            a[1] += vcov
        auc_sq[u] += np.array(a) ** 2
    return sums, sq, auc_sq, n_runs


@pytest.mark.parametrize("chunk", [3, 4096])
def test_sums_from_runs_match_per_run_statistics_by_hand(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The blocked per-statistic reduction gives every integer of the plain sums."""
    monkeypatch.setattr(sums_mod, "_CHUNK", chunk)  # 3: runs of one input span several chunks
    rng = np.random.default_rng(7)
    R, C, K, U = 23, 5, 6, 4
    fh = np.where(rng.random((R, C)) < 0.7, rng.integers(0, 9, (R, C)), -1)
    fvh = np.where(rng.random((R, C)) < 0.5, fh, -1)
    fv = rng.integers(-1, 8, R)
    lengths = np.where(rng.random(R) < 0.8, K, K - 2)
    unit = rng.integers(0, U, R)
    m = np.array([5, 6, 7, 5])
    got, _ = sums_from_runs(fh, lengths, unit, m, K, first_valid_hit=fvh, first_valid=fv)
    want = _reference_sums(fh, lengths, unit, m, K, fvh, fv)
    for name, w in zip(("sums", "sq", "auc_sq", "n_runs"), want, strict=True):
        if name == "sq":  # kept for the count statistics; an indicator's square is its sum
            for j in range(N_STATS):
                np.testing.assert_array_equal(got.squares(j), w[:, :, j], err_msg=f"sq {j}")
            continue
        np.testing.assert_array_equal(got.full() if name == "sums" else getattr(got, name), w, err_msg=name)


def test_point_estimates_are_reused_until_a_run_completes_and_follow_loads() -> None:
    """``point()`` is recomputed when a run completes, never stale, never shared."""
    K = 3
    t = CoverageTracker(("a", "b", "c"), budget=K)

    def record(x: str, env: int, k: int, hit: int) -> None:
        hits = np.zeros((1, 3), dtype=bool)
        hits[0, hit] = True
        t.record(
            EpisodeBatch.of(t.strategies, [x], hits, env_index=[env], sample_index=[k - 1], run_index=[0])
        )

    for k, hit in ((1, 0), (2, 0), (3, 1)):
        record("x1", 0, k, hit)
    first = t.point()
    first["auc"] = -1.0  # a caller's change must not reach the next call
    assert t.point()["auc"] == pytest.approx((1 / 3 + 1 / 3 + 2 / 3) / 3)
    record("x1", 1, 1, 2)  # an open run: the sums, and so the estimates, stay
    assert t.point()["auc"] == pytest.approx((1 / 3 + 1 / 3 + 2 / 3) / 3)
    for k, hit in ((2, 1), (3, 0)):
        record("x1", 1, k, hit)  # completes: coverage 1/3, 2/3, 3/3
    fresh = point_from_totals(GroupTotals.of(t.derived_sums(K)[0], t.m))
    assert t.point()["auc"] == fresh["auc"] == pytest.approx((4 / 9 + 6 / 9) / 2)
    other = CoverageTracker(("a", "b", "c"), budget=K)
    for _ in range(K):
        other.update("x1", {"c"}, stream=0)
    t.load_state_dict(other.state_dict())
    assert t.point()["auc"] == pytest.approx(1 / 3)


def test_env_columns_by_lookup_table_equal_the_dict() -> None:
    """Env columns by lookup table equal the dict's (new, huge, restored envs)."""
    a = RunAssigner(4)
    seen: dict[int, int] = {}

    def want(env: list[int]) -> list[int]:
        for e in sorted(set(env)):
            seen.setdefault(e, len(seen))
        return [seen[e] for e in env]

    for env in ([3, 1, 3], [1, 3], [0, 5, 1], [70_000, 2, 0], [2, 70_000], [5, 5]):
        assert a.env_columns(np.array(env)).tolist() == want(env)
    a.restore_open(0, 9, 0, 1, 0, 0)  # a loaded open run adds env 9
    seen.setdefault(9, len(seen))
    assert a.env_columns(np.array([9, 0])).tolist() == [seen[9], seen[0]]

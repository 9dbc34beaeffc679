"""``OracleBaseline``: the no-repeat oracle that emits each feasible strategy's reference trace."""

from __future__ import annotations

import math
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from seffi._seeding import SeedLike, rngs
from seffi.coverage._common import (
    _check_strategies,
    _columns,
    _input_id,
    _mean_curves,
    _per_input_m,
    named,
    rarity_bin_matrix,
)
from seffi.coverage.curves import TAUS, Curves, TimeToCoverage, check_budget, tau_key
from seffi.coverage.sums_curves import curves_from_runs
from seffi.errors import SeffiError

#: What ``OracleBaseline`` takes, named in its input-format errors.
ORACLE_INPUT_FORMAT = (
    "{strategy: match set of its reference trace} (e.g. task.reference_match_sets(x)) or "
    "{input_id: that}, not a list of samples' match sets"
)

#: One input of the oracle: (strategy columns, M_x, {feasible column: its trace's match-set mask}).
_Part = tuple[list[str], int, dict[int, int]]


def _unambiguous_oracle(f: int, m: int, K: int, bins: np.ndarray | None, n_bins: int) -> Curves:
    """Analytic oracle when every reference trace matches exactly its own strategy: C(k) = min(k, f) / m."""
    ks = np.arange(1, K + 1)
    covered = np.minimum(ks, f).astype(np.float64)
    ttc = {}
    for t in TAUS:
        need = math.ceil(t * m - 1e-9)
        ttc[tau_key(t)] = TimeToCoverage.from_survival(
            t, (covered < need).astype(np.float64), mean=float(need) if need <= f else None
        )
    new = (ks <= f).astype(np.float64)
    full = ((covered >= m) & (f >= m)).astype(np.float64)
    point = {"coverage": covered / m, "novelty": new, "expected_new": new.copy(), "full_coverage": full}
    c = Curves.from_point("oracle", K, point, ttc, n_inputs=1)
    if bins is not None:  # each feasible strategy is covered by step k w.p. min(k, f) / f
        per = covered / max(f, 1)
        c.coverage_by_rarity = np.stack([per * (bins[:f] == b).sum() / m for b in range(n_bins)])
    return c


#: Monte Carlo runs of the oracle when its exact DP is too large (standard error <= 0.5 / 64).
MC_ORACLE_RUNS = 4096


def _pack_words(bits: np.ndarray) -> np.ndarray:
    """Pack bool rows (N, M) into 64-bit words (N, ceil(M / 64)) (zero padding)."""
    packed = np.packbits(bits, axis=1)
    pad = (-packed.shape[1]) % 8
    packed = np.pad(packed, ((0, 0), (0, pad))) if pad else packed
    return np.ascontiguousarray(packed).view(np.uint64)


def oracle_first_hits(
    refmask: Mapping[int, int], M: int, K: int, runs: int, rng: np.random.Generator
) -> np.ndarray:
    """First-hit indices (runs, M) of simulated no-repeat oracle runs (-1 never), all advanced together.

    ``refmask``: column -> bit mask of its reference trace's match set.
    """
    feas = np.fromiter(refmask, dtype=np.int64, count=len(refmask))  # (F,)
    # Python ints, so masks of any width decode (numpy int64 shifts would overflow past 63 columns).
    R_sets = np.array([[(refmask[int(s)] >> j) & 1 for j in range(M)] for s in feas], dtype=np.uint8)
    R_sets = R_sets.reshape(-1, M) > 0  # (F, M): the match set of each feasible strategy's trace
    R_words = _pack_words(R_sets)  # (F, W) 64-bit words: a set test is one AND per word
    covered = np.zeros((runs, M), dtype=bool)
    fh = np.full((runs, M), -1, dtype=np.int64)
    active = np.arange(runs)  # runs that can still move; a stalled run stays stalled
    for k in range(min(K, M)):
        cov = covered[active]
        # Eligible: the strategy itself is uncovered and its trace matches some uncovered column.
        free = ~_pack_words(cov)  # padding bits are set here but never in R_words
        hits = R_words[None, :, :] & free[:, None, :]  # (A, F, W)
        adds = hits[:, :, 0] != 0 if hits.shape[2] == 1 else (hits != 0).any(axis=2)
        eligible = adds & ~cov[:, feas]  # (A, F)
        live = eligible.any(axis=1)
        if not live.all():
            active, cov, eligible = active[live], cov[live], eligible[live]
            if active.size == 0:
                break
        # Uniform choice among the eligible: the largest of iid uniform keys.
        pick = np.argmax(np.where(eligible, rng.random(eligible.shape), -1.0), axis=1)
        new = R_sets[pick] & ~cov
        r, c = np.nonzero(new)
        fh[active[r], c] = k
        covered[active] = cov | new
    return fh


class OracleBaseline:
    """The no-repeat oracle, exact per input and averaged over inputs.

    Each step emits the reference trace of a uniformly chosen strategy that is not yet covered and
    whose trace still adds something.

    Args:
        reference_sets: ``{strategy: match set of its reference trace}`` (``task.reference_match_sets(x)``;
            keys are the feasible strategies), or ``{input_id: that}``. None: one input where every
            one of ``num_strategies`` strategies is feasible and unambiguous.
        strategies: declared strategy ids (M_x = their number).
        num_strategies: M_x when strategies are not declared (int or per input).
        seed: seed of the Monte Carlo fallback.
        max_states: above this many reachable covered-sets the exact DP gives way to Monte Carlo.
    """

    def __init__(
        self,
        reference_sets: Mapping[Any, Any] | None = None,
        *,
        strategies: Sequence[str] | None = None,
        num_strategies: int | Mapping[str, int] | None = None,
        seed: SeedLike = 0,
        max_states: int = 200_000,
    ) -> None:
        strategies = _check_strategies(strategies)
        if reference_sets is None:
            m = num_strategies if strategies is None else len(strategies)
            if not isinstance(m, int) or m < 1:
                raise ValueError("OracleBaseline needs reference_sets, strategies or num_strategies")
            names = list(strategies) if strategies is not None else [f"s{i}" for i in range(m)]
            reference_sets = {s: frozenset([s]) for s in names}
            strategies = tuple(names)
        if not isinstance(reference_sets, Mapping) or not reference_sets:
            raise ValueError("reference_sets must be a non-empty {strategy: match set} dict")
        per_input = all(isinstance(v, Mapping) for v in reference_sets.values())
        if not per_input and any(isinstance(v, Mapping) for v in reference_sets.values()):
            raise SeffiError(
                "reference sets mix per-input dicts with other values; "
                f"the oracle takes {ORACLE_INPUT_FORMAT}"
            )
        data = reference_sets if per_input else {None: reference_sets}
        self._parts: dict[str | None, _Part] = {}
        for key, refs in data.items():
            iid = None if key is None else _input_id(key)
            where = "reference sets" + ("" if iid is None else f" of input {iid!r}")
            used = set(refs)
            for s, ms in refs.items():
                # Name the expected format, not "TypeError: unhashable type: 'list'" deep inside.
                if (
                    isinstance(ms, str)
                    or not isinstance(ms, Iterable)
                    or not all(isinstance(e, str) for e in ms)
                ):
                    raise SeffiError(
                        f"{where}: match set of {s!r} must be an iterable of strategy ids (str), got "
                        f"{reprlib.repr(ms)}; the oracle takes {ORACLE_INPUT_FORMAT}"
                    )
                used |= set(ms)
            cols, m = _columns(used, strategies, _per_input_m(num_strategies, key), where)
            index = {s: j for j, s in enumerate(cols)}
            refmask = {index[s]: sum(1 << index[x] for x in set(ms)) for s, ms in refs.items()}
            self._parts[iid] = (cols, m, refmask)
        self.seed, self.max_states = seed, max_states

    def strategy_sets(self) -> dict[str | None, tuple[tuple[str, ...], int]]:
        """Per input key (``None`` for a single input): (the strategy ids the oracle names, M_x)."""
        return {key: (named(cols), int(m)) for key, (cols, m, _) in self._parts.items()}

    def curves(self, K: int, *, rarity: Any = None, rarity_bins: int = 4) -> Curves:
        """Exact curves (analytic or DP over covered sets; Monte Carlo above ``max_states``).

        Args:
            K: budget.
            rarity: base law for the common-vs-rare split (an ``IidBaseline`` or
                ``{input_id: {strategy: pi}}``); None skips it.
            rarity_bins: number of bins.
        """
        K = check_budget(K)
        gens = rngs(self.seed, len(self._parts))
        parts = []
        items = sorted(self._parts.items(), key=lambda kv: str(kv[0]))
        # Inputs with the same strategies, traces and rarity bins share their exact curves (not Monte Carlo).
        exact: dict[tuple, Curves] = {}
        for (key, (cols, m, refmask)), rng in zip(items, gens, strict=True):
            bins = None
            if rarity is not None:
                bins = rarity_bin_matrix(rarity, [key], cols, np.array([m]), rarity_bins)[0]
            same = (tuple(cols), m, tuple(sorted(refmask.items())), None if bins is None else bins.tobytes())
            c = exact.get(same)
            if c is None:
                if all(r == 1 << s for s, r in refmask.items()):
                    c = _unambiguous_oracle(len(refmask), m, K, bins, rarity_bins)
                else:
                    c = self._input_curves((cols, m, refmask), K, rng, bins, rarity_bins)
                c.valid_coverage, c.valid_auc = c.coverage, c.auc  # reference traces are correct solutions
                c.valid_at_k = np.full(K, 1.0 if refmask else 0.0)
                if not c.notes:  # exact (analytic or DP)
                    exact[same] = c
            parts.append(c)
        return _mean_curves(parts, "oracle", K, rarity_bins, [key for key, _ in items])

    def _input_curves(
        self, part: _Part, K: int, rng: np.random.Generator, bins: np.ndarray | None, n_bins: int
    ) -> Curves:
        cols, m, refmask = part
        M = len(cols)
        dist: dict[int, float] = {0: 1.0}
        # Per step: the law of the covered set (a bitmask); absorbed after at most M steps.
        per_s = np.zeros((K, M))
        count_law = np.zeros((K, M + 1))
        new_prob = np.zeros(K)
        for k in range(K):
            nxt: dict[int, float] = {}
            moved = 0.0
            for S, pr in dist.items():
                options = [r for s, r in refmask.items() if not (S >> s) & 1 and (r | S) != S]
                if not options:
                    nxt[S] = nxt.get(S, 0.0) + pr
                    continue
                share = pr / len(options)
                moved += pr
                for r in options:
                    nxt[S | r] = nxt.get(S | r, 0.0) + share
            dist = nxt
            new_prob[k] = moved
            if len(dist) > self.max_states:
                return self._mc_curves(part, K, rng, bins, n_bins)
            for S, pr in dist.items():
                count_law[k, bin(S).count("1")] += pr
                if bins is not None:
                    per_s[k] += pr * ((S >> np.arange(M)) & 1)
            if moved == 0.0:
                count_law[k + 1 :] = count_law[k]
                per_s[k + 1 :] = per_s[k]
                break
        covered = count_law @ np.arange(M + 1)
        point = {
            "coverage": covered / m,
            "novelty": new_prob,
            "expected_new": np.diff(np.r_[0.0, covered]),
            "full_coverage": count_law[:, m:].sum(axis=1) if m <= M else np.zeros(K),
        }
        ttc = {
            tau_key(t): TimeToCoverage.from_survival(
                t, count_law[:, : min(math.ceil(t * m - 1e-9), M + 1)].sum(axis=1)
            )
            for t in TAUS
        }
        c = Curves.from_point("oracle", K, point, ttc, n_inputs=1)
        if bins is not None:
            c.coverage_by_rarity = np.stack([per_s[:, bins == b].sum(axis=1) / m for b in range(n_bins)])
        return c

    def _mc_curves(
        self, part: _Part, K: int, rng: np.random.Generator, bins: np.ndarray | None, n_bins: int
    ) -> Curves:
        cols, m, refmask = part
        runs = MC_ORACLE_RUNS
        fh = oracle_first_hits(refmask, len(cols), K, runs, rng)
        c = curves_from_runs(
            fh,
            np.full(runs, K),
            np.full(runs, m),
            K,
            n_boot=0,
            kind="oracle",
            rarity_bin=None if bins is None else np.tile(bins, (runs, 1)),
            n_bins=n_bins,
        )
        # A [0, 1]-valued mean of R runs has sd <= 1/2; a step's new count lies in [0, widest trace].
        se = 0.5 / math.sqrt(runs)
        widest = max((bin(r).count("1") for r in refmask.values()), default=1)
        c.notes.append(
            f"oracle curves are Monte Carlo ({runs} runs; standard error <= {se:.4f}, "
            f"<= {se * widest:.4f} for expected new strategies)"
        )
        c.n_runs, c.samples = 0, 0
        return c

"""``EnvBaselines``: the exact iid and oracle baselines of an env's inputs, computed once and cached."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from seffi._seeding import SeedLike
from seffi.coverage.curves import Curves, check_budget
from seffi.coverage.iid import IidBaseline
from seffi.coverage.oracle import OracleBaseline
from seffi.coverage.room import grow
from seffi.errors import SeffiError


def check_agrees(what: str, baseline: Any, strategies: Sequence[str]) -> None:
    """Raise `SeffiError` unless a user ``what`` ("iid"/"oracle") baseline has the monitor's ids and M.

    Another M would silently change the gain (an iid law over 3 of 4 strategies reaches C = 1 where
    the policy's ceiling is 0.75). Objects without ``strategy_sets()`` are not checked.
    """
    sets = getattr(baseline, "strategy_sets", None)
    if baseline is None or not callable(sets):
        return
    declared, m_monitor = set(strategies), len(strategies)
    for key, (ids, m) in sets().items():
        unknown = sorted(set(ids) - declared)
        if m == m_monitor and not unknown:
            continue
        where = "" if key is None else f" (input {key!r})"
        unnamed = f" and {m - len(ids)} unnamed" if m > len(ids) else ""
        problem = f"names {unknown}, which the monitor does not declare" if unknown else "has another M"
        raise SeffiError(
            f"the {what} baseline{where} counts coverage over M = {m} strategies {sorted(ids)}{unnamed}, "
            f"but the monitor's M = {m_monitor}: {sorted(declared)}; the {what} baseline {problem}. "
            f"Build it with strategies={list(strategies)}"
            + (" (IidBaseline.from_match_distribution for a law over match sets)" if what == "iid" else "")
        )


@contextmanager
def _env_fact_errors(fact: str) -> Iterator[None]:
    """Turn a ValueError raised while building a baseline from the env's ``fact`` into one SeffiError."""
    try:
        yield
    except ValueError as exc:  # the env's fact names other strategies, or is not what it should be
        if isinstance(exc, SeffiError):
            raise
        raise SeffiError(f"the env's {fact}: {exc}") from exc


class EnvBaselines:
    """Exact iid and oracle curves of an env's inputs, cached per input (AUCs) and per input set (curves).

    It reads the env's facts through callables only; a user baseline replaces the env's.

    Args:
        strategies: The declared strategy ids.
        budget: K.
        base_law: ``base_law(x, valid_only=False)``: the iid base sampler's law of input ``x`` over
            match sets (``task.base_match_distribution``); None: no exact iid baseline.
        references: ``references(x)``: the oracle's reference match sets of ``x``; None: no oracle.
        pool: ``pool()``: every input id of the env (baselines over the whole pool are computed once).
        iid: A user iid baseline, used instead of ``base_law`` (checked by `check_agrees`).
        oracle: A user oracle baseline, used instead of ``references`` (checked likewise).
        seed: Seed of the oracle's Monte Carlo parts.
        iid_seed: Seed of the iid curves' Monte Carlo parts and of an estimated iid's bootstrap.
        oracle_rarity: Split the oracle's coverage by the iid law's rarity bins (the report's panel).
        env_id: ``env_id(x)``: the id ``base_law`` and ``references`` take for input ``x`` (seffi keeps
            ids as str; an env reporting int ids keys its facts by int). Default: ``x`` itself.

    Raises:
        SeffiError: A user baseline counts coverage over other strategies or another M.
    """

    def __init__(
        self,
        strategies: Sequence[str],
        budget: int,
        *,
        base_law: Callable[..., Any] | None = None,
        references: Callable[[str], Any] | None = None,
        pool: Callable[[], Iterable[str]] | None = None,
        iid: Any = None,
        oracle: Any = None,
        seed: SeedLike = 0,
        iid_seed: SeedLike = 0,
        oracle_rarity: bool = False,
        env_id: Callable[[str], Any] | None = None,
    ) -> None:
        if env_id is not None:
            law, refs = base_law, references
            base_law = law and (lambda x, **kw: law(env_id(x), **kw))  # type: ignore[misc]
            references = refs and (lambda x: refs(env_id(x)))  # type: ignore[misc]
        self.strategies = tuple(strategies)
        self.budget = check_budget(budget)
        for what, baseline in (("iid", iid), ("oracle", oracle)):
            check_agrees(what, baseline, self.strategies)
        self.base_law, self.references, self._pool_fn = base_law, references, pool
        self.user_iid, self.user_oracle = iid, oracle
        self.seed, self.iid_seed, self.oracle_rarity = seed, iid_seed, oracle_rarity
        #: Wall time spent computing baselines (each computed once).
        self.seconds = 0.0
        self._aucs: dict[str, tuple[float | None, float | None]] = {}
        self._users: dict[int, Curves] = {}
        self._user_rows: dict[int, dict[str, int]] = {}  # per user baseline: input_id -> its row
        self._laws: dict[str, Any] = {}
        self._curves: dict[frozenset[str], tuple[Curves | None, Curves | None]] = {}
        self._pool: frozenset[str] | None = None
        self.iid_baseline: IidBaseline | None = None  # of the last iid curves (the rarity law of a report)

    @classmethod
    def from_env(cls, env: Any, budget: int, **kwargs: Any) -> EnvBaselines:
        """Baselines of a seffi env's ``unwrapped``; ``kwargs`` as `EnvBaselines`."""
        return cls(
            env.strategies,
            budget,
            base_law=getattr(env, "base_match_distribution", None),
            references=getattr(env, "reference_match_sets", None),
            pool=lambda: env.input_ids,
            **kwargs,
        )

    def law(self, x: str) -> Any:
        """Input ``x``'s base law over match sets (``base_law(x)``), read once; None without one."""
        if self.base_law is None:
            return None
        if x not in self._laws:
            self._laws[x] = self.base_law(x)
        return self._laws[x]

    @property
    def sources(self) -> bool:
        """Whether any baseline can be computed (an env law, references or a user baseline)."""
        return any(b is not None for b in (self.user_iid, self.base_law, self.user_oracle, self.references))

    @property
    def available(self) -> bool:
        """Whether both baselines exist (else the gain is undefined)."""
        has_iid = self.user_iid is not None or self.base_law is not None
        return has_iid and (self.user_oracle is not None or self.references is not None)

    def _baselines(self, inputs: Sequence[str]) -> tuple[IidBaseline | None, OracleBaseline | None]:
        """The (iid, oracle) baselines over ``inputs``: a user's, else built from the env's facts, or None."""
        iid, oracle = self.user_iid, self.user_oracle
        if iid is None and self.base_law is not None and inputs:
            raw = {x: self.base_law(x) for x in inputs}
            valid = {x: self.base_law(x, valid_only=True) for x in inputs}
            with _env_fact_errors("base_match_distribution"):
                iid = IidBaseline.from_match_distribution(
                    raw, strategies=self.strategies, valid_distribution=valid
                )
        if oracle is None and self.references is not None and inputs:
            refs = {x: self.references(x) for x in inputs}
            with _env_fact_errors("reference_match_sets"):
                oracle = OracleBaseline(refs, strategies=self.strategies, seed=self.seed)
        return iid, oracle

    def _user_curves(self, baseline: Any) -> Curves:
        """A user baseline's curves over its inputs, computed once (an `IidBaseline`'s with ``iid_seed``)."""
        if id(baseline) not in self._users:
            seed = {"seed": self.iid_seed} if isinstance(baseline, IidBaseline) else {}  # else any .curves(K)
            self._users[id(baseline)] = baseline.curves(self.budget, **seed)
        return self._users[id(baseline)]

    def _input_auc(self, baseline: Any, x: str) -> float | None:
        """Input ``x``'s AUC under ``baseline`` (a user's without per-input AUCs: its overall AUC)."""
        if baseline is None:
            return None
        if baseline is self.user_iid or baseline is self.user_oracle:
            c = self._user_curves(baseline)
            if c.input_auc is None or c.input_keys is None:
                return c.auc
            if id(baseline) not in self._user_rows:  # built once: a window asks input by input
                self._user_rows[id(baseline)] = {str(i): j for j, (_, i) in enumerate(c.input_keys)}
            row = self._user_rows[id(baseline)].get(x)
            return None if row is None else float(c.input_auc[row])
        if isinstance(baseline, IidBaseline):
            return baseline.aucs(self.budget)[x]
        return baseline.curves(self.budget).auc

    def input_aucs(self, x: str) -> tuple[float | None, float | None]:
        """(iid AUC, oracle AUC) of input ``x``, each computed once (None where unavailable)."""
        if x not in self._aucs:
            started = time.perf_counter()
            iid, oracle = self._baselines([x])
            self._aucs[x] = (self._input_auc(iid, x), self._input_auc(oracle, x))
            self.seconds += time.perf_counter() - started
        return self._aucs[x]

    def aucs(self, inputs: Sequence[str]) -> tuple[float | None, float | None]:
        """(iid AUC, oracle AUC) over ``inputs``: the mean of per-input AUCs (None where one is missing)."""
        pairs = [self.input_aucs(x) for x in inputs]
        iid, oracle = [p[0] for p in pairs], [p[1] for p in pairs]
        iid_auc, oracle_auc = (None if not v or None in v else float(np.mean(v)) for v in (iid, oracle))
        return iid_auc, oracle_auc

    def curves(self, inputs: Iterable[str], *, pool: bool = False) -> tuple[Curves | None, Curves | None]:
        """(iid, oracle) curves over ``inputs`` (``None`` where unavailable); cached.

        Args:
            inputs: The input ids.
            pool: Over the env's whole pool instead, when every input is in it: computed once while
                the inputs seen grow; ``Curves.gain`` restricts it to the policy's inputs.
        """
        if not self.sources:
            return None, None  # nothing to compute: skip the O(inputs) set of ids
        seen = frozenset(inputs)
        if pool and self._pool_fn is not None and self.user_iid is None and self.user_oracle is None:
            if self._pool is None:
                self._pool = frozenset(map(str, self._pool_fn()))
            if seen <= self._pool:
                seen = self._pool
        if seen not in self._curves:
            if len(self._curves) >= 2:  # the pool's and the seen set's
                self._curves.clear()
            started = time.perf_counter()
            order = sorted(seen)
            iid, oracle = self._baselines(order)
            self.iid_baseline = iid
            # A user object may take no seed; a user oracle's own curves carry its per-input AUCs.
            if iid is None or iid is self.user_iid:
                iid_c = None if iid is None else self._user_curves(iid)
            else:
                iid_c = iid.curves(self.budget, seed=self.iid_seed)
            oracle_c = None
            if oracle is not None:
                user = oracle is self.user_oracle and not self.oracle_rarity
                rarity = iid if self.oracle_rarity else None
                oracle_c = self._user_curves(oracle) if user else oracle.curves(self.budget, rarity=rarity)
            self._curves[seen] = (iid_c, oracle_c)
            self.seconds += time.perf_counter() - started
        return self._curves[seen]


class BaselineAucSums:
    """Per-input baseline AUCs by input code, each read once; their sums over the inputs with a complete run.

    A log costs O(new inputs) in Python (the rest: numpy over the codes asked for).
    """

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        """Forget every input read and summed (the tracker's input codes are new)."""
        self._n, self._sums, self._complete = 0, [0.0, 0.0], True
        self._aucs = np.zeros((0, 2))  # (iid, oracle) AUC by input code, NaN where unavailable
        self._read = np.zeros(0, dtype=bool)

    def _read_one(self, baselines: EnvBaselines, c: int, keys: Sequence[tuple[str, str]]) -> list[float]:
        """Input code ``c``'s (iid, oracle) AUCs, NaN where unavailable."""
        if c >= self._read.size:
            grow(self, "_read", c + 1)
            grow(self, "_aucs", c + 1)
        if not self._read[c]:
            self._aucs[c] = [np.nan if v is None else v for v in baselines.input_aucs(keys[c][1])]
            self._read[c] = True
        return self._aucs[c].tolist()

    def of(self, baselines: EnvBaselines, codes: np.ndarray, keys: Sequence[tuple[str, str]]) -> np.ndarray:
        """(iid, oracle) AUCs of input ``codes`` (U,): (U, 2), NaN where unavailable; ``keys`` by code."""
        if codes.size:
            self._read_one(baselines, int(codes.max()), keys)  # room for every code
        for c in codes[~self._read[codes]].tolist():
            self._read_one(baselines, c, keys)
        return self._aucs[codes]

    def mean(
        self, baselines: EnvBaselines, codes: np.ndarray, keys: Sequence[tuple[str, str]]
    ) -> tuple[float | None, float | None]:
        """(iid AUC, oracle AUC) over input ``codes`` (U,) (the previous call's first); ``keys`` by code."""
        # An input without a baseline AUC leaves the mean undefined until a restart: nothing more to ask.
        for c in codes[self._n :].tolist() if self._complete else ():
            iid, oracle = self._read_one(baselines, c, keys)
            if iid != iid or oracle != oracle:  # NaN: unavailable
                self._complete = False
                break
            self._sums[0] += iid
            self._sums[1] += oracle
        self._n = int(codes.size)
        if not self._n or not self._complete:
            return None, None
        return self._sums[0] / self._n, self._sums[1] / self._n

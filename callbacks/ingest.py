"""``EpisodeBuffer``: finished episodes checked, coded and buffered until the tracker takes them.

Every ingestion path ends here: Gymnasium dict-of-arrays infos, SB3 lists, single-env dicts, parsed
[`EpisodeEnd`][seffi.callbacks.EpisodeEnd] objects and raw columns. Each episode is checked against
the info contract as it arrives (a bad one is refused on its own, after the good ones of the call are
buffered); its ``strategy_matches`` value is coded once into a row of a bool match table, so a batch
reaches the tracker as numpy columns plus a (N, M) hit matrix. SB3 lists are kept as checked row
tuples until the drain; a whole rollout of them can be checked at once (`EpisodeBuffer.add_steps`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from seffi.callbacks.infos import (
    EpisodeColumns,
    EpisodeEnd,
    _as_bool_array,
    _BadMatches,
    _from_ends,
    _from_list,
    _list_rows,
    _matches_problem,
    _num_envs,
    _parse,
    _rows_to_columns,
)
from seffi.callbacks.rules import (
    _ABSENT,
    _ENV,
    _I64_MAX,
    _MATCHES,
    _NO_REJECTS,
    _ROW_KEYS,
    _RULES,
    _Absent,
    _Rejects,
    _screen,
)

__all__ = ["EpisodeBuffer"]


class EpisodeBuffer:
    """Checks, codes and buffers finished episodes (see the module docstring).

    Args:
        strategies: The declared strategy ids (the columns of the hit matrix).
        env_name: Env id named in rejection messages.
    """

    def __init__(self, strategies: Sequence[str], env_name: str | None = None) -> None:
        self.strategies = tuple(strategies)
        self.env_name = env_name
        #: Finished episodes accepted so far (lifetime).
        self.episodes = 0
        #: Input ids (str) that passed the contract: a column of known ids is checked at once.
        self.known_ids: set[Any] = set()
        # strategy_matches value -> row of the match table (one bool row per distinct match set)
        self._match_code: dict[Any, int] = {}
        self._match_sets: list[tuple[str, ...]] = []
        self._table = np.zeros((0, len(self.strategies)), dtype=bool)
        self._index = {s: j for j, s in enumerate(self.strategies)}
        self.clear()

    def clear(self) -> None:
        """Drop the buffered episodes (not yet handed to the tracker)."""
        self._pending: list[tuple[EpisodeColumns, np.ndarray]] = []
        self._rows: list[tuple[Any, ...]] = []  # checked SB3 rows waiting to become columns
        self._row_codes: list[int] = []
        self.pending = 0

    # -- entry points ----------------------------------------------------------------------------------

    def add_infos(self, infos: Any, dones: Any = None, *, env_offset: int = 0) -> int:
        """Buffer every episode that ended in one step's ``infos``.

        Every finished episode is checked against the info contract (``strategy_matches`` and
        ``input_id`` present; ``valid`` a bool; ``input_id`` a str or int; ``sample_index``,
        ``run_index`` and ``z`` ints >= 0; strategy ids among the declared ones). A bad episode is
        refused on its own: the good ones of the call are buffered first, then
        [`EpisodeRejected`][seffi.callbacks.EpisodeRejected] names the key, env and sub-env.

        Args:
            infos: Gymnasium vector info dict (either autoreset mode), SB3 list of dicts, or one
                single-env info dict.
            dones: ``terminated | truncated`` of this step: bool array, shape (num_envs,), or a bool.
                Recommended: with it, an ended episode whose info lacks ``strategy_matches`` is
                rejected instead of going unseen.
            env_offset: Added to sub-env indices (e.g. a worker's first env index).

        Returns:
            The number of episodes buffered.

        Raises:
            EpisodeRejected: Some finished episodes broke the contract (after the others were buffered).
            SeffiError: ``dones`` is not boolean or does not fit the infos (nothing buffered).
        """
        if type(dones) is np.ndarray and dones.dtype == np.bool_:
            if isinstance(infos, (list, tuple)):
                return self._add_list(infos, dones, env_offset)
            if type(infos) is dict and dones.ndim == 1 and not dones.any():
                # No episode ended (every other step of a NEXT_STEP vector env): whatever the info
                # format, nothing to read, once the infos are known to describe as many envs as dones.
                n = _num_envs(infos)
                if n is None or n == dones.shape[0]:
                    return 0
        elif isinstance(infos, (list, tuple)) and dones is not None:
            return self._add_list(infos, dones, env_offset)
        cols, rejects = _parse(infos, dones, self.env_name, self.known_ids)
        return self._add_checked(cols, rejects, env_offset)

    def add_steps(self, steps: Sequence[tuple[Sequence[Any], Any]]) -> int:
        """Buffer the episodes of several SB3 steps, in order: ``add_infos(infos, dones)`` for each.

        The common case (every step a list of info dicts with a bool ``dones`` array, every finished
        info keeping the contract with a known match set) is read and checked for the whole batch at
        once, a column at a time (`_proven_rows`); anything else is replayed step by step
        through `add_infos`, so an error is raised exactly as there, after the good episodes of
        the steps before it.

        Args:
            steps: ``(infos, dones)`` of consecutive ``VecEnv.step`` calls.

        Returns:
            The number of episodes buffered.
        """
        rows = _batch_rows(steps)
        if rows is not None:
            try:
                codes = list(map(self._match_code.__getitem__, map(_MATCHES, rows)))
            except (KeyError, TypeError):  # a new or unhashable match set: coded (or refused) per step
                rows = None
        if rows is None:
            return sum(self.add_infos(infos, dones) for infos, dones in steps)
        self._rows.extend(rows)
        self._row_codes.extend(codes)
        self.pending += len(rows)
        self.episodes += len(rows)
        return len(rows)

    def add_info(self, info: Mapping[str, Any], *, env_index: int = 0) -> int:
        """Buffer one finished episode from its final-step ``info``."""
        cols, rejects = _from_list([info], np.zeros(1, dtype=np.int64), self.known_ids, int(env_index))
        return self._add_checked(cols, rejects)

    def add_ends(self, ends: Sequence[EpisodeEnd], *, env_offset: int = 0) -> int:
        """Buffer parsed [`EpisodeEnd`][seffi.callbacks.EpisodeEnd] objects in order."""
        cols, rejects = _from_ends(ends)
        return self._add_checked(cols, rejects, env_offset)

    def add_columns(self, cols: EpisodeColumns, *, env_offset: int = 0) -> int:
        """Buffer episodes given as columns (values checked here, as for every other path)."""
        rejects = _Rejects(cols.env_index)
        have = {key: getattr(cols, key) != -1 for key in ("sample_index", "run_index", "z")}
        raw = {key: getattr(cols, key) for key in ("input_id", "valid", *have)}
        _screen(raw, have, rejects, self.known_ids)
        return self._add_checked(cols.take(rejects.good) if rejects else cols, rejects, env_offset)

    def drain(self) -> tuple[EpisodeColumns, np.ndarray] | None:
        """Every buffered episode as (columns, hits: bool array, shape (N, M)) or None; empties the buffer."""
        if self._rows:
            rows, codes = self._rows, self._row_codes
            self._pending.append((_rows_to_columns(rows), np.array(codes, dtype=np.int64)))
        if not self._pending:
            self.clear()
            return None
        pending = self._pending
        self.clear()
        cols = EpisodeColumns.concat([c for c, _ in pending])
        codes = np.concatenate([m for _, m in pending]) if len(pending) > 1 else pending[0][1]
        return cols, self._table[codes]

    # -- paths -----------------------------------------------------------------------------------------

    def _add_list(self, infos: Sequence[Mapping[str, Any]], dones: Any, env_offset: int) -> int:
        """SB3's list of info dicts: checked rows per finished episode, columns built at the drain.

        A training step ends a few episodes; building numpy columns for each step would cost more
        than the dict lookups themselves, so checked rows are buffered and converted once per drain.
        """
        if type(dones) is np.ndarray and dones.dtype == bool and dones.shape == (len(infos),):
            done = dones.nonzero()[0].tolist()  # SB3's dones: skip the checks and copies below
        else:
            done = np.flatnonzero(_as_bool_array(dones, len(infos))).tolist()
        if not done:
            return 0
        rows, rejects = _list_rows(infos, done, env_offset, self.known_ids)
        # map/itemgetter rather than comprehensions: this runs at every SB3 step that ends an episode
        try:
            codes = list(map(self._match_code.__getitem__, map(_MATCHES, rows)))
        except (KeyError, TypeError):  # a new or unhashable match set, or a placeholder row
            if rejects is _NO_REJECTS:
                rejects = _Rejects(list(map(_ENV, rows)))
            codes = self._codes_slow(list(map(_MATCHES, rows)), rejects).tolist()
        bad = rejects.mask
        if bad is not None:
            rows = [r for r, b in zip(rows, bad.tolist(), strict=True) if not b]
            codes = [c for c, b in zip(codes, bad.tolist(), strict=True) if not b]
        self._rows.extend(rows)
        self._row_codes.extend(codes)
        n = len(rows)
        self.pending += n
        self.episodes += n
        if bad is not None:
            raise rejects.error(self.env_name, recorded=n)
        return n

    def _add_checked(self, cols: EpisodeColumns, rejects: _Rejects, env_offset: int = 0) -> int:
        """Buffer columns whose values were checked, then raise for the episodes ``rejects`` refused."""
        n = len(cols)
        bad_matches = None
        if n:
            if env_offset:
                cols = dataclasses.replace(cols, env_index=cols.env_index + int(env_offset))
            try:
                table = self._match_code
                codes = np.fromiter(map(table.__getitem__, cols.matches), dtype=np.int64, count=n)
            except (KeyError, TypeError):  # a new match set, or an unhashable value (a list): slow path
                bad_matches = _Rejects(cols.env_index)
                codes = self._codes_slow(cols.matches, bad_matches)
                if bad_matches.mask is not None:
                    keep = ~bad_matches.mask
                    cols, codes, n = cols.take(keep), codes[keep], int(keep.sum())
                else:
                    bad_matches = None
            if n:
                self._pending.append((cols, codes))
                self.pending += n
                self.episodes += n
        if rejects.mask is not None or bad_matches is not None:
            total = sum(int(r.mask.sum()) for r in (rejects, bad_matches) if r)
            if rejects.mask is not None:
                raise rejects.error(self.env_name, env_offset=env_offset, recorded=n, rejected=total)
            assert bad_matches is not None
            raise bad_matches.error(self.env_name, recorded=n, rejected=total)
        return n

    # -- match coding ----------------------------------------------------------------------------------

    def _codes_slow(self, raw: Sequence[Any], rejects: _Rejects) -> np.ndarray:
        """Match codes one by one: bad match sets are marked in ``rejects`` (code 0)."""
        out = np.zeros(len(raw), dtype=np.int64)
        skip = rejects.mask
        bad: np.ndarray | None = None
        reasons: dict[int, str] = {}
        for i, m in enumerate(raw):
            if skip is not None and skip[i]:
                continue  # already rejected (a placeholder row)
            try:
                out[i] = self._code(m)
            except _BadMatches as exc:
                if bad is None:
                    bad = np.zeros(len(raw), dtype=bool)
                bad[i] = True
                reasons[i] = str(exc)
        if bad is not None:
            rejects.add(bad, "strategy_matches", reasons.__getitem__)
        return out

    def _code(self, raw: Any) -> int:
        try:
            return self._match_code[raw]
        except (KeyError, TypeError):
            pass
        problem = _matches_problem(raw)
        if problem is not None:
            raise _BadMatches(problem)
        ms = tuple(sorted(str(s) for s in raw))
        code = self._match_code.get(ms)
        if code is None:
            unknown = sorted(set(ms) - set(self._index))
            if unknown:
                raise _BadMatches(
                    f"'strategy_matches' holds strategy ids {unknown} that are not among the declared "
                    f"strategies {list(self.strategies)}"
                )
            row = np.zeros((1, len(self.strategies)), dtype=bool)
            row[0, [self._index[s] for s in ms]] = True
            code = self._match_code[ms] = len(self._match_sets)
            self._match_sets.append(ms)
            self._table = np.concatenate([self._table, row])
        try:
            self._match_code[raw] = code
        except TypeError:
            pass
        return code


def _batch_rows(steps: Sequence[tuple[Sequence[Any], Any]]) -> list[tuple[Any, ...]] | None:
    """The finished episodes of SB3 ``steps`` as rows (as `_list_rows`).

    ``None`` unless every step is a list with a bool ``dones`` array and every row keeps the contract.
    """
    if not steps or not all(
        type(d) is np.ndarray and d.dtype == np.bool_ and d.shape == (len(i),) and isinstance(i, list)
        for i, d in steps
    ):
        return None
    n = len(steps[0][0])
    if n == 0 or any(len(i) != n for i, _ in steps):
        return None
    flat = list(chain.from_iterable(i for i, _ in steps))
    pos = np.concatenate([d for _, d in steps]).nonzero()[0]
    try:
        # One comprehension over the whole batch (the slow path names a missing key per episode).
        rows = [
            (
                info["input_id"],
                info["strategy_matches"],
                info.get("valid", _ABSENT),
                e,
                info.get("sample_index", _ABSENT),
                info.get("run_index", _ABSENT),
                info.get("z", _ABSENT),
            )
            for p, e in zip(pos.tolist(), (pos % n).tolist(), strict=True)
            for info in (flat[p],)
        ]
    except (KeyError, TypeError, AttributeError):
        return None
    return rows if _proven_rows(rows) else None


def _proven_rows(rows: Sequence[tuple[Any, ...]]) -> bool:
    """Whether every row keeps `_RULES` at a glance, checked per column.

    The set of a column's value types against the rule's exact types, then the int ranges by one
    ``min``/``max``: C-level loops, where a per-row check would cost a Python call per episode.
    ``False`` does not mean bad: `_screen` decides that on the slow path.
    """
    if not rows:
        return True
    cols = list(zip(*rows, strict=True))
    for pos, key in _ROW_KEYS:
        rule, col = _RULES[key], cols[pos]
        types = set(map(type, col))
        absent = _Absent in types
        if not types - {_Absent} <= rule.types:
            return False
        if rule.minimum is not None:
            values = [v for v in col if v is not _ABSENT] if absent else col
            if values and (min(values) < rule.minimum or max(values) > _I64_MAX):
                return False
    return True

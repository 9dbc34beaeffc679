"""The info contract: one table of the keys a finished episode's info holds, and one screen for all."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any

import numpy as np

from seffi._convert import brief, clip
from seffi.episodes.batch import EpisodeBatch
from seffi.errors import SeffiError

_I64_MAX = int(np.iinfo(np.int64).max)
_INTS = frozenset({int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64})
_BOOLS, _STRS = (bool, np.bool_), frozenset({str, np.str_})
_empty = functools.lru_cache(maxsize=64)(EpisodeBatch.empty)  # every reset-only step of a vector env


@dataclass(frozen=True)
class Rule:
    """What one info key may hold: ``what`` in words, ``fill`` where not reported (None: required).

    ``types``: of a value (a bool only where listed); ``exact``: the value types (or a typed column's
    dtype) that pass at a glance; ``minimum``: of ints, which fit int64; ``dtype``: the batch column's.
    Integral floats count as ints: Gymnasium stores a column as floats when its first value was one.
    """

    what: str
    fill: Any
    types: tuple[type, ...]
    exact: frozenset[type] = frozenset()
    minimum: int | None = None
    dtype: Any = np.int64

    def ok(self, v: Any) -> bool:
        """Whether one value keeps the rule."""
        if isinstance(v, _BOOLS) and bool not in self.types:
            return False
        if self.minimum is not None and isinstance(v, (float, np.floating)):  # NaN, inf, 2.5 fail
            v = float(v)  # compared with ints exactly (numpy rounds 2**63 - 1 up to 2.0**63)
            return math.isfinite(v) and v.is_integer() and self.minimum <= v <= _I64_MAX
        return isinstance(v, self.types) and (self.minimum is None or bool(self.minimum <= v <= _I64_MAX))

    def bad(self, values: Any, have: np.ndarray | None = None) -> np.ndarray | None:
        """Bool mask (N,) of the ``values`` that break the rule among those ``have`` marks; None: none."""
        typed = isinstance(values, np.ndarray) and values.dtype != object  # at a glance, else one by one
        if len(values) and ({values.dtype.type} if typed else set(map(type, values))) <= self.exact:
            if self.minimum is None:
                return None
            lo = values[values.argmin()] if typed else min(values)  # argmin: a quicker call than min
            hi = (values.dtype.kind == "u" and values[values.argmax()]) if typed else max(values)  # i8 fits
            if self.minimum <= lo and hi <= _I64_MAX:
                return None
        out = np.fromiter(map(self.ok, values.tolist() if typed else values), bool, len(values)) ^ True
        out &= True if have is None else have
        return out if out.any() else None


#: The info keys the monitor reads, in the order their errors are named. ``strategy_matches`` is
#: coded against the declared strategies by `MatchCoder`; every other key is checked by its rule.
CONTRACT: dict[str, Rule] = {
    "strategy_matches": Rule("a tuple of strategy ids", None, (Sequence, set, frozenset, np.ndarray)),
    "input_id": Rule("a str (or int) id", None, (str, int, np.integer), _INTS | _STRS, dtype=object),
    "valid": Rule("a bool (or numpy bool)", True, _BOOLS, frozenset(_BOOLS), dtype=bool),
    **dict.fromkeys(("sample_index", "run_index", "z"), Rule("an int >= 0", -1, (int, np.integer), _INTS, 0)),
}


class EpisodeRejected(SeffiError):
    """Finished episodes whose info breaks the contract; ``batch`` holds the call's good ones.

    Attributes:
        key: The offending info key (``"info"`` when the info itself is not a dict).
        env_index: Sub-env index of the first bad episode (with the caller's ``env_offset``).
        rejected: Number of episodes refused in the call.
        recorded: Good episodes of the call a monitor recorded (``None`` outside a monitor).
        batch: The good episodes of the call (an `EpisodeBatch`), which a monitor records first.
    """

    def __init__(self, reason: str, *, key: str, env_index: int, env_name: Any, rejected: int, batch: Any):
        where = f"env {clip(repr(env_name))}" if env_name else "the env"
        super().__init__(f"{where} (sub-env index {env_index}): {reason}")
        self.key, self.env_index, self.rejected, self.batch = key, env_index, rejected, batch
        self.recorded: int | None = None

    def recorded_as(self, n: int) -> EpisodeRejected:
        """This error, its message saying that the call's ``n`` good episodes were recorded."""
        m, self.recorded = self.rejected, n
        which = f"{m} finished episodes (the first named here) were" if m > 1 else "this episode was"
        self.args = (f"{self.args[0]}; {which} rejected, the other {n} of this call recorded",)
        return self


class MatchCoder:
    """Codes ``strategy_matches`` values as rows of ``table``, a bool hit table over ``strategies``."""

    def __init__(self, strategies: Sequence[str]) -> None:
        self.strategies = tuple(strategies)
        self._code: dict[Any, int] = {}
        self.ids_are_str: bool | None = None  # str or int ids: the first good one decides, across calls
        self.known: set[str] = set()  # the str ids seen, each checked once
        self.table = np.zeros((0, len(self.strategies)), dtype=bool)  # (match sets seen, M)

    def codes(self, values: Sequence[Any]) -> tuple[np.ndarray, dict[int, str]]:
        """(code of each value, shape (N,); position -> why, for values that are no match set)."""
        try:  # each distinct object (a labeler shares one list per match set) is coded once, across calls
            return np.fromiter(map(self._code.__getitem__, values), np.int64, len(values)), {}
        except (KeyError, TypeError):  # a new or unhashable value (a list)
            keys = list(map(id, objs := list(values)))  # objs keeps each id's object alive
        code = {k: self._new(v) for k, v in dict(zip(keys, objs, strict=True)).items()}
        why = {k: c for k, c in code.items() if isinstance(c, str)}
        out = np.fromiter(map((code | dict.fromkeys(why, 0)).__getitem__, keys), np.int64, len(keys))
        return out, {i: why[k] for i, k in enumerate(keys) if k in why} if why else {}

    def _new(self, v: Any) -> int | str:  # its code, or why it is no match set
        with contextlib.suppress(KeyError, TypeError):  # a list by its tuple
            return self._code[tuple(v) if isinstance(v, (list, np.ndarray)) else v]
        if isinstance(v, str | bytes) or not CONTRACT["strategy_matches"].ok(v) or getattr(v, "ndim", 1) != 1:
            t = type(v).__name__ + (f" of shape {v.shape}" if isinstance(v, np.ndarray) else "")
            return f"'strategy_matches' must be a tuple of strategy ids, got {t}: {clip(repr(v))}"
        if not all(isinstance(s, str) for s in v):  # 1 is not "1", None not "None": str ids only
            return f"'strategy_matches' must hold str strategy ids, got {brief(v)}"
        if (ms := tuple(sorted(map(str, v)))) not in self._code:
            if unknown := sorted(set(ms) - set(self.strategies)):
                why = f"'strategy_matches' holds strategy ids {brief(unknown)} that are not among the"
                return f"{why} declared strategies {brief(self.strategies)}"
            self.table = np.concatenate([self.table, np.isin(self.strategies, ms)[None]])
            self._code[ms] = len(self.table) - 1
        with contextlib.suppress(TypeError):  # unhashable: found by its tuple next time
            self._code[v] = self._code[ms]
        return self._code[ms]


def _why(key: str, x: Any, missing: bool = False) -> str:
    """Why an episode is refused: its info ``x`` lacks ``key``, or ``x``, its value of ``key``, is bad."""
    if not missing:
        return f"{key!r} must be {CONTRACT[key].what}, got {type(x).__name__} {x!r:.60}"
    if not isinstance(x, Mapping):
        return f"an episode ended but its info is {x!r:.60}, not a dict"
    hint = "; coverage needs the final-step info of a seffi env, or a wrapper that passes it through"
    keys = f"an episode ended but its info has no {key!r} (keys: {brief(sorted(map(str, x)))})"
    return keys + hint if key == "strategy_matches" else keys


def _column(cols: dict[str, Any], key: str, keep: Any, n: int, known: bool) -> np.ndarray:
    """The batch column of ``key``: its values at rows ``keep`` (None: all), ``fill`` where not reported."""
    rule, (values, have) = CONTRACT[key], cols.get(key, (None, None))
    if values is None:
        return np.full(n, rule.fill, dtype=rule.dtype)
    if keep is not None:
        values = values[keep] if isinstance(values, np.ndarray) else list(compress(values, keep.tolist()))
        have = None if have is None else have[keep]
    if key == "input_id" and not known and set(map(type, values)) - {str}:  # ids are str: 7 becomes "7"
        values = list(map(str, values))
    if isinstance(values, np.ndarray):  # a typed column (the parser's copy); unreported NaN filled first
        return np.asarray(values if have is None else np.where(have, values, rule.fill), rule.dtype)
    if have is not None:
        values = [v if h else rule.fill for v, h in zip(values, have.tolist(), strict=True)]
    return np.array(values, dtype=rule.dtype)


def screen(cols: dict, env: np.ndarray, strategies: Any, info_of: Callable, name: Any = None) -> Any:
    """The batch (`EpisodeBatch`) of the good ones of N finished episodes, checked against `CONTRACT`.

    ``cols``: key -> (values: a list or typed column of N, which reported it: bool (N,), None for all),
    keys nobody reported left out; ``env``: int64 (N,), each one's sub-env; ``strategies``: the ids or
    the `MatchCoder` kept across calls; ``info_of``: row -> its info (a non-dict one is named "info").
    Raises `EpisodeRejected` naming the first bad episode's env and key, with the batch of the good ones.
    """
    coder = strategies if isinstance(strategies, MatchCoder) else MatchCoder(strategies)
    if not (n := len(env)):
        return _empty(coder.strategies)
    bad, first = np.zeros(n, dtype=bool), [n, "", ""]

    def add(mask: np.ndarray | None, key: str, reason_of: Callable[[int], str]) -> None:
        if mask is not None and mask.any():
            np.logical_or(bad, mask, out=bad)
            if (row := int(mask.argmax())) < first[0]:
                first[:] = row, key, reason_of(row)

    ids, have = cols.get("input_id", (None, 0))
    try:  # ids all seen before hold the id rule and kind at a glance; an unhashable one is named below
        known = coder.ids_are_str and have is None and coder.known.issuperset(ids)
    except TypeError:
        known = False
    for key, rule in CONTRACT.items():
        values, have = cols.get(key, (None, None))
        if rule.fill is None and (values is None or have is not None):
            mask = np.ones(n, bool) if values is None else ~have
            add(mask, key, lambda r, k=key: _why(k, info_of(r), True))
        if values is not None and key != "strategy_matches" and not (key == "input_id" and known):
            if (mask := rule.bad(values, have)) is not None:  # a reason only for a refused row
                add(mask, key, lambda r, k=key, v=values: _why(k, v[r]))
    matches, rows = cols.get("strategy_matches", (None,))[0], np.flatnonzero(~bad) if first[0] < n else None
    codes, why = coder.codes(matches if rows is None else [matches[i] for i in rows.tolist()])  # good rows
    if why:
        at = list(why) if rows is None else rows[list(why)].tolist()  # the coded values' rows
        where = dict(zip(at, why.values(), strict=True))
        add(np.isin(np.arange(n), list(where)), "strategy_matches", where.__getitem__)
    if not known and (first[0] == n or not bad.all()):  # the ids' kind: refused rows do not decide it
        types = set(map(type, ids))
        mixed = types - _STRS and types - _INTS  # else all of one kind: is_str is one bool
        is_str = np.fromiter(map(isinstance, ids, repeat(str)), bool, n) if mixed else types <= _STRS
        if coder.ids_are_str is None:
            coder.ids_are_str = bool(np.broadcast_to(is_str, n)[(~bad).argmax()])
        if is_str is not coder.ids_are_str:
            kind = ("an int", "str") if coder.ids_are_str else ("a str", "int")
            why = f"is {kind[0]} but the input ids so far are {kind[1]}: 1 and '1' would be one input"
            other = ~bad & (is_str != coder.ids_are_str)
            add(other, "input_id", lambda r: f"'input_id' {ids[r]!r:.60} {why}")
    keep = None if first[0] == n else ~bad
    picked, m = (slice(None), n) if keep is None else (keep, int(keep.sum()))
    valid, ids, *index = (_column(cols, k, keep, m, known) for k in _COLUMNS)
    if not known and coder.ids_are_str:
        coder.known.update(ids.tolist())
    hits = coder.table.take(codes if keep is None else codes[keep if rows is None else keep[rows]], axis=0)
    batch = EpisodeBatch(coder.strategies, ids, hits, valid, env[picked], *index)
    if keep is None:
        return batch
    row, key, why = first
    key = key if isinstance(info_of(row), Mapping) else "info"
    raise EpisodeRejected(why, key=key, env_index=int(env[row]), env_name=name, rejected=n - m, batch=batch)


_COLUMNS = ("valid", "input_id", "sample_index", "run_index", "z")  # the batch columns the contract fills

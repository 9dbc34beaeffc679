"""The info contract: one table of the keys a finished episode's info holds, and one screen for all."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seffi._convert import brief, clip
from seffi.errors import SeffiError

_I64_MAX = int(np.iinfo(np.int64).max)
_INTS = frozenset({int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64})
_BOOLS, _INT = (bool, np.bool_), (int, np.integer)


@dataclass(frozen=True)
class Rule:
    """What one info key may hold: ``what`` in words, ``fill`` where not reported (None: required).

    ``kinds``: numpy dtype kinds of a typed column; ``types``: of a value (a bool only where listed);
    ``exact``: the value types of a list that passes at a glance; ``minimum``: of ints (which fit int64).
    Integral floats count as ints: Gymnasium stores a column as floats when its first value was one.
    """

    what: str
    fill: Any
    kinds: str
    types: tuple[type, ...]
    exact: frozenset[type] = frozenset()
    minimum: int | None = None

    def ok(self, v: Any) -> bool:
        """Whether one value keeps the rule."""
        if isinstance(v, _BOOLS) and bool not in self.types:
            return False
        if self.minimum is not None and isinstance(v, (float, np.floating)):  # NaN, inf, 2.5 fail
            return bool(math.isfinite(v) and float(v).is_integer() and self.minimum <= v <= _I64_MAX)
        return isinstance(v, self.types) and (self.minimum is None or bool(self.minimum <= v <= _I64_MAX))

    def bad(self, values: Any, have: np.ndarray | None = None) -> np.ndarray | None:
        """Bool mask (N,) of the ``values`` that break the rule among those ``have`` marks; None: none."""
        low = self.minimum or 0
        if isinstance(values, np.ndarray) and values.dtype != object:  # by dtype and one range reduction
            kind = values.dtype.kind
            if kind not in self.kinds:
                out = np.ones(len(values), dtype=bool)
            elif kind == "f":
                out = ~((np.floor(values) == values) & (values >= low) & (values < 2.0**63))
            elif kind == "u" and self.minimum is not None:
                out = values > _I64_MAX
            elif self.minimum is None or not values.size or np.minimum.reduce(values) >= low:
                return None  # the ufunc itself: ndarray.min costs twice as much
            else:
                out = values < low
        else:  # a list: at a glance by its value types, value by value only when that does not settle it
            fits = len(values) > 0 and set(map(type, values)) <= self.exact
            if fits and (self.minimum is None or low <= min(values) <= max(values) <= _I64_MAX):
                return None
            out = np.fromiter((not self.ok(v) for v in values), dtype=bool, count=len(values))
        if have is not None:
            out &= have
        return out if out.any() else None


_INDEX = Rule("an int >= 0", -1, "iuf", _INT, _INTS, 0)
#: The info keys the monitor reads, in the order their errors are named. ``strategy_matches`` is
#: coded against the declared strategies by `MatchCoder`; every other key is checked by its rule.
CONTRACT: dict[str, Rule] = {
    "strategy_matches": Rule("a tuple of strategy ids", None, "", (Sequence, set, frozenset, np.ndarray)),
    "input_id": Rule("a str (or int) id", None, "iuU", (str, *_INT), _INTS | {str, np.str_}),
    "valid": Rule("a bool (or numpy bool)", True, "b", _BOOLS, frozenset(_BOOLS)),
    "sample_index": _INDEX,
    "run_index": _INDEX,
    "z": _INDEX,
}


def _why(key: str, x: Any, missing: bool = False) -> str:
    """Why an episode is refused: its info ``x`` lacks ``key``, or ``x``, its value of ``key``, is bad."""
    if not missing:
        return f"{key!r} must be {CONTRACT[key].what}, got {type(x).__name__} {x!r:.60}"
    if not isinstance(x, Mapping):
        return f"an episode ended but its info is {x!r:.60}, not a dict"
    text = f"an episode ended but its info has no {key!r} (keys: {brief(sorted(map(str, x)))})"
    if key == "strategy_matches":
        text += "; coverage needs the final-step info of a seffi env, or a wrapper that passes it through"
    return text


class EpisodeRejected(SeffiError):
    """Finished episodes whose info breaks the contract; the good ones of the call are in ``batch``.

    A monitor records the good episodes (and says so) before this reaches the caller.

    Attributes:
        key: The offending info key (``"info"`` when the info itself is not a dict).
        env_index: Sub-env index of the first bad episode (with the caller's ``env_offset``).
        rejected: Number of episodes refused in the call.
        recorded: Good episodes of the call a monitor recorded (``None`` outside a monitor).
        batch: The good episodes of the call (an `EpisodeBatch`).
    """

    def __init__(self, reason: str, *, key: str, env_index: int, env_name: Any, rejected: int, batch: Any):
        where = f"env {clip(repr(env_name))}" if env_name else "the env"
        super().__init__(f"{where} (sub-env index {env_index}): {reason}")
        self.key, self.env_index, self.rejected = key, env_index, rejected
        self.batch, self.recorded = batch, None

    def recorded_as(self, n: int) -> EpisodeRejected:
        """This error, its message saying that the call's ``n`` good episodes were recorded."""
        m = self.rejected
        which = f"{m} finished episodes (the first named here) were" if m > 1 else "this episode was"
        self.recorded = n
        self.args = (f"{self.args[0]}; {which} rejected, the other {n} of this call recorded",)
        return self


class MatchCoder:
    """Codes ``strategy_matches`` values as rows of ``table``, a bool hit table over ``strategies``.

    Each distinct value is checked once; a monitor keeps one across calls, with the ids already checked.
    """

    def __init__(self, strategies: Sequence[str]) -> None:
        self.strategies = tuple(strategies)
        self._index = {s: j for j, s in enumerate(self.strategies)}
        self._code: dict[Any, int] = {}
        self.known: set[str] = set()
        #: Whether the input ids are str (else int): the first good id decides, an id of the other
        #: kind is refused (1 and "1" would otherwise be one input).
        self.ids_are_str: bool | None = None
        self.table = np.zeros((0, len(self.strategies)), dtype=bool)  # (match sets seen, M)

    def codes(self, values: Sequence[Any]) -> tuple[np.ndarray, dict[int, str]]:
        """(code of each value, shape (N,); position -> why, for values that are no match set)."""
        try:
            return np.fromiter(map(self._code.__getitem__, values), np.int64, len(values)), {}
        except (KeyError, TypeError):  # a new or unhashable value (a list): one by one
            pass
        out, bad = np.zeros(len(values), dtype=np.int64), {}
        for i, v in enumerate(values):
            try:
                out[i] = self._new(v)
            except ValueError as exc:
                bad[i] = str(exc)
        return out, bad

    def _new(self, raw: Any) -> int:
        if isinstance(raw, (str, bytes)) or not CONTRACT["strategy_matches"].ok(raw) or np.ndim(raw) != 1:
            got = f"{type(raw).__name__}{f' of shape {raw.shape}' if isinstance(raw, np.ndarray) else ''}"
            raise ValueError(
                f"'strategy_matches' must be a tuple of strategy ids, got {got}: {clip(repr(raw))}"
            )
        if not all(isinstance(s, str) for s in raw):  # 1 is not "1", None not "None": str ids only
            raise ValueError(f"'strategy_matches' must hold str strategy ids, got {brief(raw)}")
        ms = tuple(sorted(str(s) for s in raw))
        if ms not in self._code:
            if unknown := sorted(set(ms) - set(self._index)):
                raise ValueError(
                    f"'strategy_matches' holds strategy ids {brief(unknown)} that are not among the "
                    f"declared strategies {brief(self.strategies)}"
                )
            self.table = np.concatenate([self.table, np.isin(self.strategies, ms)[None]])
            self._code[ms] = len(self.table) - 1
        try:
            self._code[raw] = self._code[ms]
        except TypeError:  # unhashable: coded again next time
            pass
        return self._code[ms]


def _other_kind(coder: MatchCoder, ids: Any, bad: np.ndarray | None) -> np.ndarray | None:
    """Bool mask of the good ``ids`` (``bad`` marks the others) of the kind (str / int) ``coder`` has not."""
    if isinstance(ids, np.ndarray) and ids.dtype != object:
        is_str = np.full(len(ids), ids.dtype.kind == "U")
    else:
        is_str = np.fromiter((isinstance(v, str) for v in ids), dtype=bool, count=len(ids))
    good = np.ones(len(ids), dtype=bool) if bad is None else ~bad
    if coder.ids_are_str is None and good.any():
        coder.ids_are_str = bool(is_str[good.argmax()])
    other = good & (is_str != coder.ids_are_str)
    return other if other.any() else None


def _mixed(coder: MatchCoder, x: Any) -> str:
    kind, seen = ("an int", "str") if coder.ids_are_str else ("a str", "int")
    return (
        f"'input_id' {clip(repr(x))} is {kind} but the input ids so far are {seen}: ids keep their type "
        "(1 and '1' would be one input)"
    )


def _known(coder: MatchCoder, ids: Any) -> bool:  # every id passed an earlier call: one C-level test
    try:
        return not (isinstance(ids, np.ndarray) and ids.dtype != object) and coder.known.issuperset(ids)
    except TypeError:  # an unhashable id: its rule names it
        return False


def screen(cols: dict[str, Any], n: int, coder: MatchCoder, info_of: Callable[[int], Any]) -> tuple:
    """Check N finished episodes against `CONTRACT`, the one check of every parser.

    ``cols``: key -> (values: numpy column or list of N, which are reported: bool (N,), None: all), keys
    nobody reported left out, ``"info"`` -> (None, is a dict); its input ids become an object array of
    str. ``info_of``: row -> its info, for the message naming a missing key.

    Returns:
        (good rows: bool (N,), None if all; match codes (N,); None or (bad, key, row, why) of the first).
    """
    bad, first = np.zeros(n, dtype=bool), (n, "", "")

    def add(mask: np.ndarray | None, key: str, reason_of: Callable[[int], str]) -> None:
        nonlocal first
        if mask is not None and mask.any():
            np.logical_or(bad, mask, out=bad)
            if (row := int(mask.argmax())) < first[0]:
                first = (row, key, reason_of(row))

    if "info" in cols:
        add(~cols["info"][1], "info", lambda r: _why("info", info_of(r), True))
    for key, rule in CONTRACT.items():
        values, have = cols.get(key, (None, None))
        if rule.fill is None and (values is None or have is not None):
            add(
                np.ones(n, dtype=bool) if values is None else ~have,
                key,
                lambda r, k=key: _why(k, info_of(r), True),
            )
        known = key == "input_id" and coder.ids_are_str is not False and _known(coder, values)
        mask = None if values is None or key == "strategy_matches" or known else rule.bad(values, have)
        add(mask, key, lambda r, k=key, v=values: _why(k, v[r]))
        if key == "input_id" and values is not None and not known:
            other = _other_kind(coder, values, bad)  # rows refused so far do not decide the kind
            add(other, key, lambda r, v=values: _mixed(coder, v[r]))
            mask = other if mask is None else mask if other is None else mask | other
        if key == "input_id" and values is not None and not (known and isinstance(values, np.ndarray)):
            ids = values.astype(str) if isinstance(values, np.ndarray) and values.dtype != object else values
            ids = np.array([v if type(v) is str else str(v) for v in ids], dtype=object)
            coder.known.update(ids if mask is None else ids[~mask])  # good ids pass at a glance next time
            cols["input_id"] = (ids, have)
    codes, reasons, matches = np.zeros(n, dtype=np.int64), {}, cols.get("strategy_matches", (None,))[0]
    rows = np.flatnonzero(~bad)
    if matches is not None and rows.size == n:  # the common case: no copies
        codes, reasons = coder.codes(matches)
    elif matches is not None:
        codes[rows], reasons = coder.codes([matches[i] for i in rows.tolist()])
    if reasons:
        where = dict(zip(rows[list(reasons)].tolist(), reasons.values(), strict=True))
        add(np.isin(np.arange(n), list(where)), "strategy_matches", where.__getitem__)
    return (None, codes, None) if first[0] == n else (~bad, codes, (bad, first[1], first[0], first[2]))

"""The info contract: one table of the keys a finished episode's info holds, and one screen.

Every parser hands the screen the same thing: per key, the finished episodes' values (a numpy column
or a list) and which of them the env reported. The screen returns the good rows and their match codes;
the bad ones are refused on their own and named by `EpisodeRejected`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seffi.errors import SeffiError

__all__ = ["CONTRACT", "EpisodeRejected", "MatchCoder", "Rule", "screen"]

_I64_MAX = int(np.iinfo(np.int64).max)
_INTS = frozenset({int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64})
_BOOLS = (bool, np.bool_)


class _Missing:
    """Marks a key an info did not have (``None`` is a value the env reported, and is checked)."""

    __slots__ = ()


MISSING = _Missing()


@dataclass(frozen=True)
class Rule:
    """What one info key may hold.

    Attributes:
        what: The rule in words, for the error message.
        fill: The value where the env does not report the key; ``None``: the key is required.
        kinds: numpy dtype kinds a typed column may have.
        types: Types a value may have (``isinstance``; a bool passes only where ``bool`` is listed).
        exact: Exact types accepted at a glance (a column of them needs no per-value check).
        minimum: Smallest allowed int (ints are also at most the int64 maximum). Integral floats
            (``3.0``) count as ints: Gymnasium stores a step's column as floats when the first env to
            report it gave a float; NaN, infinities and fractions never pass.
    """

    what: str
    fill: Any
    kinds: str
    types: tuple[type, ...]
    exact: frozenset[type]
    minimum: int | None = None

    def ok(self, v: Any) -> bool:
        """Whether one value keeps the rule (a missing value always does: the fill value is used)."""
        if v is MISSING:
            return True
        if isinstance(v, _BOOLS) and bool not in self.types:
            return False
        if self.minimum is not None and isinstance(v, (float, np.floating)):
            return math.isfinite(v) and float(v).is_integer() and self.minimum <= v <= _I64_MAX
        return isinstance(v, self.types) and (self.minimum is None or self.minimum <= v <= _I64_MAX)

    def bad(self, values: Any, have: np.ndarray | None = None) -> np.ndarray | None:
        """Bool mask, shape (N,), of the ``values`` that break the rule among those ``have`` marks.

        A typed numpy column is checked by its dtype and one range reduction; a list or object column
        by the set of its value types at a glance, per value only when that does not settle it.
        ``None``: every value keeps the rule.
        """
        if isinstance(values, np.ndarray) and values.dtype != object:
            kind, low = values.dtype.kind, self.minimum or 0
            if kind not in self.kinds:
                out = np.ones(values.shape[0], dtype=bool)
            elif kind == "f":  # integral floats only; NaN fails every comparison
                out = ~((np.floor(values) == values) & (values >= low) & (values < 2.0**63))
            elif self.minimum is None or values.size == 0:
                return None
            elif kind == "u":
                out = values > _I64_MAX
            elif np.minimum.reduce(values) >= low:  # the ufunc directly: ndarray.min costs twice as much
                return None
            else:
                out = values < low
        else:
            types = set(map(type, values))
            if types <= self.exact:
                nums = [v for v in values if v is not MISSING] if _Missing in types else values
                if self.minimum is None or len(nums) == 0 or (self.minimum <= min(nums) and max(nums) <= _I64_MAX):
                    return None
            out = np.fromiter((not self.ok(v) for v in values), dtype=bool, count=len(values))
        if have is not None:
            out &= have
        return out if out.any() else None


def _rule(what: str, fill: Any, kinds: str, types: tuple[type, ...], minimum: int | None = None) -> Rule:
    exact = {t for t in _INTS | {str, np.str_, bool, np.bool_, _Missing} if issubclass(t, types)}
    if bool not in types:
        exact -= {bool, np.bool_}
    return Rule(what, fill, kinds, types, frozenset(exact | {_Missing}), minimum)


#: The info keys the monitor reads, in the order their errors are named. ``strategy_matches`` is
#: coded against the declared strategies by `MatchCoder`; every other key is checked by its rule.
CONTRACT: dict[str, Rule] = {
    "strategy_matches": _rule("a tuple of strategy ids", None, "", (Sequence, set, frozenset, np.ndarray)),
    "input_id": _rule("a str (or int) id", None, "iuU", (str, int, np.integer)),
    "valid": _rule("a bool (or numpy bool)", True, "b", _BOOLS),
    "sample_index": _rule("an int >= 0", -1, "iuf", (int, np.integer), 0),
    "run_index": _rule("an int >= 0", -1, "iuf", (int, np.integer), 0),
    "z": _rule("an int >= 0", -1, "iuf", (int, np.integer), 0),
}


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _missing(key: str, info: Any) -> str:
    """Why an ended episode whose ``info`` lacks ``key`` (or is no dict) is refused."""
    if not isinstance(info, Mapping):
        return f"an episode ended but its info is {info!r:.60}, not a dict"
    text = f"an episode ended but its info has no {key!r} (keys: {sorted(map(str, info))})"
    if key == "strategy_matches":
        text += "; coverage needs the final-step info of a seffi env, or a wrapper that passes it through"
    return text


class EpisodeRejected(SeffiError):
    """Finished episodes whose info breaks the contract (a missing key, a value of the wrong type).

    Only the bad episodes are refused: a monitor records every good episode of the same call *before*
    this is raised, and nothing it buffered earlier is touched, so a caller that catches it (and fixes
    or drops the faulty env) loses no good data. The message names the key, the env and the sub-env
    index of the first bad episode.

    Attributes:
        key: The offending info key (``"info"`` when the info itself is not a dict).
        env_index: Sub-env index of the first bad episode (with the caller's ``env_offset``).
        rejected: Number of episodes refused in the call.
        recorded: Good episodes of the call a monitor recorded (``None`` outside a monitor).
        batch: The good episodes of the call, as an `EpisodeBatch`.
    """

    def __init__(
        self, reason: str, *, key: str, env_index: int, env_name: str | None, rejected: int, batch: Any
    ) -> None:
        self.reason, self.key, self.env_index, self.env_name = reason, key, env_index, env_name
        self.rejected, self.batch, self.recorded = rejected, batch, None
        super().__init__(self._message())

    def _message(self) -> str:
        where = f"env {self.env_name!r}" if self.env_name else "the env"
        text = f"{where} (sub-env index {self.env_index}): {self.reason}"
        if self.recorded is not None:
            n = self.rejected
            which = f"{n} finished episodes (the first named here) were" if n > 1 else "this episode was"
            text += f"; {which} rejected, the other {self.recorded} of this call recorded"
        return text

    def recorded_as(self, n: int) -> EpisodeRejected:
        """Say in the message that the call's ``n`` good episodes were recorded."""
        self.recorded = n
        self.args = (self._message(),)
        return self


class MatchCoder:
    """Codes ``strategy_matches`` values as rows of a hit table over the declared strategies.

    Each distinct value is checked and coded once; later ones cost one dict lookup.

    Args:
        strategies: The declared strategy ids (the columns of ``table``).
    """

    def __init__(self, strategies: Sequence[str]) -> None:
        self.strategies = tuple(strategies)
        self._index = {s: j for j, s in enumerate(self.strategies)}
        self._code: dict[Any, int] = {}
        #: bool array, shape (match sets seen, M): the hit row of each code.
        self.table = np.zeros((0, len(self.strategies)), dtype=bool)

    def codes(self, values: Sequence[Any]) -> tuple[np.ndarray, dict[int, str]]:
        """(code of each value, shape (N,); position -> why, for the values that are not match sets)."""
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
        try:
            return self._code[raw]
        except (KeyError, TypeError):
            pass
        if isinstance(raw, (str, bytes)) or not CONTRACT["strategy_matches"].ok(raw) or np.ndim(raw) != 1:
            shape = f" of shape {raw.shape}" if isinstance(raw, np.ndarray) else ""
            raise ValueError(
                f"'strategy_matches' must be a tuple of strategy ids, got {type(raw).__name__}{shape}: {raw!r}"
            )
        ms = tuple(sorted(str(s) for s in raw))
        code = self._code.get(ms)
        if code is None:
            unknown = sorted(set(ms) - set(self._index))
            if unknown:
                raise ValueError(
                    f"'strategy_matches' holds strategy ids {unknown} that are not among the declared "
                    f"strategies {list(self.strategies)}"
                )
            code = self._code[ms] = len(self.table)
            row = np.zeros((1, len(self.strategies)), dtype=bool)
            row[0, [self._index[s] for s in ms]] = True
            self.table = np.concatenate([self.table, row])
        try:
            self._code[raw] = code
        except TypeError:
            pass
        return code


Columns = Mapping[str, tuple[Any, "np.ndarray | None"]]


def screen(
    cols: Columns, n: int, coder: MatchCoder, info_of: Callable[[int], Any]
) -> tuple[np.ndarray | None, np.ndarray, tuple[np.ndarray, str, int, str] | None]:
    """Check N finished episodes against `CONTRACT`: the one check of every parser.

    Args:
        cols: key -> (values, have): the episodes' values (numpy column or list, length N) and a bool
            array of those the env reported (``None``: all). Keys no episode reported are left out;
            ``"info"`` -> (None, have) marks the episodes whose info is not a dict.
        n: Number of episodes N.
        coder: Codes the match sets.
        info_of: Row -> its info (for the message naming a missing key).

    Returns:
        (good: bool array (N,) or ``None`` when all are good, match codes (N,) (meaningless at bad
        rows), ``None`` or (bad mask, key, row, reason) of the first bad episode).
    """
    bad: np.ndarray | None = None
    first: tuple[int, str, str] | None = None

    def add(mask: np.ndarray | None, key: str, reason_of: Callable[[int], str]) -> None:
        nonlocal bad, first
        if mask is None or not mask.any():
            return
        bad = mask.copy() if bad is None else bad | mask
        row = int(mask.argmax())
        if first is None or row < first[0]:
            first = (row, key, reason_of(row))

    if "info" in cols:
        add(~cols["info"][1], "info", lambda r: _missing("info", info_of(r)))
    for key, rule in CONTRACT.items():
        values, have = cols.get(key, (None, np.zeros(n, dtype=bool)))
        if rule.fill is None and have is not None:
            add(~have, key, lambda r, key=key: _missing(key, info_of(r)))
        if values is not None and key != "strategy_matches":
            add(
                rule.bad(values, have),
                key,
                lambda r, key=key, rule=rule, values=values: f"{key!r} must be {rule.what}, got {_show(values[r])}",
            )
    matches = cols.get("strategy_matches", (None, None))[0]
    codes = np.zeros(n, dtype=np.int64)
    if matches is not None:
        rows = np.flatnonzero(~bad) if bad is not None else None
        got, reasons = coder.codes(matches if rows is None else [matches[i] for i in rows.tolist()])
        if rows is None:
            codes = got
        else:
            codes[rows] = got
        if reasons:
            where = [int(rows[i]) if rows is not None else i for i in reasons]
            mask = np.zeros(n, dtype=bool)
            mask[where] = True
            text = dict(zip(where, reasons.values(), strict=True))
            add(mask, "strategy_matches", text.__getitem__)
    if first is None:
        return None, codes, None
    assert bad is not None
    return ~bad, codes, (bad, first[1], first[0], first[2])

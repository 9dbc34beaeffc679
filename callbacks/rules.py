"""The info contract: one rule per key, checked by one function on every ingestion path."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seffi.errors import SeffiError


def _describe(env_name: str | None, env_index: int) -> str:
    where = f"env {env_name!r}" if env_name else "the env"
    return f"{where} (sub-env index {env_index})"


# ----------------------------------------------------------------------------------------------------
# The info contract: one rule per key, checked by one function (`_screen`) on every ingestion
# path — Gymnasium dict-of-arrays (incl. final_info), SB3 lists, single-env dicts, EpisodeEnd objects.
# ----------------------------------------------------------------------------------------------------


class _Absent:
    """Marks a key an info did not have. ``None`` is a value the env reported, and is checked."""

    __slots__ = ()

    def __bool__(self) -> bool:  # valid's fill value is True, so ``bool`` of a missing valid is True
        return True

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()
_I64_MAX = int(np.iinfo(np.int64).max)
_I64_MIN = int(np.iinfo(np.int64).min)
_INT_TYPES = frozenset(
    {int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64}
)
_BOOLS = (bool, np.bool_)


@dataclass(frozen=True)
class _Rule:
    """What one info key may hold.

    Attributes:
        what: The rule in words, for the error message.
        kinds: numpy dtype kinds a whole (non-object) column may have.
        types: Exact scalar types accepted at a glance (lists and object arrays).
        abstract: Types accepted by ``isinstance`` (subclasses), bools excluded unless listed in ``types``.
        minimum: Smallest allowed int (ints are also at most the int64 maximum), or ``None``.
        integral: Integral floats (``3.0``) count as ints. Gymnasium stores a step's column as floats
            when the first env to report it gave a float, so a good env's ``3`` arrives as ``3.0``;
            NaN, infinities and fractions never pass.
    """

    what: str
    kinds: str
    types: frozenset[type]
    abstract: tuple[type, ...]
    minimum: int | None = None
    integral: bool = False

    def ok(self, v: Any) -> bool:
        """Whether one value keeps the rule (an absent key always does: the fill value is used)."""
        t = type(v)
        if t not in self.types:  # exact types first: the common case, and no bool passes as an int
            if t is _Absent:
                return True
            if self.integral and isinstance(v, (float, np.floating)):
                return math.isfinite(v) and float(v).is_integer() and (self.minimum or 0) <= v <= _I64_MAX
            if not isinstance(v, self.abstract) or (isinstance(v, _BOOLS) and bool not in self.types):
                return False
        return self.minimum is None or self.minimum <= v <= _I64_MAX

    def bad(self, values: Any, have: np.ndarray | None) -> np.ndarray | None:
        """Bool mask of the entries of ``values`` that break the rule (``None``: all keep it).

        Args:
            values: numpy array (a whole column: checked by dtype and a range reduction, no Python per
                entry unless its dtype is object) or a sequence (checked per value).
            have: bool array: entries the env reported (the others are fill values and not checked);
                ``None``: all reported, or ``_ABSENT`` marks the missing ones.
        """
        if isinstance(values, np.ndarray) and values.dtype != object:
            kind = values.dtype.kind
            if kind not in self.kinds:
                out = np.ones(values.shape[0], dtype=bool)
            elif kind == "f":  # integral floats only (see ``integral``); NaN fails every comparison
                fine = (np.floor(values) == values) & (values >= (self.minimum or 0)) & (values < 2.0**63)
                out = ~fine
            elif self.minimum is None or values.size == 0:
                return None
            else:  # ufunc reductions directly: the ndarray.min wrapper costs as much again
                low = np.minimum.reduce(values)
                if low >= self.minimum and (kind != "u" or np.maximum.reduce(values) <= _I64_MAX):
                    return None
                out = values < self.minimum
                if kind == "u":
                    out |= values > _I64_MAX
            if have is not None:
                out &= have
            return out if out.any() else None
        if have is None:
            if all(map(self.ok, values)):
                return None
            out = np.fromiter((not self.ok(v) for v in values), dtype=bool, count=len(values))
        else:
            out = np.fromiter(
                (bool(h) and not self.ok(v) for v, h in zip(values, have, strict=True)),
                dtype=bool,
                count=len(values),
            )
        return out if out.any() else None


_INT = (int, np.integer)
#: The info contract of the keys the monitor reads (``strategy_matches`` is checked against the
#: declared strategies when the match set is coded, see `normalize_matches`).
_RULES: dict[str, _Rule] = {
    "input_id": _Rule("a str (or int) id", "iuU", frozenset({str, np.str_}) | _INT_TYPES, (str, *_INT)),
    "valid": _Rule("a bool (or numpy bool)", "b", frozenset(_BOOLS), _BOOLS),
    "sample_index": _Rule("an int >= 0", "iuf", _INT_TYPES, _INT, 0, integral=True),
    "run_index": _Rule("an int >= 0", "iuf", _INT_TYPES, _INT, 0, integral=True),
    "z": _Rule("an int >= 0", "iuf", _INT_TYPES, _INT, 0, integral=True),
}


_MATCHES, _ENV = operator.itemgetter(1), operator.itemgetter(3)  # fields of a _list_rows row
#: (position in a `_list_rows` row, key) of the checked values.
_ROW_KEYS: tuple[tuple[int, str], ...] = (
    (0, "input_id"),
    (2, "valid"),
    (4, "sample_index"),
    (5, "run_index"),
    (6, "z"),
)
#: Row type signature -> (getter of the ints still to range-check, their minimum), or ``None`` when a
#: type is not one `_RULES` accepts at a glance (then `_screen` decides).
_ROW_SIGNATURES: dict[tuple[type, ...], tuple[Callable[[Any], tuple[Any, ...]], int] | None] = {}


def _row_signature(sig: tuple[type, ...]) -> tuple[Callable[[Any], tuple[Any, ...]], int] | None:
    """What a row of types ``sig`` still needs checked (see `_ROW_SIGNATURES`), from `_RULES`."""
    positions, lows = [], []
    for pos, key in _ROW_KEYS:
        rule = _RULES[key]
        if sig[pos] is _Absent:
            continue
        if sig[pos] not in rule.types:
            return None
        if rule.minimum is not None:
            positions.append(pos)
            lows.append(rule.minimum)
    if not positions:
        return operator.itemgetter(3, 3), _I64_MIN  # the env index (an int): a tuple to check, no bound
    if len(set(lows)) > 1:
        return None  # ints with different minimums: left to _screen, which checks each rule
    # itemgetter of one index gives the value itself: repeat it so the result is always a tuple
    return operator.itemgetter(*positions, positions[0]), lows[0]


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


class _Rejects:
    """The episodes of one ingestion call that break the info contract, and why the first one does.

    Args:
        env_index: The sub-env index of each episode of the call (int array or list, length N; read
            only for the error message, so a list costs nothing on the common, all-good path).
    """

    __slots__ = ("env_index", "key", "mask", "reason", "row")

    def __init__(self, env_index: Sequence[int] | np.ndarray) -> None:
        self.env_index = env_index
        self.mask: np.ndarray | None = None
        self.row = len(env_index)
        self.key: str | None = None
        self.reason: str | None = None

    def add(self, mask: np.ndarray, key: str, reason_of: Callable[[int], str]) -> None:
        """Mark the episodes ``mask`` as bad; ``reason_of(row)`` says why, for the first one."""
        if not mask.any():
            return
        self.mask = mask.copy() if self.mask is None else self.mask | mask
        row = int(mask.argmax())
        if row < self.row:
            self.row, self.key, self.reason = row, key, reason_of(row)

    def __bool__(self) -> bool:
        return self.mask is not None

    @property
    def good(self) -> np.ndarray:
        """Bool array, shape (N,): the episodes that keep the contract."""
        if self.mask is None:
            return np.ones(len(self.env_index), dtype=bool)
        return ~self.mask

    def error(
        self,
        env_name: str | None,
        *,
        env_offset: int = 0,
        recorded: int | None = None,
        rejected: int | None = None,
    ) -> EpisodeRejected:
        """The exception naming the key, env and sub-env of the first bad episode.

        Args:
            env_name: Env id for the message.
            env_offset: Added to the sub-env index.
            recorded: Good episodes of the call that were recorded (``None``: outside a monitor).
            rejected: Episodes refused in the call (default: those marked here).
        """
        assert self.mask is not None and self.reason is not None and self.key is not None
        env = int(self.env_index[self.row]) + int(env_offset)
        n = int(self.mask.sum()) if rejected is None else int(rejected)
        message = f"{_describe(env_name, env)}: {self.reason}"
        if recorded is not None:
            which = f"{n} finished episodes (the first named here) were" if n > 1 else "this episode was"
            message += f"; {which} rejected, the other {recorded} of this call recorded"
        return EpisodeRejected(message, key=self.key, env_index=env, rejected=n, recorded=recorded)


_NO_REJECTS = _Rejects(())  # a shared "nothing rejected" (never added to: take a new one for that)


class EpisodeRejected(SeffiError):
    """Finished episodes whose info breaks the contract (a missing key, a value of the wrong type).

    Only the bad episodes are refused: every good episode of the same call is recorded *before* this is
    raised, and nothing buffered earlier is touched, so a caller that catches it (and fixes or drops
    the faulty env) loses no good data. The message names the key, the env and the sub-env index of
    the first bad episode.

    Attributes:
        key: The offending info key (``"info"`` when the info itself is not a dict).
        env_index: Sub-env index of the first bad episode (with the caller's ``env_offset``).
        rejected: Number of episodes refused in the call.
        recorded: Number of good episodes of the call that were recorded (``None`` outside a monitor).
    """

    def __init__(
        self, message: str, *, key: str, env_index: int, rejected: int, recorded: int | None = None
    ) -> None:
        super().__init__(message)
        self.key, self.env_index, self.rejected, self.recorded = key, env_index, rejected, recorded


def _screen(
    raw: Mapping[str, Any],
    have: Mapping[str, np.ndarray | None],
    rejects: _Rejects,
    known_ids: set[Any] | None = None,
) -> None:
    """Check the values of finished episodes against `_RULES`: the one check of every path.

    Args:
        raw: key -> the episodes' values (numpy array or sequence; keys absent from all are left out).
        have: key -> bool array of the entries the env reported (``None`` or missing: see
            `_Rule.bad`).
        rejects: Where the bad episodes are marked.
        known_ids: Input ids (str) already checked: a column of known ids is accepted with one
            C-level set test instead of a type check per entry; newly checked str ids are added.
    """
    for key, rule in _RULES.items():
        values = raw.get(key)
        if values is None:
            continue
        if key == "input_id" and known_ids is not None:
            try:
                if known_ids.issuperset(values):
                    continue
            except TypeError:  # an unhashable id: checked below
                pass
        mask = rule.bad(values, have.get(key))
        if mask is not None:
            rejects.add(
                mask,
                key,
                lambda row, key=key, rule=rule, values=values: (
                    f"{key!r} must be {rule.what}, got {_show(values[row])}"
                ),
            )
        if key == "input_id" and known_ids is not None:
            known_ids.update(
                v for i, v in enumerate(values) if type(v) is str and (mask is None or not mask[i])
            )

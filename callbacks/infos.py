"""Reading episode ends out of every info format a training loop hands us.

Three shapes reach the monitor:

* **Gymnasium vector infos** — one dict of arrays with boolean ``_key`` masks. In ``NEXT_STEP`` (the
  default) and ``DISABLED`` autoreset modes the final step's info sits at index ``i`` of the arrays on
  the step where env ``i`` finished. In ``SAME_STEP`` mode the env was already reset inside that step,
  so the top level holds the *reset* info and the final info is nested under ``infos["final_info"]``
  (itself a dict of arrays with masks, selected by ``infos["_final_info"]``; Gymnasium 0.29 used an
  object array of dicts, also accepted).
* **SB3 VecEnv infos** — a list of dicts, one per env. SB3 auto-resets inside ``step`` and still puts
  the final info in ``infos[i]`` itself (next to ``terminal_observation``), so the done step's dict is
  the episode end.
* **Single-env infos** — the plain dict of one ``env.step``.

Which envs finished is known for sure from ``dones`` (``terminated | truncated``) when the caller
passes them; without them an episode end is recognised by the final-step keys seffi envs emit only on
that step (`END_MARKERS`). Episodes are parsed into columns (`EpisodeColumns`): for
Gymnasium dict-of-arrays infos by numpy masks and fancy indexing (no per-episode Python beyond one
dict lookup for the match set), for SB3 lists by a few dict lookups per finished episode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seffi.callbacks.rules import (
    _ABSENT,
    _BOOLS,
    _ENV,
    _I64_MAX,
    _NO_REJECTS,
    _ROW_SIGNATURES,
    _RULES,
    _describe,
    _Rejects,
    _row_signature,
    _screen,
    _show,
)
from seffi.errors import SeffiError

#: Keys that seffi envs put in ``info`` only on the step that ends an episode.
END_MARKERS: tuple[str, ...] = ("strategy_matches", "y_text")

#: Keys read from a final info; everything else (observations, y_text, ...) is never copied.
_WANTED: tuple[str, ...] = (
    "input_id",
    "strategy_matches",
    "valid",
    "sample_index",
    "run_index",
    "z",
    "num_strategies",
)


@dataclass(frozen=True)
class EpisodeEnd:
    """One finished episode as the coverage core sees it.

    Attributes:
        input_id: Which input the episode sampled for.
        matches: Strategy ids the episode's trace matched (sorted; empty for junk or off-strategy).
        valid: The trace was a correct solution (``True`` when the env does not report validity).
        env_index: Index of the sub-environment in its vector env (0 for a single env).
        sample_index: The env's position k (1-based) of this sample in its run, if reported.
        run_index: The env's run counter for this input, if reported (a new run restarts k at 1).
        z: The latent code of a router env, if reported (a diagnostic, never strategy coverage).
    """

    input_id: str
    matches: tuple[str, ...]
    valid: bool
    env_index: int = 0
    sample_index: int | None = None
    z: int | None = None
    run_index: int | None = None



def _missing(key: str, keys: Any) -> str:
    if keys is None:
        return "an episode ended but its info is None, not a dict"
    text = f"an episode ended but its info has no {key!r} (keys: {sorted(map(str, keys))})"
    if key == "strategy_matches":
        text += "; coverage needs the final-step info of a seffi env, or a wrapper that passes it through"
    return text


def episode_from_info(
    info: Mapping[str, Any], *, env_index: int = 0, env_name: str | None = None
) -> EpisodeEnd:
    """Turn the final-step ``info`` of one episode into an [`EpisodeEnd`][seffi.callbacks.EpisodeEnd].

    Args:
        info: The info dict of the step that ended the episode.
        env_index: Sub-env index, used as part of the run identity and in error messages.
        env_name: Env id for error messages (e.g. ``"seffi/HanoiRouter-v0"``).

    Returns:
        The parsed episode end.

    Raises:
        EpisodeRejected: ``strategy_matches`` or ``input_id`` is missing, or a value breaks the info
            contract (``valid`` a bool; ``input_id`` a str or int; ``sample_index``, ``run_index``
            and ``z`` ints >= 0). Missing keys are an error rather than an empty match
            set, because silently counting zero coverage would make a broken wrapper look like a bad
            policy.
    """
    cols, rejects = _from_list([info], np.array([0]), None)
    if rejects:
        rejects.env_index = np.array([env_index])
        raise rejects.error(env_name)
    (end,) = cols.ends(env_name)
    return dataclasses.replace(end, env_index=int(env_index))


def _as_bool_array(dones: Any, n: int | None = None) -> np.ndarray:
    """``dones`` as a 1-D bool array; anything but booleans is an error (``1``, ``"no"`` are not dones)."""
    arr = np.asarray(dones)
    if arr.dtype != np.bool_:
        flat = arr.reshape(-1)
        if arr.dtype != object or not all(isinstance(v, _BOOLS) for v in flat):
            raise SeffiError(
                f"'dones' must be booleans (terminated | truncated), got {arr.dtype} values "
                f"{flat[:4].tolist()!r}"
            )
        arr = arr.astype(bool)
    arr = arr.reshape(-1)
    if n is not None and arr.shape[0] != n:
        raise SeffiError(f"dones has {arr.shape[0]} entries but the infos describe {n} envs")
    return arr


def _row(vector_info: Mapping[str, Any], i: int) -> dict[str, Any]:
    """The single-env info at index ``i`` of a Gymnasium dict-of-arrays (slow path: errors, old formats).

    Only the keys seffi reads get their values; other keys present at ``i`` map to ``None`` so that a
    missing-key error can still list what the env did report.
    """
    row: dict[str, Any] = {}
    for key, value in vector_info.items():
        if key.startswith("_"):
            continue
        mask = vector_info.get("_" + key)
        if mask is not None and not bool(mask[i]):
            continue
        row[key] = value[i] if key in _WANTED else None
    return row


def _num_envs(vector_info: Mapping[str, Any]) -> int | None:
    for key, value in vector_info.items():
        if key.startswith("_") and isinstance(value, np.ndarray) and value.dtype == np.bool_:
            return int(value.shape[0])
    return None


def _marker_mask(vector_info: Mapping[str, Any]) -> np.ndarray | None:
    mask = None
    for key in END_MARKERS:
        m = vector_info.get("_" + key)
        if m is not None:
            mask = np.asarray(m, dtype=bool) if mask is None else mask | np.asarray(m, dtype=bool)
    return mask


def is_vector_info(infos: Any) -> bool:
    """Whether ``infos`` is a Gymnasium vector info (dict of arrays with ``_key`` masks)."""
    if not isinstance(infos, Mapping):
        return False
    if "final_info" in infos or "_final_info" in infos:
        return True
    return any(
        k.startswith("_") and isinstance(v, np.ndarray) and v.dtype == np.bool_ and v.ndim == 1
        for k, v in infos.items()
    )


def _objects(values: Sequence[Any]) -> np.ndarray:
    """A 1-D object array of ``values`` (tuples stay elements instead of becoming a 2-D array)."""
    return np.fromiter(values, dtype=object, count=len(values))


@dataclass
class EpisodeColumns:
    """The episodes that ended in one step, as columns of N entries (the fast ingestion format).

    Attributes:
        input_id: object array, shape (N,): input ids as the env reported them.
        matches: object array, shape (N,): the raw ``strategy_matches`` values (checked on use).
        valid: bool array, shape (N,) (``True`` where the env does not report validity).
        env_index: int array, shape (N,): sub-env index.
        sample_index: int array, shape (N,): the env's k, -1 where not reported.
        run_index: int array, shape (N,): the env's run counter, -1 where not reported.
        z: int array, shape (N,): router latent, -1 where not reported.
    """

    input_id: np.ndarray
    matches: np.ndarray
    valid: np.ndarray
    env_index: np.ndarray
    sample_index: np.ndarray
    run_index: np.ndarray
    z: np.ndarray

    def __len__(self) -> int:
        return int(self.valid.shape[0])

    @classmethod
    def empty(cls) -> EpisodeColumns:
        """No episodes."""
        i = np.zeros(0, dtype=np.int64)
        return cls(_objects([]), _objects([]), np.zeros(0, dtype=bool), i, i, i, i)

    @classmethod
    def from_ends(cls, ends: Sequence[EpisodeEnd]) -> EpisodeColumns:
        """Columns of parsed episode ends.

        Raises:
            EpisodeRejected: An end breaks the info contract (e.g. ``valid=None``).
        """
        cols, rejects = _from_ends(ends)
        if rejects:
            raise rejects.error(None)
        return cols

    @classmethod
    def concat(cls, parts: Sequence[EpisodeColumns]) -> EpisodeColumns:
        """One set of columns from several (in order)."""
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(cls)))

    def take(self, idx: np.ndarray) -> EpisodeColumns:
        """The episodes at positions ``idx`` (int array or bool mask)."""
        return EpisodeColumns(*(getattr(self, f.name)[idx] for f in dataclasses.fields(self)))

    def ends(self, env_name: str | None = None) -> list[EpisodeEnd]:
        """The episodes as `EpisodeEnd` objects (match sets checked and sorted)."""

        def opt(v: int) -> int | None:
            return None if v < 0 else v

        return [
            EpisodeEnd(
                input_id=str(x),
                matches=normalize_matches(m, env_name, e),
                valid=bool(v),
                env_index=e,
                sample_index=opt(si),
                z=opt(z),
                run_index=opt(ri),
            )
            for x, m, v, e, si, ri, z in zip(
                self.input_id,
                self.matches,
                self.valid.tolist(),
                self.env_index.tolist(),
                self.sample_index.tolist(),
                self.run_index.tolist(),
                self.z.tolist(),
                strict=True,
            )
        ]


def normalize_matches(raw: Any, env_name: str | None = None, env_index: int = 0) -> tuple[str, ...]:
    """A ``strategy_matches`` value as a sorted tuple of ids; one clear error for anything else."""
    problem = _matches_problem(raw)
    if problem is not None:
        raise SeffiError(f"{_describe(env_name, env_index)}: {problem}")
    return tuple(sorted(str(s) for s in raw))


class _BadMatches(Exception):
    """A ``strategy_matches`` value the monitor cannot code (its message is the reason)."""


def _matches_problem(raw: Any) -> str | None:
    """Why ``raw`` is not a collection of strategy ids (``None`` when it is one)."""
    if (
        isinstance(raw, (str, bytes))
        or not isinstance(raw, (Sequence, frozenset, set, np.ndarray))
        or (isinstance(raw, np.ndarray) and raw.ndim != 1)
    ):
        shape = f" of shape {raw.shape}" if isinstance(raw, np.ndarray) else ""
        return f"'strategy_matches' must be a tuple of strategy ids, got {type(raw).__name__}{shape}: {raw!r}"
    return None


def episode_columns(infos: Any, dones: Any = None, *, env_name: str | None = None) -> EpisodeColumns:
    """All episode ends in one step's ``infos``, as columns (see `episode_ends`).

    Gymnasium vector infos are read with numpy masks and fancy indexing — no per-episode dicts; SB3
    lists cost one dict lookup per key per finished episode.

    Raises:
        EpisodeRejected: A finished episode breaks the info contract (see `episode_from_info`).
    """
    cols, rejects = _parse(infos, dones, env_name)
    if rejects:
        raise rejects.error(env_name)
    return cols


def _parse(
    infos: Any, dones: Any, env_name: str | None, known_ids: set[Any] | None = None
) -> tuple[EpisodeColumns, _Rejects]:
    """(columns of the good episode ends, the bad ones) of one step's ``infos``, whatever the format."""
    if isinstance(infos, (list, tuple)):
        if dones is None:
            idx = np.array(
                [
                    i
                    for i, info in enumerate(infos)
                    if isinstance(info, Mapping) and any(k in info for k in END_MARKERS)
                ],
                dtype=np.int64,
            )
        else:
            idx = np.flatnonzero(_as_bool_array(dones, len(infos)))
        return _from_list(infos, idx, known_ids)
    if isinstance(infos, Mapping):
        if is_vector_info(infos):
            if "final_info" in infos or "_final_info" in infos:
                return _from_same_step(infos, dones, known_ids)
            n = _num_envs(infos)
            if dones is not None:
                idx = np.flatnonzero(_as_bool_array(dones, n))
            else:
                mask = _marker_mask(infos)
                idx = np.flatnonzero(mask) if mask is not None else np.zeros(0, dtype=np.int64)
            return _from_vector(infos, idx, known_ids)
        if dones is not None and np.ndim(dones) > 0 and np.size(dones) != 1:
            # A vector step where nothing had info yet (an empty dict) — no masks, so no ends —
            # unless dones says otherwise, which means the infos lost the final step.
            return _from_vector(infos, np.flatnonzero(_as_bool_array(dones)), known_ids)
        done = any(k in infos for k in END_MARKERS) if dones is None else bool(_as_bool_array(dones)[0])
        return _from_list([infos], np.zeros(int(done), dtype=np.int64), known_ids)
    raise SeffiError(
        f"infos must be a Gymnasium vector info dict, a list of info dicts (SB3) or one info dict, "
        f"got {type(infos).__name__}"
    )


def episode_ends(infos: Any, dones: Any = None, *, env_name: str | None = None) -> list[EpisodeEnd]:
    """All episode ends in one step's ``infos``, whatever the format.

    Args:
        infos: A Gymnasium vector info dict, an SB3 list of info dicts, or one single-env info dict.
        dones: Which envs finished on this step (``terminated | truncated``): bool array, shape
            (num_envs,), or a bool for a single env. Optional; without it episode ends are recognised
            by the final-step keys (`END_MARKERS`), so an end whose info lost them goes unseen —
            pass ``dones`` to get an error instead.
        env_name: Env id used in error messages.

    Returns:
        The finished episodes, in env-index order.

    Raises:
        EpisodeRejected: A finished episode's info lacks ``strategy_matches``/``input_id`` or breaks
            the info contract.
        SeffiError: The inputs have an unknown shape, or ``dones`` is not boolean.
    """
    return episode_columns(infos, dones, env_name=env_name).ends(env_name)


#: (key, fill value where the env did not report it, dtype) of the optional columns.
_OPTIONAL: tuple[tuple[str, Any, Any], ...] = (
    ("valid", True, bool),
    ("sample_index", -1, np.int64),
    ("run_index", -1, np.int64),
    ("z", -1, np.int64),
)


def _list_rows(
    infos: Sequence[Any], idx: Sequence[int], env_offset: int = 0, known_ids: set[Any] | None = None
) -> tuple[list[tuple[Any, ...]], _Rejects]:
    """The finished envs ``idx`` of a list of info dicts as rows, and the rows that break the contract.

    A row is ``(input_id, matches, valid, env index, sample_index, run_index, z)``, ``_ABSENT`` where a
    key is missing; a bad row keeps its place (a placeholder), so rows and env indices stay aligned.
    """
    rows: list[tuple[Any, ...]] = []
    missing: list[tuple[int, str, str]] = []
    signatures = _ROW_SIGNATURES
    proven = True  # every row's values keep the rules (by type signature and range): no _screen needed
    last: tuple[type, ...] | None = None
    check: Any = False
    for i in idx:
        info = infos[i]
        try:
            row = (
                info["input_id"],
                info["strategy_matches"],
                info.get("valid", _ABSENT),
                i + env_offset,
                info.get("sample_index", _ABSENT),
                info.get("run_index", _ABSENT),
                info.get("z", _ABSENT),
            )
        except (KeyError, TypeError, AttributeError):  # a required key missing, or not a dict at all
            keys = info if isinstance(info, Mapping) else None
            key = "info" if keys is None else "input_id" if "strategy_matches" in keys else "strategy_matches"
            missing.append((len(rows), key, _missing(key, keys)))
            rows.append((_ABSENT, _ABSENT, _ABSENT, i + env_offset, _ABSENT, _ABSENT, _ABSENT))
            continue
        rows.append(row)
        if proven:
            # A per-row pre-check derived from _RULES (one dict lookup by the row's types, then the int
            # ranges): cheaper than _screen's per-key calls for the few episodes of an SB3 step. It only
            # ever proves rows fine; anything else goes to _screen, which alone decides what is bad.
            sig = tuple(map(type, row))
            if sig != last:  # consecutive rows mostly share one signature: skip hashing it
                check = signatures.get(sig, False)
                last = sig
            if check is False:
                check = _row_signature(sig)
                if len(signatures) < 1024:
                    signatures[sig] = check
            if check is None:
                proven = False
            else:
                values = check[0](row)
                proven = min(values) >= check[1] and max(values) <= _I64_MAX
    if proven and not missing:
        return rows, _NO_REJECTS  # the common case: no numpy, no lists built
    rejects = _Rejects(list(map(_ENV, rows)))
    for row_no, key, reason in missing:
        mask = np.zeros(len(rows), dtype=bool)
        mask[row_no] = True
        rejects.add(mask, key, lambda _, reason=reason: reason)
    if rows and not proven:
        input_id, _, valid, _, sample_index, run_index, z = zip(*rows, strict=True)
        raw = {"input_id": input_id, "valid": valid, "sample_index": sample_index, "run_index": run_index}
        _screen({**raw, "z": z}, {}, rejects, known_ids)
    return rows, rejects


def _rows_to_columns(rows: Sequence[tuple[Any, ...]]) -> EpisodeColumns:
    """Columns of checked rows from `_list_rows` (``_ABSENT`` becomes the fill value)."""
    n = len(rows)
    if n == 0:
        return EpisodeColumns.empty()
    input_id, matches, valid, *rest = zip(*rows, strict=True)  # in C: one tuple per column

    def ints(col: tuple[Any, ...]) -> np.ndarray:
        try:
            return np.array(col, dtype=np.int64)
        except TypeError:  # _ABSENT (the info did not have the key) -> -1
            return np.fromiter((-1 if v is _ABSENT else v for v in col), dtype=np.int64, count=n)

    env_index, sample_index, run_index, z = map(ints, rest)
    # bool(_ABSENT) is True: valid's fill value
    valid_col = np.fromiter(map(bool, valid), dtype=bool, count=n)
    return EpisodeColumns(
        _objects(input_id), _objects(matches), valid_col, env_index, sample_index, run_index, z
    )


def _from_list(
    infos: Sequence[Any], idx: np.ndarray, known_ids: set[Any] | None = None, env_offset: int = 0
) -> tuple[EpisodeColumns, _Rejects]:
    rows, rejects = _list_rows(infos, idx.tolist(), env_offset, known_ids)
    if rejects:
        rows = [r for r, ok in zip(rows, rejects.good.tolist(), strict=True) if ok]
    return _rows_to_columns(rows), rejects


def _from_ends(ends: Sequence[EpisodeEnd]) -> tuple[EpisodeColumns, _Rejects]:
    """Columns of the good ``ends`` (an EpisodeEnd's ``None`` means "not reported") and the bad ones."""

    def opt(v: Any) -> Any:
        return _ABSENT if v is None else v

    rows = [
        (e.input_id, e.matches, e.valid, e.env_index, opt(e.sample_index), opt(e.run_index), opt(e.z))
        for e in ends
    ]
    rejects = _Rejects(np.zeros(len(rows), dtype=np.int64))
    if rows:
        input_id, _, valid, env, sample_index, run_index, z = zip(*rows, strict=True)
        rejects.add(
            np.fromiter((not _RULES["run_index"].ok(e) for e in env), dtype=bool, count=len(rows)),
            "env_index",
            lambda r: f"'env_index' must be an int >= 0, got {_show(env[r])}",
        )
        rejects.env_index = np.fromiter(
            (e if _RULES["run_index"].ok(e) else -1 for e in env), dtype=np.int64, count=len(rows)
        )
        raw = {
            "input_id": input_id,
            "valid": valid,
            "sample_index": sample_index,
            "run_index": run_index,
            "z": z,
        }
        _screen(raw, {}, rejects)
        if rejects:
            rows = [r for r, ok in zip(rows, rejects.good.tolist(), strict=True) if ok]
    return _rows_to_columns(rows), rejects


def _typed(values: np.ndarray, have: np.ndarray | None, fill: Any, dtype: Any) -> np.ndarray:
    """A checked column with the fill value where the env did not report the key."""
    if values.dtype == object:  # Python values (None where missing): element by element
        it = values if have is None else (v if h else fill for v, h in zip(values, have, strict=True))
        return np.fromiter(it, dtype=dtype, count=values.shape[0])
    if values.dtype.kind == "f" and have is not None:  # unreported entries may be NaN: no cast warning
        values = np.where(have, values, fill)
    out = values.astype(dtype, copy=False)
    return out if have is None or have.all() else np.where(have, out, fill)


def _from_vector(
    infos: Mapping[str, Any], idx: np.ndarray, known_ids: set[Any] | None = None
) -> tuple[EpisodeColumns, _Rejects]:
    """Columns of the finished envs ``idx`` of a dict-of-arrays info, by masks and fancy indexing."""
    rejects = _Rejects(idx)
    if idx.size == 0:
        return EpisodeColumns.empty(), rejects
    raw: dict[str, Any] = {}
    have: dict[str, np.ndarray | None] = {}  # None: every finished env reported the key (no fill)
    for key in ("strategy_matches", "input_id", *(k for k, _, _ in _OPTIONAL)):
        value, mask = infos.get(key), infos.get("_" + key)
        h = None if mask is None or key not in infos else np.asarray(mask, dtype=bool)[idx]
        if h is not None and np.count_nonzero(h) == h.size:  # C call: ndarray.all costs twice as much
            h = None
        if key in ("strategy_matches", "input_id") and (h is not None or key not in infos):
            absent = ~h if h is not None else np.ones(idx.size, dtype=bool)
            rejects.add(absent, key, lambda r, key=key: _missing(key, _row(infos, int(idx[r]))))
        if key != "strategy_matches" and key in infos:
            raw[key], have[key] = np.asarray(value)[idx], h
    _screen(raw, have, rejects, known_ids)
    good = None if not rejects else rejects.good
    if good is not None:
        if not good.any():
            return EpisodeColumns.empty(), rejects
        idx = idx[good]
        raw = {k: v[good] for k, v in raw.items()}
        have = {k: None if h is None else h[good] for k, h in have.items()}
    cols = []
    for key, fill, dtype in _OPTIONAL:
        if key not in raw:
            cols.append(np.full(idx.size, fill, dtype=dtype))
        else:
            cols.append(_typed(raw[key], have[key], fill, dtype))
    matches = infos["strategy_matches"]
    matches = (
        matches[idx]
        if isinstance(matches, np.ndarray) and matches.dtype == object
        else _objects([matches[i] for i in idx.tolist()])
    )
    ids = raw["input_id"] if raw["input_id"].dtype == object else raw["input_id"].astype(object)
    return EpisodeColumns(ids, matches, cols[0], idx.astype(np.int64), cols[1], cols[2], cols[3]), rejects


def _from_same_step(
    infos: Mapping[str, Any], dones: Any, known_ids: set[Any] | None = None
) -> tuple[EpisodeColumns, _Rejects]:
    final = infos.get("final_info")
    mask = infos.get("_final_info")
    if mask is None:
        if final is None:
            return EpisodeColumns.empty(), _Rejects(np.zeros(0, dtype=np.int64))
        mask = np.array([f is not None for f in final]) if not isinstance(final, Mapping) else None
    idx = np.flatnonzero(np.asarray(mask, dtype=bool)) if mask is not None else np.array([], dtype=np.int64)
    if dones is not None:
        # dones is the authority: a done env without a final info is a rejected episode, not skipped.
        idx = np.flatnonzero(_as_bool_array(dones, len(mask) if mask is not None else None))
    if isinstance(final, Mapping) or final is None:
        return _from_vector(final or {}, idx, known_ids)
    # Gymnasium 0.29: an object array of per-env dicts
    return _from_list(final, idx, known_ids)

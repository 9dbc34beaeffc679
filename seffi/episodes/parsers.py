"""One parser per info format, each returning the finished episodes as an `EpisodeBatch`.

* **Gymnasium vector env** (`parse_vector`): one dict of arrays with boolean ``_key`` masks. In
  ``NEXT_STEP`` (the default) and ``DISABLED`` autoreset modes the final step's info sits at index
  ``i`` on the step where env ``i`` finished. In ``SAME_STEP`` mode the env was reset inside that
  step, so the top level holds the *reset* info and the final info is nested under ``"final_info"``
  (a dict of arrays selected by ``"_final_info"``; Gymnasium 0.29: an object array of dicts).
* **A list of per-env infos** (`parse_list`): SB3's VecEnv (which resets inside ``step`` and leaves
  the final info in ``infos[i]``), and Gymnasium's ``DictInfoToList`` in every autoreset mode (in
  ``SAME_STEP`` its dict ``i`` holds the final info under ``"final_info"``).
* **One info** (`parse_info`): a plain env's final step, an RLlib episode's last info.
* **A TRL generation** (`parse_generation`): all completions of a step, as columns.
* **Plain rows** (`parse_rows`): dicts with the contract's keys, e.g. read from files.

Which envs finished is known for sure from ``dones`` (``terminated | truncated``) when given; without
them an end is recognised by the keys seffi envs emit only on the final step (`END_MARKERS`). Every
parser checks the episodes with `screen`: the good ones form the batch and the bad ones raise
`EpisodeRejected`, which carries the good ones as ``batch``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from seffi.episodes.batch import EpisodeBatch
from seffi.episodes.contract import _BOOLS, CONTRACT, MISSING, EpisodeRejected, MatchCoder, _Missing, screen
from seffi.errors import SeffiError

__all__ = ["END_MARKERS", "parse_generation", "parse_info", "parse_infos", "parse_list", "parse_rows"]
__all__ += ["parse_vector"]

#: Keys that seffi envs put in ``info`` only on the step that ends an episode.
END_MARKERS: tuple[str, ...] = ("strategy_matches", "y_text")

Strategies = Sequence[str] | MatchCoder
_empty = functools.lru_cache(maxsize=64)(EpisodeBatch.empty)


def _coder(strategies: Strategies) -> MatchCoder:
    return strategies if isinstance(strategies, MatchCoder) else MatchCoder(strategies)


def _bools(dones: Any, n: int | None = None) -> np.ndarray:
    """``dones`` as a bool array (at least 1-D); anything but booleans (``1``, ``"no"``) is an error."""
    arr = np.atleast_1d(np.asarray(dones))
    if arr.dtype != np.bool_:
        if arr.dtype != object or not all(isinstance(v, _BOOLS) for v in arr.flat):
            raise SeffiError(
                f"'dones' must be booleans (terminated | truncated), got {arr.dtype} values "
                f"{arr.reshape(-1)[:4].tolist()!r}"
            )
        arr = arr.astype(bool)
    if n is not None and arr.shape[0] != n:
        raise SeffiError(f"dones has {arr.shape[0]} entries but the infos describe {n} envs")
    return arr


def _finish(cols: dict[str, Any], env_index: np.ndarray, coder: MatchCoder, info_of: Any, name: Any) -> Any:
    """The batch of the good episodes of ``cols`` (see `screen`); raises for the bad ones."""
    n = env_index.shape[0]
    if n == 0:
        return _empty(coder.strategies)
    good, codes, first = screen(cols, n, coder, info_of)
    env = env_index
    if good is not None:
        keep = good.tolist()
        cols = {
            k: (v[good] if isinstance(v, np.ndarray) else [x for x, g in zip(v, keep, strict=True) if g],
                h if h is None else h[good])  # fmt: skip
            for k, (v, h) in cols.items()
            if k != "info"
        }
        env, codes = env_index[good], codes[good]
    m = env.shape[0]
    columns = [_typed(cols.get(k), CONTRACT[k].fill, d, m) for k, d in _TYPED]
    ids = cols["input_id"][0] if m else np.zeros(0, dtype=object)
    batch = EpisodeBatch(coder.strategies, _ids(ids), coder.table[codes], columns[0], env, *columns[1:])
    if first is not None:
        mask, key, row, reason = first
        where = int(env_index[row])
        raise EpisodeRejected(reason, key=key, env_index=where, env_name=name, rejected=int(mask.sum()), batch=batch)
    return batch


_TYPED = (("valid", bool), ("sample_index", np.int64), ("run_index", np.int64), ("z", np.int64))


def _typed(col: Any, fill: Any, dtype: Any, n: int) -> np.ndarray:
    """A checked column with ``fill`` where the env did not report the key."""
    if col is None:
        return np.full(n, fill, dtype=dtype)
    values, have = col
    if isinstance(values, np.ndarray) and values.dtype != object:
        if have is not None:  # unreported entries may be NaN: filled before the cast
            values = np.where(have, values, fill)
        return values.astype(dtype, copy=False)
    if have is None:
        return np.array(values, dtype=dtype)
    return np.fromiter((v if h else fill for v, h in zip(values, have.tolist(), strict=True)), dtype, n)


def _ids(values: Any) -> np.ndarray:
    """Input ids as an object array of str (an int id becomes its decimal string)."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        return values.astype(str).astype(object)
    out = np.fromiter(values, dtype=object, count=len(values))
    if set(map(type, values)) <= {str}:
        return out
    return np.fromiter((v if type(v) is str else str(v) for v in values), dtype=object, count=len(values))


def _from_dicts(infos: Sequence[Any], env_index: np.ndarray, coder: MatchCoder, name: Any) -> Any:
    """The batch of finished episodes given by their final info dicts (a few lookups per episode)."""
    cols: dict[str, Any] = {}
    dicts = infos
    if not all(isinstance(d, Mapping) for d in infos):
        cols["info"] = (None, np.fromiter((isinstance(d, Mapping) for d in infos), bool, len(infos)))
        dicts = [d if isinstance(d, Mapping) else {} for d in infos]
    for key in CONTRACT:
        values = [d.get(key, MISSING) for d in dicts]
        have = None
        if _Missing in set(map(type, values)):
            have = np.fromiter((v is not MISSING for v in values), bool, len(values))
        cols[key] = (values, have)
    return _finish(cols, env_index, coder, infos.__getitem__, name)


def _from_columns(infos: Mapping[str, Any], idx: np.ndarray, coder: MatchCoder, name: Any, offset: int) -> Any:
    """The batch of the finished envs ``idx`` of a dict of arrays, by masks and fancy indexing."""
    if idx.size == 0:
        return _empty(coder.strategies)
    cols: dict[str, Any] = {}
    for key in CONTRACT:
        if key not in infos:
            continue
        mask, values = infos.get("_" + key), infos[key]
        have = None if mask is None else np.asarray(mask, dtype=bool)[idx]
        if have is not None and np.count_nonzero(have) == have.size:  # C call: .all() costs twice as much
            have = None
        if isinstance(values, np.ndarray) and (values.dtype == object or key != "strategy_matches"):
            cols[key] = (values[idx], have)
        else:  # match sets stored as rows of a 2-D array, or a plain sequence
            cols[key] = ([values[i] for i in idx.tolist()], have)

    def info_of(row: int) -> dict[str, Any]:  # the keys env idx[row] reported (for the error message)
        i, out = int(idx[row]), {}
        for key, value in infos.items():
            mask = infos.get("_" + key)
            if not key.startswith("_") and (mask is None or mask[i]):
                out[key] = None
        return out

    return _finish(cols, idx + offset, coder, info_of, name)


def parse_vector(
    infos: Mapping[str, Any], strategies: Strategies, dones: Any = None, *, env_name: Any = None, env_offset: int = 0
) -> EpisodeBatch:
    """The episodes that ended in one step of a Gymnasium vector env (any autoreset mode).

    Args:
        infos: The step's info dict of arrays.
        strategies: The declared strategy ids (or a `MatchCoder` over them, kept across calls).
        dones: ``terminated | truncated``, bool array of shape (num_envs,). Recommended: with it an
            ended episode whose info lacks ``strategy_matches`` is rejected instead of going unseen.
        env_name: Env id named in error messages.
        env_offset: Added to the sub-env indices (a worker's first env index).

    Raises:
        EpisodeRejected: Some finished episodes break the contract (``batch`` holds the others).
        SeffiError: ``dones`` is not boolean or does not fit the infos.
    """
    coder = _coder(strategies)
    if "final_info" in infos or "_final_info" in infos:  # SAME_STEP
        final, mask = infos.get("final_info"), infos.get("_final_info")
        if mask is None and final is not None and not isinstance(final, Mapping):
            mask = [f is not None for f in final]
        n = None if mask is None else len(mask)
        idx = np.flatnonzero(_bools(dones, n) if dones is not None else np.asarray(mask if mask is not None else [], dtype=bool))
        if isinstance(final, Mapping) or final is None:
            return _from_columns(final or {}, idx, coder, env_name, env_offset)
        return _from_dicts([final[i] for i in idx.tolist()], idx + env_offset, coder, env_name)
    n = next((len(v) for k, v in infos.items() if k[:1] == "_" and isinstance(v, np.ndarray)), None)
    if dones is not None:
        idx = np.flatnonzero(_bools(dones, n))
    else:
        marks = [np.asarray(infos["_" + k], dtype=bool) for k in END_MARKERS if "_" + k in infos]
        idx = np.flatnonzero(np.logical_or.reduce(marks)) if marks else np.zeros(0, dtype=np.int64)
    return _from_columns(infos, idx, coder, env_name, env_offset)


def parse_list(
    infos: Sequence[Any], strategies: Strategies, dones: Any = None, *, env_name: Any = None, env_offset: int = 0
) -> EpisodeBatch:
    """The episodes that ended in a list of per-env infos (SB3 VecEnv, ``DictInfoToList``).

    Several consecutive steps go in one call as a list of steps' lists with ``dones`` of shape
    (steps, num_envs). Other arguments, errors: as `parse_vector`.
    """
    coder = _coder(strategies)
    n = len(infos)
    if dones is None:
        ends = (*END_MARKERS, "final_info")
        done = [i for i, d in enumerate(infos) if isinstance(d, Mapping) and any(k in d for k in ends)]
    else:
        d = _bools(dones)
        if d.ndim == 2:  # consecutive steps
            n = d.shape[1]
            infos = list(chain.from_iterable(infos))
            d = d.reshape(-1)
        done = d.nonzero()[0].tolist()
        if d.shape[0] != len(infos):
            raise SeffiError(f"dones has {d.size} entries but the infos describe {len(infos)} envs")
    if not done:
        return _empty(coder.strategies)
    # DictInfoToList in SAME_STEP: the finished env's dict holds its final info under "final_info"
    final = [f.get("final_info", f) if isinstance(f := infos[i], Mapping) else f for i in done]
    return _from_dicts(final, np.array(done, dtype=np.int64) % n + env_offset, coder, env_name)


def parse_info(info: Any, strategies: Strategies, *, env_index: int = 0, env_name: Any = None) -> EpisodeBatch:
    """The one episode that ``info``, its final step's info, ends (errors as `parse_vector`)."""
    return _from_dicts([info], np.array([env_index], dtype=np.int64), _coder(strategies), env_name)


def parse_infos(
    infos: Any, strategies: Strategies, dones: Any = None, *, env_name: Any = None, env_offset: int = 0
) -> EpisodeBatch:
    """The episodes that ended in one step's ``infos`` of any format above, told apart by its shape."""
    if isinstance(infos, (list, tuple)):
        return parse_list(infos, strategies, dones, env_name=env_name, env_offset=env_offset)
    many = dones is not None and np.size(dones) != 1
    if isinstance(infos, Mapping) and (many or any(k[:1] == "_" for k in infos)):
        return parse_vector(infos, strategies, dones, env_name=env_name, env_offset=env_offset)
    if isinstance(infos, Mapping) or dones is not None:
        ended = any(k in infos for k in END_MARKERS) if dones is None else bool(_bools(dones)[0])
        if not ended:
            return _empty(_coder(strategies).strategies)
        return parse_info(infos, strategies, env_index=env_offset, env_name=env_name)
    raise SeffiError(
        "infos must be a Gymnasium vector info dict, a list of info dicts (SB3) or one info dict, "
        f"got {type(infos).__name__}"
    )


def parse_generation(
    input_ids: Sequence[Any],
    matches: Sequence[Any],
    strategies: Strategies,
    valid: Sequence[bool] | None = None,
    *,
    sample_index: Sequence[int] | None = None,
    run_index: Sequence[int] | None = None,
    env_name: Any = None,
) -> EpisodeBatch:
    """The completions of one generation step (TRL), as columns of equal length (errors as `parse_vector`)."""
    given = {"input_id": input_ids, "strategy_matches": matches, "valid": valid}
    given.update(sample_index=sample_index, run_index=run_index)
    cols = {k: (list(v), None) for k, v in given.items() if v is not None}
    if len({len(v) for v, _ in cols.values()}) != 1:
        raise SeffiError("parse_generation needs columns of equal length")
    return _finish(cols, np.zeros(len(input_ids), dtype=np.int64), _coder(strategies), lambda r: {}, env_name)


def parse_rows(
    rows: Sequence[Mapping[str, Any]], strategies: Strategies, *, env_index: Any = None, env_name: Any = None
) -> EpisodeBatch:
    """Finished episodes given as dicts with the contract's keys (``env_index``: per row, default 0)."""
    env = np.zeros(len(rows), dtype=np.int64) if env_index is None else np.asarray(env_index, dtype=np.int64)
    return _from_dicts(rows, env, _coder(strategies), env_name)

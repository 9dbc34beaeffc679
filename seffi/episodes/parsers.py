"""One parser per info format, each returning the finished episodes as an `EpisodeBatch`.

`parse_vector`: a Gymnasium vector env's dict of arrays (``_key``: which envs hold ``key``; SAME_STEP
autoreset: under ``"final_info"``, in Gymnasium 0.29 an object array of dicts); `parse_list`: a dict per
env (SB3; ``DictInfoToList``, under ``"final_info"`` in SAME_STEP); `parse_info`: one env's final info
(RLlib too); `parse_generation`: a TRL step's completions; `parse_rows`: dicts, e.g. read from files.
``dones`` (``terminated | truncated``) tells which envs ended, else the keys seffi envs emit on the final
step only (`END_MARKERS`); ``strategies``: the ids or a `MatchCoder` kept across calls.
"""

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from seffi.episodes.batch import EpisodeBatch
from seffi.episodes.contract import CONTRACT, screen
from seffi.errors import SeffiError

#: Keys that seffi envs put in ``info`` only on the step that ends an episode.
END_MARKERS: tuple[str, ...] = ("strategy_matches", "y_text")


def _bools(dones: Any, n: int | None = None) -> np.ndarray:
    """``dones`` as a bool array (at least 1-D); anything but booleans (``1``, ``"no"``) is an error."""
    arr = dones if type(dones) is np.ndarray and dones.ndim else np.atleast_1d(np.asarray(dones))
    if arr.dtype != np.bool_:
        got = f"{arr.dtype} values {arr.reshape(-1)[:4].tolist()!r}"
        raise SeffiError(f"'dones' must be booleans (terminated | truncated), got {got}")
    if n is not None and arr.shape[0] != n:
        raise SeffiError(f"dones has {arr.shape[0]} entries but the infos describe {n} envs")
    return arr


def _width(infos: Mapping[str, Any]) -> int | None:  # the envs of a dict of arrays: its first _key mask
    masks = (len(v) for k, v in infos.items() if k[:1] == "_" and type(v) is np.ndarray and v.dtype == bool)
    return next(masks, None)


def _columns(infos: Mapping[str, Any], idx: np.ndarray, strategies: Any, name: Any, offset: int) -> Any:
    """The batch of the finished envs ``idx`` of a dict of arrays (``_key``: the envs that hold ``key``)."""
    cols: dict[str, Any] = {}
    for key in [k for k in CONTRACT if k in infos] if idx.size else ():
        values, mask = infos[key], infos.get("_" + key)
        rows = values[idx] if isinstance(values, np.ndarray) else [values[i] for i in idx.tolist()]
        have = None if mask is None or np.count_nonzero(mask) == len(mask) else np.asarray(mask, bool)[idx]
        cols[key] = (rows, None if have is None or np.count_nonzero(have) == have.size else have)

    def info_of(row: int) -> dict[str, Any]:  # the keys env idx[row] reported, for the error message
        return {k: None for k in infos if k[:1] != "_" and ("_" + k not in infos or infos["_" + k][idx[row]])}

    return screen(cols, idx + offset, strategies, info_of, name)


def parse_vector(
    infos: Mapping[str, Any], strategies: Any, dones: Any = None, *, env_name: Any = None, env_offset: int = 0
) -> EpisodeBatch:
    """The episodes that ended in one step of a Gymnasium vector env (any autoreset mode)."""
    if "final_info" in infos or "_final_info" in infos:  # SAME_STEP
        final, mask = infos.get("final_info"), infos.get("_final_info")
        ends = mask if dones is None else _bools(dones, None if mask is None else len(mask))
        idx = np.flatnonzero(np.asarray([] if ends is None else ends, dtype=bool))
        if isinstance(final, Mapping) or final is None:
            return _columns(final or {}, idx, strategies, env_name, env_offset)
        return parse_rows([final[i] for i in idx], strategies, env_index=idx + env_offset, env_name=env_name)
    marks = [infos["_" + k] for k in END_MARKERS if dones is None and "_" + k in infos] or [[]]
    ends = np.logical_or.reduce(marks) if dones is None else _bools(dones, _width(infos))
    return _columns(infos, ends.nonzero()[0], strategies, env_name, env_offset)


def parse_list(
    infos: Sequence[Any], strategies: Any, dones: Any = None, *, env_name: Any = None, env_offset: int = 0
) -> EpisodeBatch:
    """The episodes that ended in a list of per-env infos (steps' lists: ``dones`` (steps, num_envs))."""
    n = len(infos)
    if dones is None:
        ends = (*END_MARKERS, "final_info")
        done = [i for i, d in enumerate(infos) if isinstance(d, Mapping) and any(k in d for k in ends)]
    else:
        d = _bools(dones)
        if d.ndim == 2:  # consecutive steps
            n, infos, d = d.shape[1], list(chain.from_iterable(infos)), d.reshape(-1)
        done = _bools(d, len(infos)).nonzero()[0].tolist()
    # DictInfoToList in SAME_STEP: the finished env's dict holds its final info under "final_info"
    final = [f.get("final_info", f) if isinstance(f := infos[i], Mapping) else f for i in done]
    env = np.array(done, dtype=np.int64) % max(n, 1) + env_offset
    return parse_rows(final, strategies, env_index=env, env_name=env_name)


def parse_info(info: Any, strategies: Any, *, env_index: int = 0, env_name: Any = None) -> EpisodeBatch:
    """The episode that ``info``, its final step's info, ends."""
    return parse_rows([info], strategies, env_index=[env_index], env_name=env_name)


def parse_infos(
    infos: Any, strategies: Any, dones: Any = None, *, env_name: Any = None, env_offset: int = 0
) -> EpisodeBatch:
    """The episodes that ended in one step's ``infos`` of any format above, told by its shape."""
    if isinstance(infos, (list, tuple)) and (dones is None or np.ndim(dones) > 0):
        return parse_list(infos, strategies, dones, env_name=env_name, env_offset=env_offset)
    mapping = isinstance(infos, Mapping)
    vector = mapping and ("final_info" in infos or "_final_info" in infos or np.size(dones) > 1)
    if vector or (mapping and _width(infos) is not None):
        return parse_vector(infos, strategies, dones, env_name=env_name, env_offset=env_offset)
    if not mapping and dones is None:
        raise SeffiError(f"infos must be a vector info dict, a list of dicts or one dict, not {infos!r:.60}")
    # One env's info (a single done): whatever it holds is that episode's info, a list too.
    ended = int(any(k in infos for k in END_MARKERS) if dones is None else _bools(dones)[0])
    return parse_rows([infos][:ended], strategies, env_index=[env_offset][:ended], env_name=env_name)


def parse_generation(
    input_ids, matches, strategies, valid=None, *, sample_index=None, run_index=None, env_name=None
) -> EpisodeBatch:
    """All completions of one generation step (TRL), given as columns of equal length."""
    given = {"input_id": input_ids, "strategy_matches": matches, "valid": valid, "sample_index": sample_index}
    cols = {k: (list(v), None) for k, v in (given | {"run_index": run_index}).items() if v is not None}
    if len({len(v) for v, _ in cols.values()}) != 1:
        raise SeffiError("parse_generation needs columns of equal length")
    return screen(cols, np.zeros(len(input_ids), dtype=np.int64), strategies, lambda _: {}, env_name)


def parse_rows(rows: Sequence[Any], strategies: Any, *, env_index: Any = None, env_name: Any = None) -> Any:
    """Finished episodes given as their final info dicts (``env_index``: per row, default 0)."""
    cols: dict[str, Any] = {}
    if set(map(type, dicts := rows)) - {dict}:  # a non-dict info holds no key
        dicts = [d if isinstance(d, Mapping) else {} for d in rows]
    for key in CONTRACT:
        if any(have := [key in d for d in dicts]):
            cols[key] = ([d.get(key) for d in dicts], None if all(have) else np.array(have))
    env = np.zeros(len(rows), dtype=np.int64) if env_index is None else np.asarray(env_index, dtype=np.int64)
    return screen(cols, env, strategies, rows.__getitem__, env_name)

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
that step (:data:`END_MARKERS`). Either way the cost per call is O(number of envs) in numpy plus
O(finished episodes) in Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seffi.errors import SeffiError

#: Keys that seffi envs put in ``info`` only on the step that ends an episode.
END_MARKERS: tuple[str, ...] = ("strategy_matches", "y_text")

#: Keys read from a final info; everything else (observations, y_text, ...) is never copied.
_WANTED: tuple[str, ...] = ("input_id", "strategy_matches", "valid", "sample_index", "z", "num_strategies")


@dataclass(frozen=True)
class EpisodeEnd:
    """One finished episode as the coverage core sees it.

    Attributes:
        input_id: Which input the episode sampled for.
        matches: Strategy ids the episode's trace matched (sorted; empty for junk or off-strategy).
        valid: The trace was a correct solution (``True`` when the env does not report validity).
        env_index: Index of the sub-environment in its vector env (0 for a single env).
        sample_index: The env's own sample counter for this input, if reported.
        z: The latent code of a router env, if reported (a diagnostic, never strategy coverage).
    """

    input_id: str
    matches: tuple[str, ...]
    valid: bool
    env_index: int = 0
    sample_index: int | None = None
    z: int | None = None


def _describe(env_name: str | None, env_index: int) -> str:
    where = f"env {env_name!r}" if env_name else "the env"
    return f"{where} (sub-env index {env_index})"


def episode_from_info(
    info: Mapping[str, Any], *, env_index: int = 0, env_name: str | None = None
) -> EpisodeEnd:
    """Turn the final-step ``info`` of one episode into an :class:`EpisodeEnd`.

    Args:
        info: The info dict of the step that ended the episode.
        env_index: Sub-env index, used as part of the run identity and in error messages.
        env_name: Env id for error messages (e.g. ``"seffi/HanoiRouter-v0"``).

    Returns:
        The parsed episode end.

    Raises:
        SeffiError: ``strategy_matches`` or ``input_id`` is missing or malformed. Missing keys are
            an error rather than an empty match set, because silently counting zero coverage would
            make a broken wrapper look like a bad policy.
    """
    where = _describe(env_name, env_index)
    if "strategy_matches" not in info:
        raise SeffiError(
            f"an episode ended in {where} but its info has no 'strategy_matches' (keys: "
            f"{sorted(map(str, info))}); coverage needs the final-step info of a seffi env, or a wrapper "
            "that passes it through"
        )
    if "input_id" not in info:
        raise SeffiError(f"an episode ended in {where} but its info has no 'input_id'")
    raw = info["strategy_matches"]
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (Sequence, frozenset, set, np.ndarray)):
        raise SeffiError(
            f"'strategy_matches' in {where} must be a tuple of strategy ids, "
            f"got {type(raw).__name__}: {raw!r}"
        )
    matches = tuple(sorted(str(s) for s in raw))
    sample_index = info.get("sample_index")
    z = info.get("z")
    return EpisodeEnd(
        input_id=str(info["input_id"]),
        matches=matches,
        valid=bool(info.get("valid", True)),
        env_index=int(env_index),
        sample_index=None if sample_index is None else int(sample_index),
        z=None if z is None else int(z),
    )


def _as_bool_array(dones: Any, n: int | None = None) -> np.ndarray:
    arr = np.asarray(dones, dtype=bool).reshape(-1)
    if n is not None and arr.shape[0] != n:
        raise SeffiError(f"dones has {arr.shape[0]} entries but the infos describe {n} envs")
    return arr


def _row(vector_info: Mapping[str, Any], i: int) -> dict[str, Any]:
    """The single-env info at index ``i`` of a Gymnasium dict-of-arrays.

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


def episode_ends(infos: Any, dones: Any = None, *, env_name: str | None = None) -> list[EpisodeEnd]:
    """All episode ends in one step's ``infos``, whatever the format.

    Args:
        infos: A Gymnasium vector info dict, an SB3 list of info dicts, or one single-env info dict.
        dones: Which envs finished on this step (``terminated | truncated``): bool array, shape
            (num_envs,), or a bool for a single env. Optional; without it episode ends are recognised
            by the final-step keys (:data:`END_MARKERS`), so an end whose info lost them goes unseen —
            pass ``dones`` to get an error instead.
        env_name: Env id used in error messages.

    Returns:
        The finished episodes, in env-index order.

    Raises:
        SeffiError: A finished episode's info lacks ``strategy_matches``/``input_id``, or the inputs
            have an unknown shape.
    """
    if isinstance(infos, (list, tuple)):
        return _from_list(infos, dones, env_name)
    if isinstance(infos, Mapping):
        if is_vector_info(infos):
            return _from_vector(infos, dones, env_name)
        if dones is not None and np.ndim(dones) > 0 and np.size(dones) != 1:
            # A vector step where nothing had info yet (an empty dict) — no masks, so no ends —
            # unless dones says otherwise, which means the infos lost the final step.
            done_idx = np.flatnonzero(_as_bool_array(dones))
            if done_idx.size:
                return [episode_from_info({}, env_index=int(done_idx[0]), env_name=env_name)]
            return []
        done = (
            any(k in infos for k in END_MARKERS) if dones is None else bool(np.asarray(dones).reshape(-1)[0])
        )
        return [episode_from_info(infos, env_index=0, env_name=env_name)] if done else []
    raise SeffiError(
        f"infos must be a Gymnasium vector info dict, a list of info dicts (SB3) or one info dict, "
        f"got {type(infos).__name__}"
    )


def _from_list(infos: Sequence[Mapping[str, Any]], dones: Any, env_name: str | None) -> list[EpisodeEnd]:
    if dones is None:
        idx = [i for i, info in enumerate(infos) if any(k in info for k in END_MARKERS)]
    else:
        idx = np.flatnonzero(_as_bool_array(dones, len(infos))).tolist()
    return [episode_from_info(infos[i], env_index=i, env_name=env_name) for i in idx]


def _from_vector(infos: Mapping[str, Any], dones: Any, env_name: str | None) -> list[EpisodeEnd]:
    if "final_info" in infos or "_final_info" in infos:
        return _from_same_step(infos, dones, env_name)
    n = _num_envs(infos)
    if dones is not None:
        idx = np.flatnonzero(_as_bool_array(dones, n))
    else:
        mask = _marker_mask(infos)
        if mask is None:
            return []
        idx = np.flatnonzero(mask)
    return [episode_from_info(_row(infos, int(i)), env_index=int(i), env_name=env_name) for i in idx]


def _from_same_step(infos: Mapping[str, Any], dones: Any, env_name: str | None) -> list[EpisodeEnd]:
    final = infos.get("final_info")
    mask = infos.get("_final_info")
    if mask is None:
        if final is None:
            return []
        mask = np.array([f is not None for f in final]) if not isinstance(final, Mapping) else None
    idx = np.flatnonzero(np.asarray(mask, dtype=bool)) if mask is not None else np.array([], dtype=int)
    if dones is not None:
        # dones is the authority: a done env without a final info must be reported, not skipped.
        done_idx = np.flatnonzero(_as_bool_array(dones, len(mask) if mask is not None else None))
        missing = np.setdiff1d(done_idx, idx)
        if missing.size:
            return [episode_from_info({}, env_index=int(missing[0]), env_name=env_name)]
        idx = done_idx
    ends = []
    for i in idx:
        i = int(i)
        row = final[i] if not isinstance(final, Mapping) else _row(final, i)
        ends.append(episode_from_info(row or {}, env_index=i, env_name=env_name))
    return ends

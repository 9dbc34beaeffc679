"""Shared machinery of the seffi envs: the input pool, the batched per-input budget state, rewards, infos.

Every env keeps its state in a `Life` of ``E`` rows, each with its own seeded generator, so a native
vector env equals ``SyncVectorEnv`` over single envs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from pydantic import ValidationError

from seffi._convert import clip, plain
from seffi._seeding import canonical_json
from seffi.errors import SeffiError
from seffi.tasks import get_task
from seffi.tasks.base import Task, TaskInput, ValidationResult

from .config import EnvConfig, problems

#: Uniforms drawn per refill of a row's buffer (in blocks, so the vector env can index them).
UNIFORM_BLOCK = 256

#: Keys present in ``info`` exactly on the step that ends an episode, in this order.
FINAL_INFO_KEYS: tuple[str, ...] = tuple(
    "input_id y_text strategy_matches valid parse_ok num_strategies sample_index budget_exhausted run_index "
    "num_new_strategies".split()
)

_SPEC_CACHE: dict[str, Any] = {}

#: Settings that shape an env row's runs, not its pool: envs that differ only in these share one spec.
_RUN_FIELDS = frozenset({"budget", "reward", "novelty_bonus", "schedule", "history", "render_mode"})


def pool_fields(cfg: EnvConfig) -> dict[str, Any]:
    """The settings of ``cfg`` that determine its pool data (the key of `cached_spec`)."""
    return cfg.model_dump(exclude=_RUN_FIELDS)


def cached_spec(kind: str, key_fields: dict[str, Any], build: Any) -> Any:
    """The pool data shared by envs of one config (a SyncVectorEnv of 256 envs builds it once)."""
    key = kind + canonical_json(key_fields)
    if key not in _SPEC_CACHE:
        if len(_SPEC_CACHE) > 64:  # bounded: configs in a sweep come and go
            _SPEC_CACHE.clear()
        _SPEC_CACHE[key] = build()
    return _SPEC_CACHE[key]


class PoolSpec:
    """The fixed input pool of an env (``task.make_inputs(n_inputs, seed=input_seed)``), shareable."""

    def __init__(self, cfg: EnvConfig) -> None:
        try:
            self.task: Task[Any, Any] = get_task(cfg.task, **(cfg.task_config or {}))
        except ValidationError as exc:
            raise SeffiError(f"invalid task_config for {cfg.task!r}: {problems(exc)}") from None
        self.inputs: list[TaskInput] = self.task.make_inputs(cfg.n_inputs, seed=cfg.input_seed)
        self.n_inputs = len(self.inputs)
        self.input_ids: tuple[str, ...] = tuple(x.id for x in self.inputs)
        self.strategies: tuple[str, ...] = tuple(self.task.strategies())
        self.strategy_index = {s: i for i, s in enumerate(self.strategies)}
        self._index = {xid: i for i, xid in enumerate(self.input_ids)}
        self.ids_array = np.fromiter(self.input_ids, dtype=object, count=len(self.input_ids))

    def index_of(self, input_id: Any) -> int:
        """Pool position of ``input_id``; a `SeffiError` for an id not in the pool."""
        try:
            return self._index[input_id]
        except (KeyError, TypeError):
            shown = ", ".join(self.input_ids[:8]) + (" ..." if len(self.input_ids) > 8 else "")
            raise SeffiError(
                f"unknown input_id {input_id!r}: not in this env's pool of {len(self.input_ids)} "
                f"{self.task.name} inputs ({shown})"
            ) from None

    def match_mask(self, matches: frozenset[str] | Sequence[str]) -> np.ndarray:
        """Which declared strategies are in ``matches``: bool array, shape (M,)."""
        mask = np.zeros(len(self.strategies), dtype=bool)
        mask[[self.strategy_index[s] for s in matches if s in self.strategy_index]] = True
        return mask

    def base_match_distribution(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        return self.task.base_match_distribution(self.inputs[self.index_of(input_id)], valid_only=valid_only)

    @cached_property
    def feasible_mask(self) -> np.ndarray:
        """Which strategies each input admits: bool (N, M), built when first rendered."""
        mask = np.zeros((self.n_inputs, len(self.strategies)), dtype=bool)
        for i, x in enumerate(self.inputs):
            mask[i] = self.match_mask(self.task.feasible_strategies(x))
        return mask


@dataclass(frozen=True, slots=True)
class Outcomes:
    """Validated samples as columns of R rows; ``matches`` holds sorted tuples, ``mask`` is (R, M)."""

    y_text: np.ndarray
    matches: np.ndarray
    valid: np.ndarray
    parse_ok: np.ndarray
    mask: np.ndarray

    @classmethod
    def from_results(
        cls, spec: PoolSpec, texts: Sequence[str], results: Iterable[ValidationResult]
    ) -> Outcomes:
        """Columns of ``texts`` and their validation ``results`` (an iterable read once)."""
        r_count = len(texts)
        mask = np.zeros((r_count, len(spec.strategies)), dtype=bool)
        valid, parse_ok = np.zeros((2, r_count), dtype=bool)
        matches = np.empty(r_count, dtype=object)
        shared: dict[frozenset[str], tuple[tuple[str, ...], np.ndarray]] = {}  # per distinct match set
        for i, (_, r) in enumerate(zip(texts, results, strict=True)):  # strict: one result per text
            if (key := r.strategy_matches) not in shared:
                shared[key] = (tuple(sorted(key)), spec.match_mask(key))
            matches[i], mask[i] = shared[key]
            valid[i], parse_ok[i] = r.valid, r.parse_ok
        return cls(np.fromiter(texts, dtype=object, count=r_count), matches, valid, parse_ok, mask)

    def take(self, idx: Any) -> Outcomes:
        """The rows ``idx`` of every column."""
        return Outcomes(*(getattr(self, column)[idx] for column in self.__slots__))


class Life:
    """Budget, schedule, history and novelty state of ``E`` env rows over one pool (``n_latents``: Z).

    With ``cfg.render_mode`` it also keeps what the renderer reads: ``matched`` and ``last_info``.
    """

    def __init__(self, spec: PoolSpec, cfg: EnvConfig, num_envs: int, n_latents: int = 0) -> None:
        e, n, m = num_envs, spec.n_inputs, len(spec.strategies)
        self.spec, self.cfg, self.num_envs = spec, cfg, num_envs
        self.gens: list[np.random.Generator | None] = [None] * e
        self.ubuf = np.zeros((e, UNIFORM_BLOCK))
        self.upos = np.full(e, UNIFORM_BLOCK, dtype=np.int64)
        self.counts = np.zeros((e, n), dtype=np.int64)  # samples used in the current run
        self.runs = np.zeros((e, n), dtype=np.int64)  # completed-or-current run number
        self.rr = np.zeros(e, dtype=np.int64)  # round-robin pointer
        self.seen = np.zeros((e, n, m), dtype=bool)  # strategies found by valid traces, this run
        # Router: latents tried, this run (int32: a count never exceeds the budget, <= 1,000,000).
        self.tried = np.zeros((e, n, n_latents), dtype=np.int32)
        self.cur = np.full(e, -1, dtype=np.int64)  # input of the current episode
        self.active = np.zeros(e, dtype=bool)  # an episode is in progress
        self.record = cfg.render_mode is not None
        self.matched = np.zeros((e, n, m) if self.record else (e, 0, 0), dtype=bool)
        self.last_info: list[dict[str, Any] | None] = [None] * e
        self._arange_n = np.arange(n)

    def seeded(self, row: int) -> bool:
        return self.gens[row] is not None

    def restart(self, row: int, gen: np.random.Generator) -> None:
        """Give ``row`` a (freshly seeded) generator and start its life afresh."""
        self.gens[row] = gen
        self.upos[row] = UNIFORM_BLOCK
        for arr in (self.counts, self.runs, self.seen, self.tried, self.matched, self.rr, self.active):
            arr[row] = 0
        self.cur[row] = -1
        self.last_info[row] = None

    def uniform(self, rows: np.ndarray) -> np.ndarray:
        """The next uniform of each row's stream, shape (len(rows),)."""
        empty = rows[self.upos[rows] >= UNIFORM_BLOCK]
        for r in empty:  # rare: once per UNIFORM_BLOCK draws of a row
            self.ubuf[r] = self.gens[r].random(UNIFORM_BLOCK)  # type: ignore[union-attr]
            self.upos[r] = 0
        u = self.ubuf[rows, self.upos[rows]]
        self.upos[rows] += 1
        return u

    def _new_runs(self, rows: np.ndarray, inputs: np.ndarray) -> None:
        self.counts[rows, inputs] = 0
        self.runs[rows, inputs] += 1
        self.seen[rows, inputs] = False
        self.tried[rows, inputs] = 0
        if self.record:
            self.matched[rows, inputs] = False

    def begin(self, rows: np.ndarray, explicit: np.ndarray | None = None) -> None:
        """Pick each row's next input (``explicit`` pool indices, or the schedule) and start an episode."""
        if rows.size == 0:
            return
        budget = self.cfg.budget
        if explicit is not None:
            exhausted = self.counts[rows, explicit] >= budget
            if exhausted.any():
                self._new_runs(rows[exhausted], explicit[exhausted])
            choice = explicit
        elif self.cfg.schedule == "round_robin":
            choice = self._round_robin(rows)
        else:
            left = self._budget_left(rows)
            u = self.uniform(rows)
            target = np.floor(u * left.sum(axis=1)).astype(np.int64)
            choice = np.argmax(np.cumsum(left, axis=1) > target[:, None], axis=1)
        self.cur[rows] = choice
        self.active[rows] = True

    def _budget_left(self, rows: np.ndarray) -> np.ndarray:
        """Which inputs have budget left (len(rows), N); an exhausted row starts new runs first."""
        left = self.counts[rows] < self.cfg.budget
        done = ~left.any(axis=1)
        if done.any():
            self._new_runs(rows[done][:, None], self._arange_n)
            left[done] = True
        return left

    def _round_robin(self, rows: np.ndarray) -> np.ndarray:
        """The next input with budget left at or after each row's pointer (cyclic); advances it."""
        n = self.spec.n_inputs
        choice = self.rr[rows].copy()
        # Only rows whose pointed input is exhausted scan the pool: O(rows), not O(rows * N).
        slow = self.counts[rows, choice] >= self.cfg.budget
        if slow.any():
            s = rows[slow]
            left = self._budget_left(s)
            order = (self.rr[s, None] + self._arange_n) % n
            at = np.arange(s.size)
            choice[slow] = order[at, np.argmax(left[at[:, None], order], axis=1)]
        self.rr[rows] = (choice + 1) % n
        return choice

    def finish(
        self, rows: np.ndarray, out: Outcomes, latents: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Book the finished episodes of ``rows``: (rewards, info columns); ``latents`` adds ``z``."""
        inputs = self.cur[rows]
        k = self.counts[rows, inputs] + 1
        found = out.mask & out.valid[:, None]
        new = found & ~self.seen[rows, inputs]
        n_new = new.sum(axis=1).astype(np.int64)
        columns: dict[str, np.ndarray] = {
            "input_id": self.spec.ids_array[inputs],
            "y_text": out.y_text,
            "strategy_matches": out.matches,
            "valid": out.valid,
            "parse_ok": out.parse_ok,
            "num_strategies": np.full(rows.size, len(self.spec.strategies), dtype=np.int64),
            "sample_index": k,
            "budget_exhausted": k >= self.cfg.budget,
            "run_index": self.runs[rows, inputs].copy(),
            "num_new_strategies": n_new,
        }
        if latents is not None:
            columns["z"] = latents.astype(np.int64)
        reward = self.cfg.reward
        if callable(reward):
            rewards = np.array([user_reward(reward, row_info(columns, j)) for j in range(rows.size)])
        else:
            rewards = out.valid + (self.cfg.novelty_bonus * n_new if reward == "novel" else 0.0)
        # Booked once every reward is known: a user reward that raises leaves the state as it was.
        self.counts[rows, inputs] = k
        self.seen[rows, inputs] |= found
        if latents is not None:
            self.tried[rows, inputs, latents] += 1
        self.active[rows] = False
        if self.record:
            self.matched[rows, inputs] |= out.mask
            for j, r in enumerate(rows.tolist()):
                self.last_info[r] = row_info(columns, j)
        return rewards, columns


def user_reward(fn: Any, info: dict[str, Any]) -> float:
    """``fn(info)`` as a float; a value that is not a finite number is a `SeffiError` naming ``fn``."""
    value = fn(info)
    try:
        reward = float(value)
    except (TypeError, ValueError, OverflowError):  # None, a string, an int beyond float range
        reward = math.nan
    if not math.isfinite(reward):
        name = getattr(fn, "__qualname__", None) or repr(fn)
        module = getattr(fn, "__module__", None)
        where = f"{module}.{name}" if module and module != "builtins" else name
        raise SeffiError(
            f"reward function {where} returned {clip(repr(value), 77)} for input {info.get('input_id')!r} "
            f"(sample {info.get('sample_index')}); a reward must be a finite number"
        )
    return reward


def row_info(columns: dict[str, np.ndarray], j: int) -> dict[str, Any]:
    """The single-env ``info`` of finished row ``j`` (plain Python values)."""
    return {key: plain(col[j]) for key, col in columns.items()}


def vector_infos(num_envs: int, rows: np.ndarray, columns: dict[str, np.ndarray]) -> dict[str, Any]:
    """Gymnasium's vector info layout: per key a length-E array (``SyncVectorEnv``'s fill) and a mask."""
    infos: dict[str, Any] = {}
    if rows.size == 0:
        return infos
    mask = np.zeros(num_envs, dtype=np.bool_)
    mask[rows] = True
    for key, col in columns.items():
        arr = np.full(num_envs, None, dtype=object) if col.dtype == object else np.zeros(num_envs, col.dtype)
        arr[rows] = col
        infos[key], infos[f"_{key}"] = arr, mask.copy()  # a mask per key, as SyncVectorEnv gives
    return infos

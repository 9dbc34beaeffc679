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

import dataclasses
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from seffi.errors import SeffiError
from seffi.report import keys

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
    run_index = info.get("run_index")
    return EpisodeEnd(
        input_id=str(info["input_id"]),
        matches=matches,
        valid=bool(info.get("valid", True)),
        env_index=int(env_index),
        sample_index=None if sample_index is None else int(sample_index),
        z=None if z is None else int(z),
        run_index=None if run_index is None else int(run_index),
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


# ----------------------------------------------------------------------------------------------------
# Reading what a baseline needs out of any env (single, Gymnasium vector, SB3 VecEnv).
# ----------------------------------------------------------------------------------------------------


class EnvAccess:
    """Uniform attribute/method access to sub-env 0 of any env container.

    seffi envs expose ``task``, ``input_ids``, ``budget``, ``strategies``,
    ``base_match_distribution(input_id, valid_only=False)`` and ``reference_match_sets(input_id)`` on
    ``env.unwrapped`` (and on native vector envs themselves). Wrappers, SB3 VecEnvs (possibly in
    subprocesses) and Gymnasium ``AsyncVectorEnv`` each hide them differently; this class asks the
    right way once, so the monitor never cares.

    Args:
        env: A ``gymnasium.Env``, a ``gymnasium.vector.VectorEnv`` or an SB3 ``VecEnv``.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self._target: Any = None
        if hasattr(env, "env_method") and hasattr(env, "get_attr"):  # SB3 VecEnv (maybe subprocess)
            self._kind = "sb3"
        elif hasattr(env, "call") and hasattr(env, "num_envs") and not self._native(env):
            self._kind = "gym_vector"
            sub = getattr(env, "envs", None)  # SyncVectorEnv: talk to the sub-env directly
            if sub:
                self._kind, self._target = "direct", sub[0].unwrapped
        else:
            self._kind = "direct"
            self._target = getattr(env, "unwrapped", env)

    @staticmethod
    def _native(env: Any) -> bool:
        # A seffi native vector env carries the facts itself (its unwrapped is the batched env).
        return hasattr(getattr(env, "unwrapped", env), "base_match_distribution")

    def has(self, name: str) -> bool:
        """Whether the env exposes ``name`` (attribute or method)."""
        try:
            self.get(name)
        except (AttributeError, SeffiError):
            return False
        return True

    def get(self, name: str) -> Any:
        """Attribute ``name`` of sub-env 0.

        Raises:
            AttributeError: the env does not have it.
        """
        if self._kind == "sb3":
            try:
                return self.env.get_attr(name, indices=[0])[0]
            except AttributeError:
                raise
            except Exception as exc:  # SubprocVecEnv re-raises remote errors as other types
                raise AttributeError(name) from exc
        if self._kind == "gym_vector":
            return self.env.get_attr(name)[0]
        return getattr(self._target, name)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call method ``name`` of sub-env 0."""
        if self._kind == "sb3":
            return self.env.env_method(name, *args, indices=[0], **kwargs)[0]
        if self._kind == "gym_vector":
            return self.env.call(name, *args, **kwargs)[0]
        return getattr(self._target, name)(*args, **kwargs)

    def single_action_space(self) -> Any:
        """The action space of one sub-env."""
        env = self.env
        return getattr(env, "single_action_space", None) or getattr(env, "action_space", None)

    def env_id(self) -> str | None:
        """The registered id (e.g. ``"seffi/HanoiRouter-v0"``), if known."""
        spec = None
        for obj in (self.env, self._target):
            spec = getattr(obj, "spec", None)
            if spec is not None:
                break
        if spec is None and self._kind != "direct":
            try:
                spec = self.get("spec")
            except AttributeError:
                spec = None
        return getattr(spec, "id", None)


# ----------------------------------------------------------------------------------------------------
# The monitor: episodes in, tracker updated, curves vs baselines out to the sinks.
# ----------------------------------------------------------------------------------------------------

LogUnit = Literal["episodes", "steps"]


def default_out_dir(prefix: str = "seffi") -> Path:
    """``runs/<prefix>-<UTC timestamp>`` under the working directory (made unique if it exists)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path("runs") / f"{prefix}-{stamp}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = Path(f"{base}-{n}")
    return out


def _wandb_mode(mode: str | None) -> str:
    """Explicit mode, else ``WANDB_MODE`` when it names one, else offline (never online by surprise)."""
    if mode is not None:
        return mode
    env = os.environ.get("WANDB_MODE", "").strip().lower()
    if env in ("online", "offline", "disabled"):
        return env
    if env == "dryrun":
        return "offline"
    return "offline"


class _RunKeys:
    """Assigns tracker streams to runs: a run is one input's consecutive samples in one env (row).

    With ``run_index`` from the env (seffi envs report it) a run is (input, env row, run_index). Without
    it a run restarts when ``sample_index`` does not increase, or after ``budget`` samples. Streams are
    small ints numbered per input so merged trackers from several workers stay apart via
    ``stream_offset``.
    """

    def __init__(self, budget: int, stream_offset: int) -> None:
        self.budget = budget
        self.stream_offset = stream_offset
        # (input, env row) -> [stream, samples so far, last sample_index, run_index]
        self._open: dict[tuple[str, int], list[Any]] = {}
        self._n_streams: dict[str, int] = {}

    def assign(self, end: EpisodeEnd) -> tuple[int, int]:
        """(stream, position k) for ``end``; position > budget means "beyond the budget, skip"."""
        key = (end.input_id, end.env_index)
        cur = self._open.get(key)
        new = cur is None
        if not new:
            if end.run_index is not None and cur[3] is not None:
                new = end.run_index != cur[3]
            elif end.sample_index is not None and cur[2] is not None:
                new = end.sample_index <= cur[2]
            else:
                new = cur[1] >= self.budget
        if new:
            n = self._n_streams.get(end.input_id, 0)
            self._n_streams[end.input_id] = n + 1
            cur = [self.stream_offset + n, 0, None, None]
            self._open[key] = cur
        cur[1] += 1
        cur[2], cur[3] = end.sample_index, end.run_index
        return cur[0], cur[1]

    @property
    def n_runs(self) -> int:
        return sum(self._n_streams.values())


class CoverageMonitor:
    """Framework-agnostic coverage monitoring: feed episode ends, get curves logged to the sinks.

    A *run* is one input's sequence of samples in one env row (one stream of the tracker); its first
    ``budget`` samples count, so the curves are per-input-budget curves C(k), k = 1..K, averaged over
    runs. Baselines (exact iid and oracle) come from the env (:meth:`for_env`) or from the caller;
    without them the policy curves are still logged, only the gain is missing (with its reason).

    Args:
        budget: Per-input sample budget K.
        strategies: Declared strategy ids (the coverage denominator M). ``None``: taken from ``env``.
        env: A seffi env (single, Gymnasium vector or SB3 VecEnv) to read strategies, the exact iid
            baseline and the oracle from. Optional when ``strategies`` is given.
        iid: A user iid baseline (e.g. ``IidBaseline.from_samples(...)``) — replaces the env's.
        oracle: A user oracle baseline — replaces the env's.
        sinks: Where to log (a :class:`seffi.report.sinks.Sink`). ``None``: the default pair, a local
            folder ``out_dir`` (always) and W&B (``wandb`` mode; an active ``wandb.run`` is reused).
        out_dir: Local report folder for the default sinks (default ``runs/seffi-<timestamp>``).
        wandb: "offline", "online" or "disabled"; ``None`` uses ``WANDB_MODE`` if set, else offline.
        wandb_kwargs: Extra ``wandb.init`` arguments (project, name, group, config, dir, run).
        log_every: Log after this many new episodes (``log_unit="episodes"``) or steps (``"steps"``).
        log_unit: What ``log_every`` counts.
        log_curves_every: Curve snapshots (tables/images) on W&B every this many logs.
        scope: Key scope, e.g. ``"eval"`` gives ``seffi/eval/auc`` (``None``: ``seffi/auc``).
        label: Legend name of the policy in plots and report.
        n_boot: Bootstrap replicates for the CIs of logged numbers (the final report uses the same).
        seed: Seed of the bootstrap.
        stream_offset: Added to every stream id, so trackers of several workers merge without clashes.
        plots: Render PNG plots into the local folder at :meth:`finalize`.
        env_name: Env id used in error messages and the report (default: read from ``env``).
        task_name: Task name for the report (default: read from ``env``).
        verbose: 1 prints a one-line summary at every log.
        max_overhead: :meth:`maybe_log` defers a due log while the time spent logging exceeds this
            fraction of the wall time since the monitor was created, so logging never costs more
            than ~2% of training however small ``log_every`` is (``log``/``finalize`` always run).

    Example:
        >>> monitor = CoverageMonitor.for_env(envs, budget=16)      # doctest: +SKIP
        >>> obs, _ = envs.reset(seed=0)                             # doctest: +SKIP
        >>> for step in range(10_000):                              # doctest: +SKIP
        ...     obs, r, term, trunc, infos = envs.step(policy(obs))
        ...     monitor.ingest_infos(infos, term | trunc)
        ...     monitor.maybe_log(step)
        >>> monitor.close()                                         # doctest: +SKIP
    """

    def __init__(
        self,
        budget: int,
        strategies: Sequence[str] | None = None,
        *,
        env: Any = None,
        iid: Any = None,
        oracle: Any = None,
        sinks: Any = None,
        out_dir: str | Path | None = None,
        wandb: str | None = None,
        wandb_kwargs: Mapping[str, Any] | None = None,
        log_every: int = 256,
        log_unit: LogUnit = "episodes",
        log_curves_every: int = 10,
        scope: str | None = None,
        label: str = "policy",
        n_boot: int = 200,
        seed: int = 0,
        stream_offset: int = 0,
        plots: bool = True,
        env_name: str | None = None,
        task_name: str | None = None,
        verbose: int = 0,
        max_overhead: float = 0.02,
    ) -> None:
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
            raise SeffiError(f"budget must be a positive int, got {budget!r}")
        for name, value in (("log_every", log_every), ("log_curves_every", log_curves_every)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise SeffiError(f"{name} must be a positive int, got {value!r}")
        if log_unit not in ("episodes", "steps"):
            raise SeffiError(f"log_unit must be 'episodes' or 'steps', got {log_unit!r}")
        self.budget = int(budget)
        self.access = EnvAccess(env) if env is not None else None
        self.env_name = env_name or (self.access.env_id() if self.access else None)
        self.task_name = task_name or self._task_name()
        if strategies is None:
            if self.access is None or not self.access.has("strategies"):
                raise SeffiError("CoverageMonitor needs `strategies` or a seffi `env` that exposes them")
            strategies = self.access.get("strategies")
        self.strategies: tuple[str, ...] = tuple(str(s) for s in strategies)
        self.user_iid, self.user_oracle = iid, oracle
        self.log_every, self.log_unit = int(log_every), log_unit
        self.scope, self.label = scope, label
        self.n_boot, self.seed, self.stream_offset = int(n_boot), int(seed), int(stream_offset)
        self.verbose = verbose
        self.max_overhead = float(max_overhead)
        self._created = time.perf_counter()
        self.log_seconds = 0.0
        self.num_latents = self._num_latents()
        self._owns_sinks = sinks is None
        if sinks is None:
            from seffi.report.sinks import default_sinks

            kwargs = dict(wandb_kwargs or {})
            self.out_dir = Path(out_dir) if out_dir is not None else default_out_dir()
            sinks = default_sinks(
                self.out_dir,
                wandb=_wandb_mode(wandb),  # type: ignore[arg-type]
                log_curves_every=log_curves_every,
                plots=plots,
                **kwargs,
            )
        else:
            self.out_dir = Path(out_dir) if out_dir is not None else None
        self.sinks = sinks
        self.reset_tracker()
        self.episodes = 0
        self.skipped_beyond_budget = 0
        self.n_logs = 0
        self.last_step: int | None = None
        self._episodes_at_log = 0
        self._step_at_log: int | None = None
        self._warned_order = False
        self._baseline_cache: dict[frozenset[str], tuple[Any, Any]] = {}
        self.finalized = False
        self.last_scalars: dict[str, float] = {}
        self.last_comparison: Any = None
        #: Extra policy lines for the final report (the evaluator's earlier evaluations).
        self.extra_policies: list[Any] = []

    # -- construction helpers ---------------------------------------------------------------------

    @classmethod
    def for_env(cls, env: Any, budget: int, **kwargs: Any) -> CoverageMonitor:
        """A monitor whose strategies and baselines come from the seffi ``env``.

        Args:
            env: A seffi env: single, Gymnasium vector (native or Sync/Async) or an SB3 VecEnv.
            budget: Per-input sample budget K.
            **kwargs: Any other :class:`CoverageMonitor` argument.
        """
        return cls(budget, env=env, **kwargs)

    def _task_name(self) -> str:
        if self.access is not None:
            try:
                task = self.access.get("task")
                name = getattr(task, "name", None) or (task if isinstance(task, str) else None)
                if name:
                    return str(name)
            except AttributeError:
                pass
        return self.env_name or "unknown"

    def _num_latents(self) -> int | None:
        """Z of a router env (its Discrete action space), for the latent-coverage diagnostic."""
        if self.access is None or not self.access.has("config"):
            return None
        if not hasattr(self.access.get("config"), "n_latents"):  # only router configs have latents
            return None
        space = self.access.single_action_space()
        n = getattr(space, "n", None)
        return int(n) if n is not None else None

    def reset_tracker(self) -> None:
        """Start a fresh tracker (and run bookkeeping); the periodic evaluator does this per evaluation."""
        from seffi.coverage import CoverageTracker

        self.tracker = CoverageTracker(strategies=self.strategies, task=self.task_name)
        self.latent_tracker = (
            CoverageTracker(strategies=tuple(str(z) for z in range(self.num_latents)))
            if self.num_latents
            else None
        )
        self._runs = _RunKeys(self.budget, self.stream_offset)
        self._barcode: dict[str, list[int]] = {}
        self._index = {s: j for j, s in enumerate(self.strategies)}
        self._inputs: set[str] = set()
        self._valid = 0
        self._counted = 0
        self._has_latent = False

    # -- ingestion -----------------------------------------------------------------------------------

    def ingest_infos(self, infos: Any, dones: Any = None, *, env_offset: int = 0) -> int:
        """Record every episode that ended in one step's ``infos``.

        Args:
            infos: Gymnasium vector info dict (either autoreset mode), SB3 list of dicts, or one
                single-env info dict.
            dones: ``terminated | truncated`` of this step: bool array, shape (num_envs,), or a bool.
                Recommended: with it, an ended episode whose info lacks ``strategy_matches`` raises.
            env_offset: Added to sub-env indices (e.g. a worker's first env index).

        Returns:
            The number of episodes recorded.
        """
        ends = episode_ends(infos, dones, env_name=self.env_name)
        for end in ends:
            self.ingest_end(end, env_offset=env_offset)
        return len(ends)

    def ingest_episode(self, info: Mapping[str, Any], *, env_index: int = 0) -> None:
        """Record one finished episode from its final-step ``info`` (single-env loops, RLlib, TRL)."""
        self.ingest_end(episode_from_info(info, env_index=env_index, env_name=self.env_name))

    def ingest_end(self, end: EpisodeEnd, *, env_offset: int = 0) -> None:
        """Record one parsed :class:`EpisodeEnd` (the lowest-level entry point)."""
        if env_offset:
            end = dataclasses.replace(end, env_index=end.env_index + env_offset)
        self.episodes += 1
        stream, k = self._runs.assign(end)
        if k > self.budget:
            # Samples beyond K of a run do not enter C(k) for k <= K; counting them would need O(samples).
            self.skipped_beyond_budget += 1
            return
        self.tracker.update(end.input_id, end.matches, valid=end.valid, stream=stream)
        if self.latent_tracker is not None and end.z is not None:
            self.latent_tracker.update(end.input_id, (str(end.z),), valid=True, stream=stream)
            self._has_latent = True
        self._inputs.add(end.input_id)
        self._counted += 1
        self._valid += int(end.valid)
        if stream == self.stream_offset:  # the first run of each input draws its barcode row
            self._barcode.setdefault(end.input_id, []).append(self._barcode_cell(end))

    def _barcode_cell(self, end: EpisodeEnd) -> int:
        if not end.matches:
            return -1
        row = self._barcode.get(end.input_id, [])
        seen = {self.strategies[c] for c in row if c >= 0}
        new = [s for s in end.matches if s not in seen and s in self._index]
        pick = new[0] if new else end.matches[0]
        return self._index.get(pick, -1)

    # -- logging ---------------------------------------------------------------------------------------

    def due(self, step: int) -> bool:
        """Whether :meth:`maybe_log` would log at ``step``."""
        if self._counted == 0:
            return False
        if self.log_unit == "episodes":
            return self.episodes - self._episodes_at_log >= self.log_every
        return self._step_at_log is None or step - self._step_at_log >= self.log_every

    def maybe_log(self, step: int) -> bool:
        """Log if ``log_every`` episodes (or steps) passed since the last log. O(1) when not due."""
        if not self.due(step):
            return False
        if self.log_seconds > self.max_overhead * (time.perf_counter() - self._created):
            return False  # over the time budget: try again at a later step
        return self.log(step) is not None

    def log(self, step: int) -> dict[str, float] | None:
        """Compute the curves now and send scalars + a snapshot to the sinks at ``step``.

        Steps must increase: a step not above the last logged one is refused with one warning (nothing
        is lost: the tracker still holds every episode and the final report uses them all).

        Returns:
            The logged scalars, or ``None`` when nothing was logged (no data or an out-of-order step).
        """
        step = int(step)
        self._episodes_at_log, self._step_at_log = self.episodes, step
        if self._counted == 0:
            return None
        if self.last_step is not None and step <= self.last_step:
            if not self._warned_order:
                self._warned_order = True
                warnings.warn(
                    f"coverage log at step {step} skipped: steps must increase (last logged "
                    f"{self.last_step}); the data stays in the tracker and the final report",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return None
        started = time.perf_counter()
        comparison, scalars = self.snapshot()
        self.last_comparison = comparison
        scalars[keys.STEP_KEY] = float(step)
        self.sinks.log(scalars, step)
        self.sinks.log_snapshot(comparison, step, self.scope)
        self.last_step = step
        self.n_logs += 1
        self.log_seconds += time.perf_counter() - started
        self.last_scalars = scalars
        if self.verbose:
            gain = scalars.get(keys.gain_key(self.scope))
            print(  # opt-in console progress
                f"[seffi] step {step}: {self.episodes} episodes, {len(self._inputs)} inputs, "
                f"AUC {scalars.get(keys.auc_key(self.scope), float('nan')):.3f}, "
                f"gain vs iid {'n/a' if gain is None else f'{gain:.3f}'}"
            )
        return scalars

    # -- curves ----------------------------------------------------------------------------------------

    def curves(self) -> Any:
        """The policy's :class:`seffi.coverage.Curves` over runs so far (k = 1..K, bootstrap CIs)."""
        return self.tracker.curves(self.budget, n_boot=self.n_boot, seed=self.seed)

    def baselines(self) -> tuple[Any, Any]:
        """(iid, oracle) curves for the inputs seen so far (``None`` where unavailable); cached."""
        seen = frozenset(self._inputs)
        if seen not in self._baseline_cache:
            self._baseline_cache = {seen: (self._iid_curves(seen), self._oracle_curves(seen))}
        return self._baseline_cache[seen]

    def _iid_curves(self, inputs: frozenset[str]) -> Any:
        if self.user_iid is not None:
            return self.user_iid.curves(self.budget)
        if self.access is None or not self.access.has("base_match_distribution") or not inputs:
            return None
        from seffi.coverage import IidBaseline

        order = sorted(inputs)
        raw = {x: self.access.call("base_match_distribution", x) for x in order}
        valid = {x: self.access.call("base_match_distribution", x, valid_only=True) for x in order}
        return IidBaseline.from_match_distribution(
            raw, strategies=self.strategies, valid_distribution=valid
        ).curves(self.budget)

    def _oracle_curves(self, inputs: frozenset[str]) -> Any:
        if self.user_oracle is not None:
            return self.user_oracle.curves(self.budget)
        if self.access is None or not self.access.has("reference_match_sets") or not inputs:
            return None
        from seffi.coverage import OracleBaseline

        order = sorted(inputs)
        refs = {x: self.access.call("reference_match_sets", x) for x in order}
        return OracleBaseline(refs, strategies=self.strategies, seed=self.seed).curves(self.budget)

    def snapshot(self) -> tuple[Any, dict[str, float]]:
        """(``Comparison`` for the report/sinks, scalar dict of the key scheme) of the data so far."""
        from seffi.report.schema import Barcode, Comparison, CurveSet, Gain, LatentCurve, PolicyResult

        curves = self.curves()
        iid, oracle = self.baselines()
        policy_set = CurveSet.from_curves(curves, self.label, "policy")
        if iid is not None and oracle is not None:
            g = curves.gain(iid, oracle)
            gain = Gain(value=g.value, lo=g.lo, hi=g.hi, reason=g.reason)
        else:
            gain = Gain(reason="no iid/oracle baseline (not a seffi env and none given)")
        latent = None
        if self.latent_tracker is not None and self._has_latent:
            lc = self.latent_tracker.curves(self.budget, n_boot=0, seed=self.seed)
            ok = np.flatnonzero(np.isfinite(lc.coverage))  # k no run reached yet is NaN: leave it out
            if ok.size:
                latent = LatentCurve(
                    label=self.label,
                    k=[int(i) + 1 for i in ok],
                    coverage=[float(lc.coverage[i]) for i in ok],
                    num_codes=self.num_latents,
                )
        barcode = Barcode(
            strategies=list(self.strategies),
            input_ids=sorted(self._barcode),
            matrix=[self._barcode[x] for x in sorted(self._barcode)],
        )
        comparison = Comparison(
            task=self.task_name,
            env_id=self.env_name,
            budget=self.budget,
            n_inputs=len(self._inputs),
            num_strategies=len(self.strategies),
            iid=CurveSet.from_curves(iid, "iid", "iid") if iid is not None else None,
            oracle=CurveSet.from_curves(oracle, "oracle", "oracle") if oracle is not None else None,
            policies=[PolicyResult(curves=policy_set, gain=gain, barcode=barcode, latent=latent)],
        )
        scalars = keys.scalars_from_curves(
            policy_set, gain=gain, episodes=self.episodes, inputs=len(self._inputs), scope=self.scope
        )
        scalars[keys.valid_rate_key(self.scope)] = self._valid / max(self._counted, 1)
        return comparison, scalars

    # -- the end ---------------------------------------------------------------------------------------

    def report(self) -> Any:
        """The :class:`seffi.report.schema.Report` of everything recorded so far."""
        from seffi.report.schema import Report

        comparisons = []
        if self._counted:
            comparison = self.snapshot()[0]
            if self.extra_policies:
                comparison = comparison.model_copy(
                    update={"policies": [*comparison.policies, *self.extra_policies]}
                )
            comparisons.append(comparison)
        return Report(
            title=f"seffi coverage: {self.task_name} (K={self.budget})",
            seed=self.seed,
            config={"budget": self.budget, "log_every": self.log_every, "log_unit": self.log_unit},
            meta={"episodes": self.episodes, "skipped_beyond_budget": self.skipped_beyond_budget},
            comparisons=comparisons,
        )

    def finalize(self, step: int | None = None) -> Any:
        """Log a last time (if ``step`` is new), then write the report and close the sinks. Idempotent.

        Returns:
            The final report (``None`` if called before).
        """
        if self.finalized:
            return None
        if step is not None and self._counted and (self.last_step is None or step > self.last_step):
            self.log(step)
        report = self.report()
        # The sinks put the report's final scalars into run.summary and upload report + tracker state.
        self.sinks.finish(report, self.tracker.state_dict())
        self.finalized = True
        return report

    close = finalize

    def __enter__(self) -> CoverageMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finalize()


# ----------------------------------------------------------------------------------------------------
# Periodic evaluation: the current policy spends K samples on every eval input of a separate env.
# ----------------------------------------------------------------------------------------------------

Act = Callable[[Any], Any]


def rollout_episodes(
    env: Any,
    act: Act,
    input_ids: Sequence[str],
    budget: int,
    *,
    seed: int | None = None,
    max_steps_per_episode: int = 100_000,
) -> list[EpisodeEnd]:
    """Run ``budget`` episodes on each input with policy ``act`` on a single Gymnasium env.

    ``reset(seed=seed)`` first, so a seffi env starts a fresh life (empty per-input history), then
    ``reset(options={"input_id": x})`` per episode; the K episodes of an input are consecutive so
    history-aware policies see their own run.

    Args:
        env: A single (non-vector) Gymnasium env with the seffi final-info contract.
        act: Maps one observation to one action (e.g. ``lambda o: model.predict(o)[0]``).
        input_ids: Inputs to evaluate.
        budget: Episodes per input, K.
        seed: Seed of the first reset (``None``: not reseeded).
        max_steps_per_episode: Guard against an env that never ends an episode.

    Returns:
        The episode ends, input by input, with ``env_index`` 0 and ``run_index`` = position of the input.
    """
    ends: list[EpisodeEnd] = []
    name = getattr(getattr(env, "spec", None), "id", None)
    if seed is not None:
        env.reset(seed=seed)
    for run, x in enumerate(input_ids):
        for _ in range(budget):
            obs, _ = env.reset(options={"input_id": x})
            for _ in range(max_steps_per_episode):
                obs, _, terminated, truncated, info = env.step(act(obs))
                if terminated or truncated:
                    end = episode_from_info(info, env_index=0, env_name=name)
                    ends.append(dataclasses.replace(end, run_index=run, sample_index=None))
                    break
            else:
                raise SeffiError(
                    f"an evaluation episode on {name or 'the env'} did not end within "
                    f"{max_steps_per_episode} steps"
                )
    return ends


class CoverageEvaluator:
    """Periodic evaluation of exploration efficiency, like SB3's ``EvalCallback``.

    Each :meth:`evaluate` call starts a fresh tracker, lets the current policy spend ``budget`` samples
    on every eval input of ``eval_env``, and logs that evaluation's curves (keys under
    ``seffi/<scope>/``, default scope ``"eval"``) at the training step, so the W&B chart of
    ``seffi/eval/gain_vs_iid`` against ``seffi/step`` shows exploration improving over training.
    The final report holds the last evaluation and, as extra policy lines, earlier ones.

    Args:
        eval_env: A single seffi env (not vector), separate from the training env.
        budget: Samples per eval input, K.
        input_ids: Eval inputs (default: the env's whole pool).
        seed: Seed of each evaluation's env reset (evaluation i uses ``seed + i``).
        keep_history: Number of evaluations kept as lines in the final report (evenly spaced).
        **monitor_kwargs: :class:`CoverageMonitor` arguments (sinks, out_dir, wandb, iid, ...).
    """

    def __init__(
        self,
        eval_env: Any,
        budget: int,
        *,
        input_ids: Sequence[str] | None = None,
        seed: int = 0,
        keep_history: int = 6,
        **monitor_kwargs: Any,
    ) -> None:
        if hasattr(eval_env, "num_envs") or hasattr(eval_env, "env_method"):
            raise SeffiError("the evaluation env must be a single Gymnasium env, not a vector env")
        monitor_kwargs.setdefault("scope", "eval")
        monitor_kwargs.setdefault("label", "eval")
        monitor_kwargs.setdefault("n_boot", 100)
        self.monitor = CoverageMonitor(budget, env=eval_env, **monitor_kwargs)
        self.env = eval_env
        self.budget = int(budget)
        access = self.monitor.access
        if input_ids is None:
            if access is None or not access.has("input_ids"):
                raise SeffiError("pass input_ids: the evaluation env does not expose its input pool")
            input_ids = access.get("input_ids")
        self.input_ids = tuple(str(x) for x in input_ids)
        env_budget = access.get("budget") if access is not None and access.has("budget") else None
        if env_budget is not None and int(env_budget) < self.budget:
            warnings.warn(
                f"eval env budget {env_budget} < K={self.budget}: samples past {env_budget} start a new "
                "env run (history cleared); make the eval env with budget >= K",
                RuntimeWarning,
                stacklevel=2,
            )
        self.seed = int(seed)
        self.keep_history = int(keep_history)
        self.history: list[tuple[int, Any]] = []  # (step, policy CurveSet) per evaluation
        self.n_evals = 0
        self.last_step: int | None = None

    def evaluate(self, act: Act, step: int) -> dict[str, float] | None:
        """Evaluate policy ``act`` now and log the curves at training ``step``.

        Returns:
            The logged scalars (``None`` if the step was refused as out of order).
        """
        self.monitor.reset_tracker()
        ends = rollout_episodes(self.env, act, self.input_ids, self.budget, seed=self.seed + self.n_evals)
        for end in ends:
            self.monitor.ingest_end(end)
        self.n_evals += 1
        self.last_step = int(step)
        scalars = self.monitor.log(step)
        if scalars is not None:
            comparison = self.monitor.last_comparison
            self.history.append((int(step), comparison.policies[0]))
        return scalars

    def finalize(self) -> Any:
        """Write the report (last evaluation + earlier ones as extra lines) and close the sinks."""
        if self.monitor.finalized:
            return None
        extra = []
        if len(self.history) > 1:
            earlier = self.history[:-1]
            n = min(self.keep_history - 1, len(earlier))
            picks = sorted({round(float(i)) for i in np.linspace(0, len(earlier) - 1, n)}) if n > 0 else []
            for i in picks:
                step, result = earlier[i]
                extra.append(
                    result.model_copy(
                        update={
                            "curves": result.curves.model_copy(
                                update={"label": f"{self.monitor.label}@{step}"}
                            )
                        }
                    )
                )
        self.monitor.extra_policies = extra
        return self.monitor.finalize()

    close = finalize

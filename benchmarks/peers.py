"""seffi against its peers: one recorded vector-env stream replayed through each consumer, CPU per episode.

The stream is recorded once: ``seffi/SortSwapsRouter-v0`` (K = ``--budget``, ``--inputs`` pool inputs)
in a Gymnasium ``SyncVectorEnv`` of ``--envs`` sub-envs (Gymnasium's default ``NEXT_STEP`` autoreset:
every other vector step of these one-step episodes is a reset-only step), random actions from the
seeded action space, until ``--episodes`` episodes ended. Every vector step's ``(obs, rewards,
terminated, truncated, infos)`` is kept in memory, and so is each sub-env's own sequence of
transitions (its reset-only steps left out: those are its ``reset()`` calls) with its per-env info
dict, as an SB3 ``DummyVecEnv`` would see them. Then each consumer gets the recorded steps in order:

* **numpy floor** — hand-written, vectorised per step: per finished episode its input's code, a
  bitmask of its matched strategies, OR-ed into its run's (row, input) mask, the popcount stored at
  its sample index; a run that reaches K adds its K popcounts to its input's sums. C(k) is the mean
  over inputs of sums / (runs x M): the least work that gives C(k) (checked against seffi's C(k)).
* **replay vector env alone** — the tiny ``VectorEnv`` that returns the recorded steps (a shallow
  copy of each infos dict, as wrappers write into it): the cost subtracted from the next row.
* **RecordEpisodeStatistics** — ``gymnasium.wrappers.vector.RecordEpisodeStatistics`` around the
  replay vector env (its real ``step``); shown raw and net of the replay env alone.
* **replay 64 sub-envs alone** — one replay ``gym.Env`` per sub-env, stepped in the recorded order
  (a sub-env's ``reset()`` after each episode end, as SB3's ``DummyVecEnv`` does): subtracted from
  the next row.
* **SB3 Monitor** — ``stable_baselines3.common.monitor.Monitor(filename=None)`` around each replay
  sub-env; shown raw and net of the replay sub-envs alone.
* **seffi ingest only** — ``CoverageMonitor(budget=K, strategies=..., wandb="disabled")``:
  ``update_infos(infos, dones)`` per step and ``flush()`` at the end; no log.
* **seffi default logging** — the same plus ``maybe_log(step)`` every step with the default
  schedule (``log_every=1024`` episodes, ``log_curves_every=10``, ``n_boot=200``, ``window=4096``);
  ``close()`` (final report, tracker_state.json, PNG plots when ``plots``) is timed on its own and is
  not in the per-episode figure. Plots are on by default, so the row runs with them and with
  ``plots=False``; with W&B disabled plots are drawn only at ``close()``. The *first log* column is
  the CPU of the first log, a curve snapshot with bootstrap intervals.
* **seffi default logging, for_env** — ``CoverageMonitor.for_env(envs, budget=K)`` (what the README
  recommends): the same, with the env's exact iid/oracle baselines (computed once, at the first log)
  and the gain.

Each figure is CPU time (``time.process_time``) divided by the recorded episodes. Repetitions are
interleaved round-robin over the consumers (order reversed every other repetition) so machine noise
hits all alike; min and median over repetitions are shown, and the ratio to the floor: the median over
repetitions of each repetition's ratio to the floor's time in that repetition (and min over min).
Net rows subtract, repetition by repetition, the replay env's time of the same repetition. The targets
(seffi with default logging <= 3x the floor, ingest only <= 2.5x) are judged on the median.
W&B is disabled; no network; torch (imported by SB3) runs on one thread.

``--old PYTHON`` adds the seffi rows of another checkout beside these, marked ``[old]``: ``PYTHON`` is
an interpreter whose ``seffi`` is that checkout (its venv). It records the same stream in a child
process and replays it there on request, interleaved with this process's rows in every repetition,
so old and new meet the same machine load; its ratios are to this process's floor.

    python benchmarks/peers.py                       # ~2 minutes on 2 shared cores
    python benchmarks/peers.py --quick               # a smoke check in seconds
    python benchmarks/peers.py --json peers.json --profile 10
    python benchmarks/peers.py --old /path/to/other/venv/bin/python
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

ENV_ID = "seffi/SortSwapsRouter-v0"
TARGETS = {"seffi ingest only": 2.5, "seffi default logging": 3.0}


#: The command-line settings: `main`'s flags as attributes (``a.episodes``, ``a.envs``, ...).
Args = argparse.Namespace


@dataclass
class Recording:
    """One recorded stream: vector steps and each sub-env's own transitions, in order."""

    steps: list[tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]]
    actions: np.ndarray  # (steps, envs)
    dones: list[np.ndarray]
    per_env: list[list[tuple[Any, float, bool, bool, dict[str, Any]]]]
    active: list[list[int]]  # per vector step: the sub-envs with a real transition (not reset-only)
    episodes: int
    strategies: tuple[str, ...]
    single_obs_space: gym.Space[Any]
    single_action_space: gym.Space[Any]
    env: Any = None  # the recording env, kept open for ``CoverageMonitor.for_env``


def record(a: Args) -> Recording:
    """Step ``ENV_ID`` in a SyncVectorEnv with seeded random actions until ``a.episodes`` episodes ended."""
    import seffi.envs  # noqa: F401 - registers the env ids

    envs = gym.make_vec(
        ENV_ID, num_envs=a.envs, vectorization_mode="sync", budget=a.budget, n_inputs=a.inputs
    )
    obs, _ = envs.reset(seed=a.seed)
    envs.action_space.seed(a.seed)
    steps, actions, dones = [], [], []
    per_env: list[list[Any]] = [[] for _ in range(a.envs)]
    active: list[list[int]] = []
    prev = np.zeros(a.envs, dtype=bool)
    ended = 0
    while ended < a.episodes:
        act = envs.action_space.sample()
        obs, rew, term, trunc, infos = envs.step(act)
        done = term | trunc
        steps.append((obs, rew, term, trunc, infos))
        actions.append(act)
        dones.append(done)
        rows = np.flatnonzero(~prev).tolist()  # a row that ended last step is only reset in this one
        active.append(rows)
        for i in rows:
            info = {k: v[i] for k, v in infos.items() if not k.startswith("_") and infos[f"_{k}"][i]}
            per_env[i].append((obs[i], float(rew[i]), bool(term[i]), bool(trunc[i]), info))
        prev = done
        ended += int(done.sum())
    return Recording(
        steps, np.asarray(actions), dones, per_env, active, ended, tuple(envs.envs[0].unwrapped.strategies),
        envs.single_observation_space, envs.single_action_space, envs,
    )  # fmt: skip


# -- consumers: each returns {"cpu": seconds per replay, ...} ------------------------------------------


class Floor:
    """The least work that gives C(k): input codes, match bitmasks, per-(row, input) run masks."""

    def __init__(self, strategies: tuple[str, ...], budget: int, n_envs: int, capacity: int = 16) -> None:
        self.bit = {s: 1 << j for j, s in enumerate(strategies)}
        self.m, self.K, self.n_envs = len(strategies), budget, n_envs
        self.codes: dict[str, int] = {}
        self.masks: dict[tuple[str, ...], int] = {}
        self.cum = np.zeros((n_envs, capacity), dtype=np.uint64)  # OR of the run's matches so far
        self.pop = np.zeros((n_envs, capacity, budget), dtype=np.int64)  # |S_k| of the open run
        self.sums = np.zeros((capacity, budget), dtype=np.int64)  # per input: sum over complete runs
        self.runs = np.zeros(capacity, dtype=np.int64)

    def _grow(self, need: int) -> None:
        cap = max(need, 2 * self.runs.size)
        pad = cap - self.runs.size
        self.cum = np.pad(self.cum, ((0, 0), (0, pad)))
        self.pop = np.pad(self.pop, ((0, 0), (0, pad), (0, 0)))
        self.sums = np.pad(self.sums, ((0, pad), (0, 0)))
        self.runs = np.pad(self.runs, (0, pad))

    def _mask(self, matches: tuple[str, ...]) -> int:
        bits = self.masks[matches] = sum(self.bit[s] for s in matches)
        return bits

    def step(self, infos: dict[str, Any], dones: np.ndarray) -> None:
        if not dones.any():
            return
        rows = np.flatnonzero(dones)
        codes, masks = self.codes, self.masks
        code = np.array([codes.setdefault(x, len(codes)) for x in infos["input_id"][rows].tolist()])
        if len(codes) > self.runs.size:
            self._grow(len(codes))
        bits = np.array(
            [masks[m] if m in masks else self._mask(m) for m in infos["strategy_matches"][rows].tolist()],
            dtype=np.uint64,
        )
        k = infos["sample_index"][rows]
        cum = np.where(k == 1, np.uint64(0), self.cum[rows, code]) | bits
        self.cum[rows, code] = cum
        self.pop[rows, code, k - 1] = np.bitwise_count(cum)
        full = k == self.K
        if full.any():
            np.add.at(self.sums, code[full], self.pop[rows[full], code[full]])
            np.add.at(self.runs, code[full], 1)

    def coverage(self) -> np.ndarray:
        """C(k), k = 1..K: mean over inputs (with a complete run) of their mean fraction of strategies."""
        seen = self.runs > 0
        return (self.sums[seen] / (self.runs[seen, None] * self.m)).mean(axis=0)


def run_floor(rec: Recording, a: Args) -> dict[str, Any]:
    """The numpy floor over the recorded steps."""
    floor = Floor(rec.strategies, a.budget, a.envs)
    t = time.process_time()
    for (_, _, _, _, infos), done in zip(rec.steps, rec.dones, strict=True):
        floor.step(infos, done)
    cpu = time.process_time() - t
    return {"cpu": cpu, "coverage": floor.coverage().tolist()}


class ReplayVectorEnv(gym.vector.VectorEnv):
    """A VectorEnv returning the recorded steps in order (infos shallow-copied: wrappers write into them)."""

    def __init__(self, rec: Recording) -> None:
        self.num_envs = len(rec.per_env)
        self.single_observation_space = rec.single_obs_space
        self.single_action_space = rec.single_action_space
        self.observation_space = gym.vector.utils.batch_space(rec.single_obs_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(rec.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self._steps, self._t = rec.steps, 0

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        self._t = 0
        return self._steps[0][0], {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rew, term, trunc, infos = self._steps[self._t]
        self._t += 1
        return obs, rew, term, trunc, dict(infos)


def run_vector(rec: Recording, a: Args, wrap: bool) -> dict[str, Any]:
    """The replay vector env alone, or wrapped in Gymnasium's vector RecordEpisodeStatistics."""
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    env: Any = ReplayVectorEnv(rec)
    if wrap:
        env = RecordEpisodeStatistics(env)
    env.reset(seed=a.seed)
    t = time.process_time()
    for act in rec.actions:
        env.step(act)
    cpu = time.process_time() - t
    return {"cpu": cpu, "episodes": int(env.episode_count) if wrap else rec.episodes}


class ReplayEnv(gym.Env):
    """A single env returning one sub-env's recorded transitions in order (info shallow-copied)."""

    def __init__(self, rec: Recording, i: int) -> None:
        self.observation_space, self.action_space = rec.single_obs_space, rec.single_action_space
        self._items, self._t = rec.per_env[i], 0
        self._obs0 = self._items[0][0]

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        return self._obs0, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, rew, term, trunc, info = self._items[self._t]
        self._t += 1
        return obs, rew, term, trunc, dict(info)


def run_subenvs(rec: Recording, a: Args, wrap: bool) -> dict[str, Any]:
    """The replay sub-envs alone, or each wrapped in SB3's Monitor; reset after each episode end."""
    from stable_baselines3.common.monitor import Monitor

    envs: list[Any] = [ReplayEnv(rec, i) for i in range(len(rec.per_env))]
    if wrap:
        envs = [Monitor(e, filename=None) for e in envs]
    for e in envs:
        e.reset(seed=a.seed)
    acts = rec.actions.tolist()
    t = time.process_time()
    for act, rows in zip(acts, rec.active, strict=True):
        for i in rows:
            e = envs[i]
            _, _, term, trunc, _ = e.step(act[i])
            if term or trunc:
                e.reset()
    cpu = time.process_time() - t
    return {"cpu": cpu, "episodes": sum(len(e.episode_lengths) for e in envs) if wrap else rec.episodes}


def run_seffi(rec: Recording, a: Args, logging: bool, plots: bool = True, for_env: bool = False) -> dict:
    """seffi's CoverageMonitor: ingest only, or with its default logging; close() timed on its own."""
    from seffi.callbacks import CoverageMonitor

    with tempfile.TemporaryDirectory(prefix="seffi-peers-") as tmp:
        out = Path(tmp) / "run"
        if for_env:
            m = CoverageMonitor.for_env(rec.env, budget=a.budget, wandb="disabled", out_dir=out)
        else:
            m = CoverageMonitor(budget=a.budget, strategies=rec.strategies, wandb="disabled", plots=plots,
                                out_dir=out)  # fmt: skip
        logs: list[float] = []
        if logging:  # time each log: an instance attribute, so maybe_log's self.log finds it
            log = m.log

            def timed_log(step: int) -> Any:
                t0 = time.process_time()
                got = log(step)
                logs.append((time.process_time() - t0, got is not None))
                return got

            m.log = timed_log  # type: ignore[method-assign]
        n = len(rec.per_env)
        t = time.process_time()
        if logging:
            for s, ((_, _, _, _, infos), done) in enumerate(zip(rec.steps, rec.dones, strict=True)):
                m.update_infos(infos, done)
                m.maybe_log((s + 1) * n)
        else:
            for (_, _, _, _, infos), done in zip(rec.steps, rec.dones, strict=True):
                m.update_infos(infos, done)
        tracker = m.flush()
        cpu = time.process_time() - t
        wrote = [c for c, ok in logs if ok]  # log() also returns None (no complete run yet): time counted
        got: dict[str, Any] = {"cpu": cpu, "episodes": m.episodes, "logs": len(wrote)}
        got["log_cpu"], got["first_log"] = sum(c for c, _ in logs), wrote[0] if wrote else float("nan")
        got["coverage"] = [float(c) for c in tracker.point()["coverage"]]
        if logging:
            t = time.process_time()
            with contextlib.redirect_stdout(io.StringIO()):  # the "[seffi] report in ..." lines
                m.close()
            got["close"] = time.process_time() - t
            got["gain"] = m.metrics().get("seffi/gain_vs_iid")
            got["baseline_s"] = m.baseline_seconds
    return got


# -- the table ------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One consumer's results over the repetitions."""

    name: str
    cpu: list[float] = field(default_factory=list)  # seconds per replay (net rows: minus the replay env)
    raw: list[float] = field(default_factory=list)  # net rows: seconds with the replay env included
    extra: list[dict[str, Any]] = field(default_factory=list)
    minus: str | None = None  # the row subtracted

    def us(self, episodes: int) -> tuple[float, float]:
        per = [1e6 * c / episodes for c in self.cpu]
        return min(per), statistics.median(per)


SEFFI_ROWS = ("seffi ingest only", "seffi default logging", "seffi default logging, plots=False",
              "seffi default logging, for_env")  # fmt: skip
#: A line of the ``--old`` child's protocol starts with this (seffi may print lines of its own).
MARK = "@@peers "


class OldCheckout:
    """The seffi rows of another checkout, replayed by its interpreter in a child process on request."""

    def __init__(self, python: str, a: Args) -> None:
        cmd = [python, os.path.abspath(__file__), "--serve"]
        for flag in ("episodes", "envs", "budget", "inputs", "seed"):
            cmd += [f"--{flag}", str(getattr(a, flag))]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
        env.pop("PYTHONPATH", None)  # the interpreter's own seffi, not this one's
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tempfile.gettempdir()
        )
        self.where = self._read()["seffi"]

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK) :])
        raise SystemExit(f"--old child exited with code {self.proc.wait()}")

    def run(self, name: str) -> dict[str, Any]:
        """One replay of row ``name`` in the child: its result dict."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def serve(a: Args) -> None:
    """The ``--old`` child: record the stream, then replay the row named on each stdin line."""
    import seffi

    rec = record(a)
    fns = consumers(a)
    print(MARK + json.dumps({"seffi": os.path.dirname(seffi.__file__)}), flush=True)
    for line in sys.stdin:
        got = fns[line.strip()](rec)
        print(MARK + json.dumps(got), flush=True)


def consumers(a: Args) -> dict[str, Callable[[Recording], dict[str, Any]]]:
    """The consumers by row name, in table order (with ``--old``, its seffi rows last)."""
    old = getattr(a, "old_checkout", None)
    extra = {f"{n} [old]": (lambda r, n=n: old.run(n)) for n in SEFFI_ROWS} if old is not None else {}
    return {
        "numpy floor": lambda r: run_floor(r, a),
        "replay vector env alone": lambda r: run_vector(r, a, wrap=False),
        "RecordEpisodeStatistics": lambda r: run_vector(r, a, wrap=True),
        f"replay {a.envs} sub-envs alone": lambda r: run_subenvs(r, a, wrap=False),
        f"SB3 Monitor x{a.envs}": lambda r: run_subenvs(r, a, wrap=True),
        "seffi ingest only": lambda r: run_seffi(r, a, logging=False),
        "seffi default logging": lambda r: run_seffi(r, a, logging=True, plots=True),
        "seffi default logging, plots=False": lambda r: run_seffi(r, a, logging=True, plots=False),
        "seffi default logging, for_env": lambda r: run_seffi(r, a, logging=True, for_env=True),
    } | extra


def measure(rec: Recording, a: Args) -> list[Row]:
    """Every consumer ``a.repeats`` times, round-robin, order reversed every other repetition."""
    fns = consumers(a)
    names = list(fns)
    rows = {n: Row(n) for n in names}
    rows["RecordEpisodeStatistics"].minus = "replay vector env alone"
    rows[f"SB3 Monitor x{a.envs}"].minus = f"replay {a.envs} sub-envs alone"
    for r in range(a.repeats):
        got: dict[str, dict[str, Any]] = {}
        for n in names if r % 2 == 0 else names[::-1]:
            got[n] = fns[n](rec)
        for n in names:
            row, g = rows[n], got[n]
            row.raw.append(g["cpu"])
            row.cpu.append(g["cpu"] - (got[row.minus]["cpu"] if row.minus else 0.0))
            row.extra.append(g)
    return list(rows.values())


def fmt(x: float, spec: str) -> str:
    return "-" if x != x else format(x, spec)


def table(rows: list[Row], rec: Recording, a: Args) -> list[dict[str, Any]]:
    """Print the side-by-side table; returns its rows as dicts (for ``--json``)."""
    eps = rec.episodes
    floor_min = rows[0].us(eps)[0]
    med = statistics.median
    head = ("consumer", "min us/ep", "median us/ep", "x floor", "(min)", "target", "", "raw median", "logs",
            "first log ms", "logs share", "close() s")  # fmt: skip
    lines, out = [head], []
    for row in rows:
        lo, mid = row.us(eps)
        target = next((v for k, v in TARGETS.items() if row.name.startswith(k)), None)
        # per repetition against the floor of the same repetition: load common to both cancels
        ratio = med(c / f for c, f in zip(row.cpu, rows[0].cpu, strict=True))
        ok = "" if target is None else ("PASS" if ratio <= target else "FAIL")
        ex = row.extra
        logs = ex[0].get("logs")
        close = [e["close"] for e in ex if "close" in e]
        share = [e["log_cpu"] / e["cpu"] for e in ex if e.get("logs")]
        first = [e["first_log"] for e in ex if e.get("logs")]
        raw = 1e6 * med(row.raw) / eps
        lines.append((
            row.name, f"{lo:.2f}", f"{mid:.2f}", f"{ratio:.2f}x", f"{lo / floor_min:.2f}x",
            "" if target is None else f"<= {target:g}x", ok,
            f"{raw:.2f} (- {row.minus})" if row.minus else "",
            str(logs) if logs else "", f"{1e3 * med(first):.1f}" if first else "",
            f"{med(share):.0%}" if share else "", f"{med(close):.2f}" if close else "",
        ))  # fmt: skip
        out.append({
            "consumer": row.name, "us_per_episode_min": lo, "us_per_episode_median": mid,
            "ratio_to_floor_median": ratio, "ratio_to_floor_min": lo / floor_min, "target": target,
            "pass": None if target is None else ratio <= target, "minus": row.minus,
            "cpu_s": row.cpu, "raw_cpu_s": row.raw, "logs": logs, "first_log_s": first,
            "log_share": share, "close_s": close,
        })  # fmt: skip
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    for line in lines:
        cells = zip(line, widths, strict=True)
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(cells)))
    return out


def profile(rec: Recording, a: Args, top: int) -> str:
    """cProfile of one 'seffi default logging' replay (close() excluded): seffi's top cumulative entries."""
    prof = cProfile.Profile()
    fns = consumers(a)
    from seffi.callbacks import CoverageMonitor

    close = CoverageMonitor.close
    CoverageMonitor.close = lambda self, *x, **k: None  # type: ignore[method-assign]
    try:
        prof.runcall(fns["seffi default logging"], rec)
    finally:
        CoverageMonitor.close = close  # type: ignore[method-assign]
    buf = io.StringIO()
    root = os.path.dirname(os.path.dirname(__import__("seffi").__file__)).replace("\\", "/")
    stats = pstats.Stats(prof, stream=buf).sort_stats("cumulative")
    stats.print_stats(f"{root}/(seffi|callbacks|envs)/", top)  # seffi's own functions only
    return buf.getvalue()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=32_000, help="episodes to record")
    p.add_argument("--envs", type=int, default=64, help="sub-envs of the SyncVectorEnv")
    p.add_argument("--repeats", type=int, default=9, help="interleaved repetitions")
    p.add_argument("--budget", type=int, default=8, help="per-input budget K")
    p.add_argument("--inputs", type=int, default=8, help="the env's pool inputs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="8,000 episodes, 2 repetitions: a smoke check")
    p.add_argument("--json", default=None, help="write the results to this path")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="print the top N cumulative seffi entries of one default-logging replay")  # fmt: skip
    p.add_argument("--old", default=None, metavar="PYTHON",
                   help="the interpreter of another checkout: its seffi rows beside these")  # fmt: skip
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    a: Args = p.parse_args()
    if a.quick:
        a.episodes, a.repeats = min(a.episodes, 8_000), min(a.repeats, 2)
    warnings.simplefilter("ignore")
    os.environ["WANDB_MODE"] = "disabled"
    if a.serve:
        serve(a)
        return
    import stable_baselines3  # noqa: F401 - imports torch
    import torch

    torch.set_num_threads(1)
    import seffi

    t = time.process_time()
    rec = record(a)
    print(
        f"seffi from {os.path.dirname(seffi.__file__)}; {ENV_ID}, {a.envs} sub-envs (SyncVectorEnv, "
        "NEXT_STEP), "
        f"{a.inputs} inputs, K = {a.budget}, M = {len(rec.strategies)}; {rec.episodes} episodes in "
        f"{len(rec.steps)} steps (recorded in {time.process_time() - t:.1f} s CPU); {a.repeats} interleaved "
        "repetitions; CPU us per episode.\nx floor: the median over repetitions of each one's ratio to the "
        "floor in that repetition ((min): min / the floor's min); the targets are judged on x floor"
    )
    if a.old:
        a.old_checkout = OldCheckout(a.old, a)
        print(f"[old] rows: seffi from {a.old_checkout.where} (run by {a.old})")
    rows = measure(rec, a)
    if a.old:
        a.old_checkout.close()
    out = table(rows, rec, a)
    by = {r.name: r for r in rows}
    floor_c = np.array(by["numpy floor"].extra[0]["coverage"])
    seffi_c = np.array(by["seffi ingest only"].extra[0]["coverage"])
    fe = by["seffi default logging, for_env"].extra
    print(
        f"net rows: minus the replay env of the same repetition (raw median shown beside). C(k) floor vs "
        f"seffi: max |diff| {np.abs(floor_c - seffi_c).max():.1e} (C(K) = {floor_c[-1]:.4f}). for_env: "
        f"gain_vs_iid {fe[0]['gain']}, baselines {statistics.median(e['baseline_s'] for e in fe):.2f} s wall "
        "(once, at its first log). close() (report, state, plots) is not in us/ep."
    )
    if a.profile:
        print(profile(rec, a, a.profile))
    if a.json:
        settings = {k: v for k, v in vars(a).items() if k not in ("quick", "serve", "old_checkout")}
        results = {"args": settings, "episodes": rec.episodes, "rows": out}
        Path(a.json).write_text(json.dumps(results, indent=1))
    rec.env.close()


if __name__ == "__main__":
    main()

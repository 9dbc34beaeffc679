"""Overhead of seffi's coverage callback: SB3 PPO (a user env, router and token env) and a vector loop.

Prints, in one run, wall times with and without the callback side by side (same env, same seed):

* **loop ratio** — training with the callback's per-step work and its periodic logs (scalars every
  ``log_every`` episodes, curve snapshots with bootstrap intervals every ``log_curves_every`` logs)
  divided by training without it. This is the number the goal (<= 1.03x) is about. The SB3
  callback checks whether a log is due at each rollout end by default (``log_at="rollout"``: one W&B
  point per policy update, like SB3's own metrics); on the router env, where every step ends an
  episode, a second row shows ``log_at="step"`` (a log as soon as ``log_every`` episodes are in,
  several per rollout) against the same "without" runs.
* **hooks / in-run ratio** — the callback's own time inside the "with" run (timed around its hooks)
  and that run divided by itself minus it: two runs of a 17 s training differ by several percent on
  a shared VM, so this figure shows the callback's direct cost without that noise (it misses
  indirect costs such as cache or GC pressure, which the loop ratio includes).
* **finalize** — the one-off end-of-training cost (final curves from the tracker, report.json/md,
  PNG plots, W&B summary), in seconds, and the ratio including it, so nothing is hidden.

The first workload trains on ``UserPlannerEnv``, an env written here as a user writes one (no seffi
import; multi-step episodes whose last step carries the info contract, plus the two optional methods
for the exact baselines), with ``PPO("MlpPolicy", env)`` as a user writes it (one env, SB3's
defaults): 20k steps, the goal's "incl. finalize" ratio. The callback draws the report's plots in a
child process (started with training, handed the report during the last policy update), so the CPU
clock counts this process and its ended children.

Repetitions are interleaved (without, with, with, without, ...) so machine noise hits all arms
alike; each figure is the median over repetitions (ratios: median of per-pair ratios). torch runs on
one thread in both arms. Monitor settings are the defaults a user gets (log_every=1024 episodes,
log_curves_every=10, n_boot=200, plots on); W&B is disabled unless ``--wandb offline``.

    python benchmarks/callback_overhead.py                 # ~5 minutes on 2 shared cores
    python benchmarks/callback_overhead.py --reps 5 --router-steps 65536 --wandb offline
    python benchmarks/callback_overhead.py --router-steps 0 --token-steps 0 --loop-steps 0  # user env only
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

import seffi.envs  # noqa: F401 - registers the env ids
from seffi.callbacks import CoverageMonitor

ROUTER, TOKEN = "seffi/SortSwapsRouter-v0", "seffi/SortSwaps-v0"
USER = "UserPlannerEnv"

#: The user env's strategies, what each action's trace follows, and the base model's law over match sets.
PLANS = ("astar", "bfs", "dfs", "greedy")
ACTION_MATCHES: tuple[tuple[str, ...], ...] = (("bfs",), ("dfs",), ("astar",), ("astar", "greedy"), ())
BASE_LAW = {
    frozenset({"bfs"}): 0.55,
    frozenset({"dfs"}): 0.25,
    frozenset({"astar"}): 0.08,
    frozenset({"astar", "greedy"}): 0.04,
    frozenset(): 0.08,
}


class UserPlannerEnv(gym.Env):
    """A user's env: an episode is ``length`` steps on one input; its last action picks the plan.

    After ``budget`` episodes on an input the next reset moves to the next of ``n_inputs`` inputs.
    """

    def __init__(self, n_inputs: int = 16, budget: int = 16, length: int = 4) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(ACTION_MATCHES))
        self.strategies = PLANS
        self.input_ids = tuple(f"maze-{i}" for i in range(n_inputs))
        self.budget, self.length = budget, length
        self.index, self.k, self.t = 0, 0, 0

    def _obs(self) -> np.ndarray:
        n = len(self.input_ids)
        return np.array([self.index / n, self.k / self.budget, self.t / self.length], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if self.k >= self.budget:
            self.index, self.k = (self.index + 1) % len(self.input_ids), 0
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any):
        self.t += 1
        if self.t < self.length:
            return self._obs(), 0.0, False, False, {}
        self.k += 1
        matches = ACTION_MATCHES[int(action)]
        info = {
            "input_id": self.input_ids[self.index],
            "strategy_matches": matches,
            "valid": bool(matches),
            "sample_index": self.k,
        }
        return self._obs(), float(len(matches)), True, False, info

    def base_match_distribution(self, input_id: str, valid_only: bool = False) -> dict[frozenset, float]:
        law = {m: p for m, p in BASE_LAW.items() if m or not valid_only}
        total = sum(law.values())
        return {m: p / total for m, p in law.items()}

    def reference_match_sets(self, input_id: str) -> dict[str, frozenset]:
        return {s: frozenset([s]) for s in PLANS}


def cpu_seconds() -> float:
    """CPU time of this process (all threads) and of its ended child processes (the plots' renderer)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Clock:
    """Wall and CPU time (this process, all threads, and its ended children) since creation."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), cpu_seconds()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, cpu_seconds() - self.cpu


class Timing:
    """One arm: (wall, cpu) seconds in total and in the one-off finalize, plus what was logged."""

    def __init__(
        self,
        total: tuple[float, float],
        finalize: tuple[float, float] = (0.0, 0.0),
        logs: int = 0,
        episodes: int = 0,
        baselines: float = 0.0,
        hooks: float = 0.0,
    ) -> None:
        self.total, self.finalize, self.logs, self.episodes = total, finalize, logs, episodes
        self.baselines = baselines  # wall s of the one-off exact baseline computation (first logs)
        self.hooks = hooks  # wall s inside the callback's own hooks (ingestion and logs), measured in-run

    def loop(self, i: int) -> float:
        """Training time without the finalize (i = 0: wall, 1: cpu)."""
        return self.total[i] - self.finalize[i]


def ppo_time(
    env_id: str, steps: int, n_envs: int, budget: int, log_at: str | None, wandb: str, out: str
) -> Timing:
    """One PPO training; ``log_at`` None: without the callback, else the callback's ``log_at``."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from seffi.callbacks.sb3 import CoverageCallback

    env_kwargs = {"n_inputs": 16, "budget": budget}
    if env_id == USER:  # as a user writes it: one env, SB3's PPO defaults (2048-step rollouts, 10 epochs)
        model = PPO(
            "MlpPolicy", make_vec_env(UserPlannerEnv, seed=0, env_kwargs=env_kwargs), seed=0, device="cpu"
        )
    else:
        venv = make_vec_env(env_id, n_envs=n_envs, seed=0, env_kwargs=env_kwargs)
        policy = "MultiInputPolicy" if isinstance(venv.observation_space, gym.spaces.Dict) else "MlpPolicy"
        model = PPO(policy, venv, n_steps=256, batch_size=256, n_epochs=4, seed=0, device="cpu")
    venv = model.get_env()
    cb = None
    spent = [(0.0, 0.0)]
    in_loop = [0.0]  # baseline seconds spent before the finalize (the finalize may compute more)
    hooks = [0.0]
    if log_at is not None:

        class Timed(CoverageCallback):
            def _on_step(self) -> bool:
                started = time.perf_counter()
                out = super()._on_step()
                hooks[0] += time.perf_counter() - started
                return out

            def _on_rollout_end(self) -> None:
                started = time.perf_counter()
                super()._on_rollout_end()
                hooks[0] += time.perf_counter() - started

            def _on_training_end(self) -> None:
                in_loop[0] = self.monitor.baseline_seconds if self.monitor is not None else 0.0
                clock = Clock()
                super()._on_training_end()
                spent[0] = clock.read()

        cb = Timed(budget=budget, out_dir=out, wandb=wandb, log_at=log_at)
    clock = Clock()
    model.learn(steps, callback=cb)
    total = clock.read()
    venv.close()
    if cb is None:
        return Timing(total)
    return Timing(total, spent[0], cb.monitor.n_logs, cb.monitor.episodes, in_loop[0], hooks[0])


def loop_time(steps: int, n_envs: int, n_inputs: int, budget: int, arm: str | None, out: str) -> Timing:
    # A router env row cycles through the inputs, so a run (one input in one row) reaches K after
    # n_inputs x K episodes of that row: with few inputs the loop's runs complete and it logs.
    envs = gym.make_vec(
        ROUTER, num_envs=n_envs, vectorization_mode="vector_entry_point", n_inputs=n_inputs, budget=budget
    )
    monitor = CoverageMonitor.for_env(envs, budget=budget, out_dir=out, wandb="disabled") if arm else None
    rng = np.random.default_rng(0)
    actions = rng.integers(0, envs.single_action_space.n, size=(steps, n_envs))
    envs.reset(seed=0)
    hooks = 0.0
    clock = Clock()
    for t in range(steps):
        _, _, term, trunc, infos = envs.step(actions[t])
        if monitor is not None:
            started = time.perf_counter()
            monitor.update_infos(infos, term | trunc)
            monitor.maybe_log(t * n_envs)
            hooks += time.perf_counter() - started
    fin = (0.0, 0.0)
    if monitor is not None:
        in_loop = monitor.baseline_seconds  # before the finalize, which may compute more
        fin_clock = Clock()
        monitor.close()
        fin = fin_clock.read()
    total = clock.read()
    envs.close()
    if monitor is None:
        return Timing(total)
    return Timing(total, fin, monitor.n_logs, monitor.episodes, in_loop, hooks)


def interleaved(
    fn: Callable[[str | None, str], Timing], reps: int, arms: tuple[str, ...] = ("rollout",)
) -> tuple[list[Timing], dict[str, list[Timing]]]:
    """Timings without the callback (arm None) and with it (one list per arm), order reversed per rep."""
    base: list[Timing] = []
    cb: dict[str, list[Timing]] = {a: [] for a in arms}
    for r in range(reps):
        order = (None, *arms)
        for arm in order if r % 2 == 0 else order[::-1]:
            with tempfile.TemporaryDirectory() as out:
                (base if arm is None else cb[arm]).append(fn(arm, out))
    return base, cb


ROWS: list[tuple[str, ...]] = []


def record(name: str, base: list[Timing], cb: list[Timing]) -> None:
    med = statistics.median
    for i, clock in ((0, "wall"), (1, "cpu")):
        loop_r = [c.loop(i) / b.total[i] for b, c in zip(base, cb, strict=True)]
        steady_r = [(c.loop(i) - c.baselines) / b.total[i] for b, c in zip(base, cb, strict=True)]
        total_r = [c.total[i] / b.total[i] for b, c in zip(base, cb, strict=True)]
        ROWS.append(
            (
                name if i == 0 else "",
                clock,
                f"{med(b.total[i] for b in base):8.3f}",
                f"{med(c.loop(i) for c in cb):8.3f}",
                f"{med(loop_r):6.3f}x",
                "yes" if med(loop_r) <= 1.03 else "NO",
                f"{med(c.baselines for c in cb):6.3f}" if i == 0 else "",
                f"{med(steady_r):6.3f}x",
                f"{med(c.finalize[i] for c in cb):7.3f}",
                f"{med(total_r):6.3f}x",
                f"{cb[0].logs}/{cb[0].episodes}" if i == 0 else "",
                f"{med(c.hooks for c in cb):6.3f}" if i == 0 else "",
                f"{med(c.loop(0) / (c.loop(0) - c.hooks) for c in cb):6.3f}x" if i == 0 else "",
                " ".join(f"{r:.3f}" for r in loop_r),
            )
        )


def show() -> None:
    head = (
        "workload",
        "clock",
        "without s",
        "with s",
        "loop ratio",
        "<=1.03x",
        "baselines s",
        "w/o baselines",
        "finalize s",
        "incl. finalize",
        "logs/episodes",
        "hooks s",
        "in-run ratio",
        "per-pair loop ratios",
    )
    widths = [max(len(str(r[i])) for r in [head, *ROWS]) for i in range(len(head))]
    for row in [head, *ROWS]:
        cells = [
            str(c).rjust(w) if i else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--user-steps", type=int, default=20000, help="PPO timesteps on the user env")
    p.add_argument("--router-steps", type=int, default=32768, help="PPO timesteps on the router env")
    p.add_argument("--token-steps", type=int, default=32768, help="PPO timesteps on the token env")
    p.add_argument("--ppo-envs", type=int, default=4)
    p.add_argument("--loop-steps", type=int, default=1000)
    p.add_argument("--loop-envs", type=int, default=64)
    p.add_argument("--loop-inputs", type=int, default=8, help="inputs of the vector loop's env")
    p.add_argument("--budget", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--wandb", default="disabled", choices=["disabled", "offline"])
    a = p.parse_args()
    warnings.simplefilter("ignore")
    os.environ.setdefault("WANDB_SILENT", "true")
    import torch

    torch.set_num_threads(1)  # both arms on one thread: the comparison, not the speed, is the point
    print(
        f"K={a.budget}, {a.reps} interleaved repetitions, W&B {a.wandb}, torch threads 1, monitor defaults "
        "(log_every=1024 episodes, log_curves_every=10, n_boot=200, plots on; SB3: log_at=rollout)"
    )
    for env_id, steps, arms in (
        (USER, a.user_steps, ("rollout",)),
        (ROUTER, a.router_steps, ("rollout", "step")),
        (TOKEN, a.token_steps, ("rollout",)),
    ):
        if steps <= 0:  # --user-steps 0 / --router-steps 0 / --token-steps 0 skip that workload
            continue
        b, c = interleaved(
            lambda arm, out, e=env_id, s=steps: ppo_time(e, s, a.ppo_envs, a.budget, arm, a.wandb, out),
            a.reps,
            arms,
        )
        for arm in arms:
            suffix = "" if arm == "rollout" else f", log_at={arm}"
            envs = "1 env, PPO defaults" if env_id == USER else f"x{a.ppo_envs} envs"
            record(f"SB3 PPO {env_id}, {steps} steps {envs}{suffix}", b, c[arm])
    if a.loop_steps <= 0:  # --loop-steps 0 skips the vector loop
        show()
    else:
        b, c = interleaved(
            lambda arm, out: loop_time(a.loop_steps, a.loop_envs, a.loop_inputs, a.budget, arm, out), a.reps
        )
        name = f"vector loop {ROUTER}, random actions, {a.loop_steps}x{a.loop_envs}, {a.loop_inputs} inputs"
        record(name, b, c["rollout"])
        loop_with = statistics.median(t.total[0] - t.finalize[0] for t in c["rollout"])
        per = (loop_with - statistics.median(t.total[0] for t in b)) / max(c["rollout"][0].episodes, 1) * 1e6
        hooks = statistics.median(t.hooks / max(t.episodes, 1) for t in c["rollout"]) * 1e6
        # The exact baselines are computed once per run: in a 1-second loop they weigh as much as the
        # steady per-episode cost, in a real training run nothing, so both figures are shown.
        once = statistics.median(t.baselines / max(t.episodes, 1) for t in c["rollout"]) * 1e6
        show()
        print(
            f"vector loop: the monitor costs {per:.2f} us per finished episode "
            f"({hooks:.2f} us in its hooks); without the one-off exact baselines "
            f"{per - once:.2f} us ({hooks - once:.2f} us)"
        )
    print(
        "loop ratio: training incl. per-step ingestion and periodic logs / training without the callback;\n"
        "cpu: CPU time of the process and its ended children (the plots' renderer), less sensitive than\n"
        "wall time to other load on a shared machine;\n"
        "baselines: one-off exact iid/oracle computation at the first logs (inside 'with'; 'w/o baselines' "
        "removes it);\n"
        "finalize: one-off end-of-training report (tracker curves, report.json/md, PNG plots), not in the "
        "loop;\n"
        "hooks: wall s inside the callback's hooks during training, timed in the 'with' run itself; in-run "
        "ratio: that run / (that run - hooks), free of run-to-run machine noise (misses indirect costs)"
    )


if __name__ == "__main__":
    main()

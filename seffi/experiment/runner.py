"""The main job behind ``seffi run``: train a learned exploration router, compare it, write a report.

For each task of the config, on that task's router env (``seffi/<Name>Router-v0``: a fixed pool of
``n_inputs`` inputs, budget ``K`` per input), three policies are compared:
1. **iid** — the base model: latents drawn from the router prior. Its curves are *exact*
   ([`seffi.coverage.IidBaseline`][seffi.coverage.IidBaseline] over the env's base match distribution); the
   same sampler is also *measured* on the env ("iid-sampler") as a built-in sanity check: its gain must be ~0.
2. **oracle** — the no-repeat sampler over the env's reference traces
   ([`OracleBaseline`][seffi.coverage.OracleBaseline]).
3. **learned** — `ReinforceRouter`, trained with the env's
   novelty reward on a native vector env for ``learner.rounds`` rounds while the streaming
   [`CoverageMonitor`][seffi.callbacks.CoverageMonitor] is attached to the training episodes (logged to W&B as
   they happen, under ``seffi/<task>/train/...``), then measured *fresh* (new env life, empty
   histories) with budget ``K`` on every input, ``eval_runs`` times.

The learned router and the measured iid sampler are bootstrapped with the same seed over the same
inputs, so their intervals are paired. Everything random is spawned from ``config.seed``, so the same
seed and library versions give a byte-identical report.json on any x86-64 CPU (it holds no timestamps,
timings or absolute paths, and the router trains without BLAS-kernel-dependent sums).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import seffi.envs
from seffi import __version__
from seffi._io import write_atomic
from seffi._seeding import spawn
from seffi.callbacks import CoverageMonitor
from seffi.coverage import CoverageTracker
from seffi.coverage.env_baselines import EnvBaselines
from seffi.envs import env_id
from seffi.episodes import parse_vector
from seffi.errors import SeffiError, Terminated
from seffi.experiment.config import RunConfig
from seffi.experiment.learner import ReinforceRouter, RouterFeatures
from seffi.experiment.summary import summary_table
from seffi.report import keys
from seffi.report.run_folder import default_out_dir, prepare_run_folder
from seffi.report.schema import Barcode, Comparison, CurveSet, LatentCurve, PolicyResult, Report
from seffi.report.sinks import ForwardingSink, closing_lines, default_sinks
from seffi.report.wandb_run import SafeWandbRun

# -- the run folder ---------------------------------------------------------------------------------


def default_out() -> Path:
    """``runs/<UTC timestamp>`` (the timestamp lives in the folder name only, never in report.json)."""
    return default_out_dir("")


def prepare_out(out: Path | None, *, overwrite: bool = False) -> Path:
    """Create the run folder and prove it is writable, before any training starts.

    A folder that already holds a seffi run is refused (its metrics.jsonl would be appended to and
    its plots mixed with the new ones) unless ``overwrite``, which removes that run's seffi files
    first (see `seffi.report.run_folder.prepare_run_folder`).

    Raises:
        RunFolderExists: The folder holds an earlier run and ``overwrite`` is False.
        SeffiError: The folder cannot be created or written (one line naming the path and the reason).
    """
    return prepare_run_folder(Path(out) if out is not None else default_out(), overwrite=overwrite)


# -- one task -----------------------------------------------------------------------------------------


def router_env_id(task_name: str) -> str:
    """``sort_swaps`` -> ``seffi/SortSwapsRouter-v0``."""
    return env_id(task_name, "router")


def env_kwargs(task_name: str, config: RunConfig, input_seed: int) -> dict[str, Any]:
    """Keyword arguments of the task's router env (the same pool for training and measurement)."""
    kwargs: dict[str, Any] = {
        "task_config": {"skew": config.skew, **config.task_options.get(task_name, {})},
        "n_inputs": config.n_inputs,
        "input_seed": input_seed,
        "budget": config.budget,
        "prior_skew": config.prior_skew,
        "noise": config.noise,
    }
    if config.n_latents is not None:
        kwargs["n_latents"] = config.n_latents
    return kwargs


def task_env_kwargs(config: RunConfig) -> dict[str, dict[str, Any]]:
    """Each task's router env kwargs, from the same seeds `Runner.run_task` spawns."""
    seeds = spawn(config.seed, len(config.tasks))
    return {
        name: env_kwargs(name, config, int(spawn(seed, 6)[0].generate_state(1)[0]))
        for name, seed in zip(config.tasks, seeds, strict=True)
    }


def check_envs(config: RunConfig) -> None:
    """Build every task's router env once, before any task trains or the run folder is touched.

    A setting that only the env rejects (its pool, latents, task options) then stops the run up front
    instead of after the earlier tasks trained. The pools are cached, so training reuses them.

    Raises:
        SeffiError: An env rejects the settings (one line naming the task).
    """
    for name, kwargs in task_env_kwargs(config).items():
        try:
            make_vec(name, 1, reward="novel", **kwargs).close()
        except SeffiError as exc:
            raise SeffiError(f"task {name}: {exc}") from None


def make_vec(task_name: str, num_envs: int, **kwargs: Any) -> Any:
    """The native vector router env of ``task_name`` (``num_envs`` independent rows)."""
    import gymnasium as gym

    seffi.envs.register_envs()  # picks up tasks registered after seffi.envs was imported
    return gym.make_vec(
        router_env_id(task_name), num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
    )


@dataclass
class Rollout:
    """Samples of one policy: rows are (input, run) pairs, ``runs`` consecutive rows per input.

    Attributes:
        tracker: The [`CoverageTracker`][seffi.coverage.CoverageTracker] of every sample (stream = row).
        input_ids: str list, length R: each row's input.
        latents: int array, shape (R, K): latent chosen at each sample.
        matches: per row, per sample, the sorted tuple of matched strategy ids.
        valid: bool array, shape (R, K).
    """

    tracker: Any
    input_ids: list[str]
    latents: np.ndarray
    matches: list[list[tuple[str, ...]]]
    valid: np.ndarray


Act = Callable[[np.ndarray, np.random.Generator], np.ndarray]  # (obs (B, D), rng) -> latents (B,)


def rollout(envs: Any, act: Act, runs: int, seed: np.random.SeedSequence) -> Rollout:
    """Spend the budget K ``runs`` times on every input of ``envs`` (a fresh env life, seeded).

    Row ``i`` of the vector env is pinned to input ``i // runs`` via ``reset(options={"input_id":
    ...})``, so each row's K consecutive samples are one run with its own history.
    """
    u = envs.unwrapped
    budget = u.budget
    ids = [x for x in u.input_ids for _ in range(runs)]
    env_seed, act_seed = (int(s.generate_state(1)[0]) for s in spawn(seed, 2))
    rng = np.random.default_rng(act_seed)
    # One barcode row per input (its first run: the lowest stream), K cells each.
    tracker = CoverageTracker(
        strategies=u.strategies, task=u.task.name, barcode_rows=len(u.input_ids), barcode_cols=budget
    )
    latents = np.zeros((len(ids), budget), dtype=np.int64)
    valid = np.zeros((len(ids), budget), dtype=bool)
    matches: list[list[tuple[str, ...]]] = [[] for _ in ids]
    obs, _ = envs.reset(seed=env_seed, options={"input_id": ids})
    for k in range(budget):
        if k:
            obs, _ = envs.reset(options={"input_id": ids})
        obs, _r, terminated, truncated, infos = envs.step(act(obs, rng))
        b = parse_vector(infos, u.strategies, terminated | truncated)
        for i, row in enumerate(b.env_index.tolist()):
            ms = tuple(sorted(s for s, h in zip(b.strategies, b.hits[i].tolist(), strict=True) if h))
            ok = bool(b.valid[i])
            tracker.update(b.input_id[i], ms, valid=ok, stream=row)
            latents[row, k], valid[row, k] = b.z[i], ok
            matches[row].append(ms)
    return Rollout(tracker, ids, latents, matches, valid)


def exact_baselines(envs: Any, budget: int, seed: np.random.SeedSequence) -> Any:
    """The env pool's exact baselines ([`EnvBaselines`][seffi.coverage.env_baselines.EnvBaselines]).

    The iid law is the router prior pushed through the env's hidden generator
    (``base_match_distribution``); the oracle emits the reference traces (``reference_match_sets``),
    its coverage split by the iid law's rarity bins.
    """
    iid_seed, oracle_seed = (int(s.generate_state(1)[0]) for s in spawn(seed, 2))
    return EnvBaselines.from_env(
        envs.unwrapped, budget, seed=oracle_seed, iid_seed=iid_seed, oracle_rarity=True
    )


@dataclass
class TaskResult:
    """One task's outcome: the comparison for the report and what goes into the state files."""

    comparison: Any
    state: dict[str, Any]
    router: dict[str, Any]


class Runner:
    """Runs every task of a config, logging the training streams into one set of sinks.

    Args:
        config: The run settings.
        sinks: A [`seffi.report.sinks.MultiSink`][seffi.report.MultiSink] (local folder + W&B) shared by all
            tasks.
        progress: A rich ``Progress`` (or a disabled one).
    """

    def __init__(self, config: RunConfig, sinks: Any, progress: Any) -> None:
        self.config, self.sinks, self.progress = config, sinks, progress
        self.rarity: Any = None  # the current task's base law, for the common-vs-rare split
        self.base_law: Any = None  # the current task's base law over match sets, per input id
        # seffi/step: training episodes so far over all tasks (W&B steps must not decrease); each task's
        # keys also carry their own seffi/<task>/train/step (see ForwardingSink)
        self.step = 0

    def run_task(self, task_name: str, seed: np.random.SeedSequence) -> TaskResult:
        """The three policies on one task."""
        cfg, lc = self.config, self.config.learner
        pool_seed, base_seed, train_seed, iid_seed, learned_seed, boot_seed = spawn(seed, 6)
        kwargs = env_kwargs(task_name, cfg, int(pool_seed.generate_state(1)[0]))
        n = cfg.n_inputs
        bar = self.progress.add_task(task_name, total=lc.rounds + 2, status="baselines")
        # The env's "novel" reward: 1 for a valid trace plus 1 per strategy it adds to its input's run.
        train_env = make_vec(task_name, n * lc.train_runs, reward="novel", **kwargs)
        u = train_env.unwrapped
        strategies = tuple(u.strategies)
        baselines = exact_baselines(train_env, cfg.budget, base_seed)
        iid, oracle = baselines.curves(u.input_ids)
        self.rarity, self.base_law = baselines.iid_baseline, baselines.law
        feats = RouterFeatures(u.obs_layout, use_input=lc.input_features)
        router = ReinforceRouter(
            u.n_latents, feats.size, lr=lc.lr, gamma=lc.gamma, baseline_decay=lc.baseline_decay
        )
        scope = f"{task_name}/train"  # the task's name, as the final summary keys and the report write it
        monitor = CoverageMonitor(
            cfg.budget,
            env=train_env,
            baselines=baselines,
            sinks=ForwardingSink(self.sinks, scope, start=self.step),
            scope=scope,
            label="learned (training stream)",
            log_every=cfg.log_every * n * lc.train_runs * cfg.budget,  # episodes per log
            # each log describes the router of its last log_every rounds, not every round since the start
            window=cfg.log_every * n * lc.train_runs * cfg.budget,
            n_boot=0,  # intervals of the training stream would cost a bootstrap per log
            seed=int(boot_seed.generate_state(1)[0]),
        )
        self.progress.update(bar, status="training")
        self.train(router, feats, train_env, monitor, train_seed, bar)
        if monitor.last_step != self.step:  # the final state of the training stream
            monitor.log(self.step)
        final = getattr(self.sinks, "log_final_curves", None)
        if final is not None and monitor.tracker.complete_runs():
            # The training stream's chart ends on every run it recorded (snapshots are every 10th log only).
            final(monitor.snapshot()[0], self.step, scope)
        self.progress.update(bar, advance=1, status="measuring")

        def learned_act(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return router.act(*feats(obs), rng)

        untrained = ReinforceRouter(u.n_latents, feats.size)  # zero weights: the iid base model

        def iid_act(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return untrained.act(*feats(obs), rng)

        eval_env = make_vec(task_name, n * cfg.eval_runs, **kwargs)
        learned_run = rollout(eval_env, learned_act, cfg.eval_runs, learned_seed)
        iid_run = rollout(eval_env, iid_act, cfg.eval_runs, iid_seed)
        boot = int(boot_seed.generate_state(1)[0])  # one seed for both: the bootstraps are paired
        comparison = self.compare(
            task_name,
            strategies,
            u.n_latents,
            {"learned": learned_run, "iid-sampler": iid_run},
            iid,
            oracle,
            boot,
            [
                f"learned: the router after {lc.rounds} rounds x {lc.train_runs} runs of K={cfg.budget} "
                f"per input with the novelty reward on {n} inputs, then measured fresh ({cfg.eval_runs} "
                "runs per input) on the same pool",
                "iid-sampler: the base model measured on the env; its gain should be near 0",
            ],
        )
        self.progress.update(bar, advance=1, status="done")
        state = {
            "train": monitor.tracker.state_dict(),
            "learned": learned_run.tracker.state_dict(),
            "iid-sampler": iid_run.tracker.state_dict(),
        }
        return TaskResult(comparison, state, router.state_dict())

    def train(
        self,
        router: ReinforceRouter,
        feats: RouterFeatures,
        envs: Any,
        monitor: Any,
        seed: np.random.SeedSequence,
        bar: Any,
    ) -> None:
        """``rounds`` rounds: each row runs its input for K samples, then one policy-gradient update.

        Every step's infos go to the streaming monitor (``update_infos``), which logs every
        ``log_every`` rounds at ``seffi/step`` = training episodes so far over all tasks, with the task's
        own ``seffi/<task>/train/step`` = this task's training episodes so far.
        """
        lc = self.config.learner
        u = envs.unwrapped
        budget = u.budget
        ids = [x for x in u.input_ids for _ in range(lc.train_runs)]
        env_seed, act_seed = (int(s.generate_state(1)[0]) for s in spawn(seed, 2))
        rng = np.random.default_rng(act_seed)
        rows = len(ids)
        phi = np.zeros((rows, budget, feats.size))
        base = np.zeros((rows, budget, u.n_latents))
        actions = np.zeros((rows, budget), dtype=np.int64)
        rewards = np.zeros((rows, budget))
        obs, _ = envs.reset(seed=env_seed, options={"input_id": ids})
        for r in range(lc.rounds):
            for k in range(budget):
                if k or r:
                    # An explicit input per row: a row whose input used its budget starts a new run.
                    obs, _ = envs.reset(options={"input_id": ids})
                phi[:, k], base[:, k] = feats(obs)
                actions[:, k] = router.act(phi[:, k], base[:, k], rng)
                obs, rewards[:, k], terminated, truncated, infos = envs.step(actions[:, k])
                monitor.update_infos(infos, terminated | truncated)
                self.step += rows
            found = router.update(phi, base, actions, rewards)
            monitor.maybe_log(self.step)
            self.progress.update(bar, advance=1, status=f"round {r + 1}: reward {found:.2f} / run")

    def compare(
        self,
        task_name: str,
        strategies: tuple[str, ...],
        n_latents: int,
        runs: dict[str, Rollout],
        iid: Any,
        oracle: Any,
        boot: int,
        notes: list[str],
    ) -> Any:
        """The task's [`Comparison`][seffi.report.Comparison]: policies (with gains) vs iid and oracle."""
        cfg = self.config
        policies = []
        for label, run in runs.items():
            curves = run.tracker.curves(
                cfg.budget, n_boot=cfg.bootstrap, seed=boot, ci_level=cfg.ci, rarity=self.rarity
            )
            g = curves.gain(iid, oracle)
            cs = CurveSet.from_curves(curves, label, "policy", valid_rate=float(run.valid.mean()))
            times = run_times(run, len(strategies), [t.tau for t in cs.time_to_coverage])
            ttc = [t.model_copy(update={"values": times[t.tau]}) for t in cs.time_to_coverage]
            policies.append(
                PolicyResult(
                    curves=cs.model_copy(update={"time_to_coverage": ttc}),
                    gain=g,
                    barcode=Barcode.from_tracker(curves.barcode),
                    latent=latent_curve(run, n_latents, label),
                    metrics=run.tracker.metric_estimates(self.base_law),
                )
            )
        return Comparison(
            task=task_name,
            env_id=router_env_id(task_name),
            budget=cfg.budget,
            n_inputs=cfg.n_inputs,
            num_strategies=len(strategies),
            iid=CurveSet.from_curves(iid, "iid", "iid"),
            oracle=CurveSet.from_curves(oracle, "oracle", "oracle"),
            policies=policies,
            notes=notes,
        )


def run_times(run: Rollout, num_strategies: int, taus: list[float]) -> dict[float, list[int | None]]:
    """Per run (row) T(tau) = min{k : |S_k| / M >= tau}; None where censored at K.

    Returns:
        ``{tau: list of length R}`` (feeds the per-run panel of the time-to-coverage plot).
    """
    out: dict[float, list[int | None]] = {tau: [] for tau in taus}
    for row in run.matches:
        seen: set[str] = set()
        frac = []
        for m in row:
            seen.update(m)
            frac.append(len(seen) / num_strategies)
        for tau in taus:
            # The same tolerance as the coverage engine, so 3/4 >= 0.75 holds despite rounding.
            out[tau].append(next((k + 1 for k, f in enumerate(frac) if f >= tau - 1e-12), None))
    return out


def latent_curve(run: Rollout, n_latents: int, label: str) -> Any:
    """Latent-code coverage (fraction of the Z codes tried by k, mean over runs): a diagnostic."""
    rows, budget = run.latents.shape
    tried = np.zeros((rows, n_latents), dtype=bool)
    cov = np.zeros(budget)
    for k in range(budget):
        tried[np.arange(rows), run.latents[:, k]] = True
        cov[k] = tried.sum(axis=1).mean() / n_latents
    return LatentCurve(label=label, k=list(range(1, budget + 1)), coverage=cov.tolist(), num_codes=n_latents)


@dataclass
class RunResult:
    """What `run_experiment` produced."""

    out: Path
    report: Any
    files: dict[str, Path]
    seconds: float
    sync_hint: str | None = None


def run_experiment(config: RunConfig, *, console: Any = None, overwrite: bool = False) -> RunResult:
    """Run ``config``: write the run folder, show progress while training and a summary at the end.

    Args:
        config: The run settings.
        console: A rich console (default: stdout).
        overwrite: Replace an earlier run in ``config.out`` (its seffi files are removed first);
            without it such a folder is refused.

    Raises:
        SeffiError: A missing W&B login in online mode, an env that rejects the settings, or an
            unwritable ``--out`` or one that holds an earlier run (all checked before any work).
    """
    from rich.console import Console

    start = time.perf_counter()
    # Not a terminal (a log file, CI): rich would wrap the summary table at 80 columns.
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    SafeWandbRun.check_login(config.wandb)  # online mode without a login is fatal, before any work
    check_envs(config)
    out = prepare_out(config.out, overwrite=overwrite)
    sinks = default_sinks(
        out,
        wandb=config.wandb,
        plots=True,
        log_curves_every=1,  # each monitor decides which of its logs are curve snapshots
        project=config.wandb_project,
        job_type="seffi-run",
        config=config.public_dict(),
    )
    results: list[TaskResult] = []
    runner: Runner | None = None
    try:
        with _progress(console, config.progress) as progress, _sigterm_as_interrupt():
            runner = Runner(config, sinks, progress)
            for name, seed in zip(config.tasks, spawn(config.seed, len(config.tasks)), strict=True):
                results.append(runner.run_task(name, seed))
                if len(results) < len(config.tasks):  # a kill from here on keeps the finished tasks
                    _write_results(out, config, results, sinks, checkpoint=True)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: write what was measured, marked, then stop
        if results:
            _write_results(out, config, results, sinks, step=runner.step if runner else 1, interrupted=True)
            console.print(
                f"interrupted: the report in {out} covers the {len(results)} finished task(s) of "
                f"{len(config.tasks)}",
                soft_wrap=True,
                markup=False,
            )
        raise
    assert runner is not None
    report, files = _write_results(out, config, results, sinks, step=runner.step)

    wandb, seconds = sinks.wandb, time.perf_counter() - start
    console.print(summary_table(report))
    for line in closing_lines(out, wandb, seconds=seconds):
        # soft_wrap: long paths stay on one line, so they can be copied as they are.
        console.print(line, soft_wrap=True, markup=False)
    hint = wandb.run.sync_hint if wandb is not None else None
    return RunResult(out, report, files, seconds, hint)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated`, a KeyboardInterrupt, inside the block (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _write_results(
    out: Path,
    config: RunConfig,
    results: list[TaskResult],
    sinks: Any,
    *,
    step: int = 1,
    checkpoint: bool = False,
    interrupted: bool = False,
) -> tuple[Any, dict[str, Path]]:
    """Write the report of the finished tasks: a checkpoint (report.json, state), or the final files.

    Returns:
        (report, local files written).
    """
    report = build_report(config, [r.comparison for r in results])
    marks = {"checkpoint": checkpoint, "interrupted": interrupted}
    if any(marks.values()):
        report = report.model_copy(update={"meta": {**report.meta, **{k: v for k, v in marks.items() if v}}})
    done = list(zip(config.tasks, results, strict=False))  # the finished tasks, in order
    state = {name: r.state for name, r in done}
    save_routers(out, {name: r.router for name, r in done})
    local = sinks.local
    if checkpoint:
        local.checkpoint(report, state)
        return report, dict(local.files)
    wandb = sinks.wandb
    local.finish(report, state)  # report.json, report.md, plots, tracker_state.json
    if wandb is not None:
        names = keys.comparison_names(report.comparisons)
        task_of = dict(zip(report.slugs(), names, strict=True))  # plot files are named by slug
        for name, path in sorted(local.files.items()):
            slug, _, plot = name.partition("/")
            if path.suffix == ".png" and slug in task_of:
                wandb.run.log_image(f"seffi/plots/{task_of[slug]}/{plot}", path, step=max(step, 1))
        for comparison, name in zip(report.comparisons, names, strict=True):  # one chart per task
            wandb.log_final_curves(comparison, max(step, 1), name, image=False)
        wandb.finish(report, state)  # run.summary, report + tracker state as an artifact
    return report, dict(local.files)


def save_routers(out: Path, routers: dict[str, dict[str, Any]]) -> None:
    """The trained routers' weights, ``out/routers.json`` (canonical JSON)."""
    try:
        write_atomic(out / "routers.json", json.dumps(routers, sort_keys=True) + "\n")
    except OSError as exc:
        raise SeffiError(f"cannot write {out / 'routers.json'}: {exc.strerror or exc}") from None


def _progress(console: Any, enabled: bool) -> Any:
    """A rich progress display, one bar per task (disabled: prints nothing)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not enabled,
    )


def build_report(config: RunConfig, comparisons: list[Any]) -> Any:
    """The run's [`Report`][seffi.report.Report] (no timestamps, no timings, no absolute paths)."""
    return Report(
        title="seffi run: learned exploration router vs iid vs oracle",
        seed=config.seed,
        config=config.public_dict(),
        meta={"seffi_version": __version__, "command": "seffi run"},
        comparisons=comparisons,
    )

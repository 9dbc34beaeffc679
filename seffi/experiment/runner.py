"""The main job behind ``seffi run``: train a learned exploration router, compare it, write a report.

For each task of the config, on that task's router env (``seffi/<Name>Router-v0``, a fixed pool of
``n_inputs`` inputs, budget ``K`` per input):

1. **iid** — the base sampler: latents drawn from the router prior, ``K`` per input. Its measured
   curves sit next to the *exact* iid baseline computed from the env's base match distribution (a
   built-in sanity check: the two must agree within their CI).
2. **oracle** — the no-repeat sampler over the env's reference match sets (exact).
3. **learned** — :class:`~seffi.experiment.learner.ReinforceRouter`, trained with the novelty reward
   for ``learner.rounds`` passes over the pool while the streaming coverage monitor watches the
   training episodes (logged to W&B as they happen), then evaluated *fresh* (empty histories, new
   seed stream) with budget ``K`` per input.

Everything random is spawned from ``config.seed`` (one child per task, then per policy), so the same
seed gives a byte-identical report.json (which holds no timestamps or absolute paths).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from seffi._seeding import spawn
from seffi.errors import SeffiError
from seffi.experiment.config import RunConfig
from seffi.experiment.learner import Episode, HistoryFeatures, ReinforceRouter

TAUS = (0.5, 0.8, 1.0)
STATE_DIR = "tracker_state"


# -- the run folder ---------------------------------------------------------------------------------


def default_out() -> Path:
    """``runs/<timestamp>`` (the timestamp lives in the folder name only, never in report.json)."""
    return Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")


def prepare_out(out: Path | None) -> Path:
    """Create the run folder and prove it is writable, before any training starts.

    Raises:
        SeffiError: The folder cannot be created or written (one line naming the path and the reason).
    """
    path = Path(out) if out is not None else default_out()
    if path.exists() and not path.is_dir():
        raise SeffiError(f"--out {path} exists and is not a folder")
    probe = path / ".seffi-write-test"
    try:
        (path / STATE_DIR).mkdir(parents=True, exist_ok=True)
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise SeffiError(f"cannot write to --out {path}: {exc.strerror or exc}") from None
    return path


# -- rollouts ---------------------------------------------------------------------------------------


@dataclass
class Rollout:
    """Every sample a policy drew on one task: ``K`` per input, in input-pool order.

    Attributes:
        input_ids: one per input, shape (n_inputs,).
        latents: int array, shape (n_inputs, K): the latent code of each sample.
        matches: per input, per sample, the sorted tuple of matched strategy ids.
        valid: bool array, shape (n_inputs, K).
    """

    input_ids: list[str]
    latents: np.ndarray
    matches: list[list[tuple[str, ...]]]
    valid: np.ndarray


Chooser = Callable[[int, Any, np.random.Generator], int]  # (input index, history, rng) -> latent


@dataclass
class RouterSetting:
    """What the runner needs from one task's router env (read once, then used as plain data)."""

    env: Any
    env_id: str
    task: Any
    input_ids: list[str]
    strategies: tuple[str, ...]
    n_latents: int
    prior: np.ndarray  # float, shape (Z,)
    extras: dict[str, Any] = field(default_factory=dict)


def sample_input(
    setting: RouterSetting,
    index: int,
    budget: int,
    choose: Chooser,
    feats: HistoryFeatures,
    rng: np.random.Generator,
    on_info: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Episode, list[int], list[tuple[str, ...]], list[bool]]:
    """Spend ``budget`` samples of one policy on input ``index`` (each sample is a one-step episode).

    Returns:
        The learner's episode (features, actions, novelty rewards), and per sample the latent, the
        matched strategies and validity.
    """
    env = setting.env
    input_id = setting.input_ids[index]
    history = feats.new_history()
    episode = Episode()
    latents: list[int] = []
    matches: list[tuple[str, ...]] = []
    valid: list[bool] = []
    for _ in range(budget):
        env.reset(options={"input_id": input_id})
        phi = feats(history, budget)
        z = int(choose(index, history, rng) if choose is not None else 0)
        _obs, _reward, _term, _trunc, info = env.step(z)
        m = tuple(sorted(info["strategy_matches"]))
        episode.add(phi, z, feats.record(history, z, m))
        latents.append(z)
        matches.append(m)
        valid.append(bool(info.get("valid", True)))
        if on_info is not None:
            on_info(info)
    return episode, latents, matches, valid


def evaluate(
    setting: RouterSetting, budget: int, choose: Chooser, feats: HistoryFeatures, seed: np.random.SeedSequence
) -> Rollout:
    """Budget ``K`` on every input of the pool with fresh histories; one spawned stream per input."""
    lat, mat, val = [], [], []
    for i, rng in enumerate(np.random.default_rng(s) for s in spawn(seed, len(setting.input_ids))):
        _ep, z, m, v = sample_input(setting, i, budget, choose, feats, rng)
        lat.append(z)
        mat.append(m)
        val.append(v)
    return Rollout(list(setting.input_ids), np.asarray(lat, dtype=np.int64), mat, np.asarray(val, dtype=bool))


# -- the experiment -----------------------------------------------------------------------------------


@dataclass
class RunResult:
    """What :func:`run_experiment` produced."""

    out: Path
    report: Any
    files: dict[str, Path]
    seconds: float
    sync_hint: str | None = None
    table: str = ""


def run_experiment(config: RunConfig, *, console: Any = None) -> RunResult:
    """Run the default experiment described by ``config`` and write the run folder.

    Raises:
        SeffiError: An unknown task, an unwritable ``--out``, a missing W&B login in online mode.
    """
    from rich.console import Console

    from seffi.report.wandb_run import SafeWandbRun

    start = time.perf_counter()
    console = console or Console(stderr=True)
    SafeWandbRun.check_login(config.wandb)  # before any work: online mode without a login is fatal
    out = prepare_out(config.out)
    pool_root, run_root = spawn(config.seed, 2)  # input pools and policies get independent streams
    n = len(config.tasks)
    settings = [make_setting(t, config, s) for t, s in zip(config.tasks, spawn(pool_root, n), strict=True)]
    wandb_run = SafeWandbRun(
        mode=config.wandb, project=config.wandb_project, config=config.public_dict(), job_type="seffi-run"
    )
    comparisons = []
    task_seeds = spawn(run_root, n)
    with _progress(console, config.progress) as progress:
        for setting, seed in zip(settings, task_seeds, strict=True):
            comparisons.append(run_task(setting, config, seed, wandb_run, progress, out))
    report = build_report(config, comparisons)
    files = write_run(out, report)
    log_final(wandb_run, report, files)
    hint = wandb_run.sync_hint
    wandb_run.finish()
    seconds = time.perf_counter() - start
    table = summary_table(report)
    console.print(table)
    console.print(f"run folder: {out}  ({seconds:.1f} s)")
    if hint:
        console.print(f"W&B offline run saved; upload it with: {hint}")
    return RunResult(out, report, files, seconds, hint, table)


def router_env_id(task_name: str) -> str:
    """``sort_swaps`` -> ``seffi/SortSwapsRouter-v0``."""
    return "seffi/" + "".join(part.capitalize() for part in task_name.split("_")) + "Router-v0"


def make_setting(task_name: str, config: RunConfig, seed: np.random.SeedSequence) -> RouterSetting:
    """Build one task's router env (its input pool is drawn from ``seed``) and read what the run needs.

    Raises:
        SeffiError: The task has no router env, or the env rejects the settings.
    """
    import gymnasium as gym

    import seffi.envs  # noqa: F401  (registers the seffi/* ids)

    env_id = router_env_id(task_name)
    if env_id not in gym.registry:
        raise SeffiError(f"task {task_name!r} has no router env ({env_id} is not registered)")
    task_config = {"skew": config.skew, **config.task_options.get(task_name, {})}
    kwargs: dict[str, Any] = {
        "task_config": task_config,
        "n_inputs": config.n_inputs,
        "input_seed": int(seed.generate_state(1)[0]),
        "budget": config.budget,
        "reward": "novel",
    }
    if config.n_latents is not None:
        kwargs["n_latents"] = config.n_latents
    env = gym.make(env_id, **kwargs).unwrapped
    task = env.task
    n_latents = int(env.action_space.n)
    return RouterSetting(
        env=env,
        env_id=env_id,
        task=task,
        input_ids=list(env.input_ids),
        strategies=tuple(task.strategies()),
        n_latents=n_latents,
        prior=np.full(n_latents, 1.0 / n_latents),
    )


def _progress(console: Any, enabled: bool) -> Any:
    """A rich progress display (one bar per task) — or a silent stand-in with the same methods."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not enabled,
        transient=False,
    )


def train_router(
    setting: RouterSetting,
    config: RunConfig,
    feats: HistoryFeatures,
    seed: np.random.SeedSequence,
    on_info: Callable[[dict[str, Any]], None] | None = None,
    on_round: Callable[[int, float], None] | None = None,
) -> ReinforceRouter:
    """Train the learned router with the novelty reward: ``rounds`` passes of budget K over the pool.

    Args:
        setting: The task's router env.
        config: Run settings (``budget`` and ``learner``).
        feats: The history featuriser.
        seed: Stream of this training (router init, sampling and input order).
        on_info: Called with every final-step info (the streaming coverage monitor hangs here).
        on_round: Called after each pass with (round index, mean novelty return per input).
    """
    lc = config.learner
    init_seed, sample_seed = spawn(seed, 2)
    router = ReinforceRouter(
        setting.n_latents,
        feats.size,
        lr=lc.lr,
        gamma=lc.gamma,
        baseline_decay=lc.baseline_decay,
        prior=setting.prior,
        seed=init_seed,
    )
    rng = np.random.default_rng(sample_seed)
    n = len(setting.input_ids)

    def choose(_i: int, history: Any, r: np.random.Generator) -> int:
        return router.act(feats(history, config.budget), r)

    for round_index in range(lc.rounds):
        order = rng.permutation(n)
        returns = []
        for start in range(0, n, lc.batch_inputs):
            batch = [
                sample_input(setting, int(i), config.budget, choose, feats, rng, on_info)[0]
                for i in order[start : start + lc.batch_inputs]
            ]
            returns.append(router.update(batch) * len(batch))
        if on_round is not None:
            on_round(round_index, float(sum(returns) / n))
    return router


def latent_curve(rollout: Rollout, n_latents: int, label: str) -> Any:
    """Latent-code coverage (fraction of the Z codes tried by k, mean over inputs): a diagnostic."""
    from seffi.report.schema import LatentCurve

    n, budget = rollout.latents.shape
    tried = np.zeros((n, n_latents), dtype=bool)
    cov = np.zeros(budget)
    for k in range(budget):
        tried[np.arange(n), rollout.latents[:, k]] = True
        cov[k] = tried.sum(axis=1).mean() / n_latents
    return LatentCurve(label=label, k=list(range(1, budget + 1)), coverage=cov.tolist(), num_codes=n_latents)


def barcode(rollout: Rollout, strategies: Sequence[str]) -> Any:
    """Strategy per (input, sample): the first *new* match of a sample, else its first match, else -1."""
    from seffi.report.schema import Barcode

    index = {s: j for j, s in enumerate(strategies)}
    matrix = []
    for row in rollout.matches:
        seen: set[str] = set()
        cells = []
        for m in row:
            new = [s for s in m if s not in seen]
            pick = new[0] if new else (m[0] if m else None)
            cells.append(index[pick] if pick is not None else -1)
            seen.update(m)
        matrix.append(cells)
    return Barcode(strategies=list(strategies), input_ids=list(rollout.input_ids), matrix=matrix)


def _curve_set(curves: Any, label: str, role: str, method: str) -> Any:
    from seffi.report.schema import CurveSet

    return CurveSet.from_curves(curves, label=label, role=role, method=method)


def _gain(policy: Any, iid: Any, oracle: Any) -> Any:
    from seffi.report.schema import Gain

    g = policy.gain(iid, oracle)
    return Gain(value=g.value, lo=g.lo, hi=g.hi, reason=g.reason if g.value is None else None)


def measure(rollout: Rollout, strategies: Sequence[str], budget: int, config: RunConfig, seed: Any) -> Any:
    """Curves of a policy from its rollout, through a :class:`~seffi.coverage.CoverageTracker`."""
    from seffi.coverage import CoverageTracker

    tracker = CoverageTracker(strategies=tuple(strategies))
    for input_id, row, valid in zip(rollout.input_ids, rollout.matches, rollout.valid, strict=True):
        for m, v in zip(row, valid, strict=True):
            tracker.update(input_id, m, valid=bool(v), stream=0)
    curves = tracker.curves(budget, n_boot=config.bootstrap, ci_level=config.ci, seed=seed)
    return tracker, curves


def baselines(setting: RouterSetting, budget: int) -> tuple[Any, Any]:
    """The exact iid baseline (router prior through the hidden generator) and the exact oracle."""
    from seffi.coverage import IidBaseline, OracleBaseline

    env = setting.env
    iid = IidBaseline.from_match_distribution(
        {i: env.base_match_distribution(i) for i in setting.input_ids}, strategies=setting.strategies
    ).curves(budget)
    oracle = OracleBaseline(
        {i: env.reference_match_sets(i) for i in setting.input_ids}, strategies=setting.strategies
    ).curves(budget)
    return iid, oracle


def run_task(
    setting: RouterSetting,
    config: RunConfig,
    seed: np.random.SeedSequence,
    wandb_run: Any,
    progress: Any,
    out: Path,
) -> Any:
    """The three policies on one task; returns its :class:`~seffi.report.schema.Comparison`."""
    from seffi.report.schema import Comparison, PolicyResult

    name = setting.task.name
    budget = config.budget
    iid_seed, train_seed, eval_seed, boot_seed = spawn(seed, 4)
    feats = HistoryFeatures(setting.n_latents, setting.strategies)
    bar = progress.add_task(name, total=config.learner.rounds + 2, status="iid sampler")

    def base_choice(i: int, _history: Any, rng: np.random.Generator) -> int:
        return int(setting.env.sample_base_action(setting.input_ids[i], rng))

    iid_rollout = evaluate(setting, budget, base_choice, feats, iid_seed)
    progress.update(bar, advance=1, status="training learned router")

    monitor = make_monitor(setting, config, wandb_run, scope=f"{name}/learned_train")

    def on_round(r: int, ret: float) -> None:
        auc = monitor.end_pass()
        progress.update(bar, advance=1, status=f"pass {r + 1}: AUC@K {auc:.3f}, {ret:.2f} new / input")

    router = train_router(setting, config, feats, train_seed, on_info=monitor.on_info, on_round=on_round)

    def learned_choice(_i: int, history: Any, rng: np.random.Generator) -> int:
        return router.act(feats(history, budget), rng)

    learned_rollout = evaluate(setting, budget, learned_choice, feats, eval_seed)
    progress.update(bar, advance=1, status="measuring")

    iid_exact, oracle = baselines(setting, budget)
    boot = [int(s.generate_state(1)[0]) for s in spawn(boot_seed, 2)]
    learned_tracker, learned = measure(learned_rollout, setting.strategies, budget, config, boot[0])
    iid_tracker, iid_measured = measure(iid_rollout, setting.strategies, budget, config, boot[1])
    save_state(out, name, {"learned": learned_tracker, "iid_sampler": iid_tracker}, router)
    policies = [
        PolicyResult(
            curves=_curve_set(learned, "learned", "policy", "empirical"),
            gain=_gain(learned, iid_exact, oracle),
            barcode=barcode(learned_rollout, setting.strategies),
            latent=latent_curve(learned_rollout, setting.n_latents, "learned"),
        ),
        PolicyResult(
            curves=_curve_set(iid_measured, "iid sampler", "policy", "empirical"),
            gain=_gain(iid_measured, iid_exact, oracle),
            barcode=barcode(iid_rollout, setting.strategies),
            latent=latent_curve(iid_rollout, setting.n_latents, "iid sampler"),
        ),
    ]
    return Comparison(
        task=name,
        env_id=setting.env_id,
        budget=budget,
        n_inputs=len(setting.input_ids),
        num_strategies=len(setting.strategies),
        iid=_curve_set(iid_exact, "iid (exact)", "iid", "exact"),
        oracle=_curve_set(oracle, "oracle", "oracle", "exact"),
        policies=policies,
        notes=[
            f"learned router: {config.learner.rounds} training passes over {len(setting.input_ids)} inputs "
            f"with the novelty reward, then evaluated fresh with budget {budget}",
            "'iid sampler' is the base sampler measured on the env; it should agree with 'iid (exact)'",
        ],
    )


def save_state(out: Path, task: str, trackers: dict[str, Any], router: ReinforceRouter) -> None:
    """Tracker states and the router's weights under ``out/tracker_state/`` (canonical JSON)."""
    state = out / STATE_DIR
    try:
        for label, tracker in trackers.items():
            (state / f"{task}.{label.replace(' ', '_')}.json").write_text(
                json.dumps(_jsonable(tracker.state_dict()), sort_keys=True), encoding="utf-8"
            )
        (state / f"{task}.router.json").write_text(json.dumps(router.state_dict(), sort_keys=True), "utf-8")
    except OSError as exc:
        raise SeffiError(f"cannot write tracker state to {state}: {exc.strerror or exc}") from None


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


class TrainingMonitor:
    """Streams the training episodes into a coverage tracker and logs them to W&B after each pass.

    Each training pass gives every input ``K`` fresh samples, so the curves of pass r are the
    exploration curves of the router as it was during pass r; logged at ``seffi/step`` = episodes so
    far, they show exploration efficiency improving while the router trains.
    """

    def __init__(self, setting: RouterSetting, config: RunConfig, wandb_run: Any, scope: str) -> None:
        self.setting, self.config, self.wandb_run, self.scope = setting, config, wandb_run, scope
        self.episodes = 0
        self.history: list[tuple[int, float]] = []  # (episodes so far, AUC of that pass)
        self._new_pass()

    def _new_pass(self) -> None:
        from seffi.coverage import CoverageTracker

        self.tracker = CoverageTracker(strategies=self.setting.strategies)

    def on_info(self, info: dict[str, Any]) -> None:
        """Feed one step's info (episode ends are recognised by the final-step keys)."""
        from seffi.callbacks.core import episode_ends

        for end in episode_ends(info, env_name=self.setting.env_id):
            self.tracker.update(end.input_id, end.matches, valid=end.valid, stream=0)
            self.episodes += 1

    def end_pass(self) -> float:
        """Close the current pass: log its curves at the current episode count; return its AUC."""
        from seffi.report.keys import scalars_from_curves

        curves = self.tracker.curves(self.config.budget, n_boot=0)  # intervals only at the end
        self.history.append((self.episodes, float(curves.auc)))
        data = _curve_set(curves, "learned (training)", "policy", "empirical")
        self.wandb_run.log(
            scalars_from_curves(data, episodes=self.episodes, scope=self.scope), step=self.episodes
        )
        self._new_pass()
        return float(curves.auc)


def make_monitor(setting: RouterSetting, config: RunConfig, wandb_run: Any, scope: str) -> Any:
    """The streaming coverage monitor attached to the learned router's training episodes."""
    return TrainingMonitor(setting, config, wandb_run, scope)


# -- the report -------------------------------------------------------------------------------------


def build_report(config: RunConfig, comparisons: list[Any]) -> Any:
    """The run's :class:`~seffi.report.schema.Report` (no timestamps, no absolute paths)."""
    from seffi import __version__
    from seffi.report.schema import Report

    return Report(
        title="seffi run: learned exploration router vs iid vs oracle",
        seed=config.seed,
        config=config.public_dict(),
        meta={"seffi_version": __version__, "command": "seffi run"},
        comparisons=comparisons,
    )


def write_run(out: Path, report: Any) -> dict[str, Path]:
    """report.json, report.md and the plots into ``out``."""
    from seffi.report.schema import write_report

    return write_report(out, report)


def log_final(wandb_run: Any, report: Any, files: dict[str, Path]) -> None:
    """Final numbers to ``run.summary``, the plots as images, report.json + tracker state as an artifact."""
    from seffi.report.keys import report_scalars

    if not wandb_run.enabled:
        return
    wandb_run.update_summary(report_scalars(report))
    step = wandb_run._last_step or 0
    for name, path in files.items():
        if path.suffix == ".png":
            wandb_run.log_image(f"seffi/plots/{name}", path, step=step)
    state = sorted((files["report.json"].parent / STATE_DIR).glob("*.json"))
    wandb_run.log_artifact("seffi-run", "seffi-report", [files["report.json"], *state])


def _cell(value: float | None, lo: float | None = None, hi: float | None = None) -> str:
    if value is None:
        return "—"
    if lo is None or hi is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"


def summary_rows(report: Any) -> list[list[str]]:
    """Summary rows: task, policy, AUC@K [CI], gain vs iid [CI], T(0.8) median, F(K), valid rate."""
    rows = []
    for comp in report.comparisons:
        entries = [(p.curves, p.gain) for p in comp.policies]
        entries += [(c, None) for c in (comp.iid, comp.oracle) if c is not None]
        for curves, gain in entries:
            ttc = curves.ttc(0.8)
            if gain is None:
                g = "—"
            elif gain.value is None:
                g = f"undefined ({gain.reason})"
            else:
                g = _cell(gain.value, gain.lo, gain.hi)
            full = curves.full_coverage[-1] if curves.full_coverage else None
            rows.append(
                [
                    comp.task,
                    curves.label,
                    _cell(curves.auc, curves.auc_lo, curves.auc_hi),
                    g,
                    "censored"
                    if ttc is not None and ttc.median is None
                    else _cell(ttc.median if ttc else None),
                    _cell(full),
                    _cell(curves.valid_rate),
                ]
            )
    return rows


SUMMARY_HEADER = (
    "task",
    "policy",
    "AUC@K [95% CI]",
    "gain vs iid [CI]",
    "T(0.8) median",
    "F(K)",
    "valid rate",
)


def summary_table(report: Any) -> Any:
    """The summary as a rich Table (printable, and ``str``-able through a console)."""
    from rich.table import Table

    budget = report.comparisons[0].budget if report.comparisons else "?"
    table = Table(
        title=f"seffi run — coverage at budget K={budget} (higher is better; gain: 0 = iid, 1 = oracle)"
    )
    for h in SUMMARY_HEADER:
        table.add_column(h, justify="left" if h in ("task", "policy") else "right")
    for row in summary_rows(report):
        table.add_row(*row)
    return table


def render_run(run_dir: Path) -> list[Path]:
    """``seffi report DIR``: re-render report.md and the plots from DIR/report.json.

    Raises:
        SeffiError: DIR is missing, holds no valid report.json, or is not writable.
    """
    from seffi.report.schema import load_report, write_report

    report = load_report(run_dir)
    files = write_report(run_dir, report)
    return sorted(p for name, p in files.items() if name != "report.json")


def compare_runs(dirs: list[Path], out: Path | None = None) -> tuple[str, list[Path]]:
    """``seffi compare DIR...`` (see :mod:`seffi.experiment.compare`)."""
    from seffi.experiment.compare import compare_runs as _compare

    return _compare(dirs, out)

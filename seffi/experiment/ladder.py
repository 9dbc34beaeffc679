"""``seffi ladder``: the exploration ladder's rungs 1-3 side by side on one task, pool and budget K.

* **Rung 1** — the router env ``seffi/<Name>Router-v0`` (hand-written latent -> strategy generator,
  exact iid law), run as ``seffi run`` runs it (`seffi.experiment.runner.Runner`).
* **Rung 2** — learned generators (`seffi.models`): a base LM trained by SFT on the task's
  training rows and a latent mixture learned by hard EM without labels, behind
  ``seffi/<Name>LatentLM-v0``. The iid curves are estimated from the base LM's own samples
  (``IidBaseline.from_samples``, ``iid_samples`` per input, default 4 K).
* **Rung 3** — GRPO (TRL) on the rung-2 base LM with the validity reward, the group-diversity reward
  and a learning-rate-0 sanity run (`seffi.experiment.ladder_rung3`); iid = the reference
  model's own samples; valid@k and C(k) up to n on held-out prompts with the crossover k.

Each rung measures the untrained router, a round-robin over latents and the trained REINFORCE router
against iid and the oracle on the same pool; the run folder's files are described in docs/ladder.md.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from seffi._convert import jsonable
from seffi._io import write_atomic
from seffi._seeding import spawn
from seffi.callbacks import CoverageMonitor
from seffi.coverage import OracleBaseline
from seffi.envs import env_id
from seffi.errors import SeffiError
from seffi.experiment.config import LearnerConfig, RunConfig, WandbMode
from seffi.experiment.ladder_report import (
    append_markdown,
    append_rung3_markdown,
    build_report,
    ladder_plots,
    ladder_table,
    log_rung3_wandb,
    measurement_table,
    rung3_plots,
    rung3_summary,
    scalars,
)
from seffi.experiment.ladder_rung3 import GRPOSettings, require_trl, run_rung3
from seffi.experiment.learner import ReinforceRouter, RouterFeatures
from seffi.experiment.runner import (
    Runner,
    _progress,
    check_envs,
    env_kwargs,
    exact_baselines,
    prepare_out,
    rollout,
)
from seffi.experiment.runner import make_vec as router_vec
from seffi.models import require_lm
from seffi.models.cache import train_ladder_models, training_input_ids
from seffi.models.config import LMConfig
from seffi.report.sinks import ForwardingSink, default_sinks
from seffi.report.wandb_run import SafeWandbRun
from seffi.tasks import get_task

#: The default task: the one task whose base LM met both targets (valid rate within 0.1 of the rows',
#: strategy TV <= 0.1) in the measurements, with the highest NMI ceiling among those (README table).
DEFAULT_TASK = "grid_routes"
#: Settings rung 1 (``seffi run``) takes from the ladder unchanged.
RUNG1_FIELDS = (
    "seed",
    "n_inputs",
    "budget",
    "eval_runs",
    "learner",
    "bootstrap",
    "ci",
    "wandb",
    "wandb_project",
    "progress",
)
DEFAULT_TASK_CONFIG: dict[str, dict[str, Any]] = {"sort_swaps": {"min_length": 3, "max_length": 4}}

#: Online hard EM on 4000 rows, 8 epochs, one fold, codes capped at twice the mean share (measured best),
#: the latent prior learned per input (``MixtureConfig.prior``), then 3 settling epochs with the final
#: assignments (cosine decay): of 0, 1, 3, 5 and 8, 3 and 5 gave the mixture valid rate closest to the
#: base LM's over three seeds, and 3 the lower held-out NLL of the two (README).
_MIXTURE: dict[str, Any] = {
    "mode": "online",
    "folds": 1,
    "rounds": 8,
    "epochs_per_round": 1,
    "final_epochs": 3,
    "max_rows": 4000,
    "code_init_std": 0.02,
    "lr": 0.001,
    "capacity": 2.0,
    "prior": "input",
}
#: The rung-2 models per task ("*": any other task); the measured configurations.
DEFAULT_LM: dict[str, dict[str, Any]] = {
    "*": {"n_train_inputs": 3000, "rows_per_input": 4, "epochs": 10, "mixture": _MIXTURE},
    "sort_swaps": {"n_train_inputs": 4000, "rows_per_input": 4, "epochs": 10, "mixture": _MIXTURE},
    # 355 distinct inputs in all: fewer inputs, more rows each, the rest held out.
    "grid_routes": {"n_train_inputs": 280, "rows_per_input": 40, "epochs": 10, "mixture": _MIXTURE},
}

#: ``--smoke``: everything tiny (a 1-layer d=32 model on 100 inputs), for a < 60 s end-to-end check.
SMOKE: dict[str, Any] = {
    "smoke": True,
    "n_inputs": 4,
    "budget": 4,
    "eval_runs": 2,
    "bootstrap": 50,
    "learner": {"rounds": 3, "train_runs": 2},
    "lm": {
        "n_train_inputs": 100,
        "rows_per_input": 2,
        "d_model": 32,
        "n_layer": 1,
        "n_head": 2,
        "epochs": 2,
        "batch_size": 32,
        "lr": 3e-3,
        "mixture": {"rounds": 1, "epochs_per_round": 0.5, "final_epochs": 0.5, "lr": 3e-3, "prior": "input"},
    },
    "measure_inputs": 8,
    "measure_samples": 4,
    "grpo": {
        "steps": 2,
        "prompts_per_step": 2,
        "pool_runs": 2,
        "iid_samples": 8,
        "eval_inputs": 2,
        "eval_samples": 8,
        "eval_every": 2,
    },
}


class LadderConfig(BaseModel):
    """Settings of ``seffi ladder``.

    Attributes:
        task: The task (both rungs).
        task_config: Its config overrides (``None``: the ladder default for the task).
        seed: Root seed of the pool, the iid samples, router training and the held-out measurements
            (the rung-2 models do not depend on it).
        model_seed: Seed of model *training*: the base LM's initialisation and shuffling
            (``LMConfig.seed``) and the mixture's code embeddings, row subset, shuffling and revivals
            (``MixtureConfig.seed``); rung 3's GRPO runs derive their seed from it. Each model seed is
            its own pair of cached models. The training rows (``LMConfig.data_seed``) stay the task's:
            they are the data, not training noise. ``lm`` may not set another seed.
        n_inputs: Pool size (the same pool on both rungs).
        budget: K.
        eval_runs: Runs per input when measuring each policy.
        iid_samples: Base-LM samples per input for the rung-2 iid baseline (``None``: 4 K).
        lm: `seffi.models.LMConfig` fields of the rung-2 models, over the task's ``DEFAULT_LM``
            entry; a ``mixture`` dict is merged into the default mixture's fields (``None``: the defaults).
        cache_dir: Model cache (``None``: ``$SEFFI_CACHE`` or ``~/.cache/seffi/models``).
        retrain: ``None``: use cached models whose digests check out, retrain damaged ones (one
            warning each); ``True``: retrain every cached model; ``False``: refuse a damaged cache.
        learner: REINFORCE router settings (both rungs).
        bootstrap: Bootstrap replicates per CI.
        ci: CI level.
        measure_inputs: Held-out inputs for the model measurements (``ladder.json``).
        measure_samples: Base-LM samples per held-out input for those measurements.
        grpo: Rung 3's GRPO runs (`GRPOSettings`).
        wandb: W&B mode.
        wandb_project: W&B project.
        out: Run folder (``None``: ``runs/<timestamp>``).
        progress: Live progress display.
        smoke: A ``--smoke`` run: its report, plots and console say the numbers are not results.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str = DEFAULT_TASK
    task_config: dict[str, Any] | None = None
    seed: int = Field(0, ge=0)
    model_seed: int = Field(0, ge=0)
    n_inputs: int = Field(32, ge=1, le=10_000)
    budget: int = Field(8, ge=1, le=1024)
    eval_runs: int = Field(4, ge=1, le=1024)
    iid_samples: int | None = Field(None, ge=1, le=100_000)
    lm: dict[str, Any] | None = None
    cache_dir: Path | None = None
    retrain: bool | None = None
    learner: LearnerConfig = LearnerConfig(rounds=30, train_runs=2)
    bootstrap: int = Field(1000, ge=10, le=100_000)
    ci: float = Field(0.95, gt=0.5, lt=1.0)
    measure_inputs: int = Field(64, ge=1, le=10_000)
    measure_samples: int = Field(16, ge=1, le=10_000)
    grpo: GRPOSettings = GRPOSettings()
    wandb: WandbMode = "offline"
    wandb_project: str = "seffi"
    out: Path | None = None
    progress: bool = True
    smoke: bool = False

    @model_validator(mode="after")
    def _one_model_seed(self) -> LadderConfig:
        lm = self.lm or {}
        mixture = lm.get("mixture")
        given = {"lm.seed": lm.get("seed")}
        if isinstance(mixture, dict):
            given["lm.mixture.seed"] = mixture.get("seed")
        for name, value in given.items():
            if value is not None and value != self.model_seed:
                raise ValueError(
                    f"{name} = {value!r} differs from model_seed = {self.model_seed}; set the seed of model "
                    "training with model_seed (--model-seed) alone"
                )
        return self

    def resolved_task_config(self) -> dict[str, Any]:
        """The task config both rungs use (the ladder default for the task unless given)."""
        return dict(DEFAULT_TASK_CONFIG.get(self.task, {}) if self.task_config is None else self.task_config)

    def lm_config(self) -> Any:
        """The rung-2 `seffi.models.LMConfig` (its cache key sees the task config as given)."""
        fields = merge_lm(DEFAULT_LM.get(self.task, DEFAULT_LM["*"]), self.lm or {})
        fields["seed"] = self.model_seed
        mixture = fields.get("mixture") or {}
        if isinstance(mixture, BaseModel):
            mixture = mixture.model_dump()
        fields["mixture"] = {**mixture, "seed": self.model_seed}
        return LMConfig(task=self.task, task_config=self.resolved_task_config() or None, **fields)

    def run_config(self) -> RunConfig:
        """The ``seffi run`` config of rung 1 (same task and task config, pool size, K, learner, CIs)."""
        tc = self.resolved_task_config()
        options = {k: v for k, v in tc.items() if k != "skew"}
        shared = {name: getattr(self, name) for name in RUNG1_FIELDS}
        return RunConfig(
            tasks=(self.task,),
            skew=float(tc.get("skew", 1.0)),
            task_options={self.task: options} if options else {},
            **shared,
        )

    def public_dict(self) -> dict[str, Any]:
        """JSON-ready settings that change results (no paths, no display or W&B settings)."""
        return self.model_dump(
            mode="json",
            exclude={"out", "progress", "wandb", "wandb_project", "cache_dir", "retrain", "smoke"},
        )


def merge_lm(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``LMConfig`` fields: ``overrides`` over ``defaults``, a ``mixture`` dict merged field by field.

    Args:
        defaults: The task's ``DEFAULT_LM`` entry.
        overrides: The user's fields (``LadderConfig.lm``).

    Returns:
        A new dict; ``overrides["mixture"]`` keeps every default mixture field it does not name.
    """
    fields = {**defaults, **overrides}
    base, extra = defaults.get("mixture"), overrides.get("mixture")
    if isinstance(base, dict) and isinstance(extra, dict):
        fields["mixture"] = {**base, **extra}
    return fields


def smoke_config(**overrides: Any) -> LadderConfig:
    """The ``--smoke`` config (tiny everything), with ``overrides``."""
    return LadderConfig(**{**SMOKE, **overrides})


# -- policies -------------------------------------------------------------------------------------------


def round_robin_act(obs_layout: dict[str, slice], budget: int) -> Any:
    """A no-learning explorer: the k-th sample of a run takes the k-th latent in prior order (cycling)."""
    prior_slice, used_slice = obs_layout["prior"], obs_layout["used"]

    def act(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        prior = obs[:, prior_slice]
        order = np.argsort(-prior, axis=1, kind="stable")
        k = np.rint(obs[:, used_slice][:, 0] * budget).astype(np.int64)
        return order[np.arange(len(obs)), k % prior.shape[1]]

    return act


def router_act(router: Any, feats: Any) -> Any:
    """``(obs, rng) -> latents`` of a `ReinforceRouter` (zero weights: z from the prior)."""

    def act(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return router.act(*feats(obs), rng)

    return act


class FixedCurves:
    """Precomputed baseline curves in the shape the monitor wants (an object with ``curves(K)``)."""

    def __init__(self, curves: Any) -> None:
        self._curves = curves

    def curves(self, K: int, **_: Any) -> Any:
        """The curves (computed for K; another K is refused; options such as ``rarity`` are fixed)."""
        if K != self._curves.K:
            raise SeffiError(f"baseline computed for K={self._curves.K}, asked for K={K}")
        return self._curves


# -- one rung ---------------------------------------------------------------------------------------------


@dataclass
class RungResult:
    """A rung's comparison, tracker states and trained router."""

    comparison: Any
    state: dict[str, Any]
    router: dict[str, Any]


def run_rung(
    rung: int,
    runner: Any,
    make_env: Any,
    env_id: str,
    baselines: Any,
    seed: np.random.SeedSequence,
    notes: list[str],
) -> RungResult:
    """Train the REINFORCE router on ``make_env``'s env, then measure untrained, round-robin and trained.

    Args:
        rung: 1 or 2 (tags the comparison).
        runner: A `seffi.experiment.runner.Runner` (its ``train``, ``compare`` and step count).
        make_env: ``make_env(num_envs, **kwargs)`` -> native vector env of this rung.
        env_id: The env id named in the comparison.
        baselines: ``baselines(env) -> (iid curves, oracle curves, rarity law, iid_source)``.
        seed: This rung's seed.
        notes: Notes for the comparison.
    """
    cfg, lc = runner.config, runner.config.learner
    n, task = cfg.n_inputs, cfg.tasks[0]
    train_seed, untrained_seed, rr_seed, learned_seed, boot_seed = spawn(seed, 5)
    slug = env_id.rsplit("/", 1)[-1]
    bar = runner.progress.add_task(f"rung {rung}", total=lc.rounds + 2, status="baselines")
    train_env = make_env(n * lc.train_runs, reward="novel")
    u = train_env.unwrapped
    strategies = tuple(u.strategies)
    iid, oracle, runner.rarity, iid_source = baselines(train_env)
    feats = RouterFeatures(u.obs_layout, use_input=lc.input_features)
    router = ReinforceRouter(
        u.n_latents, feats.size, lr=lc.lr, gamma=lc.gamma, baseline_decay=lc.baseline_decay
    )
    monitor = CoverageMonitor(
        cfg.budget,
        env=train_env,
        iid=FixedCurves(iid),
        oracle=FixedCurves(oracle),
        sinks=ForwardingSink(runner.sinks),
        scope=f"{slug}/train",
        label="trained router (training stream)",
        log_every=cfg.log_every * n * lc.train_runs * cfg.budget,
        n_boot=0,
        seed=int(boot_seed.generate_state(1)[0]),
    )
    runner.progress.update(bar, status="training")
    runner.train(router, feats, train_env, monitor, train_seed, bar)
    if monitor.last_step != runner.step:
        monitor.log(runner.step)
    runner.progress.update(bar, advance=1, status="measuring")
    eval_env = make_env(n * cfg.eval_runs)
    untrained = ReinforceRouter(u.n_latents, feats.size)  # zero weights: z from the latent prior
    runs = {
        "trained router": rollout(eval_env, router_act(router, feats), cfg.eval_runs, learned_seed),
        "untrained router": rollout(eval_env, router_act(untrained, feats), cfg.eval_runs, untrained_seed),
        "round-robin latents": rollout(
            eval_env, round_robin_act(u.obs_layout, cfg.budget), cfg.eval_runs, rr_seed
        ),
    }
    boot = int(boot_seed.generate_state(1)[0])  # one seed for every policy: paired bootstraps
    comparison = runner.compare(task, strategies, u.n_latents, runs, iid, oracle, boot, notes)
    comparison = comparison.model_copy(update={"env_id": env_id, "rung": rung, "iid_source": iid_source})
    runner.progress.update(bar, advance=1, status="done")
    state = {label: run.tracker.state_dict() for label, run in runs.items()}
    state["train"] = monitor.tracker.state_dict()
    return RungResult(comparison, state, router.state_dict())


# -- the ladder -------------------------------------------------------------------------------------------


@dataclass
class LadderResult:
    """What `run_ladder` produced."""

    out: Path
    report: Any
    measurements: dict[str, Any]
    files: dict[str, Path]
    seconds: float
    timings: dict[str, float]


def run_ladder(config: LadderConfig, *, console: Any = None, overwrite: bool = False) -> LadderResult:
    """Rungs 1-3 on one task, pool and K (see the module docstring); writes the run folder.

    Raises:
        SeffiError: A bad setting, a missing W&B login in online mode, a missing ``lm`` extra, or an
            unusable run folder — all before any training.
    """
    from rich.console import Console

    start = time.perf_counter()
    timings: dict[str, float] = {}
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    require_lm()
    if config.grpo.enabled:
        require_trl()
    run_cfg = config.run_config()
    lm_cfg = config.lm_config()
    SafeWandbRun.check_login(config.wandb)
    check_envs(run_cfg)
    out = _prepare_out(config.out, overwrite)
    sinks = default_sinks(
        out,
        wandb=config.wandb,
        plots=True,
        project=config.wandb_project,
        job_type="seffi-ladder",
        config=config.public_dict(),
    )
    task = config.task
    pool_seed, rung1_seed, rung2_seed, iid_seed, measure_seed, rung3_seed = spawn(config.seed, 6)
    input_seed = int(pool_seed.generate_state(1)[0])
    kwargs1 = env_kwargs(task, run_cfg, input_seed)
    with _progress(console, config.progress) as progress:
        runner = Runner(run_cfg, sinks, progress)

        # Rung 1: the hand-written router env, exact baselines.
        t0 = time.perf_counter()

        def rung1_baselines(env: Any) -> tuple[Any, Any, Any, str]:
            baselines = exact_baselines(env, config.budget, iid_seed)
            iid, oracle = baselines.curves(env.unwrapped.input_ids)
            law = baselines.iid_baseline
            return iid, oracle, law, "exact"

        rung1 = run_rung(
            1,
            runner,
            lambda num, **kw: router_vec(task, num, **kwargs1, **kw),
            env_id(task, "router"),
            rung1_baselines,
            rung1_seed,
            [
                "rung 1: hand-written latent -> strategy generator (router env); iid exact",
                "untrained router: z from the router prior (= the iid base model); its gain should be ~0",
            ],
        )
        timings["rung1_seconds"] = time.perf_counter() - t0

        # Rung 2: train (or load) the base LM and the mixture, then the same policies.
        t0 = time.perf_counter()
        models = _train_models(lm_cfg, config.cache_dir, progress, config.retrain)
        timings["models_seconds"] = time.perf_counter() - t0
        timings["models_cached"] = float(all(models.cached.values()))
        t0 = time.perf_counter()
        kwargs2 = {
            "model_dir": str(models.mixture_dir),
            "n_inputs": config.n_inputs,
            "input_seed": input_seed,
            "budget": config.budget,
            "iid_samples": config.iid_samples,
        }

        def rung2_baselines(env: Any) -> tuple[Any, Any, Any, str]:
            u = env.unwrapped
            iid = u.iid_baseline(seed=int(iid_seed.generate_state(1)[0]))
            refs = {x: u.reference_match_sets(x) for x in u.input_ids}
            oracle = OracleBaseline(refs, strategies=u.strategies, seed=int(iid_seed.generate_state(2)[1]))
            return iid.curves(config.budget, seed=0), oracle.curves(config.budget, rarity=iid), iid, "samples"

        overlap = len(set(_pool_ids(task, run_cfg, input_seed)) & _train_ids(lm_cfg))
        n_iid = config.iid_samples or 4 * config.budget
        rung2 = run_rung(
            2,
            runner,
            lambda num, **kw: latent_vec(task, num, **kwargs2, **kw),
            env_id(task, "latent_lm"),
            rung2_baselines,
            rung2_seed,
            [
                f"rung 2: learned generators; base LM ({models.base.n_params():,} parameters) trained by SFT "
                f"on {lm_cfg.n_train_inputs * lm_cfg.rows_per_input:,} rows, mixture of "
                f"{models.n_codes} codes by hard EM without labels",
                f"iid: estimated from {n_iid} base-LM samples per input (IidBaseline.from_samples)",
                f"{overlap} of the {config.n_inputs} pool inputs were also training inputs",
                "untrained router: z from the mixture's latent prior (its ancestral sampling); "
                "its gain should be ~0",
            ],
        )
        timings["rung2_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        measurements = _measure(models, lm_cfg, config, measure_seed)
        timings["measure_seconds"] = time.perf_counter() - t0
        rung3 = None
        if config.grpo.enabled:  # Rung 3: GRPO on the base LM, the same pool and K.
            t0 = time.perf_counter()
            pool = models.task.make_inputs(config.n_inputs, seed=input_seed)
            rung3 = run_rung3(config, runner, models, pool, rung3_seed, out)
            timings["rung3_seconds"] = time.perf_counter() - t0
    comparisons = [rung1.comparison, rung2.comparison] + ([rung3.comparison] if rung3 else [])
    report = build_report(config, comparisons, measurements)
    state = {"rung1": rung1.state, "rung2": rung2.state, **({"rung3": rung3.state} if rung3 else {})}
    if rung3 is not None:
        write_atomic(
            out / "rung3.json", json.dumps(jsonable(rung3_summary(rung3)), indent=1, allow_nan=False)
        )
    routers = {"rung1": rung1.router, "rung2": rung2.router}
    write_atomic(out / "routers.json", json.dumps(routers, sort_keys=True))
    write_atomic(
        out / "ladder.json",
        json.dumps(jsonable(measurements), indent=1, sort_keys=True, allow_nan=False),
    )
    wandb = sinks.wandb
    hint = wandb.run.sync_hint if wandb is not None else None
    local = sinks.local
    local.finish(report, state)
    files = dict(local.files)
    files.update(ladder_plots(out, report, measurements))
    append_markdown(out, measurements, timings)
    if rung3 is not None:
        files.update(rung3_plots(out, rung3))
        append_rung3_markdown(out, rung3, report.comparisons[-1])
    if wandb is not None:
        for name, path in sorted(files.items()):
            if path.suffix == ".png":
                wandb.run.log_image(f"seffi/plots/{name}", path, step=max(runner.step, 1))
        wandb.run.log(
            {f"seffi/ladder/{k}": v for k, v in scalars(measurements).items()}, step=max(runner.step, 1)
        )
        if rung3 is not None:
            log_rung3_wandb(wandb.run, rung3, max(runner.step, 1))
        wandb.finish(report, state)
    seconds = time.perf_counter() - start
    timings["total_seconds"] = seconds
    write_atomic(out / "timings.json", json.dumps(timings, indent=1, sort_keys=True))
    console.print(ladder_table(report))
    console.print(measurement_table(measurements))
    console.print(f"run folder: {out}  ({seconds:.1f} s)", soft_wrap=True, markup=False)
    if hint:
        console.print(f"W&B offline run saved; upload it with: {hint}", soft_wrap=True, markup=False)
    return LadderResult(out, report, measurements, files, seconds, timings)


def _prepare_out(out: Path | None, overwrite: bool) -> Path:
    return prepare_out(out, overwrite=overwrite)


def latent_vec(task: str, num_envs: int, **kwargs: Any) -> Any:
    """A vector env of ``task``'s latent-LM router env (``seffi/<Name>LatentLM-v0``), ``num_envs`` rows."""
    import gymnasium as gym

    return gym.make_vec(
        env_id(task, "latent_lm"), num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
    )


def _pool_ids(task: str, run_cfg: RunConfig, input_seed: int) -> list[str]:
    tc = {"skew": run_cfg.skew, **run_cfg.task_options.get(task, {})}
    return [x.id for x in get_task(task, **tc).make_inputs(run_cfg.n_inputs, seed=input_seed)]


def _train_ids(lm_cfg: Any) -> frozenset[str]:
    return training_input_ids(lm_cfg)


def _train_models(lm_cfg: Any, cache_dir: Path | None, progress: Any, retrain: bool | None = None) -> Any:
    """Train or load the rung-2 models with a progress bar per phase (SFT steps, EM phases)."""
    bars: dict[str, Any] = {}

    def hook(phase: str, done: int, total: int) -> None:
        name = "SFT" if phase == "SFT" else "hard EM"
        if name not in bars:
            bars[name] = progress.add_task(f"rung 2 {name}", total=total, status="")
        progress.update(bars[name], completed=done, status=phase)

    return train_ladder_models(lm_cfg, cache_dir, hook=hook, retrain=retrain)


def _measure(models: Any, lm_cfg: Any, config: LadderConfig, seed: np.random.SeedSequence) -> dict[str, Any]:
    """``measure_models`` on held-out inputs (never training inputs), plus the settings used."""
    from seffi.models.evaluate import measure_models

    train = training_input_ids(lm_cfg, models.task)
    want = config.measure_inputs * 4 + 64
    while True:  # small input spaces (hanoi: 18 inputs) cannot give that many distinct draws
        try:
            drawn = models.task.make_inputs(want, seed=int(seed.generate_state(1)[0]))
            break
        except SeffiError:
            if want <= 8:
                raise
            want //= 2
    held_out = [x for x in drawn if x.id not in train][: config.measure_inputs]
    if not held_out:
        raise SeffiError(
            f"{models.task.name}: every input drawn is a training input; lower lm.n_train_inputs "
            "to keep some held out"
        )
    out = measure_models(
        models, held_out, n_base=config.measure_samples, per_code=4, seed=int(seed.generate_state(2)[1])
    )
    out["lm_config"] = lm_cfg.model_dump(mode="json")
    out["cache_keys"] = {"base": lm_cfg.base_key(), "mixture": lm_cfg.mixture_key()}
    return out

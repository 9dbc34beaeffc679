"""``seffi bench exploration``: which RL exploration methods keep or widen strategy coverage.

Rung 3 of the ladder as a benchmark. For each model-training seed (SFT + EM of rung 2's models, then
every GRPO run) the bench trains every method of `seffi.experiment.bench_methods` from the same
base LM on the same pool prompts with the same seed, steps and K, and measures each one the same way:
* **pool gain vs the base's own iid** [95 % CI]: ``pool_runs`` fresh runs of K per pool prompt against
  the base LM's own samples (``IidBaseline.from_samples``, 16 K per prompt, drawn once per seed), under
  two labelers: the task's validator and a classifier (`ClassifierLabeler`)
  trained on base samples of other prompts labelled by the validator, whose agreement with the
  validator (confusion, Cohen's kappa) is measured on the base's held-out samples;
* **held-out** valid@1, C(K) and C(n), gain vs the base [95 % CI], the crossover k and the share of
  prompts solvable within n samples (`seffi.models.passk`), every ``eval_every`` steps;
* **surface diversity** of each group of K (distinct-1..4, pairwise edit distance, distinct rate;
  `seffi.models.surface`) at every evaluation, and its rank correlation with C(K) and with the
  gain across methods and checkpoints (`seffi.experiment.bench_report`).

Writes ``bench.json`` (config, one row per method and seed, the per-step records, correlations,
labeler agreement), ``bench.md``, ``bench.png``, ``records/seed-<s>/<method>.json`` (each method's
labelled pool and final held-out samples) and an offline W&B run with one ``line_series`` per method.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from seffi._seeding import seed_of, spawn
from seffi.callbacks import trl_model
from seffi.coverage import IidBaseline, OracleBaseline
from seffi.errors import SeffiError
from seffi.experiment.bench_methods import (
    METHOD_SLUGS,
    BenchEval,
    Sampler,
    SeedContext,
    bench_methods,
    grpo_args,
    run_method,
)
from seffi.experiment.bench_report import combine_summaries, finish, publish
from seffi.experiment.bench_sampling import train_router
from seffi.experiment.config import WandbMode
from seffi.experiment.ladder import LadderConfig
from seffi.experiment.ladder_rung3 import GRPOSettings, held_out_inputs, require_trl
from seffi.experiment.runner import _progress, default_out
from seffi.labelers import TaskLabeler
from seffi.models import grpo, require_lm
from seffi.models.cache import build_task, cached_base_folder, default_cache_dir, train_ladder_models
from seffi.models.classifier import ClassifierLabeler, agreement
from seffi.report.run_folder import prepare_run_folder
from seffi.report.wandb_run import SafeWandbRun

#: Task configs of the bench's settings. ``default``: grid_routes as the ladder trains it (3-4 cells a
#: side, up to 3 walls); ``hard``: bigger grids with more walls, where the base LM leaves some held-out
#: prompts unsolved within n = 64 samples (so a valid@k crossover can appear or not).
SETTINGS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "hard": {"min_size": 5, "max_size": 6, "max_walls": 8},
}
#: `LMConfig` fields of each setting over the ladder's defaults (`BenchConfig.lm` goes over these). With
#: the ladder's 280 training grids the base LM solved every held-out 5-6 grid within 8 samples (its
#: errors are slips, not prompts it cannot do); 60 training grids leave held-out grids it never solves.
SETTING_LM: dict[str, dict[str, Any]] = {"default": {}, "hard": {"n_train_inputs": 60}}

#: ``--smoke``: tiny models and pools, two GRPO steps per method: an end-to-end check, not a result.
SMOKE: dict[str, Any] = {
    "seeds": (0,),
    "n_inputs": 4,
    "budget": 4,
    "bootstrap": 50,
    "classifier_inputs": 6,
    "classifier_samples": 8,
    "lm": {
        "n_train_inputs": 100,
        "rows_per_input": 4,
        "d_model": 48,
        "n_layer": 2,
        "n_head": 2,
        "epochs": 8,
        "batch_size": 32,
        "lr": 1e-2,
        "mixture": {"rounds": 1, "epochs_per_round": 0.5, "final_epochs": 0.5, "lr": 3e-3, "prior": "input"},
    },
    "grpo": {
        "steps": 2,
        "prompts_per_step": 2,
        "pool_runs": 2,
        "iid_samples": 8,
        "eval_inputs": 3,
        "eval_samples": 8,
        "eval_every": 2,
        "logging_steps": 1,
    },
    "smoke": True,
}


class BenchConfig(BaseModel):
    """Settings of ``seffi bench exploration``.

    Attributes:
        setting: ``"default"`` or ``"hard"`` (`SETTINGS`).
        task: The task (grid_routes: the settings are its configs).
        task_config: Task config overrides (``None``: the setting's).
        seeds: Model-training seeds: each trains (or loads) its own base LM and mixture
            (``LadderConfig.model_seed``), then every method's GRPO run and measurement.
        seed: Seed of the prompts (pool, held-out and classifier prompts: the same for every model seed).
        methods: Which methods to run (`METHOD_SLUGS`).
        n_inputs: Pool size (GRPO's training prompts).
        budget: K (GRPO's group size and the coverage budget).
        grpo: Steps, learning rate, prompts per step, pool runs, iid samples, held-out evaluation.
        unlikeliness_beta: The unlikeliness reward's rank penalty (He et al.: 0.25).
        passk_k: pass@k's k (``None``: K / 2).
        outcome_c: Bonus / penalty scale of the two outcome rewards.
        temperature: Sampling temperature of the no-training baseline.
        classifier_inputs: Prompts whose base samples train the classifier labeler.
        classifier_samples: Base samples per such prompt.
        lm: ``LMConfig`` fields of the rung-2 models over the ladder's defaults (no seed: ``seeds``).
        cache_dir: Model cache (``None``: ``$SEFFI_CACHE`` or ``~/.cache/seffi/models``).
        retrain: As ``seffi ladder``'s (None: retrain damaged cached models with a warning).
        bootstrap: Bootstrap replicates of the pool gain's interval.
        ci: Interval level.
        wandb: W&B mode.
        wandb_project: W&B project.
        out: Output folder (``None``: ``runs/<timestamp>``).
        progress: Live progress display.
        smoke: A ``--smoke`` run (its numbers are marked as not results).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    setting: Literal["default", "hard"] = "default"
    task: str = "grid_routes"
    task_config: dict[str, Any] | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    seed: int = Field(0, ge=0)
    methods: tuple[str, ...] = METHOD_SLUGS
    n_inputs: int = Field(32, ge=1, le=10_000)
    budget: int = Field(8, ge=2, le=1024)
    grpo: GRPOSettings = GRPOSettings()
    unlikeliness_beta: float = Field(0.25, ge=0.0, le=1.0)
    passk_k: int | None = Field(None, ge=1)
    outcome_c: float = Field(0.5, ge=0.0, le=10.0)
    temperature: float = Field(1.3, gt=0.0, le=10.0)
    classifier_inputs: int = Field(64, ge=1, le=10_000)
    classifier_samples: int = Field(16, ge=1, le=10_000)
    lm: dict[str, Any] | None = None
    cache_dir: Path | None = None
    retrain: bool | None = None
    bootstrap: int = Field(1000, ge=10, le=100_000)
    ci: float = Field(0.95, gt=0.5, lt=1.0)
    wandb: WandbMode = "offline"
    wandb_project: str = "seffi"
    out: Path | None = None
    progress: bool = True
    smoke: bool = False

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or len(set(v)) != len(v) or min(v) < 0:
            raise ValueError("seeds must be distinct non-negative ints (at least one)")
        return v

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [m for m in v if m not in METHOD_SLUGS]
        if unknown or not v or len(set(v)) != len(v):
            raise ValueError(f"methods must be distinct names among {', '.join(METHOD_SLUGS)}; got {list(v)}")
        return tuple(m for m in METHOD_SLUGS if m in v)  # table order

    def resolved_task_config(self) -> dict[str, Any] | None:
        """The task config: ``task_config`` if given, else the setting's."""
        return self.task_config if self.task_config is not None else SETTINGS[self.setting]

    def lm_fields(self) -> dict[str, Any] | None:
        """`LMConfig` fields over the ladder's defaults: the setting's (`SETTING_LM`), then `lm`."""
        fields = {**SETTING_LM[self.setting], **(self.lm or {})}
        return fields or None

    def ladder(self, model_seed: int) -> Any:
        """The `LadderConfig` whose rung-2 models this seed uses."""
        return LadderConfig(
            task=self.task,
            task_config=self.resolved_task_config(),
            seed=self.seed,
            model_seed=model_seed,
            n_inputs=self.n_inputs,
            budget=self.budget,
            lm=self.lm_fields(),
            cache_dir=self.cache_dir,
            retrain=self.retrain,
            bootstrap=self.bootstrap,
            ci=self.ci,
            grpo=self.grpo,
            wandb="disabled",
            progress=False,
        )

    def public_dict(self) -> dict[str, Any]:
        """JSON-ready settings that change results (no paths, display or W&B settings)."""
        return self.model_dump(
            mode="json", exclude={"out", "progress", "wandb", "wandb_project", "cache_dir", "retrain"}
        )


def smoke_bench_config(**overrides: Any) -> BenchConfig:
    """The ``--smoke`` config (tiny models, two steps per method), with ``overrides``."""
    fields = {**SMOKE, **overrides}
    if isinstance(overrides.get("grpo"), dict):
        fields["grpo"] = {**SMOKE["grpo"], **overrides["grpo"]}
    return BenchConfig(**fields)


@dataclass
class BenchResult:
    """What `run_exploration_bench` produced.

    Attributes:
        out: The output folder.
        summary: The content of ``bench.json``.
        files: ``{name: path}`` of the files written.
        seconds: Wall time.
    """

    out: Path
    summary: dict[str, Any]
    files: dict[str, Path]
    seconds: float


#: Names an earlier bench leaves in its folder (refused without ``overwrite``).
OWNED = ("bench.json", "bench.md", "bench.png", "records", "seed-*", ".seffi-write-test")


def run_exploration_bench(
    config: BenchConfig, *, console: Any = None, overwrite: bool = False, command: str | None = None
) -> BenchResult:
    """Every method on every seed (module docstring); writes the output folder and returns its summary.

    Raises:
        SeffiError: A bad setting, a missing extra, a missing W&B login in online mode or an unusable
            output folder — all before any training.
    """
    from rich.console import Console

    started = time.perf_counter()
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    require_lm()
    require_trl()
    SafeWandbRun.check_login(config.wandb)
    for s in config.seeds:
        config.ladder(s).lm_config()  # a bad lm / task config fails here, before any training
    out = prepare_run_folder(config.out or default_out(), overwrite=overwrite, owned=OWNED)
    seeds: dict[int, dict[str, Any]] = {}
    try:
        with _progress(console, config.progress) as progress:
            for s in config.seeds:
                t0, cpu = time.perf_counter(), time.process_time()
                seeds[s] = run_seed(config, s, progress, out)
                seeds[s]["seconds"] = time.perf_counter() - t0
                seeds[s]["cpu_seconds"] = time.process_time() - cpu
    finally:
        gc.unfreeze()  # each GRPO run freezes what is alive before it (bench_methods._train)
    result = finish(config, seeds, out, console, time.perf_counter() - started, command)
    return BenchResult(out, result[0], result[1], time.perf_counter() - started)


def combine_benches(
    folders: list[Path],
    *,
    out: Path | None = None,
    console: Any = None,
    overwrite: bool = False,
    wandb: str = "offline",
) -> BenchResult:
    """One table from benches run separately on other seeds with the same settings (``--combine``).

    Each folder's ``bench.json`` is read; rows, checkpoints and per-seed facts are pooled and the
    per-method summary and correlations recomputed (`combine_summaries`).
    The records stay in the source folders.

    Raises:
        SeffiError: A folder without a readable ``bench.json``, settings that differ, a repeated seed, or
            an unusable output folder.
    """
    from rich.console import Console

    started = time.perf_counter()
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    summaries = []
    for folder in folders:
        path = Path(folder) / "bench.json"
        try:
            summaries.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise SeffiError(f"cannot read {path}: {exc}") from None
    summary = combine_summaries(summaries)
    summary["combined_from"] = [str(Path(f)) for f in folders]
    target = prepare_run_folder(out or default_out(), overwrite=overwrite, owned=OWNED)
    cfg = BenchConfig(**{**summary["config"], "wandb": wandb})
    files = publish(cfg, summary, target, console)
    return BenchResult(target, summary, files, time.perf_counter() - started)


# -- one seed -------------------------------------------------------------------------------------------


def _models(config: BenchConfig, model_seed: int, progress: Any) -> tuple[Any, Path, Path | None, bool]:
    """(task, base folder, mixture folder or None, whether every model came from the cache)."""
    lm_cfg = config.ladder(model_seed).lm_config()
    bars: dict[str, Any] = {}

    def hook(phase: str, done: int, total: int) -> None:
        name = f"seed {model_seed} {'SFT' if phase == 'SFT' else 'hard EM'}"
        if name not in bars:
            bars[name] = progress.add_task(name, total=total, status="")
        progress.update(bars[name], completed=done, status=phase)

    if any(m.startswith("mixture") for m in config.methods):
        models = train_ladder_models(lm_cfg, config.cache_dir, hook=hook, retrain=config.retrain)
        return models.task, models.base_dir, models.mixture_dir, all(models.cached.values())
    root = Path(config.cache_dir) if config.cache_dir is not None else None

    cached = ((root or default_cache_dir()) / lm_cfg.base_key() / "config.json").is_file()
    folder = cached_base_folder(lm_cfg, config.cache_dir, hook=hook, retrain=config.retrain)
    return build_task(lm_cfg), folder, None, cached


def pool_seed(config: BenchConfig) -> int:
    """The pool's seed: the ladder's (``task.make_inputs(n_inputs, seed=...)``)."""
    return int(spawn(config.seed, 6)[0].generate_state(1)[0])


def prompt_sets(config: BenchConfig, task: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """(pool, held-out, classifier-training) inputs: disjoint, the same for every model seed.

    The pool is the ladder's (the same seed gives the same pool as ``seffi ladder``).
    """
    pool = task.make_inputs(config.n_inputs, seed=pool_seed(config))
    root = seed_of(config.seed, 26)
    held_out = held_out_inputs(task, {x.id for x in pool}, config.grpo.eval_inputs, seed_of(root, 1))
    used = {x.id for x in pool} | {x.id for x in held_out}
    try:
        clf = held_out_inputs(task, used, config.classifier_inputs, seed_of(root, 2))
    except SeffiError:
        clf = list(pool)  # a tiny input space: the classifier learns from the pool prompts' base samples
    return pool, held_out, clf


def run_seed(config: BenchConfig, model_seed: int, progress: Any, out: Path) -> dict[str, Any]:
    """Models, shared baselines and every method of one model seed.

    Returns:
        ``{"context": SeedContext, "runs": {slug: MethodRun}, "agreement": ..., "models_cached": bool,
        "baseline_seconds": float}``.
    """
    t0 = time.perf_counter()
    task, base_dir, mixture_dir, cached = _models(config, model_seed, progress)
    pool, held_out, clf_inputs = prompt_sets(config, task)
    seed = seed_of(config.seed, 26, 3, model_seed)
    strategies = tuple(task.strategies())
    base = grpo.trl_policy(base_dir, task)
    methods = bench_methods(config)
    folder = out / f"seed-{model_seed}"
    args = grpo_args(config.grpo, config, folder, methods[0], base.max_new_tokens, base.suppress, seed)
    gen = trl_model.generation_config(args, base.model, base.tokenizer)
    bar = progress.add_task(f"seed {model_seed} base", total=4, status="reference samples")
    validator = TaskLabeler(task)
    n_iid = config.grpo.reference_samples(config.budget)
    sampler = Sampler(base)
    iid_texts = sampler.texts(
        base.model,
        base.tokenizer,
        [base.prompt(task, x) for x in pool],
        n_iid,
        gen,
        seed=seed_of(seed, 1),
    )
    progress.update(bar, advance=1, status="classifier")
    clf_texts = sampler.texts(
        base.model,
        base.tokenizer,
        [base.prompt(task, x) for x in clf_inputs],
        config.classifier_samples,
        gen,
        seed=seed_of(seed, 2),
    )
    train_x = [x for x, row in zip(clf_inputs, clf_texts, strict=True) for _ in row]
    train_t = [t for row in clf_texts for t in row]
    classifier = ClassifierLabeler(valid=lambda x, t: task.validate_y_text(x, t).valid).fit(
        train_t, [validator(x, t).strategy_matches for x, t in zip(train_x, train_t, strict=True)], strategies
    )
    labelers = {"validator": validator, "classifier": classifier}
    iid, oracle = {}, {}
    for name, lab in labelers.items():
        sets, valid = grpo.label_samples(lab, [x.id for x in pool], pool, iid_texts)
        iid[name] = IidBaseline.from_samples(sets, strategies=strategies, valid=valid)
        refs = {
            x.id: {s: lab(x, task.reference(x, s)).strategy_matches for s in task.feasible_strategies(x)}
            for x in pool
        }
        oracle[name] = OracleBaseline(refs, strategies=strategies, seed=seed_of(seed, 4))
    progress.update(bar, advance=1, status="held-out base")
    base_eval_cb = BenchEval(
        task, held_out, sampler, n=config.grpo.eval_samples, budget=config.budget, seed=seed
    )
    base_eval = base_eval_cb.evaluate(base.model, base.tokenizer, args, salt=0)
    texts, sets, _ = base_eval_cb.samples[0]  # the validator's labels of the base's held-out samples
    agree = agreement(
        [m for x in held_out for m in sets[x.id]],
        [classifier(x, t).strategy_matches for x, row in zip(held_out, texts, strict=True) for t in row],
        strategies,
    )
    progress.update(bar, advance=1, status="mixture prior")
    priors: dict[str, np.ndarray] = {}
    if mixture_dir is not None:
        from seffi.models.lm import TaskLM

        mixture = TaskLM.load(mixture_dir, task)
        if mixture.layout.code_slot != "after_sep":
            raise SeffiError(
                "the mixture methods need a mixture with code_slot='after_sep' (code after <sep>)"
            )
        inputs = list(pool) + list(held_out)
        n_codes = int(mixture.meta["n_codes"])
        if mixture.meta.get("prior_kind", "global") == "input":
            prior = mixture.code_distribution([task.prompt(x) for x in inputs], n_codes)
        else:
            prior = np.tile(np.asarray(mixture.meta["prior"], dtype=np.float64), (len(inputs), 1))
        priors = {base.prompt(task, x): row for x, row in zip(inputs, prior, strict=True)}
    router = None
    if "mixture_router" in config.methods:
        progress.update(bar, status="router")
        assert mixture_dir is not None
        learner = config.ladder(model_seed).learner.model_copy(update={"input_features": False})
        ids = [x.id for x in pool]
        router = train_router(
            task.name, mixture_dir, ids, pool_seed(config), config.budget, learner, seed_of(seed, 5), progress
        )
    progress.update(bar, advance=1, status="done")
    ctx = SeedContext(
        config,
        task,
        list(pool),
        list(held_out),
        labelers,
        iid,
        oracle,
        base_eval,
        base_dir,
        mixture_dir,
        priors,
        seed,
        folder,
        router,
    )
    baseline_seconds = time.perf_counter() - t0
    runs = {m.slug: run_method(ctx, m, progress) for m in methods}
    return {
        "context": ctx,
        "runs": runs,
        "agreement": agree,
        "base_surface": base_eval_cb.surface[0],
        "base_samples": base_eval_cb.samples[0],
        "models_cached": cached,
        "baseline_seconds": baseline_seconds,
        "classifier_rows": len(train_t),
    }

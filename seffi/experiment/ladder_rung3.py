"""Rung 3 of ``seffi ladder``: GRPO (TRL) on the rung-2 base LM, validity vs diversity reward.

Three GRPO runs from the same base LM with the same seed, steps and prompts (the ladder's pool, one
group of K = ``budget`` completions per prompt and step): the plain validity reward, the
order-independent group-diversity reward (`seffi.group_scoring`) and a learning-rate-0 sanity run.
The iid baseline is the reference model's own samples (``IidBaseline.from_samples``, 16 K per pool
prompt, drawn once before training, GRPO's generation settings). After training each policy is
measured fresh on the pool like rungs 1-2 (``pool_runs`` runs of K per prompt: coverage, gain with a
CI, valid@k), and on held-out prompts with n samples per prompt (`seffi.models.passk`: valid@k
and C(k) for k up to n, the crossover k, the solvable share), periodically during training too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from seffi._seeding import seed_of
from seffi.callbacks.trl_model import generation_config
from seffi.coverage import CoverageTracker, OracleBaseline
from seffi.errors import SeffiError
from seffi.experiment.runner import Rollout
from seffi.labelers import TaskLabeler
from seffi.models import MissingExtraError, missing_modules
from seffi.models.grpo import cpu_training, quiet_trainer, sample_completions, trl_policy


class GRPOSettings(BaseModel):
    """Rung 3's GRPO runs.

    Attributes:
        enabled: Run rung 3.
        steps: GRPO optimizer steps per run.
        lr: Learning rate of the validity and diversity runs (AdamW, TRL's linear decay).
        prompts_per_step: Prompts per step (each with K completions).
        diversity_weight: ``w`` of the diversity reward.
        pool_runs: Fresh runs of K completions per pool prompt measured after training. More than
            rungs 1-2's ``eval_runs``: a run of K costs milliseconds here against seconds of training,
            and with 4 runs (and 4 K iid samples) per prompt the lr = 0 sanity gain had a standard
            deviation of 0.10 over measurement seeds (16 runs, 16 K samples: 0.048).
        iid_samples: Reference-model samples per pool prompt for ``IidBaseline.from_samples``
            (``None``: 16 K).
        eval_inputs: Held-out prompts for valid@k / C(k).
        eval_samples: Samples per held-out prompt (k runs up to this n).
        eval_every: Evaluate every this many steps (and at the end).
        logging_steps: TRL logging (and coverage log) interval.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    steps: int = Field(60, ge=1, le=100_000)
    lr: float = Field(3e-4, ge=0.0, le=1.0)
    prompts_per_step: int = Field(4, ge=1, le=4096)
    diversity_weight: float = Field(0.5, ge=0.0, le=1.0)
    pool_runs: int = Field(16, ge=1, le=1024)
    iid_samples: int | None = Field(None, ge=1, le=100_000)
    eval_inputs: int = Field(32, ge=1, le=10_000)
    eval_samples: int = Field(64, ge=1, le=10_000)
    eval_every: int = Field(20, ge=1, le=100_000)
    logging_steps: int = Field(5, ge=1, le=100_000)

    def reference_samples(self, budget: int) -> int:
        """Reference-model samples per pool prompt: ``iid_samples``, or 16 K by default."""
        return self.iid_samples or 16 * budget


#: (label, reward mode, learning-rate factor): the three runs of rung 3.
RUNS = (
    ("GRPO validity reward", "valid", 1.0),
    ("GRPO diversity reward", "diversity", 1.0),
    ("GRPO lr=0 (sanity)", "valid", 0.0),
)


@dataclass
class Rung3Result:
    """Rung 3's comparison (fresh pool measurement), held-out evaluations and per-run facts."""

    comparison: Any
    state: dict[str, Any]
    base_eval: Any
    evals: dict[str, Any] = field(default_factory=dict)
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)


def require_trl() -> None:
    """Raise one readable line unless rung 3's dependencies (the ``trl`` extra) import."""
    missing = missing_modules(("trl", "datasets", "accelerate"))
    if missing:
        raise MissingExtraError(
            f"rung 3 (GRPO) needs the 'trl' extra ({', '.join(missing)} missing): pip install 'seffi[trl]', "
            "or skip it with --no-rung3"
        )


def held_out_inputs(task: Any, exclude: set[str], n: int, seed: int) -> list[Any]:
    """``n`` inputs not in ``exclude`` (small input spaces: as many as exist)."""
    want = 4 * n + 64
    while True:
        try:
            drawn = task.make_inputs(want, seed=seed)
            break
        except SeffiError:
            if want <= 8:
                raise
            want //= 2
    out = [x for x in drawn if x.id not in exclude][:n]
    if not out:
        raise SeffiError(f"{task.name}: no held-out input left for rung 3's evaluation")
    return out


def grpo_config(
    cfg: Any,
    s: GRPOSettings,
    out: Path,
    *,
    lr: float,
    max_new: int,
    suppress: list[int],
    seed: int,
    **extra: Any,
) -> Any:
    """The ``GRPOConfig`` of one GRPO run on the CPU: ``cfg.budget`` completions per prompt, no checkpoints.

    Args:
        cfg: The `LadderConfig` or bench config (its ``budget`` K is the group size).
        s: The run's `GRPOSettings` (steps, prompts per step, logging interval).
        out: The run's folder (TRL's own output goes to ``out/trainer``).
        lr: The learning rate.
        max_new: The most tokens per completion.
        suppress: Token ids the seffi sampler never emits (suppressed in generation).
        seed: The training seed.
        **extra: Further ``GRPOConfig`` fields (``num_iterations``, ``scale_rewards``).
    """
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out / "trainer"),
        use_cpu=True,
        num_generations=cfg.budget,
        per_device_train_batch_size=s.prompts_per_step * cfg.budget,
        max_completion_length=max_new,
        generation_kwargs={"suppress_tokens": suppress},
        max_steps=s.steps,
        learning_rate=lr,
        logging_steps=s.logging_steps,
        save_strategy="no",
        report_to="none",  # the command's own W&B run gets the results (one run per command)
        seed=seed,
        disable_tqdm=True,
        **cpu_training(),
        **extra,
    )


def label_rollout(
    task: Any, pool: Sequence[Any], texts: Sequence[Sequence[str]], labeler: Any, budget: int
) -> Any:
    """One `Rollout` of the pool's completions labelled by ``labeler``, in runs of K.

    Args:
        task: The task (names the tracker).
        pool: The pool inputs.
        texts: Per pool input, its completions: whole runs of ``budget``, in order.
        labeler: ``labeler(x, text) -> ValidationResult`` with a ``strategies`` attribute.
        budget: K, the completions per run.

    Returns:
        A `seffi.experiment.runner.Rollout` (latents all 0: these policies have none).
    """
    # One barcode row per input (its first run: the lowest stream), K cells each — as seffi run's.
    tracker = CoverageTracker(
        strategies=labeler.strategies, task=task.name, barcode_rows=len(pool), barcode_cols=budget
    )
    ids, matches, valid = [], [], []
    stream = 0
    for x, row in zip(pool, texts, strict=True):
        for r in range(len(row) // budget):
            res = [labeler(x, t) for t in row[r * budget : (r + 1) * budget]]
            for v in res:
                tracker.update(x.id, v.strategy_matches, valid=v.valid, stream=stream)
            stream += 1
            ids.append(x.id)
            matches.append([tuple(sorted(v.strategy_matches)) for v in res])
            valid.append([bool(v.valid) for v in res])
    return Rollout(
        tracker, ids, np.zeros((len(ids), budget), dtype=np.int64), matches, np.array(valid, dtype=bool)
    )


def _measure_pool(policy: Any, task: Any, pool: list[Any], cfg: Any, gen: Any, seed: int) -> Any:
    """``grpo.pool_runs`` fresh runs of K completions per pool prompt from the trained policy."""
    n = cfg.grpo.pool_runs * cfg.budget
    prompts = [policy.prompt(task, x) for x in pool]
    texts = sample_completions(
        policy.model, policy.tokenizer, prompts, n, gen, seed=seed, decode=policy.decode
    )
    return label_rollout(task, pool, texts, TaskLabeler(task), cfg.budget)


def progress_callback(progress: Any, bar: Any) -> Any:
    """A ``TrainerCallback`` advancing the rich progress ``bar`` to each GRPO step."""
    from transformers import TrainerCallback

    class Bar(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            progress.update(bar, completed=int(state.global_step))

    return Bar()


def run_rung3(
    config: Any, runner: Any, models: Any, pool: list[Any], seed: np.random.SeedSequence, out: Path
) -> Rung3Result:
    """The three GRPO runs, their fresh pool measurement and held-out evaluations (module docstring).

    Args:
        config: The `LadderConfig` (budget, grpo settings).
        runner: The ladder's `Runner` (comparison, progress).
        models: The rung-2 `LadderModels` (the base LM is the policy).
        pool: The pool's task inputs (GRPO's training prompts).
        seed: Rung 3's seed.
        out: Folder for each run's local GRPO report (``rung3/<run>/``).
    """
    from datasets import Dataset
    from trl import GRPOTrainer

    from seffi.callbacks.trl import GRPOCoverage
    from seffi.models.passk import PassAtKEval

    s: GRPOSettings = config.grpo
    task = models.task
    strategies = tuple(task.strategies())
    root = int(seed.generate_state(1)[0])
    held_out = held_out_inputs(task, {x.id for x in pool}, s.eval_inputs, seed_of(root, 1))
    dataset_rows = {"prompt": [], "input_id": []}
    iid: Any = "reference"
    base_eval = None
    result = Rung3Result(None, {}, None)
    rollouts: dict[str, Any] = {}
    n_iid = s.reference_samples(config.budget)
    for i, (label, reward, factor) in enumerate(RUNS):
        started = time.perf_counter()
        slug = label.split()[1].lower().replace("=", "")
        policy = trl_policy(models.base_dir, task)
        if not dataset_rows["prompt"]:
            dataset_rows = {
                "prompt": [policy.prompt(task, x) for x in pool],
                "input_id": [x.id for x in pool],
            }
        shared = {"decode": policy.decode, "out_dir": out / "rung3" / slug, "seed": root}
        cov = GRPOCoverage(
            task,
            pool,
            reward=reward,
            diversity_weight=s.diversity_weight,
            iid=iid,  # drawn by the first run at train begin, then shared: one reference sample
            iid_samples=n_iid,
            # The pool comparison needs the reference on every pool prompt, all drawn at train begin
            # from the seed (none taken from the first batch, none from an earlier run's cache).
            reference_prompts=None,
            reuse_first_batch=False,
            reference_cache=False,
            n_boot=0,
            plots=False,
            **shared,
        )
        evaluation = PassAtKEval(
            task,
            held_out,
            prompt=policy.prompt,
            n=s.eval_samples,
            every=s.eval_every,
            base=base_eval,
            **shared,
        )
        lr = s.lr * factor
        args = grpo_config(
            config,
            s,
            out / "rung3" / slug,
            lr=lr,
            max_new=policy.max_new_tokens,
            suppress=policy.suppress,
            seed=config.seed,
        )
        bar = runner.progress.add_task(f"rung 3 {label}", total=s.steps, status="GRPO")
        from transformers.trainer_callback import PrinterCallback

        with quiet_trainer():
            trainer = GRPOTrainer(
                model=policy.model,
                processing_class=policy.tokenizer,
                reward_funcs=[cov.reward],
                callbacks=[cov.callback, evaluation, progress_callback(runner.progress, bar)],
                train_dataset=Dataset.from_dict(dataset_rows),
                args=args,
            )
            trainer.remove_callback(PrinterCallback)  # TRL's per-step log dicts would flood the console
            trainer.train()
        iid, base_eval = cov.iid, evaluation.base
        runner.progress.update(bar, status="measuring")
        gen = generation_config(args, policy.model, policy.tokenizer)
        rollouts[label] = _measure_pool(policy, task, pool, config, gen, seed_of(root, 100 + i))
        final = evaluation.history[-1]
        result.evals[label] = final[1]
        result.history[label] = [{"step": st, **sc} for st, _, sc in evaluation.history]
        train_comp = cov.monitor.report().comparisons[0] if cov.monitor is not None else None
        result.runs[label] = {
            "reward": reward,
            "lr": s.lr * factor,
            "seconds": time.perf_counter() - started,
            "train_auc": train_comp.policies[0].curves.auc if train_comp else None,
            "train_valid_rate": cov.monitor.last_scalars.get("seffi/valid_rate") if cov.monitor else None,
            "eval": {k.removeprefix("seffi/eval/"): v for k, v in final[2].items()},
        }
        runner.progress.update(bar, completed=s.steps, status="done")
    result.base_eval = base_eval
    iid_curves = iid.curves(config.budget, seed=seed_of(root, 3))
    refs = {x.id: task.reference_match_sets(x) for x in pool}
    oracle = OracleBaseline(refs, strategies=strategies, seed=seed_of(root, 2)).curves(
        config.budget, rarity=iid
    )
    runner.rarity = iid
    notes = [
        f"rung 3: GRPO (TRL) on the rung-2 base LM, {s.steps} steps x {s.prompts_per_step} prompts x K = "
        f"{config.budget} completions, lr {s.lr:g}; rewards: validity, group diversity "
        f"(w = {s.diversity_weight})",
        f"iid: the reference model's own samples, {n_iid} per pool prompt (IidBaseline.from_samples)",
        f"policies measured after training: {s.pool_runs} fresh runs of K completions per pool prompt",
        "GRPO lr=0 (sanity): the policy stays the reference model; its gain should be ~0",
    ]
    comp = runner.compare(task.name, strategies, 1, rollouts, iid_curves, oracle, seed_of(root, 4), notes)
    policies = [p.model_copy(update={"latent": None}) for p in comp.policies]
    result.comparison = comp.model_copy(
        update={"env_id": "trl/GRPO on the base LM", "rung": 3, "iid_source": "samples", "policies": policies}
    )
    result.state = {label: run.tracker.state_dict() for label, run in rollouts.items()}
    return result

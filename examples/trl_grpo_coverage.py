"""GRPO (TRL) on the task's locally trained base LM, measuring how well each prompt's group explores.

The policy starts from the ladder's rung-2 base LM (trained here by SFT on the task's rows, cached
under ``$SEFFI_CACHE``; trained on first use). Each prompt's ``num_generations`` completions are one run
with budget K = num_generations: coverage C(k), novelty and the gain vs the *reference model's own*
samples go into TRL's logs (its W&B run shows ``train/seffi/...``) and a local report. The reference
takes 4 K samples per prompt (at most ``--reference-prompts`` prompts), the first training batch's among
them; the rest are drawn once and cached (a line states the cost). Every
``eval_every`` steps the policy and the reference model answer held-out prompts ``eval_samples`` times:
valid@k (pass@k) and C(k) for k up to n, the crossover k and the solvable share.

    python examples/trl_grpo_coverage.py --smoke                         # tiny LM, ~1 min on CPU
    python examples/trl_grpo_coverage.py --reward diversity --max-steps 60 --report-to wandb
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from seffi.experiment.example_args import parse_args


@dataclass
class Args:
    """Command-line arguments (each field is a ``--flag``)."""

    task: str = "grid_routes"
    """seffi task (the ladder's default); its rung-2 base LM is the policy"""
    model_dir: str = ""
    """a seffi.models base LM folder (default: the ladder's, trained and cached if missing)"""
    n_inputs: int = 16
    """training prompts"""
    eval_inputs: int = 16
    """held-out prompts for valid@k / C(k)"""
    eval_samples: int = 64
    """samples per held-out prompt (k runs up to this n)"""
    eval_every: int = 20
    """evaluate the policy every this many steps"""
    num_generations: int = 8
    """completions per prompt = the per-input budget K"""
    reference_prompts: int = 256
    """at most this many prompts get reference-iid samples, 4 K each (0: every prompt)"""
    prompts_per_step: int = 4
    """prompts per optimizer step"""
    per_device_batch: int = 0
    """completions per process and step (0: prompts_per_step * num_generations; smaller splits groups)"""
    max_steps: int = 60
    """GRPO optimizer steps"""
    learning_rate: float = 3e-4
    """AdamW learning rate (0: the sanity run, gain ~ 0)"""
    reward: str = "valid"
    """valid (correctness only) or diversity (order-independent group diversity)"""
    diversity_weight: float = 0.5
    """w of the diversity reward: valid * ((1 - w) + w / #valid completions sharing the strategy set)"""
    report_to: str = "none"
    """TRL reporting: none or wandb (W&B then carries train/seffi/* keys)"""
    out_dir: str = "runs/trl-grpo-coverage"
    """local report folder"""
    seed: int = 0
    """seed of the inputs and training"""
    smoke: bool = False
    """tiny run for CI: the smoke-sized base LM, 3 steps"""
    record_dir: str = ""
    """write each rank's completions, seffi log keys and (rank 0) tracker state here (2-process check)"""


def main(args: Args) -> dict:
    """Train and return the headline numbers."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from seffi.callbacks.trl import GRPOCoverage
    from seffi.experiment.ladder import LadderConfig, smoke_config
    from seffi.models.cache import build_task
    from seffi.models.grpo import base_lm_folder, cpu_training, trl_policy
    from seffi.models.passk import PassAtKEval

    if args.smoke:
        args = dataclasses.replace(
            args, n_inputs=4, eval_inputs=4, eval_samples=8, eval_every=2, max_steps=3, prompts_per_step=2
        )
    ladder = smoke_config(task=args.task) if args.smoke else LadderConfig(task=args.task)
    lm_cfg = ladder.lm_config()
    task = build_task(lm_cfg)
    policy = trl_policy(args.model_dir or base_lm_folder(lm_cfg), task)
    drawn = task.make_inputs(args.n_inputs + args.eval_inputs, seed=args.seed)
    train, held_out = drawn[: args.n_inputs], drawn[args.n_inputs :]
    dataset = Dataset.from_dict(
        {"prompt": [policy.prompt(task, x) for x in train], "input_id": [x.id for x in train]}
    )
    # The coverage monitor and the held-out evaluation decode alike and report to one folder.
    shared = {"decode": policy.decode, "out_dir": args.out_dir, "seed": args.seed}
    cov = GRPOCoverage(
        task,
        train,
        reward=args.reward,
        diversity_weight=args.diversity_weight,
        reference_prompts=args.reference_prompts or None,  # cached under $SEFFI_CACHE/reference-iid
        **shared,
    )
    evaluation = PassAtKEval(
        task, held_out, prompt=policy.prompt, n=args.eval_samples, every=args.eval_every, **shared
    )
    recorded: list[list[str]] = []

    def record(prompts, completions, completion_ids, input_id, **kwargs):  # weight 0: only records
        recorded.extend([str(i), policy.decode(c)] for i, c in zip(input_id, completion_ids, strict=True))
        return [0.0] * len(completions)

    trainer = GRPOTrainer(
        model=policy.model,
        processing_class=policy.tokenizer,
        # cov.reward labels every completion, records its strategies and scores it
        reward_funcs=[cov.reward, record] if args.record_dir else [cov.reward],
        callbacks=[cov.callback, evaluation],  # seffi/* scalars into TRL's logs + the local report
        train_dataset=dataset,
        args=GRPOConfig(
            output_dir=f"{args.out_dir}/trainer",
            use_cpu=True,
            num_generations=args.num_generations,
            per_device_train_batch_size=args.per_device_batch or args.prompts_per_step * args.num_generations,
            max_completion_length=policy.max_new_tokens,
            generation_kwargs={"suppress_tokens": policy.suppress},  # tokens the seffi sampler never emits
            max_steps=args.max_steps,
            learning_rate=args.learning_rate,
            logging_steps=1,
            save_strategy="no",
            report_to=args.report_to,
            seed=args.seed,
            reward_weights=[1.0, 0.0] if args.record_dir else None,
            **cpu_training(),  # full precision, no checkpointing: TRL's defaults slow CPU runs 5-8x
        ),
    )
    trainer.train()
    if args.record_dir:
        write_record(args.record_dir, trainer, cov, recorded)
    comp = cov.monitor.report().comparisons[0]
    last = evaluation.history[-1][2] if evaluation.history else {}
    out = {
        "reward": args.reward,
        "learning_rate": args.learning_rate,
        "budget": comp.budget,
        "train_auc": comp.policies[0].curves.auc,
        "reference_iid_auc": comp.iid.auc if comp.iid else None,
        "train_gain": comp.policies[0].gain.value,
        "eval": {k.removeprefix("seffi/eval/"): v for k, v in last.items()},
        "completions": cov.monitor.episodes,
        "reference_cost": cov.reference_cost,  # samples drawn / reused / cached, generate calls, seconds
    }
    print(json.dumps(out, default=str))
    return out


def write_record(folder: str, trainer, cov, recorded: list) -> None:
    """``rank<r>.json``: this rank's completions (local order), seffi keys per log, rank 0's tracker."""
    from pathlib import Path

    rank = trainer.accelerator.process_index
    keys = [sorted(k for k in rec if k.startswith("seffi/")) for rec in trainer.state.log_history]
    data = {
        "rank": rank,
        "world": trainer.accelerator.num_processes,
        "completions": recorded,
        "log_keys": keys,
    }
    if rank == 0:
        data["tracker"] = cov.monitor.tracker.state_dict()
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(data, default=str))


if __name__ == "__main__":
    main(parse_args(Args, extra="trl", modules=("trl", "transformers", "datasets")))

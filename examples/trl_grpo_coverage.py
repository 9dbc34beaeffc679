"""GRPO (TRL) on a seffi task's prompts, measuring how well each prompt's completion group explores.

Each prompt's ``num_generations`` completions are one run with budget K = num_generations: coverage
C(k), novelty and gain vs the task's iid base sampler are added to TRL's logs (so they land in its W&B
run as ``train/seffi/...``) and written to a local report. The model is a tiny randomly initialised
causal LM with a word-level tokenizer built locally from the task vocabulary — nothing is downloaded.
With a real model, pass ``labeler=`` (a regex rubric or a function) when strategies cannot be parsed.

    python examples/trl_grpo_coverage.py --smoke              # ~30 s on CPU
    python examples/trl_grpo_coverage.py --task sort_swaps --max-steps 200 --report-to wandb
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from seffi.experiment.example_args import parse_args


@dataclass
class Args:
    """Command-line arguments (each field is a ``--flag``)."""

    task: str = "sort_swaps"
    """seffi task whose prompts and validator are used"""
    n_inputs: int = 8
    """number of task inputs (dataset rows)"""
    num_generations: int = 8
    """completions per prompt = the per-input budget K"""
    max_steps: int = 50
    """GRPO optimizer steps"""
    max_completion_length: int = 48
    """tokens per completion"""
    learning_rate: float = 1e-3
    """AdamW learning rate"""
    report_to: str = "none"
    """TRL reporting: none or wandb (W&B then carries train/seffi/* keys)"""
    out_dir: str = "runs/trl-grpo-coverage"
    """local report folder"""
    seed: int = 0
    """seed of the inputs, the model weights and training"""
    smoke: bool = False
    """tiny run for CI: 3 steps, 4 generations"""


def main(args: Args) -> dict:
    """Train and return the report's headline numbers."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from seffi.callbacks.trl import GRPOCoverage, tiny_causal_lm
    from seffi.tasks import get_task

    if args.smoke:
        args = dataclasses.replace(args, n_inputs=3, num_generations=4, max_steps=3, max_completion_length=24)
    task = get_task(args.task)
    inputs = task.make_inputs(args.n_inputs, seed=args.seed)
    dataset = Dataset.from_dict(
        {"prompt": [task.prompt(x) for x in inputs], "input_id": [x.id for x in inputs]}
    )
    model, tokenizer = tiny_causal_lm(task, seed=args.seed)

    cov = GRPOCoverage(task, inputs, id_column="input_id", out_dir=args.out_dir, seed=args.seed)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[cov.reward],  # 1 for a valid trace; records every completion's strategies
        callbacks=[cov.callback],  # seffi/* scalars into TRL's logs + the local report
        train_dataset=dataset,
        args=GRPOConfig(
            output_dir=f"{args.out_dir}/trainer",
            use_cpu=True,
            num_generations=args.num_generations,
            per_device_train_batch_size=2 * args.num_generations,
            max_completion_length=args.max_completion_length,
            max_steps=args.max_steps,
            learning_rate=args.learning_rate,
            logging_steps=1,
            save_strategy="no",
            report_to=args.report_to,
            seed=args.seed,
        ),
    )
    trainer.train()
    report = cov.monitor.report()
    comp = report.comparisons[0]
    policy = comp.policies[0]
    out = {
        "budget": comp.budget,
        "policy_auc": policy.curves.auc,
        "iid_auc": comp.iid.auc if comp.iid else None,
        "oracle_auc": comp.oracle.auc if comp.oracle else None,
        "gain": policy.gain.value,
        "gain_reason": policy.gain.reason,
        "completions": cov.monitor.episodes,
    }
    print(json.dumps(out, default=str))
    return out


if __name__ == "__main__":
    main(parse_args(Args, extra="trl", modules=("trl", "transformers", "datasets")))

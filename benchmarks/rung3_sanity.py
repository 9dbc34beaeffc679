"""Calibration of rung 3's learning-rate-0 sanity: the base LM measured against its own samples.

With lr = 0 GRPO leaves the weights unchanged (checked: the largest parameter change after 60 steps
is 0.0), so the sanity run's gain is the gain of the reference model against its own iid sample,
true value 0. One ladder run gives one draw of it; this script gives many: for each measurement seed
it draws the reference iid (``grpo.iid_samples`` per pool prompt) and ``grpo.pool_runs`` fresh runs
of K per pool prompt exactly as ``seffi ladder`` rung 3 does (same pool, generation settings, code
path: :func:`seffi.models.grpo.reference_iid`, the rung's pool measurement and the runner's
comparison), and prints the gain's mean and spread and how often its 95 % interval contains 0.

Needs the ``lm`` and ``trl`` extras and the ladder's cached base LM (``seffi ladder`` trains it once,
or this script does). Run ``python benchmarks/rung3_sanity.py`` (about 5 minutes for 40 seeds on 2
shared cores); ``--pool-runs 4 --iid-samples 32`` measures the design rung 3 had before.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Args:
    """Arguments.

    Attributes:
        seeds: Measurement seeds (each: a fresh iid sample and fresh pool runs).
        pool_runs: Runs of K per pool prompt on the policy side (rung 3's ``grpo.pool_runs``).
        iid_samples: Reference samples per pool prompt (``None``: rung 3's default, 16 K).
        cache_dir: Model cache (default ``$SEFFI_CACHE``).
    """

    seeds: int = 40
    pool_runs: int = 16
    iid_samples: int | None = None
    cache_dir: str | None = None


def main(args: Args) -> None:
    import torch
    from rich.progress import Progress

    from seffi.callbacks.labelers import as_labeler
    from seffi.coverage import OracleBaseline
    from seffi.experiment import ladder_rung3 as rung3
    from seffi.experiment.ladder import LadderConfig, _train_models, spawn
    from seffi.experiment.runner import Runner
    from seffi.models.grpo import generation_config, reference_iid, seed_of, trl_policy

    torch.set_num_threads(1)
    grpo = {"pool_runs": args.pool_runs, "iid_samples": args.iid_samples}
    cfg = LadderConfig(grpo=grpo, cache_dir=args.cache_dir)
    quiet = Progress(disable=True)
    models = _train_models(cfg.lm_config(), cfg.cache_dir, quiet)
    pool_seed = spawn(cfg.seed, 6)[0]  # the ladder's pool
    task = models.task
    pool = task.make_inputs(cfg.n_inputs, seed=int(pool_seed.generate_state(1)[0]))
    runner = Runner(cfg.run_config(), [], quiet)
    policy = trl_policy(models.base_dir, task)
    grpo_args = rung3._grpo_args(cfg, cfg.grpo, Path("unused"), 0.0, policy.max_new_tokens, policy.suppress)
    gen = generation_config(grpo_args, policy.model, policy.tokenizer)
    strategies = tuple(task.strategies())
    refs = {x.id: task.reference_match_sets(x) for x in pool}

    n_iid = cfg.grpo.reference_samples(cfg.budget)
    prompts = [policy.prompt(task, x) for x in pool]
    ids = [x.id for x in pool]
    gains, covers, widths = [], [], []
    started = time.perf_counter()
    for i in range(args.seeds):
        iid = reference_iid(
            policy.model,
            policy.tokenizer,
            grpo_args,
            as_labeler(task),
            ids,
            pool,
            prompts,
            n_iid,
            seed=seed_of(11, i),
            decode=policy.decode,
        )
        iid_curves = iid.curves(cfg.budget, seed=seed_of(12, i))
        oracle = OracleBaseline(refs, strategies=strategies, seed=2).curves(cfg.budget, rarity=iid)
        rollout = rung3._measure_pool(policy, task, pool, cfg, gen, seed_of(13, i))
        comp = runner.compare(
            task.name, strategies, 1, {"reference": rollout}, iid_curves, oracle, seed_of(14, i), []
        )
        gain = comp.policies[0].gain
        gains.append(gain.value)
        covers.append(gain.lo <= 0.0 <= gain.hi)
        widths.append(gain.hi - gain.lo)
    g = np.array(gains)
    share = float(np.mean(covers))
    se = (share * (1 - share) / len(covers)) ** 0.5
    print(
        f"{task.name}, {len(pool)} pool prompts, K = {cfg.budget}, {args.pool_runs} runs of K and "
        f"{n_iid} reference samples per prompt, {args.seeds} seeds:"
    )
    print(f"  gain of the reference against its own samples: mean {g.mean():+.3f}, sd {g.std(ddof=1):.3f}")
    print(f"  95% gain CI contains 0: {share:.3f} ± {se:.3f} (target 0.95); mean width {np.mean(widths):.3f}")
    print(f"  ({time.perf_counter() - started:.0f} s)")


def parse() -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Args()
    p.add_argument("--seeds", type=int, default=d.seeds)
    p.add_argument("--pool-runs", type=int, default=d.pool_runs)
    p.add_argument("--iid-samples", type=int, default=d.iid_samples)
    p.add_argument("--cache-dir", default=d.cache_dir)
    return Args(**vars(p.parse_args()))


if __name__ == "__main__":
    main(parse())

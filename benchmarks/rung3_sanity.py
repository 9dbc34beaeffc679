"""Calibration of rung 3's learning-rate-0 sanity: the base LM measured against its own samples.

With lr = 0 GRPO leaves the weights unchanged (checked: the largest parameter change after 60 steps
is 0.0), so the sanity run's gain is the gain of the reference model against its own iid sample,
true value 0. One ladder run gives one draw of it; this script gives many: for each measurement seed
it draws the reference iid (``grpo.iid_samples`` per pool prompt) and ``grpo.pool_runs`` fresh runs
of K per pool prompt exactly as ``seffi ladder`` rung 3 does (same pool, generation settings, code
path: :func:`seffi.models.grpo.reference_iid`, the rung's pool measurement and the runner's
comparison), and prints the gain's mean and spread and how often its 95 % interval contains 0.

``--held-out`` measures rung 3's other gain the same way: ``PassAtKEval``'s held-out gain vs the base
(the ladder's held-out prompts, n samples each; :func:`seffi.models.passk.gain_vs_base`, its interval
over prompts), the base LM evaluated twice per measurement seed with independent samples. It also
recomputes the ladder's own lr = 0 draw (the reference evaluation against the evaluation at the last
step, same seeds as ``seffi ladder``: the table's "held-out gain vs base" of the sanity row).
``--no-pool`` skips the pool measurement. ``benchmarks/passk_calibration.py`` does the same from known
laws, without a model.

Needs the ``lm`` and ``trl`` extras and the ladder's cached base LM (``seffi ladder`` trains it once,
or this script does, in about 6 minutes on 2 busy cores). Run ``python benchmarks/rung3_sanity.py``
(about 9 minutes for 40 seeds on 2 busy cores; ``--held-out`` adds about 3); ``--pool-runs 4
--iid-samples 32`` measures the design rung 3 had before.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class Args:
    """Arguments.

    Attributes:
        seeds: Measurement seeds (each: a fresh iid sample and fresh pool runs).
        pool_runs: Runs of K per pool prompt on the policy side (rung 3's ``grpo.pool_runs``).
        iid_samples: Reference samples per pool prompt (``None``: rung 3's default, 16 K).
        cache_dir: Model cache (default ``$SEFFI_CACHE``).
        held_out: Also measure ``PassAtKEval``'s held-out gain interval.
        pool: Measure the pool gain.
    """

    seeds: int = 40
    pool_runs: int = 16
    iid_samples: int | None = None
    cache_dir: str | None = None
    held_out: bool = False
    pool: bool = True


def main(args: Args) -> None:
    import torch

    from seffi.callbacks.trl_model import generation_config
    from seffi.experiment import ladder_rung3 as rung3
    from seffi.experiment.ladder import LadderConfig, spawn
    from seffi.models.cache import build_task
    from seffi.models.grpo import base_lm_folder, trl_policy

    torch.set_num_threads(1)
    grpo = {"pool_runs": args.pool_runs, "iid_samples": args.iid_samples}
    cfg = LadderConfig(grpo=grpo, cache_dir=args.cache_dir)
    lm_cfg = cfg.lm_config()
    task = build_task(lm_cfg)
    policy = trl_policy(base_lm_folder(lm_cfg, cfg.cache_dir), task)  # only the base LM is needed
    pool_seed, *_, rung3_seed = spawn(cfg.seed, 6)  # the ladder's pool and rung-3 seeds
    pool = task.make_inputs(cfg.n_inputs, seed=int(pool_seed.generate_state(1)[0]))
    grpo_args = rung3.grpo_config(
        cfg, cfg.grpo, Path("unused"), lr=0.0, max_new=policy.max_new_tokens, suppress=policy.suppress,
        seed=cfg.seed,
    )  # fmt: skip
    gen = generation_config(grpo_args, policy.model, policy.tokenizer)
    if args.pool:
        pool_gain(args, cfg, task, pool, policy, grpo_args, gen)
    if args.held_out:
        held_out_gain(args, cfg, task, pool, policy, grpo_args, int(rung3_seed.generate_state(1)[0]))


def pool_gain(
    args: Args, cfg: Any, task: Any, pool: list[Any], policy: Any, grpo_args: Any, gen: Any
) -> None:
    """The pool gain of the reference against its own iid sample, over measurement seeds."""
    from rich.progress import Progress

    from seffi._seeding import seed_of
    from seffi.coverage import OracleBaseline
    from seffi.experiment import ladder_rung3 as rung3
    from seffi.experiment.runner import Runner
    from seffi.labelers import as_labeler
    from seffi.models.grpo import reference_iid

    runner = Runner(cfg.run_config(), [], Progress(disable=True))
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


def held_out_gain(
    args: Args, cfg: Any, task: Any, pool: list[Any], policy: Any, grpo_args: Any, root: int
) -> None:
    """PassAtKEval's held-out gain of the base LM against itself, with its interval over prompts."""
    from seffi._seeding import seed_of
    from seffi.experiment import ladder_rung3 as rung3
    from seffi.models.passk import PassAtKEval, gain_vs_base

    s = cfg.grpo
    held_out = rung3.held_out_inputs(task, {x.id for x in pool}, s.eval_inputs, seed_of(root, 1))

    def gain(seed: int, salts: tuple[int, int]) -> Any:
        ev = PassAtKEval(
            task, held_out, prompt=policy.prompt, n=s.eval_samples, decode=policy.decode, seed=seed
        )
        base, again = (ev.evaluate(policy.model, policy.tokenizer, grpo_args, salt=t) for t in salts)
        return gain_vs_base(again, base, ev.oracle_aucs(cfg.budget), cfg.budget)

    started = time.perf_counter()
    ladder = gain(root, (0, s.steps))  # the ladder's reference and its lr = 0 run's last evaluation
    print(
        f"{task.name}, {len(held_out)} held-out prompts, n = {s.eval_samples}, K = {cfg.budget}; the "
        f"ladder's lr = 0 held-out gain vs base: {ladder.value:+.3f} [{ladder.lo:+.3f}, {ladder.hi:+.3f}]"
    )
    values, hits, widths = [], [], []
    for i in range(args.seeds):
        g = gain(seed_of(15, i), (0, 1))
        values.append(g.value)
        hits.append(g.lo is not None and g.lo <= 0.0 <= g.hi)
        widths.append(g.hi - g.lo if g.lo is not None else np.nan)
    v = np.array(values)
    share = float(np.mean(hits))
    se = (share * (1 - share) / args.seeds) ** 0.5
    print(f"  base LM against itself, {args.seeds} seeds: gain mean {v.mean():+.3f}, sd {v.std(ddof=1):.3f}")
    print(
        f"  95% CI over prompts contains 0: {share:.3f} ± {se:.3f} (target 0.95); "
        f"mean width {np.nanmean(widths):.3f}"
    )
    print(f"  ({time.perf_counter() - started:.0f} s)")


def parse() -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Args()
    p.add_argument("--seeds", type=int, default=d.seeds)
    p.add_argument("--pool-runs", type=int, default=d.pool_runs)
    p.add_argument("--iid-samples", type=int, default=d.iid_samples)
    p.add_argument("--cache-dir", default=d.cache_dir)
    p.add_argument("--held-out", action="store_true", help="also measure PassAtKEval's held-out gain")
    p.add_argument("--no-pool", dest="pool", action="store_false", help="skip the pool gain")
    return Args(**vars(p.parse_args()))


if __name__ == "__main__":
    main(parse())

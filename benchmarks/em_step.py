"""Cost of one online-EM step of the ladder's mixture: the E-step's scoring batch size, side by side.

An online-EM step scores a minibatch of 64 rows under all L codes (the E-step: 64 L sequences through
the model, no gradient) and then takes one gradient step on the 64 rows (the M-step). This script
times the E-step with several scoring batch sizes, interleaved so the machine's drift hits them all
alike, against the M-step, and checks that each batch size gives the same code assignments
(``balanced_argmax``) as the reference batch of 512 on every minibatch. It prints each time as a ratio
to the reference and the estimated wall time of the ladder's online EM (its step count times E + M).

Needs the ``lm`` extra and the ladder's cached models (``seffi ladder`` trains them once, or this script
does). Run ``python benchmarks/em_step.py`` (about 2 minutes on 2 shared cores).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np


@dataclass
class Args:
    """Arguments.

    Attributes:
        batch_sizes: Scoring batch sizes to compare (sequences per forward pass); the largest is the
            reference.
        minibatches: EM minibatches of 64 rows timed per batch size.
        reps: Interleaved passes over the batch sizes (the median pass counts).
        cache_dir: Model cache (default ``$SEFFI_CACHE``).
    """

    batch_sizes: tuple[int, ...] = (32, 64, 128, 256, 512)
    minibatches: int = 8
    reps: int = 3
    cache_dir: str | None = None


def main(args: Args) -> None:
    import torch
    from rich.progress import Progress

    from seffi.experiment.ladder import LadderConfig, _train_models
    from seffi.models.cache import mixture_rows, training_rows
    from seffi.models.mixture import _examples, _Trainer, balanced_argmax, code_scores

    torch.set_num_threads(1)
    cfg = LadderConfig(cache_dir=args.cache_dir)
    lm_cfg = cfg.lm_config()
    models = _train_models(lm_cfg, cfg.cache_dir, Progress(disable=True))
    lm, mix = models.mixture, lm_cfg.mixture
    n_codes = int(lm.meta["n_codes"])
    rows = mixture_rows(lm_cfg, training_rows(lm_cfg, models.task))
    order = np.random.default_rng(0).permutation(len(rows))
    parts = [[rows[i] for i in order[b * 64 : (b + 1) * 64]] for b in range(args.minibatches)]
    reference = max(args.batch_sizes)

    seconds: dict[int, list[float]] = {bs: [] for bs in args.batch_sizes}
    assignments: dict[int, list[np.ndarray]] = {}
    max_diff = dict.fromkeys(args.batch_sizes, 0.0)
    ref_scores = [code_scores(lm, p, n_codes, batch_size=reference) for p in parts]
    for _ in range(args.reps):
        for bs in args.batch_sizes:
            started = time.perf_counter()
            scores = [code_scores(lm, p, n_codes, batch_size=bs) for p in parts]
            seconds[bs].append((time.perf_counter() - started) / len(parts))
            assignments[bs] = [balanced_argmax(s, mix.capacity) for s in scores]
            diff = max(float(np.abs(s - r).max()) for s, r in zip(scores, ref_scores, strict=True))
            max_diff[bs] = max(max_diff[bs], diff)

    trainer = _Trainer(lm.copy(), mix.lr)
    m_seconds = []
    for _ in range(args.reps):
        started = time.perf_counter()
        for p, z in zip(parts, assignments[reference], strict=True):
            trainer.step(_examples(lm.layout, p, z, np.arange(len(p)), mix))
        m_seconds.append((time.perf_counter() - started) / len(parts))
    m_step = float(np.median(m_seconds))

    steps = int(np.ceil(len(rows) / 64)) * mix.rounds * mix.epochs_per_round
    ref_time = float(np.median(seconds[reference]))
    print(f"{models.task.name}: {len(rows)} EM rows, L = {n_codes}, {steps:.0f} online steps of 64 rows")
    print(f"M-step (one gradient step on 64 rows): {m_step * 1e3:.0f} ms")
    print(
        "scoring batch | E-step per minibatch | vs reference | same assignments | max |diff| (nats) "
        "| online EM"
    )
    for bs in args.batch_sizes:
        e_step = float(np.median(seconds[bs]))
        same = all(
            np.array_equal(a, b) for a, b in zip(assignments[bs], assignments[reference], strict=True)
        )
        print(
            f"{bs:>13} | {e_step * 1e3:>17.0f} ms | {ref_time / e_step:>11.2f}x | {same!s:>16} | "
            f"{max_diff[bs]:>17.1e} | {steps * (e_step + m_step):>6.0f} s"
        )


def parse() -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Args()
    p.add_argument("--batch-sizes", type=int, nargs="+", default=list(d.batch_sizes))
    p.add_argument("--minibatches", type=int, default=d.minibatches)
    p.add_argument("--reps", type=int, default=d.reps)
    p.add_argument("--cache-dir", default=d.cache_dir)
    a = p.parse_args()
    return Args(tuple(a.batch_sizes), a.minibatches, a.reps, a.cache_dir)


if __name__ == "__main__":
    main(parse())

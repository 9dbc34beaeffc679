"""Wall time of the ladder's online EM by E-step scorer, side by side in fresh processes.

Each online-EM step scores a minibatch of 64 rows under all L codes (the E-step: 64 L sequences through
the model, no gradient), then takes one gradient step on them (the M-step); the E-step is most of the
cost. Two scorers:

* ``full:B`` — every row's L sequences ``prompt <sep> <z> trace`` scored whole, ``B`` sequences per
  forward pass (the straightforward scorer, the reference);
* ``shared:B`` — :func:`seffi.models.mixture.code_scores` as shipped: each distinct row's prompt runs
  once and its KV cache is shared by the L code branches, ``B`` sequences per pass.

The script runs the ladder's EM (its rows, model and settings, cut to ``--rounds`` rounds and no
settling epochs) once per scorer and repetition, each in a fresh process so every run starts from the
same memory state, alternating the order between repetitions so the shared machine's drift hits every
scorer alike. It prints the median wall time per scorer, the ratio to the first, and whether the
assignments and the trained weights equal the first's.

Needs the ``lm`` extra and the ladder's cached base LM (``seffi ladder`` trains it once, or this script
does). Run ``python benchmarks/em_step.py`` (about 5 minutes on 2 shared cores; ``--rounds 8`` is the
ladder's whole online phase, about 25 minutes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Args:
    """Arguments.

    Attributes:
        scorers: E-step scorers to compare, ``full:B`` or ``shared:B``; the first is the reference.
        rounds: Online-EM rounds (passes over the ladder's EM rows) per run.
        reps: Runs per scorer.
        cache_dir: Model cache (default ``$SEFFI_CACHE``).
        child: Internal: run one EM with this scorer and print its result as JSON.
    """

    scorers: tuple[str, ...] = ("full:512", "full:128", "shared:128")
    rounds: int = 1
    reps: int = 2
    cache_dir: str | None = None
    child: str | None = None


def full_sequence_scorer(batch_size: int) -> Any:
    """The E-step that scores each row's L sequences whole (:meth:`TaskLM.score`)."""
    from seffi.models.lm import examples_from_rows

    def code_scores(lm: Any, rows: Any, n_codes: int) -> Any:
        examples = []
        for z in range(n_codes):
            examples += examples_from_rows(lm.layout, rows, [z] * len(rows))
        return lm.score(examples, batch_size=batch_size).reshape(n_codes, len(rows)).T.copy()

    return code_scores


def run_em(args: Args) -> dict[str, Any]:
    """One EM run with scorer ``args.child``: wall seconds and digests of its output."""
    import numpy as np
    import torch
    from rich.progress import Progress

    from seffi.experiment.ladder import LadderConfig, _train_models
    from seffi.models import mixture
    from seffi.models.cache import mixture_rows, training_rows

    torch.set_num_threads(1)
    lm_cfg = LadderConfig(cache_dir=args.cache_dir).lm_config()
    models = _train_models(lm_cfg, args.cache_dir, Progress(disable=True))
    rows = mixture_rows(lm_cfg, training_rows(lm_cfg, models.task))
    em = lm_cfg.mixture.model_copy(update={"rounds": args.rounds, "final_epochs": 0.0})
    kind, batch = str(args.child).split(":")
    shipped = mixture.code_scores
    if kind == "full":
        mixture.code_scores = full_sequence_scorer(int(batch))  # the E-step looks it up at call time
    else:
        mixture.code_scores = lambda lm, rows, n: shipped(lm, rows, n, batch_size=int(batch))
    started = time.perf_counter()
    result = mixture.train_mixture(models.base, rows, int(models.mixture.meta["n_codes"]), em)
    seconds = time.perf_counter() - started
    weights = hashlib.sha256()
    for p in result.model.model.parameters():
        weights.update(p.detach().numpy().tobytes())
    assignments = hashlib.sha256(np.asarray(result.assignments, dtype=np.int64).tobytes()).hexdigest()
    return {"seconds": seconds, "assignments": assignments, "weights": weights.hexdigest(), "rows": len(rows)}


def main(args: Args) -> None:
    from rich.progress import Progress

    from seffi.experiment.ladder import LadderConfig, _train_models

    lm_cfg = LadderConfig(cache_dir=args.cache_dir).lm_config()
    _train_models(lm_cfg, args.cache_dir, Progress(disable=True))  # train once, outside the timings
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in args.scorers}
    for rep in range(args.reps):
        for scorer in args.scorers if rep % 2 == 0 else args.scorers[::-1]:
            cmd = [sys.executable, __file__, "--child", scorer, "--rounds", str(args.rounds)]
            if args.cache_dir:
                cmd += ["--cache-dir", args.cache_dir]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results[scorer].append(json.loads(out.strip().splitlines()[-1]))
            print(f"  run {rep + 1}, {scorer}: {results[scorer][-1]['seconds']:.1f} s", flush=True)
    ref = results[args.scorers[0]][0]
    ref_time = statistics.median(r["seconds"] for r in results[args.scorers[0]])
    print(
        f"{lm_cfg.task}: online EM, {ref['rows']} rows, {args.rounds} round(s), median of {args.reps} "
        "fresh-process runs per scorer"
    )
    print("E-step scorer | EM wall time | time ratio | same assignments | same weights")
    for scorer in args.scorers:
        t = statistics.median(r["seconds"] for r in results[scorer])
        same_z = all(r["assignments"] == ref["assignments"] for r in results[scorer])
        same_w = all(r["weights"] == ref["weights"] for r in results[scorer])
        print(f"{scorer:>13} | {t:>10.1f} s | {t / ref_time:>9.2f}x | {same_z!s:>16} | {same_w!s:>12}")


def parse() -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Args()
    p.add_argument("--scorers", nargs="+", default=list(d.scorers))
    p.add_argument("--rounds", type=int, default=d.rounds)
    p.add_argument("--reps", type=int, default=d.reps)
    p.add_argument("--cache-dir", default=d.cache_dir)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    return Args(tuple(a.scorers), a.rounds, a.reps, a.cache_dir, a.child)


if __name__ == "__main__":
    parsed = parse()
    if parsed.child is not None:
        print(json.dumps(run_em(parsed)))
    else:
        main(parsed)

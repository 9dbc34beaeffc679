"""Cost of seffi's TRL reward function per completion, against the labeler it wraps.

GRPO calls each reward function once per generation step with every completion of the step, as
``reward(prompts=..., completions=..., input_id=..., **kwargs)``. This script makes that call on
synthetic completions (no model, no trainer) and prints, in one run, CPU microseconds per completion:

* **labeler alone** — the 4-pattern regex rubric (`seffi.labelers.as_labeler` of a
  ``{strategy: regex}`` mapping) called on each completion, what any rubric-based reward pays;
* **GRPOCoverage.reward** — `seffi.callbacks.trl.GRPOCoverage`'s reward with that rubric
  (``reward="valid"``, ``iid=None``, no W&B, ``plots=False``, a temporary ``out_dir``), called once
  per step: it labels the completions, records each prompt's group as one run of a
  ``CoverageMonitor`` (K = the group size) and returns the rewards;
* **ratio** — the wrapper over the labeler alone, per repetition (target: <= 1.2x), and the
  wrapper's extra microseconds per completion.

A step holds ``--prompts`` prompts x ``--generations`` completions, laid out as TRL lays them out
(each prompt's completions adjacent); each step draws its prompts from a pool of ``--pool`` ids, so
prompts recur across steps as they do over epochs. A completion is ``--words`` words (drawn uniformly
between the two bounds) of filler with each rubric word present with probability 0.3, so completions
match 0-4 strategies. The callback's periodic log (``on_log``) is not a part of the reward call and is
not timed here (``benchmarks/peers.py`` times the monitor's logging).

The last two rows are the wall time spent in Python's garbage collector per completion in each arm (timed
by ``gc.callbacks``, included in the figures above): objects a reward keeps alive across calls are
promoted to the oldest generation and bring full collections over the whole heap (which torch and
transformers make large) sooner.

Repetitions alternate the two arms' order (labeler first in even repetitions), each wrapper
repetition with a fresh ``GRPOCoverage``; every figure is shown as min and median over repetitions
(the ratio: of the per-repetition ratios). CPU time (``time.process_time``) of this process.

    python benchmarks/trl_reward.py                  # ~1 minute on 2 shared cores
    python benchmarks/trl_reward.py --steps 50 --reps 3 --profile 25
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any

#: The rubric: four strategies of a code-writing task, each a word-boundary pattern.
RUBRIC = {
    "recursion": r"\brecurs\w*",
    "memo": r"\bmemo\w*|\bcache\b",
    "loop": r"\bfor\b[^.\n]*\bin\b",
    "closed_form": r"\bformula\b|\bclosed form\b",
}
#: Words that make a completion match the rubric (one or more per strategy).
HITS = ("recursive", "memoize", "for each in", "formula")
FILLER = (
    "the we then so value list return step first next result compute sum of a number and it is "
    "this that with from to by our each call base case answer"
).split()


@dataclass
class Args:
    """Arguments.

    Attributes:
        prompts: Prompts per step (TRL: the per-device batch over ``num_generations``).
        generations: Completions per prompt (``num_generations``, G; K = G).
        steps: Reward calls per repetition.
        pool: Distinct prompt ids the steps draw from.
        words: Completion length in words, drawn uniformly between the two bounds.
        reps: Repetitions of each arm.
        seed: Seed of the synthetic completions.
        profile: Print the top N functions of a cProfile of one wrapper repetition (0: none).
    """

    prompts: int = 64
    generations: int = 8
    steps: int = 300
    pool: int = 1024
    words: tuple[int, int] = (40, 160)
    reps: int = 5
    seed: int = 0
    profile: int = 0


def make_steps(a: Args) -> list[dict[str, list[Any]]]:
    """The steps' reward-function arguments: prompts, completions and input ids, TRL's layout."""
    rng = random.Random(a.seed)
    steps = []
    for _ in range(a.steps):
        ids = [f"p{rng.randrange(a.pool)}" for _ in range(a.prompts)]
        input_id = [i for i in ids for _ in range(a.generations)]
        completions = []
        for _ in input_id:
            words = rng.choices(FILLER, k=rng.randint(*a.words))
            for hit in HITS:
                if rng.random() < 0.3:
                    words.insert(rng.randrange(len(words) + 1), hit)
            completions.append(" ".join(words) + ".")
        steps.append({"prompts": [f"Solve task {i}." for i in input_id], "completions": completions,
                      "input_id": input_id})  # fmt: skip
    return steps


def labeler_arm(steps: list[dict[str, list[Any]]]) -> float:
    """CPU seconds of the rubric alone over every completion of every step."""
    from seffi.labelers import as_labeler

    labeler = as_labeler(RUBRIC)
    start = time.process_time()
    for s in steps:
        [labeler(p, t) for p, t in zip(s["prompts"], s["completions"], strict=True)]
    return time.process_time() - start


def wrapper(a: Args, out: str) -> Any:
    """A fresh `GRPOCoverage` configured as the trainer's ``on_train_begin`` would (G completions)."""
    from seffi.callbacks.trl import GRPOCoverage

    cov = GRPOCoverage(labeler=RUBRIC, iid=None, out_dir=out, n_boot=0, plots=False)
    cov.configure_groups(a.generations)
    return cov


def wrapper_arm(a: Args, steps: list[dict[str, list[Any]]], out: str) -> float:
    """CPU seconds of the reward calls, one per step."""
    reward = wrapper(a, out).reward
    start = time.process_time()
    for s in steps:
        reward(**s)
    return time.process_time() - start


def profile(a: Args, steps: list[dict[str, list[Any]]], top: int) -> str:
    """cProfile of one wrapper repetition, the top functions by internal time."""
    with tempfile.TemporaryDirectory() as tmp:
        reward = wrapper(a, tmp).reward
        prof = cProfile.Profile()
        prof.enable()
        for s in steps:
            reward(**s)
        prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


class GcClock:
    """Wall seconds spent in the garbage collector since `reset`."""

    def __init__(self) -> None:
        self.seconds, self._start = 0.0, 0.0
        gc.callbacks.append(self._on)

    def _on(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start

    def reset(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


def main(a: Args) -> None:
    steps = make_steps(a)
    n = a.steps * a.prompts * a.generations
    lab: list[float] = []
    wrap: list[float] = []
    gc_lab: list[float] = []
    gc_wrap: list[float] = []
    clock = GcClock()
    wrapper(a, tempfile.mkdtemp())  # imports (transformers, torch.distributed) outside the timings
    for rep in range(a.reps):
        with tempfile.TemporaryDirectory() as tmp:
            for arm in ("labeler", "wrapper") if rep % 2 == 0 else ("wrapper", "labeler"):
                clock.reset()
                if arm == "labeler":
                    lab.append(labeler_arm(steps) / n * 1e6)
                    gc_lab.append(clock.reset() / n * 1e6)
                else:
                    wrap.append(wrapper_arm(a, steps, tmp) / n * 1e6)
                    gc_wrap.append(clock.reset() / n * 1e6)
        print(
            f"  rep {rep + 1}: labeler {lab[-1]:.1f} us, wrapper {wrap[-1]:.1f} us per completion", flush=True
        )
    ratios = [w / b for w, b in zip(wrap, lab, strict=True)]
    extra = [w - b for w, b in zip(wrap, lab, strict=True)]
    print(
        f"{a.steps} steps x {a.prompts} prompts x {a.generations} completions = {n} completions, "
        f"{a.words[0]}-{a.words[1]} words each, {a.reps} repetitions (CPU us per completion)"
    )
    print(f"{'':>26} | {'min':>8} | {'median':>8}")
    rows = (("labeler alone", lab, "us"), ("GRPOCoverage.reward", wrap, "us"),
            ("wrapper extra", extra, "us"), ("ratio wrapper/labeler", ratios, "x"),
            ("gc in labeler alone", gc_lab, "us"), ("gc in GRPOCoverage.reward", gc_wrap, "us"))  # fmt: skip
    for name, vals, unit in rows:
        print(f"{name:>26} | {min(vals):>6.2f}{unit:>2} | {statistics.median(vals):>6.2f}{unit:>2}")
    print(f"target: ratio <= 1.2x (median {statistics.median(ratios):.2f}x)")
    if a.profile:
        print(profile(a, steps, a.profile))


def parse() -> Args:
    d = Args()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=d.prompts, help="prompts per step")
    p.add_argument("--generations", type=int, default=d.generations, help="completions per prompt (G = K)")
    p.add_argument("--steps", type=int, default=d.steps, help="reward calls per repetition")
    p.add_argument("--pool", type=int, default=d.pool, help="distinct prompt ids")
    p.add_argument("--words", type=int, nargs=2, default=list(d.words), metavar=("MIN", "MAX"))
    p.add_argument("--reps", type=int, default=d.reps, help="repetitions of each arm")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--profile", type=int, default=d.profile, metavar="N", help="cProfile top N (0: off)")
    x = p.parse_args()
    return Args(x.prompts, x.generations, x.steps, x.pool, tuple(x.words), x.reps, x.seed, x.profile)


if __name__ == "__main__":
    main(parse())

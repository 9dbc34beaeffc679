"""validate_y_text throughput per task (calls/s), side by side. Run on its own:

    python benchmarks/tasks.py [--seconds 0.5]

For each task: a fixed seeded pool of inputs and a mix of texts a generator produces — base-sampler
draws (reference, invalid, off-strategy), truncated traces and word-mutated traces — validated in a
loop for about ``--seconds``. Also reports one 1 MB junk string and one near-cap (~90 kB) trace, and
the slowest single call over the huge inputs of ``tests/tasks/test_contract.py`` (1 MB of one letter,
of random code points, of random bytes, of repeated steps and of repeated answers; a trace just under
the length cap; a 49,000-number line) beside the budget of 1 s per call, with the input that took it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from seffi.tasks import get_task, list_tasks
from seffi.tasks.summary import input_pool

ROOT = Path(__file__).resolve().parents[1]


def workload(task, n_inputs: int = 20, per_input: int = 30, seed: int = 0):
    rng = np.random.default_rng(seed)
    pairs = []
    for x in input_pool(task, n_inputs, seed):
        for _ in range(per_input):
            text = task.sample_y_text(x, rng)
            kind = rng.integers(3)
            if kind == 1:
                text = text[: int(rng.integers(len(text)))]
            elif kind == 2:
                words = text.split(" ")
                words[int(rng.integers(len(words)))] = str(rng.integers(10))
                text = " ".join(words)
            pairs.append((x, text))
    return pairs


def rate(task, pairs, seconds: float) -> float:
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for x, text in pairs:
            task.validate_y_text(x, text)
        calls += len(pairs)
    return calls / (time.perf_counter() - start)


def once(task, x, text: object) -> float:
    start = time.perf_counter()
    task.validate_y_text(x, text)
    return time.perf_counter() - start


#: The most one validate_y_text call on a huge input may take, in seconds.
HUGE_BUDGET = 1.0


def main() -> None:
    if str(ROOT) not in sys.path:  # the huge inputs live beside the task-contract test
        sys.path.insert(0, str(ROOT))
    from tests.tasks.huge_inputs import huge_inputs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5)
    args = parser.parse_args()
    print(
        f"{'task':16s} {'calls/s':>10s} {'us/call':>8s} {'1MB junk ms':>12s} {'90kB trace ms':>14s} "
        f"{'huge max ms':>12s} {'budget ms':>10s}  slowest huge input"
    )
    for name in list_tasks():
        task = get_task(name)
        pairs = workload(task)
        r = rate(task, pairs, args.seconds)
        x = pairs[0][0]
        ref = task.solve(x, task.feasible_strategies(x)[0])
        junk = once(task, x, "answer 1 " * 111_112)
        near = once(
            task, x, ("\n".join([ref.split("\n")[0]] * (90_000 // len(ref.split("\n")[0]))) + "\nanswer 1")
        )
        huge = {label: once(task, x, text) for label, text in huge_inputs(task, x).items()}
        slowest = max(huge, key=huge.__getitem__)
        print(
            f"{name:16s} {r:10.0f} {1e6 / r:8.1f} {junk * 1e3:12.3f} {near * 1e3:14.3f} "
            f"{huge[slowest] * 1e3:12.1f} {HUGE_BUDGET * 1e3:10.0f}  {slowest}"
        )


if __name__ == "__main__":
    main()

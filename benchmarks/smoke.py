"""Wall time of the two ``--smoke`` commands, side by side with the budget each one's ``--help`` states.

Runs, in one go, ``seffi ladder --smoke`` (rungs 1-3 on tiny models) and ``seffi bench exploration
--smoke`` (every method, one seed, 2 GRPO steps each), each as its own ``python -m seffi.cli``
process the way a user starts it: ``--out`` a fresh folder, ``--no-progress``, offline W&B writing
beside it, one torch/BLAS thread, and an empty model cache (``$SEFFI_CACHE`` in a fresh folder), so
the time includes training the tiny models, as on a first run. ``--warm`` adds a second run of each
command on the model cache its first run filled.

Prints one row per command: the wall seconds of each repetition, their median, the budget read from
the command's ``--help`` (the ``(<= 90 s)`` or ``(< 60 s)`` of its ``--smoke`` option), the median's
share of it, and the exit code. Repetitions alternate the order of the two commands so the shared
machine's drift hits both alike.

    python benchmarks/smoke.py                 # about 40 s on 2 shared cores
    python benchmarks/smoke.py --reps 3 --warm
    python benchmarks/smoke.py --only ladder

Needs the ``lm`` and ``trl`` extras (the smoke runs train tiny LMs and run GRPO).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "ladder": ["ladder", "--smoke"],
    "bench": ["bench", "exploration", "--smoke"],
}
THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def seffi(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m seffi.cli argv`` in ``cwd`` with ``env``, its output captured."""
    cmd = [sys.executable, "-m", "seffi.cli", *argv]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def budget(name: str) -> tuple[str, float | None]:
    """The ``--smoke`` budget stated in ``seffi <command> --help``: its text ("<= 90 s") and seconds."""
    out = seffi([*COMMANDS[name][:-1], "--help"], Path.cwd(), {**os.environ, "COLUMNS": "400"}).stdout
    line = next((ln for ln in out.splitlines() if ln.strip().startswith("--smoke")), "")
    found = re.search(r"\((<=?) (\d+(?:\.\d+)?) s\)", line)
    if found is None:
        return "?", None
    return f"{found.group(1)} {found.group(2)} s", float(found.group(2))


def timed(name: str, root: Path, cache: Path, tag: str) -> tuple[float, int, str]:
    """Wall seconds, exit code and last output line of one smoke run with the model cache ``cache``."""
    run = root / f"{name}-{tag}"
    run.mkdir()
    env = {**os.environ, **THREADS, "SEFFI_CACHE": str(cache), "WANDB_MODE": "offline", "WANDB_DIR": str(run)}
    argv = [*COMMANDS[name], "--out", str(run / "out"), "--no-progress"]
    start = time.perf_counter()
    done = seffi(argv, run, env)
    seconds = time.perf_counter() - start
    lines = (done.stdout.strip() or done.stderr.strip() or "(no output)").splitlines()
    return seconds, done.returncode, lines[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1, help="cold-cache runs of each command (default 1)")
    parser.add_argument("--warm", action="store_true", help="also one run of each on the filled cache")
    parser.add_argument("--only", choices=sorted(COMMANDS), action="append", help="one command (repeatable)")
    args = parser.parse_args()
    names = args.only or list(COMMANDS)
    cold: dict[str, list[float]] = {n: [] for n in names}
    warm: dict[str, float] = {}
    codes: dict[str, set[int]] = {n: set() for n in names}
    with tempfile.TemporaryDirectory(prefix="seffi-smoke-") as tmp:
        root = Path(tmp)
        for rep in range(args.reps):
            for name in names if rep % 2 == 0 else names[::-1]:
                cache = root / f"cache-{name}-{rep}"
                seconds, code, last = timed(name, root, cache, f"cold{rep}")
                cold[name].append(seconds)
                codes[name].add(code)
                what = f"run {rep + 1}, empty cache"
                print(f"  {name} {what}: {seconds:.1f} s, exit {code}: {last}", flush=True)
                if args.warm and rep == 0:
                    seconds, code, last = timed(name, root, cache, "warm")
                    warm[name] = seconds
                    codes[name].add(code)
                    print(f"  {name}, filled cache: {seconds:.1f} s, exit {code}: {last}", flush=True)
    print(f"{sys.platform}, {os.cpu_count()} cores, one thread per process; wall seconds")
    head = "| command | empty cache, each run | median | budget (--help) | median / budget |"
    head += " filled cache |" if args.warm else ""
    print(head + " exit |")
    print("|---|---|---|---|---|" + ("---|" if args.warm else "") + "---|")
    for name in names:
        text, limit = budget(name)
        median = statistics.median(cold[name])
        share = f"{median / limit:.2f}" if limit else "?"
        each = ", ".join(f"{s:.1f}" for s in cold[name])
        row = f"| seffi {' '.join(COMMANDS[name])} | {each} | {median:.1f} | {text} | {share} |"
        row += f" {warm[name]:.1f} |" if args.warm else ""
        print(row + f" {', '.join(map(str, sorted(codes[name])))} |")


if __name__ == "__main__":
    main()

"""Cost of ``seffi score`` on files of generations: wall time and peak memory as the files grow.

Writes, once per size, a policy file and a base file in the ``rows`` layout (one JSON line per
completion: ``prompt_id``, ``completion``, ``correct``, ``strategy``) with ``--samples`` completions
per prompt; a completion is 20-60 filler words with each of the four rubric words present with
probability 0.3 (so it matches 0-4 strategies), and its ``strategy`` field holds the same labels
precomputed. Then, each in its own process (``seffi.cli.main``, W&B disabled, no plots; the command
reads the base files and computes their iid curves in a second process of its own), it runs:

* **rubric** — ``seffi score POLICY --base BASE --rubric RUBRIC``: a 4-pattern regex rubric labels
  every completion of both files;
* **labels** — ``--labels strategy``: the labels precomputed in the files;
* **ray** — the rubric again with ``--ray 2``: two local Ray workers label and track half the prompts
  each, the driver merges their trackers; its report.json must equal the rubric run's to 1e-12
  (every number of both files read and compared; the run stops otherwise).

and prints, side by side, the wall and CPU seconds (user + system time of the command and of the
base files' process: on a shared machine the CPU time is the cost, the wall time also the wait; for
``ray`` the driver's only, its workers are Ray's processes), CPU microseconds per policy completion
and the peak resident memory (``ru_maxrss``; the command's plus its base process's) per size,
then the growth of the per-completion CPU time from the smallest size to the largest (linear in the
files: 1.0x). ``--out FILE`` also writes all of it to FILE under a header with the command, the
core count and the load average at the start and the end.
Targets at 10^6 completions on 2 cores: rubric <= 120 s and <= 1 GB; labels >= 10^6 completions
per 30 s.

    python benchmarks/score.py                                 # 10^4, 10^5, 10^6 completions
    python benchmarks/score.py --sizes 10000,100000 --n-boot 200
    nice -n 5 python benchmarks/score.py --out docs/results/benchmarks/score.txt
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUBRIC = {
    "recursion": r"\brecurs\w*",
    "memo": r"\bmemo\w*|\bcache\b",
    "loop": r"\bfor\b[^.\n]*\bin\b",
    "closed_form": r"\bformula\b|\bclosed form\b",
}
HITS = {"recursion": "recursive", "memo": "memoize", "loop": "for each in", "closed_form": "formula"}
FILLER = "the we then so value list return step first next result compute sum of a number and it is".split()


def write_files(folder: Path, completions: int, samples: int, seed: int) -> tuple[Path, Path]:
    """The policy and the base file of ``completions`` completions each (``samples`` per prompt)."""
    rng = random.Random(seed)
    paths = []
    for name in ("policy", "base"):
        path = folder / f"{name}-{completions}.jsonl"
        with path.open("w") as f:
            for i in range(completions):
                words = [rng.choice(FILLER) for _ in range(rng.randint(20, 60))]
                found = [s for s in RUBRIC if rng.random() < 0.3]
                for s in found:
                    words.insert(rng.randrange(len(words)), HITS[s])
                row = {"prompt_id": f"p{i // samples}", "completion": " ".join(words)}
                row |= {"correct": rng.random() < 0.7, "strategy": found}
                f.write(json.dumps(row) + "\n")
        paths.append(path)
    return paths[0], paths[1]


def run(argv: list[str], children: bool) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of ``seffi`` with ``argv`` in a fresh process.

    ``children``: add the CPU time of the processes it started and waited for (the base files'
    process) and the largest one's peak RSS (the sum of the peaks bounds the peak of the sum).
    """
    code = (
        "import resource, sys; from seffi.cli import main; rc = main(sys.argv[1:]); "
        "u, c = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)); "
        "print('maxrss', u.ru_maxrss, u.ru_utime + u.ru_stime, c.ru_maxrss, c.ru_utime + c.ru_stime, "
        "file=sys.stderr); sys.exit(rc)"
    )
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"seffi {' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    _, rss, cpu, child_rss, child_cpu = next(
        line for line in proc.stderr.splitlines() if line.startswith("maxrss ")
    ).split()
    if children:
        return wall, float(cpu) + float(child_cpu), (int(rss) + int(child_rss)) / 1024
    return wall, float(cpu), int(rss) / 1024


def numbers(path: Path) -> list[tuple[str, float]]:
    """Every number of a report.json with its path, ``meta`` (times, versions, the command) left out."""
    out: list[tuple[str, float]] = []

    def walk(x: object, where: str) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{where}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{where}[{i}]")
        elif isinstance(x, int | float) and not isinstance(x, bool):
            out.append((where, float(x)))

    walk({k: v for k, v in json.loads(path.read_text()).items() if k != "meta"}, "")
    return out


def agree(one: Path, other: Path, tol: float = 1e-12) -> tuple[int, float]:
    """The numbers two report.json files hold and their largest difference; stops if they differ."""
    a, b = numbers(one), numbers(other)
    if [w for w, _ in a] != [w for w, _ in b]:
        raise SystemExit(f"{one} and {other} hold different fields")
    worst = max((abs(x - y) for (_, x), (_, y) in zip(a, b, strict=True) if x == x or y == y), default=0.0)
    if not worst <= tol:
        where = next(w for (w, x), (_, y) in zip(a, b, strict=True) if not abs(x - y) <= tol)
        raise SystemExit(f"--ray and one process differ by {worst:.3g} (first at {where})")
    return len(a), worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="completions per file")
    ap.add_argument("--samples", type=int, default=16, help="completions per prompt (K)")
    ap.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates of the report")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="also write the output to this file")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    start, load = time.perf_counter(), os.getloadavg()[0]
    rows, checks = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rubric = folder / "rubric.yaml"
        rubric.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in RUBRIC.items()))
        arms = {
            "rubric": ["--rubric", str(rubric)],
            "labels": ["--labels", "strategy"],
            "ray": ["--rubric", str(rubric), "--ray", "2"],
        }
        for n in sizes:
            policy, base = write_files(folder, n, args.samples, args.seed)
            common = [str(policy), "--base", str(base), "--wandb", "disabled", "--no-plots", "--n-boot",
                      str(args.n_boot), "--overwrite"]  # fmt: skip
            for arm, labeler in arms.items():
                out = ["--out", str(folder / f"out-{arm}-{n}")]
                wall, cpu, rss = run(["score", *common, *labeler, *out], children=arm != "ray")
                rows.append((arm, n, wall, cpu, rss))
            checks.append(
                (
                    n,
                    *agree(
                        folder / f"out-rubric-{n}" / "report.json", folder / f"out-ray-{n}" / "report.json"
                    ),
                )
            )
            policy.unlink()
            base.unlink()
    nice = f" under nice -n {os.nice(0)}" if os.nice(0) else ""
    header = [
        f"$ python benchmarks/score.py {' '.join(sys.argv[1:])}".rstrip(),
        f"# {time.perf_counter() - start:.0f} s{nice} on {os.cpu_count()} cores; load average {load:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end (other jobs running)",
    ]
    lines = []
    head = ("completions", "wall s", "CPU s", "CPU us/completion", "max RSS MB")
    lines.append(
        f"{'arm':8s} " + " ".join(f"{h:>{w}s}" for h, w in zip(head, (12, 8, 8, 18, 11), strict=True))
    )
    for arm, n, wall, cpu, rss in rows:
        lines.append(f"{arm:8s} {n:12,d} {wall:8.1f} {cpu:8.1f} {cpu / n * 1e6:18.1f} {rss:11.0f}")
    lines.append(
        "rubric, labels: CPU of the command and of its base files' process, max RSS the sum of their peaks"
    )
    lines.append("ray: CPU and RSS of the driver only (the two workers are Ray's processes)")
    for arm in ("rubric", "labels"):
        mine = [r for r in rows if r[0] == arm]
        growth = (mine[-1][3] / mine[-1][1]) / (mine[0][3] / mine[0][1])
        lines.append(f"{arm}: CPU per completion at {mine[-1][1]:,d} / at {mine[0][1]:,d} = {growth:.2f}x")
    for arm in ("labels", "ray"):
        n, wall = next((n, wall) for a, n, wall, _, _ in reversed(rows) if a == arm)
        lines.append(f"{arm}: {n / wall * 30:,.0f} policy completions per 30 s of wall time at {n:,d}")
    for n, count, worst in checks:
        lines.append(
            f"ray vs one process at {n:,d}: {count:,d} numbers of report.json, largest difference {worst:.1e}"
        )
    text = "\n".join(lines) + "\n"
    print(text, end="")  # the header is the caller's (scripts/readme_numbers.py --refresh writes its own)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(header) + "\n" + text)


if __name__ == "__main__":
    main()

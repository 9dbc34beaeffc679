"""Generate large, lint-clean concept packs from code (to test lint and the lane at scale).

Big packs are made on the fly instead of committed. Run as a script to time ``seffi lane lint`` and
``seffi lane sample-efficiency`` on generated packs::

    python -m tests.lanes.packgen 1000 10000        # lint times
    python -m tests.lanes.packgen --lane 1000       # end-to-end lane time (W&B disabled)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import string
import tempfile
import time
from pathlib import Path
from typing import Any

_LETTERS = string.ascii_lowercase


def word(n: int, prefix: str = "zq") -> str:
    """A unique alphabetic token for ``n`` >= 0 (never a stopword: it starts with ``prefix``)."""
    digits = ""
    while True:
        n, r = divmod(n, 26)
        digits = _LETTERS[r] + digits
        if n == 0:
            return prefix + digits


def make_pack(n_concepts: int, n_corrections: int = 3, holdout_every: int = 4) -> dict[str, Any]:
    """A lint-clean pack of ``n_concepts`` concepts with ``n_corrections`` corrections each.

    Every fourth concept (``holdout_every``) is holdout; all tokens, probes and corrections are unique.
    """
    concepts = []
    for i in range(n_concepts):
        name = word(i, "xk")
        tokens = [word(i * n_corrections + j) for j in range(n_corrections)]
        concepts.append(
            {
                "id": f"c{i}",
                "split": "holdout" if holdout_every and i % holdout_every == holdout_every - 1 else "public",
                "probe": f"What defines concept {name}?",
                "expected_tokens": tokens,
                "curriculum": [f"Concept {name} includes {tok}." for tok in tokens],
            }
        )
    return {"name": f"generated-{n_concepts}", "version": 1, "concepts": concepts}


def write_pack(path: Path, n_concepts: int, **kwargs: Any) -> Path:
    """Write :func:`make_pack` to ``path`` and return it."""
    path.write_text(json.dumps(make_pack(n_concepts, **kwargs)), encoding="utf-8")
    return path


def _main() -> None:
    from seffi.cli import main

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="+")
    parser.add_argument("--lane", action="store_true", help="time the lane instead of lint")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            pack = write_pack(Path(tmp) / f"pack{n}.json", n)
            if args.lane:
                argv = ["lane", "sample-efficiency", "--pack", str(pack), "--split", "all"]
                argv += ["--out", str(Path(tmp) / f"out{n}"), "--wandb", "disabled"]
            else:
                argv = ["lane", "lint", str(pack)]
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                rc = main(argv)
            seconds = time.perf_counter() - start
            print(f"{'lane' if args.lane else 'lint'} {n} concepts: {seconds:.2f} s (exit {rc})")


if __name__ == "__main__":
    _main()

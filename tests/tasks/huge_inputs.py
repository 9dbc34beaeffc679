"""The huge inputs every task's validator must survive: used by the task-contract test and timed by
``benchmarks/tasks.py``."""

from __future__ import annotations

from typing import Any

import numpy as np


def huge_inputs(task: Any, x: Any) -> dict[str, object]:
    """``{name: text}``: megabyte junk (one letter, code points, bytes, repeated steps or answers), a trace
    of ``x``'s first feasible strategy repeated to just under the length cap (the slow path: real
    parsing runs on it) and a 49,000-number line."""
    rng = np.random.default_rng(0)
    reference = task.solve(x, task.feasible_strategies(x)[0])
    return {
        "1MB letters": "a" * 1_000_000,
        "1MB code points": rng.integers(0, 0x10FFFF, size=250_000)
        .astype(np.uint32)
        .tobytes()
        .decode("utf-32", "replace"),
        "1MB bytes": bytes(rng.integers(0, 256, size=1_000_000, dtype=np.uint8)),
        "1MB steps": "\n".join(["swap 0 1"] * 120_000),
        "1MB answers": ("answer 1 " * 120_000).strip(),
        "near-cap trace": (reference + "\n") * (90_000 // (len(reference) + 1)),
        "49k numbers": " ".join(["1"] * 49_000) + "\nanswer 1",
    }

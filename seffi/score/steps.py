"""Coverage and gain per training step, for files whose rows carry a ``step`` (verl's dumps).

Each step's samples form their own runs (a prompt's samples of that step in file order, ``budget`` per
run) in a tracker of their own; at the end every step gets its C(K), AUC and gain against the base
model's iid sampling and the oracle over that step's prompts, each with its interval.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seffi._io import write_atomic
from seffi.coverage import CoverageTracker
from seffi.coverage.env_baselines import EnvBaselines
from seffi.episodes import MatchCoder, parse_generation

__all__ = ["StepCurves", "step_scalars", "write_steps"]

#: What a step's row holds, in the table's column order: (key, header).
COLUMNS = (
    ("step", "step"),
    ("prompts", "prompts"),
    ("samples", "samples"),
    ("coverage", "C(K)"),
    ("auc", "AUC"),
    ("gain_vs_iid", "gain vs iid"),
    ("valid_at_k", "valid@K"),
)


def _interval(value: Any, lo: Any, hi: Any) -> dict[str, float | None]:
    as_float = lambda v: None if v is None or not np.isfinite(v) else float(v)  # noqa: E731
    return {"value": as_float(value), "lo": as_float(lo), "hi": as_float(hi)}


class StepCurves:
    """One tracker per training step.

    Args:
        strategies: The declared strategy ids.
        budget: K, samples per run.
    """

    def __init__(self, strategies: Sequence[str], budget: int) -> None:
        self.strategies, self.budget = list(strategies), budget
        self.coder = MatchCoder(self.strategies)
        self.trackers: dict[int, CoverageTracker] = {}
        self._seen: Counter[tuple[int, str]] = Counter()

    def add(
        self, steps: Sequence[int | None], ids: Sequence[str], matches: Sequence[Any], valid: Any
    ) -> None:
        """Record a batch of samples; samples without a step are left out."""
        by_step: dict[int, list[int]] = {}
        for i, step in enumerate(steps):
            if step is not None:
                by_step.setdefault(step, []).append(i)
        for step, rows in by_step.items():
            tracker = self.trackers.setdefault(step, CoverageTracker(self.strategies, budget=self.budget))
            counts = []
            for i in rows:
                counts.append(self._seen[step, ids[i]])
                self._seen[step, ids[i]] += 1
            n = np.asarray(counts)
            tracker.record(
                parse_generation(
                    [ids[i] for i in rows],
                    [matches[i] for i in rows],
                    self.coder,
                    np.asarray(valid)[rows],
                    sample_index=n % self.budget + 1,
                    run_index=n // self.budget,
                )
            )

    def merge(self, states: Sequence[Mapping[int, Any]]) -> None:
        """Add the step trackers of other processes (``{step: CoverageTracker state}`` each), exactly."""
        for part in states:
            for step, state in part.items():
                other = CoverageTracker.from_state_dict(state)
                if step in self.trackers:
                    self.trackers[step].merge(other)
                else:
                    self.trackers[step] = other

    def rows(self, baselines: EnvBaselines, *, n_boot: int, seed: int) -> list[dict[str, Any]]:
        """Per step, in step order: prompts, samples, C(K), AUC, gain vs iid and valid@K with intervals."""
        out = []
        for step in sorted(self.trackers):
            tracker = self.trackers[step]
            curves = tracker.curves(self.budget, n_boot=n_boot, seed=seed)
            iid, oracle = baselines.curves(tracker.input_ids())
            gain = curves.gain(iid, oracle, n_boot=n_boot, seed=seed) if iid and oracle else None
            k = self.budget - 1
            lo, hi = (
                (curves.coverage_lo, curves.coverage_hi) if curves.coverage_lo is not None else (None, None)
            )
            out.append(
                {
                    "step": step,
                    "prompts": len(tracker.input_ids()),
                    "samples": int(tracker.n_samples),
                    "coverage": _interval(
                        curves.coverage[k],
                        lo[k] if lo is not None else None,
                        hi[k] if hi is not None else None,
                    ),
                    "auc": _interval(curves.auc, curves.auc_lo, curves.auc_hi),
                    "gain_vs_iid": _interval(*(gain.value, gain.lo, gain.hi) if gain else (None, None, None)),
                    "valid_at_k": _interval(curves.valid_at_k[k], None, None)
                    if curves.valid_at_k is not None
                    else None,
                }
            )
        return out


def step_scalars(row: dict[str, Any]) -> dict[str, float]:
    """A step's row as flat ``seffi/by_step/<metric>[_lo|_hi]`` scalars for the sinks (W&B history)."""
    out = {"seffi/by_step/prompts": float(row["prompts"])}
    for key, _ in COLUMNS[3:]:
        value = row[key] or {}
        for part, suffix in (("value", ""), ("lo", "_lo"), ("hi", "_hi")):
            if value.get(part) is not None:
                out[f"seffi/by_step/{key}{suffix}"] = value[part]
    return out


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        if value["value"] is None:
            return "–"
        ci = f" [{value['lo']:.3f}, {value['hi']:.3f}]" if value["lo"] is not None else ""
        return f"{value['value']:.3f}{ci}"
    return "–" if value is None else str(value)


def write_steps(out_dir: Path, rows: list[dict[str, Any]], *, plots: bool) -> list[Path]:
    """``steps.json``, ``steps.md`` and (with ``plots``) ``plots/steps.png`` in ``out_dir``."""
    written = [out_dir / "steps.json", out_dir / "steps.md"]
    write_atomic(written[0], json.dumps({"steps": rows}, indent=2) + "\n")
    header = "| " + " | ".join(h for _, h in COLUMNS) + " |"
    lines = ["# Coverage by training step", "", header, "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(r[k]) for k, _ in COLUMNS) + " |" for r in rows]
    write_atomic(written[1], "\n".join(lines) + "\n")
    if plots:
        written.append(_plot(out_dir / "plots" / "steps.png", rows))
    return written


def _plot(path: Path, rows: list[dict[str, Any]]) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    steps = np.array([r["step"] for r in rows])
    fig = Figure(figsize=(8, 3.2))
    FigureCanvasAgg(fig)
    for ax, key, title in zip(
        fig.subplots(1, 2), ("coverage", "gain_vs_iid"), ("C(K)", "gain vs iid"), strict=True
    ):
        values = [r[key] for r in rows]
        mid = np.array([np.nan if v["value"] is None else v["value"] for v in values])
        lo = np.array([np.nan if v["lo"] is None else v["lo"] for v in values])
        hi = np.array([np.nan if v["hi"] is None else v["hi"] for v in values])
        ax.plot(steps, mid, marker="o", ms=3)
        ax.fill_between(steps, lo, hi, alpha=0.25, lw=0)
        ax.set_xlabel("training step")
        ax.set_title(title + " (95% CI)")
        if key == "gain_vs_iid":
            ax.axhline(0, color="grey", lw=0.8, ls="--")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path

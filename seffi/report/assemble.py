"""From a tracker and its baselines to the report schema: one policy's ``Comparison``."""

from __future__ import annotations

from typing import Any

from seffi.errors import SeffiError
from seffi.report.schema import Barcode, Comparison, CurveSet, Gain, LatentCurve, PolicyResult, Report

#: Columns of `curves_dataframe`, in order (NaN where a method does not have the quantity).
FRAME_COLUMNS = (
    "method",
    "label",
    "k",
    "coverage",
    "coverage_lo",
    "coverage_hi",
    "novelty",
    "full_coverage",
    "valid_coverage",
    "valid_at_k",
    "auc",
)


def curves_dataframe(curves: Any, *, label: str = "policy") -> Any:
    """A long-format pandas DataFrame of ``{method: Curves or None}``: one row per (method, k).

    The columns are `FRAME_COLUMNS` (NaN where a method lacks a quantity); ``label`` names the
    ``"policy"`` rows (baselines carry their method name). `SeffiError` without pandas.
    """
    try:
        import pandas as pd
    except ImportError as exc:  # pandas is optional: only this export needs it
        raise SeffiError("to_dataframe() needs pandas: pip install pandas") from exc
    import numpy as np

    columns: dict[str, list[Any]] = {name: [] for name in FRAME_COLUMNS}
    for method, c in curves.items():
        if c is None:
            continue
        K = int(c.K)
        columns["method"] += [method] * K
        columns["label"] += [label if method == "policy" else method] * K
        columns["k"] += list(range(1, K + 1))
        for name in FRAME_COLUMNS[3:-1]:
            v = getattr(c, name, None)
            columns[name] += [np.nan] * K if v is None else np.asarray(v, dtype=float).reshape(K).tolist()
        columns["auc"] += [float("nan") if c.auc is None else float(c.auc)] * K
    frame = pd.DataFrame(columns, columns=list(FRAME_COLUMNS))
    return frame.astype({"method": str, "label": str, "k": "int64"})


class BaselineSets:
    """``CurveSet`` of baseline curves, converted once per baseline object (the costly part of a snapshot)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[Any, CurveSet]] = {}

    def __call__(self, curves: Any, kind: str) -> CurveSet | None:
        if curves is None:
            return None
        hit = self._cache.get(kind)
        if hit is None or hit[0] is not curves:  # a recomputed baseline is a new object
            hit = self._cache[kind] = (curves, CurveSet.from_curves(curves, kind, kind))
        return hit[1]

    def clear(self) -> None:
        self._cache.clear()


def policy_comparison(
    tracker: Any,
    curves: Any,
    iid: Any,
    oracle: Any,
    *,
    label: str,
    env_id: str | None,
    baseline_sets: BaselineSets,
    base_law: Any = None,
) -> tuple[Comparison, CurveSet, Gain]:
    """(comparison, the policy's curve set, its gain) of a tracker's ``curves`` for the report and the sinks.

    ``base_law(input_id)``, the base sampler's law over match sets, gives the per-input metrics their
    iid figures.
    """
    valid_rate = tracker.valid / max(tracker.samples, 1)
    policy_set = CurveSet.from_curves(curves, label, "policy", valid_rate=valid_rate)
    gain = (
        curves.gain(iid, oracle)
        if iid is not None and oracle is not None
        else Gain(reason="no iid/oracle baseline (not a seffi env and none given)")
    )
    latent = None
    cov = tracker.latent_coverage()
    if cov is not None:
        ok = [i for i in range(len(cov)) if cov[i] == cov[i]]  # k no run reached yet is NaN: left out
        latent = LatentCurve(
            label=label,
            k=[i + 1 for i in ok],
            coverage=[float(cov[i]) for i in ok],
            num_codes=tracker.num_latents,
        )
    comparison = Comparison(
        task=tracker.task,
        env_id=env_id,
        budget=tracker.budget,
        n_inputs=len(tracker.keys),
        num_strategies=len(tracker.strategies),
        iid=baseline_sets(iid, "iid"),
        oracle=baseline_sets(oracle, "oracle"),
        policies=[
            PolicyResult(
                curves=policy_set,
                gain=gain,
                barcode=Barcode.from_tracker(tracker.barcode(tracker.budget)),
                latent=latent,
                metrics=tracker.metric_estimates(base_law),
            )
        ],
    )
    return comparison, policy_set, gain


def monitor_report(monitor: Any, comparison: Comparison | None) -> Report:
    """A monitor's report: its ``comparison`` (None before any sample), the evaluator's policies, counters."""
    comparisons = []
    if comparison is not None:
        extra = monitor.extra_policies
        policies = {"policies": [*comparison.policies, *extra]}
        comparisons.append(comparison.model_copy(update=policies) if extra else comparison)
    cfg = monitor.config
    return Report(
        title=f"seffi coverage: {monitor.task_name} (K={monitor.budget})",
        seed=monitor.seed,
        config={"budget": monitor.budget, "log_every": cfg.log_every, "log_unit": cfg.log_unit},
        meta={"episodes": monitor.episodes, "skipped_beyond_budget": monitor.skipped_beyond_budget},
        comparisons=comparisons,
    )

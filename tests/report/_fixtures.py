"""A small report built from closed-form curves (iid with a known law, the single-label oracle)."""

from __future__ import annotations

import numpy as np

from seffi.report import schema

K = 16
P = np.array([0.6, 0.2, 0.1, 0.07, 0.03])  # base-sampler strategy law, single-label
M = P.size
KS = np.arange(1, K + 1)
IID = np.array([(1 - (1 - P) ** k).sum() / M for k in KS])  # E|S_k|/M, exact
ORACLE = np.minimum(KS, M) / M  # no-repeat sampler
POLICY = IID + 0.6 * (ORACLE - IID)
# Common-vs-rare split: rank quantile bins of the base law (ranks 0..4 -> bins 0,0,1,2,3).
BINS = np.array([0, 0, 1, 2, 3])
RARITY_LABELS = ["q1 (most common)", "q2", "q3", "q4 (rarest)"]
IID_RARITY = np.stack([((1 - (1 - P[BINS == b, None]) ** KS) / M).sum(axis=0) for b in range(4)])
# A no-repeat oracle in uniformly random strategy order: each bin is found in proportion to its size.
ORACLE_RARITY = np.stack([(BINS == b).sum() / M * ORACLE for b in range(4)])
POLICY_RARITY = IID_RARITY + 0.6 * (ORACLE_RARITY - IID_RARITY)


def _ttc(cov: np.ndarray, tau: float, values: list[int | None]) -> schema.TimeToCoverage:
    surv = np.clip(1.0 - (cov - tau + 0.3) / 0.4, 0.0, 1.0)
    return schema.TimeToCoverage(
        tau=tau,
        median=float(np.argmax(surv <= 0.5) + 1) if (surv <= 0.5).any() else None,
        restricted_mean=float(1.0 + surv[:-1].sum()),
        fraction_censored=float(surv[-1]),
        survival=surv.tolist(),
        values=values,
    )


def curve_set(
    label: str, role: str, cov: np.ndarray, *, band: bool = True, rarity: np.ndarray | None = None
) -> schema.CurveSet:
    """A full curve set around ``cov`` (``rarity``: coverage_by_rarity rows, shape (4, K))."""
    return schema.CurveSet(
        label=label,
        role=role,
        method="exact" if role != "policy" else "empirical",
        k=KS.tolist(),
        coverage=cov.tolist(),
        coverage_lo=np.clip(cov - 0.05, 0, 1).tolist() if band else None,
        coverage_hi=np.clip(cov + 0.05, 0, 1).tolist() if band else None,
        novelty=np.r_[1.0, np.clip(np.diff(cov) * M, 0, 1)].tolist(),
        full_coverage=(cov**5).tolist(),
        valid_coverage=(0.8 * cov).tolist(),
        auc=float(cov.mean()),
        auc_lo=float(cov.mean()) - 0.02,
        auc_hi=float(cov.mean()) + 0.02,
        time_to_coverage=[_ttc(cov, 0.8, [3, 5, 7, None, 9]), _ttc(cov, 1.0, [5, 12, None, None, 16])],
        valid_rate=0.8,
        coverage_by_rarity=None if rarity is None else rarity.tolist(),
        rarity_bins=None if rarity is None else RARITY_LABELS,
        n_samples=320,
        n_inputs=20,
        n_runs=20,
    )


def gain_value() -> float:
    """Gain of POLICY over IID relative to ORACLE, from the AUCs."""
    return float((POLICY.mean() - IID.mean()) / (ORACLE.mean() - IID.mean()))


def comparison(
    task: str = "hanoi", env_id: str | None = "seffi/HanoiRouter-v0", n_policies: int = 1
) -> schema.Comparison:
    """One comparison with a barcode and a latent curve on the first policy."""
    rng = np.random.default_rng(0)
    barcode = schema.Barcode(
        strategies=["recursive", "iterative", "gray", "bfs", "dfs"],
        input_ids=[f"in{i:03d}" for i in range(8)],
        matrix=[rng.choice(np.arange(-1, M), K, p=[0.1, *(0.9 * P)]).tolist() for _ in range(8)],
    )
    g = gain_value()
    policies = [
        schema.PolicyResult(
            curves=curve_set("learned" if i == 0 else f"learned{i}", "policy", POLICY, rarity=POLICY_RARITY),
            gain=schema.Gain(value=g, lo=g - 0.1, hi=g + 0.1),
            barcode=barcode if i == 0 else None,
            latent=schema.LatentCurve(
                label="learned", k=KS.tolist(), coverage=(1 - 0.85**KS).tolist(), num_codes=8
            )
            if i == 0
            else None,
        )
        for i in range(n_policies)
    ]
    return schema.Comparison(
        task=task,
        env_id=env_id,
        budget=K,
        n_inputs=20,
        num_strategies=M,
        iid=curve_set("iid", "iid", IID, rarity=IID_RARITY),
        oracle=curve_set("oracle", "oracle", ORACLE, band=False, rarity=ORACLE_RARITY),
        policies=policies,
    )


def report() -> schema.Report:
    """A one-comparison, one-policy report."""
    return schema.Report(seed=7, config={"budget": K, "tasks": ["hanoi"]}, comparisons=[comparison()])


def eval_series_comparison() -> schema.Comparison:
    """`comparison` with four evaluations of one policy ("eval@1000" ... "eval"), gains 0 to 0.3."""
    pols = [
        schema.PolicyResult(
            curves=curve_set("eval" if i == 3 else f"eval@{1000 * (i + 1)}", "policy", POLICY),
            gain=schema.Gain(value=0.1 * i, lo=0.1 * i - 0.1, hi=0.1 * i + 0.1),
        )
        for i in range(4)
    ]
    return comparison().model_copy(update={"policies": pols})

"""Calibration and power of ``PassAtKEval``'s gain interval: unchanged and changed models against the base.

``seffi.models.passk.gain_vs_base`` compares the policy's and the base's C(k) on held-out prompts, each
estimated from its own n samples per prompt. This script simulates that comparison with known laws and
runs the library's own code path on it (``evaluate_samples`` on the sampled match sets, the per-prompt
no-repeat oracle of ``PassAtKEval``, ``gain_vs_base``), and prints side by side the two-stage bootstrap
(prompts, then each prompt's samples, both models; the reference below, `two_stage`) and the library's
interval (Fieller over prompts, Student's t on P − 1 degrees of freedom):

- **unchanged model** (the policy's samples drawn from the base's own law, independently): how often the
  95 % interval contains 0 (target 0.93-0.97; an unbounded interval contains it) and the median width
  of the bounded intervals;
- **changed model** (the policy's law sharpened, as correctness-only RL narrows a model, or flattened
  over its strategies by a power w: +0.065, +0.118 and +0.194 at rung 3's counts): how often the
  interval contains the true gain, computed exactly from the laws (per prompt ``C(k) = (1/M) sum_s
  1 - (1 - q_s)^k`` with ``q_s`` the law's share of samples matching s, averaged over every input of
  the task: the held-out prompts of a run are a sample of those), and its **power**: how often it lies
  wholly on the truth's side of 0 (a change detected).

The laws are the base match-set laws of the ladder's task (grid_routes, ``task.base_match_distribution``),
a prompt being a task input; ``skew`` powers them (``p^skew``, renormalised) to make rare strategies rarer.
The first row uses rung 3's counts (``seffi ladder``: 32 held-out prompts, n = 64 samples each, K = 8);
the others vary the prompts and samples (few prompts: a small held-out set as in a quick TRL run).

Run ``python benchmarks/passk_calibration.py`` (a few minutes on 2 busy shared cores; ``--seeds N``
datasets per row, default 1,000; ``--quick`` for 200). Needs the ``lm`` extra (transformers).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Case:
    """One row: the comparison simulated.

    Attributes:
        name: Row label.
        prompts: Held-out prompts per dataset (drawn without replacement from the task's inputs).
        n: Samples per prompt for each model.
        budget: K of the gain.
        skew: Power applied to the base law (1: the task's own).
        policy: ``"same"`` (the base's law), ``"narrow"`` (base law cubed) or ``"wide"`` (the matched
            sets' probabilities to the power ``wide``, the unmatched share kept).
        wide: The widening power of ``"wide"``.
    """

    name: str
    prompts: int
    n: int
    budget: int
    skew: float = 1.0
    policy: str = "same"
    wide: float = 0.5


CASES = (
    Case("rung 3: 32 prompts, n = 64, K = 8", 32, 64, 8),
    Case("rung 3 counts, rarer strategies (skew 3)", 32, 64, 8, skew=3.0),
    Case("8 prompts, n = 64, K = 8", 8, 64, 8),
    Case("4 prompts, n = 64, K = 8", 4, 64, 8),
    Case("8 prompts, n = 16, K = 4", 8, 16, 4),
    Case("rung 3 counts, narrowed policy", 32, 64, 8, policy="narrow"),
    Case("rung 3 counts, widened policy (w 0.865)", 32, 64, 8, policy="wide", wide=0.865),
    Case("rung 3 counts, widened policy (w 0.745)", 32, 64, 8, policy="wide", wide=0.745),
    Case("rung 3 counts, widened policy (w 0.5)", 32, 64, 8, policy="wide"),
    Case("16 prompts, widened policy (w 0.745)", 16, 64, 8, policy="wide", wide=0.745),
    Case("8 prompts, narrowed policy", 8, 64, 8, policy="narrow"),
    Case("8 prompts, widened policy (w 0.745)", 8, 64, 8, policy="wide", wide=0.745),
    Case("8 prompts, widened policy (w 0.5)", 8, 64, 8, policy="wide"),
)


@dataclass
class Law:
    """A prompt's match-set law: atoms (J, M) bool with probabilities p (J,)."""

    atoms: np.ndarray
    p: np.ndarray

    def powered(self, power: float, keep_empty: bool = False) -> Law:
        """``p^power`` renormalised (``keep_empty``: the unmatched atom keeps its share)."""
        q = self.p**power
        empty = ~self.atoms.any(axis=1)
        if keep_empty and empty.any() and (~empty).any():
            q[~empty] *= (1 - self.p[empty].sum()) / q[~empty].sum()
            q[empty] = self.p[empty]
        return Law(self.atoms, q / q.sum())

    def auc(self, budget: int) -> float:
        """Exact AUC@K: the mean over k <= K of (1/M) sum_s 1 - (1 - q_s)^k."""
        q = self.p @ self.atoms  # (M,): share of samples matching each strategy
        ks = np.arange(1, budget + 1)
        return float((1 - (1 - q[None, :]) ** ks[:, None]).mean())


def task_laws(strategies: tuple[str, ...], task, inputs) -> list[Law]:
    out = []
    for x in inputs:
        law = task.base_match_distribution(x)
        atoms = np.array([[s in a for s in strategies] for a in law], dtype=bool)
        out.append(Law(atoms, np.array(list(law.values()), dtype=np.float64)))
    return out


def draw_sets(law: Law, n: int, strategies: tuple[str, ...], rng: np.random.Generator) -> list[frozenset]:
    idx = rng.choice(len(law.p), size=n, p=law.p)
    return [frozenset(s for s, hit in zip(strategies, law.atoms[i], strict=True) if hit) for i in idx]


def resampled_auc(result, budget: int, draws: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Two-stage bootstrap replicates (B,) of the mean AUC@K over prompts (the reference interval).

    Replicate b takes prompt p ``draws[b, p]`` times; each time, its n samples are redrawn with
    replacement from its own n and its AUC@K recomputed by the unbiased estimator.
    """
    from seffi.models.passk import auc_table

    n_boot, prompts = draws.shape
    table = auc_table(result.n, budget)
    total = np.zeros(n_boot)
    rows = np.arange(n_boot)
    for p in range(prompts):
        times = int(draws[:, p].sum())
        if times == 0:
            continue
        # Resampling samples = a multinomial over the prompt's distinct match sets (atoms).
        x = result.sample_sets[p]
        key = np.ascontiguousarray(np.packbits(x, axis=1))
        _, first, freq = np.unique(key.view(f"V{key.shape[1]}")[:, 0], return_index=True, return_counts=True)
        y = rng.multinomial(result.n, freq / freq.sum(), size=times) @ x[first].astype(np.int64)
        total += np.bincount(np.repeat(rows, draws[:, p]), weights=table[y].mean(axis=1), minlength=n_boot)
    return total / prompts


def two_stage(policy, base, oracle: dict[str, float], budget: int, seed: int, n_boot: int = 1000):
    """(lo, hi) of the two-stage bootstrap percentile interval of the gain, or None (no room in >2.5%)."""
    from seffi.coverage.resampling import bootstrap_counts, percentile_interval

    a = policy.per_prompt_coverage[:, :budget].mean(axis=1)
    o = np.array([oracle[p] for p in policy.prompt_ids])
    draws = bootstrap_counts(np.zeros(a.size, dtype=np.int64), n_boot, seed).astype(np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 1]))
    pol, ref = resampled_auc(policy, budget, draws, rng), resampled_auc(base, budget, draws, rng)
    room = draws @ o / a.size - ref
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = np.where(room > 1e-12, (pol - ref) / room, np.nan)
    if np.mean(~np.isfinite(reps)) > 0.025:
        return None
    lo, hi = percentile_interval(reps, 0.95)
    return float(lo), float(hi)


def run_case(case: Case, seeds: int, world) -> dict[str, float]:
    """Coverage of the truth (0 for an unchanged model), mean width and power, two-stage vs library."""
    from seffi.models.passk import evaluate_samples, gain_vs_base

    strategies, inputs, laws, oracle = world
    base_laws = [law.powered(case.skew) for law in laws]
    if case.policy == "same":
        pol_laws = base_laws
    elif case.policy == "narrow":
        pol_laws = [law.powered(3.0) for law in base_laws]
    else:
        pol_laws = [law.powered(case.wide, keep_empty=True) for law in base_laws]
    o = {x.id: oracle[case.budget][x.id] for x in inputs}
    tb = np.mean([law.auc(case.budget) for law in base_laws])
    tp = np.mean([law.auc(case.budget) for law in pol_laws])
    truth = 0.0 if case.policy == "same" else float((tp - tb) / (np.mean(list(o.values())) - tb))
    kinds = ("two-stage", "library")
    hits: dict[str, list[bool]] = {k: [] for k in kinds}
    widths: dict[str, list[float]] = {k: [] for k in kinds}
    power = dict.fromkeys(kinds, 0)
    undefined = dict.fromkeys(kinds, 0)
    fragile = 0
    for seed in range(seeds):
        rng = np.random.default_rng([seed, 23])
        chosen = rng.choice(len(inputs), size=case.prompts, replace=False)
        ids = [inputs[j].id for j in chosen]
        ev = []
        for side in (base_laws, pol_laws):
            sets = {i: draw_sets(side[j], case.n, strategies, rng) for i, j in zip(ids, chosen, strict=True)}
            valid = {i: [bool(s) for s in v] for i, v in sets.items()}
            ev.append(evaluate_samples(sets, valid, strategies))
        base, pol = ev
        g = gain_vs_base(pol, base, o, case.budget)
        fragile += g.fragile
        bounds = {"two-stage": two_stage(pol, base, o, case.budget, seed), "library": None}
        if g.lo is not None:
            bounds["library"] = (g.lo, g.hi)
        for kind in kinds:
            if bounds[kind] is None:  # unbounded: covers everything, detects nothing
                undefined[kind] += 1
                hits[kind].append(True)
                continue
            lo, hi = bounds[kind]
            hits[kind].append(lo <= truth <= hi)
            widths[kind].append(hi - lo)
            power[kind] += (lo > 0) if truth > 0 else (hi < 0) if truth < 0 else 0
    out: dict[str, float] = {"truth": truth, "fragile": fragile / seeds}
    for kind in kinds:
        out[f"{kind}_cover"] = float(np.mean(hits[kind]))
        out[f"{kind}_width"] = float(np.median(widths[kind])) if widths[kind] else float("nan")
        out[f"{kind}_power"] = power[kind] / seeds
        out[f"{kind}_undefined"] = undefined[kind] / seeds
    return out


def build_world(budgets: set[int]):
    """The ladder's task, all its inputs, their base laws and per-input oracle AUC@K."""
    from seffi.coverage import OracleBaseline
    from seffi.experiment.ladder import LadderConfig
    from seffi.models.cache import build_task

    task = build_task(LadderConfig().lm_config())
    strategies = tuple(task.strategies())
    want = 1000
    while True:  # grid_routes has a few hundred distinct inputs: take them all
        try:
            inputs = task.make_inputs(want, seed=0)
            break
        except Exception:
            want = int(want * 0.8)
    refs = {x.id: OracleBaseline({x.id: task.reference_match_sets(x)}, strategies=strategies) for x in inputs}
    oracle = {k: {i: float(o.curves(k).auc) for i, o in refs.items()} for k in budgets}
    return task.name, (strategies, inputs, task_laws(strategies, task, inputs), oracle)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1000, help="simulated datasets per row")
    ap.add_argument("--quick", action="store_true", help="200 datasets per row")
    ap.add_argument("--only", default=None, help="run the rows whose label contains this text")
    args = ap.parse_args(argv)
    seeds = 200 if args.quick else args.seeds
    cases = [c for c in CASES if args.only is None or args.only in c.name]
    name, world = build_world({c.budget for c in cases})
    print(f"{name}: {len(world[1])} inputs, M = {len(world[0])}; {seeds} datasets per row; 95% intervals")
    head = " | ".join(f"{k + ': cover  width  power':>33s}" for k in ("two-stage", "library (Fieller)"))
    print(f"{'case':44s} {'truth':>7s} {'fragile':>7s} | {head}")
    for case in cases:
        started = time.perf_counter()
        r = run_case(case, seeds, world)
        cells = []
        for kind in ("two-stage", "library"):
            c, w, p = r[f"{kind}_cover"], r[f"{kind}_width"], r[f"{kind}_power"]
            se = (c * (1 - c) / seeds) ** 0.5
            extra = f" ({r[f'{kind}_undefined']:.1%} unbounded)" if r[f"{kind}_undefined"] else ""
            cells.append(f"{c:.3f} ± {se:.3f}  {w:.3f}  {p:.3f}{extra}")
        print(
            f"{case.name:44s} {r['truth']:+7.3f} {r['fragile']:7.1%} | {cells[0]:>33s} | {cells[1]:>33s}"
            f"  ({time.perf_counter() - started:.0f} s)"
        )
    print("cover: share of intervals containing the truth (0 for an unchanged model), target 0.93-0.97;")
    print("power: share wholly on the truth's side of 0 (a change detected); fragile: Gain.fragile")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Calibration of ``PassAtKEval``'s gain interval: an unchanged model against its base, and a changed one.

``seffi.models.passk.gain_vs_base`` compares the policy's and the base's C(k) on held-out prompts, each
estimated from its own n samples per prompt. This script simulates that comparison with known laws and
runs the library's own code path on it (``evaluate_samples`` on the sampled match sets, the per-prompt
no-repeat oracle of ``PassAtKEval``, ``gain_vs_base``), and prints, for the interval resampling prompts
only (``"prompts"``: what ``gain_vs_base`` computes for evaluations without ``sample_sets``) and for the
two-stage interval (prompts, then each prompt's samples, both models), side by side:

- **unchanged model** (the policy's samples drawn from the base's own law, independently): how often the
  95 % interval contains 0 (target >= 0.93) and its mean width;
- **changed model** (the policy's law sharpened, as correctness-only RL narrows a model, or flattened
  over its strategies): how often the interval contains the true gain, computed exactly from the laws
  (per prompt ``C(k) = (1/M) sum_s 1 - (1 - q_s)^k`` with ``q_s`` the law's share of samples matching s,
  averaged over every input of the task: the held-out prompts of a run are a sample of those).

The laws are the base match-set laws of the ladder's task (grid_routes, ``task.base_match_distribution``),
a prompt being a task input; ``skew`` powers them (``p^skew``, renormalised) to make rare strategies rarer.
The first row uses rung 3's counts (``seffi ladder``: 32 held-out prompts, n = 64 samples each, K = 8, the
evaluation's 1,000 bootstrap replicates); the others vary the prompts and samples (few prompts: a small
held-out set as in a quick TRL run).

Run ``python benchmarks/passk_calibration.py`` (about 20 minutes on 2 busy shared cores; ``--seeds N``
datasets per row, default 1,000; ``--quick`` for 200). Needs the ``lm`` extra (transformers).
"""

from __future__ import annotations

import argparse
import dataclasses
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
            sets' probabilities square-rooted, the unmatched share kept).
    """

    name: str
    prompts: int
    n: int
    budget: int
    skew: float = 1.0
    policy: str = "same"


CASES = (
    Case("rung 3: 32 prompts, n = 64, K = 8", 32, 64, 8),
    Case("rung 3 counts, rarer strategies (skew 3)", 32, 64, 8, skew=3.0),
    Case("8 prompts, n = 64, K = 8", 8, 64, 8),
    Case("4 prompts, n = 64, K = 8", 4, 64, 8),
    Case("8 prompts, n = 16, K = 4", 8, 16, 4),
    Case("rung 3 counts, narrowed policy", 32, 64, 8, policy="narrow"),
    Case("rung 3 counts, widened policy", 32, 64, 8, policy="wide"),
    Case("8 prompts, narrowed policy", 8, 64, 8, policy="narrow"),
    Case("8 prompts, widened policy", 8, 64, 8, policy="wide"),
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


def run_case(case: Case, seeds: int, world) -> dict[str, float]:
    """Coverage of the truth (0 for an unchanged model) and mean width, prompts-only vs two-stage."""
    from seffi.models.passk import evaluate_samples, gain_vs_base

    strategies, inputs, laws, oracle = world
    base_laws = [law.powered(case.skew) for law in laws]
    if case.policy == "same":
        pol_laws = base_laws
    elif case.policy == "narrow":
        pol_laws = [law.powered(3.0) for law in base_laws]
    else:
        pol_laws = [law.powered(0.5, keep_empty=True) for law in base_laws]
    o = {x.id: oracle[case.budget][x.id] for x in inputs}
    tb = np.mean([law.auc(case.budget) for law in base_laws])
    tp = np.mean([law.auc(case.budget) for law in pol_laws])
    truth = 0.0 if case.policy == "same" else float((tp - tb) / (np.mean(list(o.values())) - tb))
    hits = {"prompts": [], "two-stage": []}
    widths = {"prompts": [], "two-stage": []}
    undefined = {"prompts": 0, "two-stage": 0}
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
        for kind in hits:
            b, p = base, pol
            if kind == "prompts":
                b, p = (dataclasses.replace(e, sample_sets=None) for e in (base, pol))
            g = gain_vs_base(p, b, o, case.budget, seed=seed)
            assert g["interval"] == kind
            if g["lo"] is None:
                undefined[kind] += 1
                continue
            hits[kind].append(g["lo"] <= truth <= g["hi"])
            widths[kind].append(g["hi"] - g["lo"])
    out: dict[str, float] = {"truth": truth}
    for kind in hits:
        out[f"{kind}_cover"] = float(np.mean(hits[kind])) if hits[kind] else float("nan")
        out[f"{kind}_width"] = float(np.mean(widths[kind])) if widths[kind] else float("nan")
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
    head = f"{'prompts only: cover  width':>27s} | {'two-stage: cover  width':>24s}"
    print(f"{'case':44s} {'truth':>7s} | {head}")
    for case in cases:
        started = time.perf_counter()
        r = run_case(case, seeds, world)
        se = lambda c: (c * (1 - c) / seeds) ** 0.5  # noqa: E731
        cells = []
        for kind in ("prompts", "two-stage"):
            c, w = r[f"{kind}_cover"], r[f"{kind}_width"]
            extra = f" ({r[f'{kind}_undefined']:.1%} undefined)" if r[f"{kind}_undefined"] else ""
            cells.append(f"{c:.3f} ± {se(c):.3f}  {w:.3f}{extra}")
        print(
            f"{case.name:44s} {r['truth']:+7.3f} | {cells[0]:>27s} | {cells[1]:>24s}"
            f"  ({time.perf_counter() - started:.0f} s)"
        )
    print("cover: share of intervals containing the truth (0 for an unchanged model); target >= 0.93")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""docs/exploration-bench.md's tables, findings, figures and wall times from committed bench results.

Used by ``scripts/readme_numbers.py`` (producer ``exploration``). Each setting's combined
``bench.json`` (three ``seffi bench exploration`` processes, one per model seed, then ``--combine``)
is committed under ``docs/results/exploration-bench/<setting>/``; the check renders the page's blocks
from it and re-renders ``docs/exploration_bench_<setting>.png`` from it, pixel for pixel. Nothing is
re-run unless ``--write --refresh`` is given (about 2.5 CPU hours with an empty model cache), or
``--exploration-dir SETTING=DIR`` names a finished ``--combine`` folder to take the results from.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from readme_numbers import DOCS, RESULTS, SEFFI, Context, Result, _run, num

SETTINGS = ("default", "hard")
SEEDS = (0, 1, 2, 3, 4)
#: The page's short name of each method (bench.json's labels carry their settings).
SHORT = {
    "base": "**base LM**",
    "validity": "validity",
    "unlikeliness": "unlikeliness",
    "unlikeliness_x2": "unlikeliness, 2 updates/batch",
    "passk": "pass@k",
    "outcome_ucb": "outcome UCB",
    "outcome_batch": "outcome batch",
    "diversity": "seffi diversity",
    "uarl": "UARL",
    "uarl_classifier": "UARL, classifier clusters",
    "ucpo": "UCPO",
    "w_reinforce": "W-REINFORCE",
    "lr0": "lr = 0",
    "temperature": "T = 1.3, no training",
    "mixture_distinct": "mixture, distinct codes",
    "mixture_iid": "mixture, iid codes",
    "mixture_router": "mixture, router-chosen codes",
    "surface": "surface diversity",
}
#: Methods that do not train the policy: the controls.
CONTROLS = ("lr0", "temperature")
SURFACE = {"distinct_1": "distinct-1", "distinct_2": "distinct-2", "distinct_3": "distinct-3",
           "distinct_4": "distinct-4", "edit_distance": "edit distance", "distinct_rate": "distinct rate"}


def blocks_of(setting: str) -> tuple[str, ...]:
    """The page's block names for one setting."""
    return tuple(f"exploration-{setting}-{part}" for part in ("setup", "table", "aggregates", "findings"))


BLOCKS = {name for s in SETTINGS for name in blocks_of(s)} | {"exploration-wall", "exploration-verdict"}


# -- formatting ----------------------------------------------------------------------------------------


def signed(x: float | None, digits: int = 3) -> str:
    """``+0.155`` / ``−0.905`` (typographic minus); None is a dash."""
    if x is None:
        return "—"
    text = num(x, digits)
    return text if text.startswith("\u2212") or float(f"{x:.{digits}f}") == 0 else "+" + text


def interval(v: float | None, lo: float | None, hi: float | None, digits: int = 3) -> str:
    """``+v [lo, hi]`` with signs, or ``+v`` without a band."""
    if lo is None or hi is None:
        return signed(v, digits)
    return f"{signed(v, digits)} [{signed(lo, digits)}, {signed(hi, digits)}]"


def side(lo: float | None, hi: float | None) -> str:
    """Where a 95% interval lies relative to 0: "above 0", "below 0" or "contains 0"."""
    if lo is None or hi is None:
        return "no interval"
    return "above 0" if lo > 0 else "below 0" if hi < 0 else "contains 0"


def seeds_text(seeds: Sequence[int]) -> str:
    """``seed 1`` / ``seeds 0 and 2`` / ``seeds 0, 1 and 2``."""
    seeds = [str(s) for s in seeds]
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return "seeds " + ", ".join(seeds[:-1]) + " and " + seeds[-1]


def span(values: Sequence[float], digits: int = 3) -> str:
    """``lo-hi`` of some values (one value when they agree at ``digits``)."""
    lo, hi = num(min(values), digits), num(max(values), digits)
    return lo if lo == hi else f"{lo}-{hi}"


def listing(values: Sequence[float | None], digits: int = 3) -> str:
    """Signed values, comma-separated."""
    return ", ".join(signed(v, digits) for v in values)


# -- reading a summary ----------------------------------------------------------------------------------


class Bench:
    """A combined bench.json, indexed by (method, seed)."""

    def __init__(self, summary: Mapping[str, Any], models: Mapping[str, Any] | None = None) -> None:
        self.s = summary
        #: ``{"train_grids": N, "seconds": {seed: {"base_seconds", "mixture_seconds"}}}`` (models.json)
        self.models = models or {}
        self.cfg = summary["config"]
        self.seeds = [int(s) for s in self.cfg["seeds"]]
        self.base = {int(b["seed"]): b for b in summary["base"]}
        self.row = {(r["method"], int(r["seed"])): r for r in summary["rows"]}
        self.methods = list(self.cfg["methods"])
        self.k, self.n = self.cfg["budget"], self.cfg["grpo"]["eval_samples"]

    @property
    def trained(self) -> list[str]:
        """The methods that train the policy, in table order."""
        return [m for m in self.methods if m not in CONTROLS]

    def short(self, method: str) -> str:
        """The page's name of a method (its bench label when the page has none)."""
        if method in SHORT:
            return SHORT[method]
        return next((r["label"] for r in self.s["rows"] if r["method"] == method), method)

    def agg(self, labeler: str = "validator") -> dict[str, Any] | None:
        """The bench's aggregates over seeds x prompts under ``labeler``; None without per-prompt data."""
        a = self.s.get("aggregates")
        if not a or a.get("needs"):
            return None
        return a["labelers"].get(labeler)

    def rows(self, method: str) -> list[Mapping[str, Any]]:
        return [self.row[(method, s)] for s in self.seeds if (method, s) in self.row]

    def mean(self, method: str, key: str) -> float:
        return statistics.fmean(r[key] for r in self.rows(method))

    def pool(self, r: Mapping[str, Any]) -> str:
        return interval(r["pool_gain"], r["pool_gain_lo"], r["pool_gain_hi"])

    def mixed_heldout(self) -> bool:
        """Whether the held-out intervals are of two kinds (rows carrying ``heldout_interval``).

        Such benches resample prompts and samples (two-stage) except for the distinct-code explorer
        (prompts only); in the others every held-out interval is over prompts.
        """
        return any(r.get("heldout_interval") == "two-stage" for r in self.s["rows"])

    def heldout(self, r: Mapping[str, Any]) -> str:
        mark = " (p)" if self.mixed_heldout() and r.get("heldout_interval") == "prompts" else ""
        return interval(r["heldout_gain"], r["heldout_gain_lo"], r["heldout_gain_hi"]) + mark


def load(setting: str) -> Bench:
    """The committed combined bench of one setting."""
    folder = RESULTS / "exploration-bench" / setting
    models = folder / "models.json"
    return Bench(json.loads((folder / "bench.json").read_text(encoding="utf-8")),
                 json.loads(models.read_text(encoding="utf-8")) if models.is_file() else None)


# -- blocks ---------------------------------------------------------------------------------------------


def setup_block(b: Bench) -> str:
    """What was run: task, setting, the base LM's training grids, K, pool and held-out sizes, seeds."""
    cfg, g = b.cfg, b.cfg["grpo"]
    task_config = b.s.get("task_config") or {}
    sizes = ", ".join(f"`{k}` {v}" for k, v in task_config.items()) or "the task's default grids"
    return (
        f"{cfg['task']} ({sizes}); the base LM trained on {train_grids(b)} grids; "
        f"K = {b.k}; a pool of {cfg['n_inputs']} prompts, {g['pool_runs']} runs of K each after training, "
        f"against {g['iid_samples'] or 16 * b.k} base samples per prompt; {g['eval_inputs']} held-out "
        f"prompts x n = {b.n}, every {g['eval_every']} steps of {g['steps']}; model seeds "
        f"{', '.join(map(str, b.seeds))}.\n"
    )


def train_grids(b: Bench) -> int:
    """How many grids the base LM trains on: the run's model config, else the one models.json records."""
    if b.cfg.get("lm"):
        return b.cfg["lm"]["n_train_inputs"]
    return b.models["train_grids"]


def table_block(b: Bench) -> str:
    """One row per method and seed, the base first within each seed."""
    head = ["method", "seed", "pool gain [95% CI]", "pool gain, classifier labels", "held-out valid@1",
            f"C({b.k}) / C({b.n})", "held-out gain vs base [95% CI]", "crossover k", f"solvable at {b.n}",
            "distinct-2", "edit dist.", "wall s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for seed in b.seeds:
        base = b.base[seed]
        lines.append(
            f"| {SHORT['base']} | {seed} | 0 (own iid) | — | {num(base['valid_at_1'])} | "
            f"{num(base['coverage_k'])} / {num(base['coverage_n'])} | 0 | — | {num(base['solvable'])} | "
            f"{num(base['distinct_2'])} | {num(base['edit_distance'])} | — |"
        )
        for method in b.methods:
            r = b.row.get((method, seed))
            if r is None:
                continue
            classifier = interval(r["pool_gain_classifier"], r["pool_gain_classifier_lo"],
                                  r["pool_gain_classifier_hi"])
            cross = "none" if r.get("crossover_k") is None else str(r["crossover_k"])
            lines.append(
                f"| {b.short(method)} | {seed} | {b.pool(r)} | {classifier} | {num(r['valid_at_1'])} | "
                f"{num(r['coverage_k'])} / {num(r['coverage_n'])} | {b.heldout(r)} | {cross} | "
                f"{num(r['solvable'])} | {num(r['distinct_2'])} | {num(r['edit_distance'])} | "
                f"{r['seconds']:.0f} |"
            )
    legend = ("(p) marks a held-out interval over prompts only; the other held-out intervals resample "
              "prompts and samples (two-stage)." if b.mixed_heldout() else
              "Every held-out interval is over prompts (Fieller's, docs/statistics.md).")
    return "\n".join(lines) + "\n\n" + legend + "\n"


def meets(r: Mapping[str, Any], base: Mapping[str, Any]) -> bool:
    """The bar of one run: pool gain CI above 0 at held-out valid@1 >= the base's."""
    return r["pool_gain_lo"] is not None and r["pool_gain_lo"] > 0 and r["valid_at_1"] >= base["valid_at_1"]


def target_finding(b: Bench) -> list[str]:
    """Which methods clear the bar on >= 2 of 3 seeds, and on one seed."""
    need = 2 if len(b.seeds) >= 3 else len(b.seeds)
    hits = {m: [r for r in b.rows(m) if meets(r, b.base[r["seed"]])] for m in b.methods}
    bar = (f"**Target (pool gain CI above 0 at held-out valid@1 ≥ the base's, on ≥ {need} of "
           f"{len(b.seeds)} seeds)**")
    winners = [m for m in b.methods if len(hits[m]) >= need]
    out = []
    if not winners:
        out.append(f"{bar}: met by no method.")
    for m in winners:
        runs = hits[m]
        cells = "; ".join(
            f"{b.pool(r)} at valid@1 {num(r['valid_at_1'])} (base {num(b.base[r['seed']]['valid_at_1'])})"
            for r in runs
        )
        others = [r for r in b.rows(m) if r not in runs]
        rest = "".join(
            f"; on seed {r['seed']} {b.pool(r)} at valid@1 {num(r['valid_at_1'])} "
            f"(base {num(b.base[r['seed']]['valid_at_1'])})"
            for r in others
        )
        held = ", ".join(b.heldout(r) for r in b.rows(m))
        classifier = listing([r["pool_gain_classifier"] for r in b.rows(m)])
        c8 = ", ".join(num(r["coverage_k"]) for r in b.rows(m))
        base8 = ", ".join(num(b.base[s]["coverage_k"]) for s in b.seeds)
        out.append(
            f"{bar}: met by **{b.short(m)}** on {seeds_text([r['seed'] for r in runs])}: {cells}{rest}. "
            f"On held-out prompts its gain vs the base is {held}, and its C({b.k}) {c8} against the "
            f"base's {base8}; under the classifier's labels its pool gain is {classifier}."
        )
    single = [(m, hits[m]) for m in b.methods if 0 < len(hits[m]) < need]
    if single:
        parts = "; ".join(
            f"{b.short(m)} on {seeds_text([r['seed'] for r in runs])} ("
            + ", ".join(f"{b.pool(r)} at valid@1 {num(r['valid_at_1'])}" for r in runs) + ")"
            for m, runs in single
        )
        out.append(f"**Clearing the bar on fewer seeds**: {parts}.")
    return out


# -- aggregates over seeds x prompts --------------------------------------------------------------------

#: What the aggregate parts say when the committed rows predate per-prompt pool data.
NEEDS = ("needs per-prompt data: these rows hold each seed's pool gain but not the per-prompt AUCs it "
         "is a ratio of (`pool_prompts`), which a run of `seffi bench exploration` records")


def ival(d: Mapping[str, Any]) -> str:
    """An aggregate ``{"value", "lo", "hi"}`` as ``+v [lo, hi]``."""
    return interval(d["value"], d["lo"], d["hi"])


def prob(d: Mapping[str, Any] | None) -> str:
    """A probability with its interval: ``0.62 [0.48, 0.75]``."""
    return "—" if d is None else f"{num(d['value'], 2)} [{num(d['lo'], 2)}, {num(d['hi'], 2)}]"


def aggregates_block(b: Bench) -> str:
    """Per method: mean and IQM pool gain over seeds x prompts [95% CI], and the rest of its aggregates.

    The probabilities of improvement, the detectable difference and whether it widens coverage; or
    why there are none.
    """
    agg = b.agg()
    if agg is None:
        return f"Aggregates over seeds × prompts: {NEEDS}.\n"
    head = ["method", "seeds × prompts", "mean pool gain [95% CI]", "IQM [95% CI]", "P(gain > 0)",
            "P(> validity)", "detectable vs 0 / vs validity", "valid@1 − base", "widens"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in b.methods:
        a = agg.get(m)
        if a is None:
            continue
        if "reason" in a:
            lines.append(f"| {b.short(m)} | — | {a['reason']} |" + " |" * (len(head) - 3))
            continue
        vs = "—" if a["detectable_vs_reference"] is None else num(a["detectable_vs_reference"], 2)
        lines.append(
            f"| {b.short(m)} | {a['seeds']} × {a['prompts']} | {ival(a['mean'])} | "
            f"{ival(a['iqm'])} | {prob(a['poi_base'])} | {prob(a['poi_reference'])} | "
            f"{num(a['detectable_vs_0'], 2)} / {vs} | {signed(a['valid_at_1_diff'])} | "
            f"{'**yes**' if a['widens'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def widening(b: Bench) -> tuple[list[str], list[str]]:
    """(methods that widen coverage, methods tried): every method but lr = 0, from the aggregates."""
    agg = b.agg() or {}
    tried = [m for m in b.methods if m != "lr0"]
    return [m for m in tried if agg.get(m, {}).get("widens")], tried


def _best(b: Bench) -> str:
    agg = b.agg() or {}
    scored = [m for m in b.methods if m != "lr0" and "mean" in agg.get(m, {})]
    m = max(scored, key=lambda k: agg[k]["mean"]["value"])
    a = agg[m]
    return (f"the highest mean pool gain is {b.short(m)}'s, {ival(a['mean'])}, with P(gain > 0) "
            f"{prob(a['poi_base'])} and held-out valid@1 {signed(a['valid_at_1_diff'])} against the base's")


def _detectable(b: Bench) -> str:
    agg = b.agg() or {}
    trained = [agg[m] for m in b.trained if "detectable_vs_0" in agg.get(m, {})]
    vs0 = [a["detectable_vs_0"] for a in trained]
    vsr = [a["detectable_vs_reference"] for a in trained if a["detectable_vs_reference"] is not None]
    text = f"a mean pool gain of {span(vs0, 2)} against 0"
    return text + (f" and a difference of {span(vsr, 2)} against validity" if vsr else "")


def _seed_detectable(b: Bench) -> str:
    """The detectable mean pool gain (vs 0) and difference (vs validity) from the seeds' pool gains alone."""
    from seffi.experiment.bench_stats import detectable

    vs0, vsr = [], []
    ref = {r["seed"]: r["pool_gain"] for r in b.rows("validity")}
    for m in b.trained:
        g = {r["seed"]: r["pool_gain"] for r in b.rows(m) if r["pool_gain"] is not None}
        if len(g) > 1:
            vs0.append(detectable(statistics.stdev(g.values()) / len(g) ** 0.5))
        d = [g[s] - ref[s] for s in g if s in ref]
        if m != "validity" and len(d) > 1:
            vsr.append(detectable(statistics.stdev(d) / len(d) ** 0.5))
    text = f"a mean pool gain of {span(vs0, 2)} against 0"
    return text + (f" and a difference of {span(vsr, 2)} against validity" if vsr else "")


def verdict_block(benches: Mapping[str, Bench]) -> str:
    """The page's first paragraph: the verdict on the seed's question, in aggregate terms."""
    first = next(iter(benches.values()))
    question = ("**Does any RL exploration method widen exact strategy coverage over the base's own iid "
                "sampling at held-out valid@1 ≥ the base's?**")
    tried = widening(first)[1]
    names = "; ".join(first.short(m) for m in tried)
    if any(b.agg() is None for b in benches.values()):
        votes, power = [], []
        for setting, b in benches.items():
            need = 2 if len(b.seeds) >= 3 else len(b.seeds)
            hits = [m for m in tried if sum(meets(r, b.base[r["seed"]]) for r in b.rows(m)) >= need]
            who = ", ".join(f"**{b.short(m)}**" for m in hits) or "no method"
            votes.append(f"{who} in the {setting} setting")
            power.append(f"{_seed_detectable(b)} in the {setting} setting")
        return (
            f"{question} Seed by seed, {' and '.join(votes)} keeps its pool-gain interval above 0 at "
            f"held-out valid@1 ≥ the base's on at least {need} of {len(first.seeds)} model seeds. "
            f"Tried: {names}. "
            f"From the spread of the seeds' pool gains (sd over seeds / √{len(first.seeds)}), the design "
            f"detects at 80% power (two-sided 5%) {'; '.join(power)}. The aggregate verdict over seeds × "
            f"pool prompts {NEEDS}.\n"
        )
    parts = []
    for setting, b in benches.items():
        wide, tried = widening(b)
        agg = b.agg() or {}
        if wide:
            found = "; ".join(
                f"**{b.short(m)}** widens it, mean pool gain {ival(agg[m]['mean'])} (IQM "
                f"{ival(agg[m]['iqm'])}, P(gain > 0) {prob(agg[m]['poi_base'])}, P(> validity) "
                f"{prob(agg[m]['poi_reference'])}, held-out valid@1 {signed(agg[m]['valid_at_1_diff'])} vs "
                "the base's)"
                for m in wide
            )
        else:
            found = f"no method widens it: {_best(b)}"
        parts.append(f"In the {setting} setting, {found}; the design detects {_detectable(b)} at 80% power.")
    sanity = [(setting, (b.agg() or {}).get("lr0", {}).get("mean")) for setting, b in benches.items()]
    sanity = [(setting, m) for setting, m in sanity if m is not None]
    if sanity:
        every = all(side(m["lo"], m["hi"]) == "contains 0" for _, m in sanity)
        cells = ", ".join(f"{ival(m)} ({setting})" for setting, m in sanity)
        parts.append(f"{'Every' if every else 'Not every'} lr = 0 aggregate interval contains 0: {cells}.")
    s0 = next(iter((first.agg() or {}).values()))
    return (
        f"{question} {' '.join(parts)} Tried: {names}; over model "
        f"seeds {', '.join(map(str, first.seeds))} × {s0['prompts']} pool prompts each. A method widens "
        "coverage when its mean pool gain over seeds × prompts has its 95% interval (two-stage bootstrap: "
        "seeds, then prompts within a seed) above 0 and its held-out valid@1 minus the base's averages "
        "at least 0 over the seeds; detectable: the smallest true difference a two-sided 5% test finds "
        "with 80% power, from the measured variances (for the trained methods). With few seeds whose effects "
        "differ the interval covers less than 95% (tests/experiment/test_bench_stats.py simulates it).\n"
    )


def aggregate_sanity(b: Bench) -> str:
    """Lr = 0's aggregate interval, which must contain 0."""
    a = (b.agg() or {}).get("lr0")
    if not a or "mean" not in a:
        return ""
    inside = side(a["mean"]["lo"], a["mean"]["hi"]) == "contains 0"
    return (f" Over seeds × prompts its mean pool gain is {ival(a['mean'])}, "
            f"{'which contains' if inside else 'which does not contain'} 0.")


def surface_method_finding(b: Bench) -> list[str]:
    """The surface-diversity reward's surface metrics vs its exact coverage, against base and validity."""
    if not b.rows("surface") or not b.rows("validity"):
        return []
    agg = b.agg() or {}

    def gain(m: str) -> str:
        a = agg.get(m, {})
        return ival(a["mean"]) if "mean" in a else signed(b.mean(m, "pool_gain"))

    base = {k: statistics.fmean(b.base[s][k] for s in b.seeds) for k in ("distinct_2", "edit_distance",
                                                                          "coverage_k")}
    cells = {m: {k: b.mean(m, k) for k in base} for m in ("surface", "validity")}
    mine, val = cells["surface"], cells["validity"]

    def vs(key: str, ref: Mapping[str, float], name: str) -> str:
        word = "above" if mine[key] > ref[key] else "below" if mine[key] < ref[key] else "equal to"
        return f"{word} {name}'s {num(ref[key])}"

    metrics = "; ".join(
        f"{label} {num(mine[k])} ({vs(k, val, 'validity')}, {vs(k, base, 'the base')})"
        for k, label in (("distinct_2", "distinct-2"), ("edit_distance", "edit distance"))
    )
    return [
        f"**Surface reward vs approach** (means over seeds): the surface-diversity reward's {metrics}; its "
        f"exact strategy coverage: held-out C({b.k}) {num(mine['coverage_k'])} "
        f"({vs('coverage_k', val, 'validity')}, {vs('coverage_k', base, 'the base')}), mean pool gain "
        f"{gain('surface')} (validity {gain('validity')})."
    ]


def aggregate_target(b: Bench) -> list[str]:
    """The target in aggregate terms: which methods widen coverage (`aggregates_block`'s last column)."""
    wide, _ = widening(b)
    bar = ("**Target (mean pool gain over seeds × prompts with its 95% interval above 0, at held-out "
           "valid@1 ≥ the base's on average over seeds)**")
    if not wide:
        return [f"{bar}: met by no method; {_best(b)}."]
    agg = b.agg() or {}
    cells = "; ".join(f"**{b.short(m)}** ({ival(agg[m]['mean'])})" for m in wide)
    return [f"{bar}: met by {cells}."]


def narrowing_finding(b: Bench) -> list[str]:
    """Every trained method's mean pool and held-out gain, and where its intervals lie."""
    trained = [m for m in b.trained if b.rows(m)]
    cells = []
    for m in trained:
        sides = [side(r["pool_gain_lo"], r["pool_gain_hi"]) for r in b.rows(m)]
        where = ("above 0", "contains 0", "below 0")
        counts = ", ".join(f"{sides.count(s)} {s}" for s in where if s in sides)
        cells.append(f"{b.short(m)} {signed(b.mean(m, 'pool_gain'), 2)} ({counts})")
    held = [r for m in trained for r in b.rows(m)]
    below = sum(r["heldout_gain_hi"] is not None and r["heldout_gain_hi"] < 0 for r in held)
    negative = sum(r["heldout_gain"] < 0 for r in held)
    under = sum(r["coverage_k"] < b.base[r["seed"]]["coverage_k"] for r in held)
    v1 = [r["valid_at_1"] for r in held]
    base_v1 = [b.base[s]["valid_at_1"] for s in b.seeds]
    return [
        "**Mean pool gain over seeds, trained methods** (and where each seed's 95% interval lies): "
        + "; ".join(cells) + ".",
        f"**Held-out**: of the {len(held)} trained runs, {negative} have a negative gain vs the base "
        f"({below} with the interval below 0), {under} a held-out C({b.k}) below the base's, at held-out "
        f"valid@1 {span(v1)} against the base's {span(base_v1)}.",
    ]


def controls_finding(b: Bench) -> list[str]:
    """The distinct-vs-iid codes contrast, temperature 1.3 and the lr = 0 sanity run."""
    out = []
    if b.rows("mixture_distinct") and b.rows("mixture_iid"):
        lead = [b.row[("mixture_distinct", s)]["pool_gain"] - b.row[("mixture_iid", s)]["pool_gain"]
                for s in b.seeds]
        distinct, iid = b.rows("mixture_distinct"), b.rows("mixture_iid")
        out.append(
            "**Distinct vs iid codes on the same mixture** (pool gain, distinct minus iid, per seed): "
            f"{listing(lead)}; distinct codes {listing([r['pool_gain'] for r in distinct])}, "
            f"iid codes {listing([r['pool_gain'] for r in iid])}; held-out valid@1 "
            f"{', '.join(num(r['valid_at_1']) for r in distinct)} with distinct codes."
        )
    if b.rows("temperature"):
        t = b.rows("temperature")
        cross = sorted({str(r["crossover_k"]) for r in t if r.get("crossover_k") is not None})
        out.append(
            f"**Temperature 1.3**: held-out valid@1 {span([r['valid_at_1'] for r in t])}, pool gain "
            f"{listing([r['pool_gain'] for r in t])}, distinct-2 {span([r['distinct_2'] for r in t])} "
            f"against the base's {span([b.base[s]['distinct_2'] for s in b.seeds])}"
            + (f"; crossover k = {', '.join(cross)}." if cross else "; no crossover.")
        )
    if b.rows("lr0"):
        rows = b.rows("lr0")
        every = all(side(r["pool_gain_lo"], r["pool_gain_hi"]) == "contains 0" for r in rows)
        out.append(
            f"**Sanity**: {'every' if every else 'not every'} lr = 0 pool-gain interval contains 0: "
            + ", ".join(b.pool(r) for r in rows) + "." + aggregate_sanity(b)
        )
    return out


def solvable_finding(b: Bench) -> list[str]:
    """The base's solvable share at n, the trained methods' range, and the crossovers."""
    prompts = b.cfg["grpo"]["eval_inputs"]
    base = [b.base[s]["solvable"] for s in b.seeds]
    trained = [r for m in b.trained for r in b.rows(m)]
    crossed = [f"{b.short(r['method'])} on seed {r['seed']} (k = {r['crossover_k']})"
               for r in trained if r.get("crossover_k") is not None]
    return [
        f"**Solvable share and crossover**: the base solves {', '.join(num(x) for x in base)} of the "
        f"held-out prompts within n = {b.n} samples ({', '.join(str(round(x * prompts)) for x in base)} "
        f"of {prompts}); the trained methods {span([r['solvable'] for r in trained])}. "
        + ("Trained runs whose valid@k falls behind the base's beyond noise: " + "; ".join(crossed) + "."
           if crossed else f"No trained method's valid@k falls behind the base's beyond noise at any "
                           f"k ≤ {b.n} (crossover k \"none\" on every run).")
    ]


def surface_finding(b: Bench) -> list[str]:
    """Spearman's rho of each surface metric with held-out C(K) and the pool gain; per-seed winners."""
    c = b.s["correlations"]
    ck = {key: c["checkpoints"][key]["coverage_k"] for key in SURFACE}
    order = sorted(SURFACE, key=lambda k: -(ck[k]["rho"] if ck[k]["rho"] is not None else -9))
    rhos = ", ".join(f"{SURFACE[k]} {signed(ck[k]['rho'], 2)}" for k in order)
    pool = [c["final_pool_gain"][k]["rho"] for k in SURFACE if c["final_pool_gain"][k]["rho"] is not None]
    n_final = c["final_pool_gain"]["distinct_2"]["n"]
    winners = []
    for seed, w in c["winners"].items():
        tops: dict[str, list[str]] = {}
        for key in SURFACE:
            tops.setdefault(SHORT.get(w.get(key), str(w.get(key))), []).append(SURFACE[key])
        by_metric = "; ".join(f"{', '.join(ks)}: {m}" for m, ks in tops.items())
        winners.append(f"seed {seed}, pool gain: {SHORT.get(w['pool_gain'], w['pool_gain'])}; {by_metric}")
    return [
        f"**Surface vs strategy**: across the {ck['distinct_2']['n']} checkpoints Spearman's rho with "
        f"held-out C({b.k}) is {rhos}; with the pool gain over the {n_final} final runs it is "
        f"{signed(min(pool), 2)} to {signed(max(pool), 2)}. The top method per seed: "
        + ". ".join(winners) + "."
    ]


def labeler_finding(b: Bench) -> list[str]:
    """The classifier's agreement with the validator, the oracle's lead under each, and the gain shifts."""
    seeds = b.s["seeds"]
    keys = [str(s) for s in b.seeds]
    kappa = ", ".join(num(seeds[k]["agreement"]["mean_kappa"]) for k in keys)
    exact = ", ".join(num(seeds[k]["agreement"]["exact_set_rate"], 2) for k in keys)
    lead = {lab: ", ".join(num(seeds[k]["oracle_auc"][lab] - seeds[k]["iid_auc"][lab]) for k in keys)
            for lab in ("validator", "classifier")}
    rows = [r for r in b.s["rows"] if r["pool_gain_classifier"] is not None]
    text = (
        f"**Second labeler**: the classifier agrees with the validator at mean per-strategy kappa {kappa} "
        f"(exact match-set rate {exact}; {seeds_text(b.seeds)} in order). The oracle's pool "
        f"AUC({b.k}) leads the base's iid by {lead['validator']} under the validator and "
        f"{lead['classifier']} under the classifier (the gain's unit)."
    )
    if rows:
        shift = [abs(r["pool_gain_classifier"] - r["pool_gain"]) for r in rows]
        flips = sum((r["pool_gain_classifier"] > 0) != (r["pool_gain"] > 0) for r in rows)
        text += (
            f" Relabelled, a run's pool gain moves by {num(statistics.median(shift), 2)} in the median "
            f"(at most {num(max(shift), 2)}) and changes sign on {flips} of the {len(rows)} runs that have a "
            "classifier-label gain"
        )
    missing = len(b.s["rows"]) - len(rows)
    if missing:
        text += (
            f"{';' if rows else ''} {missing} runs have none (the gain is undefined where the oracle's "
            "AUC does not exceed iid's under the classifier's labels)"
        )
    if rows or missing:
        text += "."
    return [text]


def findings_block(b: Bench) -> str:
    """Every finding of one setting, each read off the committed bench."""
    target = target_finding(b) if b.agg() is None else aggregate_target(b)
    parts = [*target, *narrowing_finding(b), *controls_finding(b), *surface_method_finding(b),
             *solvable_finding(b), *surface_finding(b), *labeler_finding(b)]
    return "".join(f"* {p}\n" for p in parts)


def wall_block(benches: Mapping[str, Bench]) -> str:
    """Wall and process CPU time per seed and setting, and the models' training time (in them or before)."""
    order = next(iter(benches.values())).seeds
    lines = ["| setting | " + " | ".join(f"seed {s}" for s in order) + " | all seeds |",
             "|---|" + "---|" * (len(order) + 1)]
    walls, trains, whole, included = [], [], [], False
    for setting, b in benches.items():
        seeds = b.s["seeds"]
        cells = []
        for s in order:
            f = seeds[str(s)]
            cell = f"{f['seconds']:.0f} s (CPU {f['cpu_seconds']:.0f} s)"
            models = b.models.get("seconds", {}).get(str(s))
            spent = models["base_seconds"] + models["mixture_seconds"] if models else 0.0
            inside = bool(models) and not f["models_cached"]
            included |= inside
            if models:
                trains.append(spent)
                cell += f", {'of which' if inside else 'plus'} training the models {spent:.0f} s"
            walls.append(f["seconds"] - spent if inside else f["seconds"])
            whole.append(f["seconds"] if inside else f["seconds"] + spent)
            cells.append(cell)
        lines.append(f"| {setting} | " + " | ".join(cells) + f" | {b.s['seconds']:.0f} s |")
    total = sum(b.s["seconds"] for b in benches.values())
    text = (
        f"\n\nWithout training the models, the slowest seed takes {max(walls):.0f} s "
        f"({max(walls) / 60:.1f} min); with them, {max(whole):.0f} s ({max(whole) / 60:.1f} min). "
        f"Both settings over {len(order)} seeds take {total:.0f} s ({total / 60:.1f} min) in all"
    )
    if trains:
        where = "of it" if included else "more before them,"
        text += f", {sum(trains):.0f} s {where} training the models (base LM and mixture, once per seed)"
    return "\n".join(lines) + text + ".\n"


def models_record(setting: str, seeds: Sequence[int], cache: Path) -> dict[str, Any]:
    """The base LM's training grids and each seed's training seconds (the cached ``seffi_meta.json``)."""
    from seffi.experiment.bench import BenchConfig

    out = {}
    for seed in seeds:
        lm = BenchConfig(setting=setting, seeds=(seed,)).ladder(seed).lm_config()
        meta = {kind: cache / key / "seffi_meta.json" for kind, key in
                (("base", lm.base_key()), ("mixture", lm.mixture_key()))}
        if all(path.is_file() for path in meta.values()):
            out[str(seed)] = {f"{kind}_seconds": json.loads(path.read_text(encoding="utf-8"))["train_seconds"]
                              for kind, path in meta.items()}
    grids = BenchConfig(setting=setting, seeds=(seeds[0],)).ladder(seeds[0]).lm_config().n_train_inputs
    return {"train_grids": grids, "seconds": out}


# -- producing and refreshing ---------------------------------------------------------------------------


def _cache_dir(summary: Mapping[str, Any]) -> Path:
    """The model cache the summary's commands name (the default cache without ``--cache-dir``)."""
    from seffi._cache import default_cache_dir

    words = summary["command"][0].split()
    return Path(words[words.index("--cache-dir") + 1]) if "--cache-dir" in words else default_cache_dir()


def _clean_commands(summary: dict[str, Any], setting: str) -> dict[str, Any]:
    """The summary with machine folders (commands, combined runs) replaced by the page's placeholders."""
    prefix = setting[0]
    out = []
    for seed, command in zip(summary["config"]["seeds"], summary["command"], strict=True):
        words = command.split()
        for flag, value in (("--cache-dir", "CACHE"), ("--out", f"runs/{prefix}{seed}")):
            if flag in words:
                words[words.index(flag) + 1] = value
        out.append(" ".join(words))
    combined = [f"runs/{prefix}{seed}" for seed in summary["config"]["seeds"]]
    return {**summary, "command": out, **({"combined_from": combined} if "combined_from" in summary else {})}


def refresh(ctx: Context, dirs: Mapping[str, Path]) -> None:
    """Run (or take from ``dirs``) each setting's seeds and ``--combine``; commit the results and figure."""
    for setting in SETTINGS:
        src = dirs.get(setting)
        if src is None:
            runs = []
            for seed in SEEDS:
                out = ctx.tmp / f"{setting}{seed}"
                _run([*SEFFI, "bench", "exploration", "--setting", setting, "--seeds", str(seed),
                      "--no-progress", "--wandb", "disabled", "--out", str(out)], ctx.tmp)
                runs.append(str(out))
            src = ctx.tmp / setting
            _run([*SEFFI, "bench", "exploration", "--combine", *runs, "--no-progress", "--wandb", "disabled",
                  "--out", str(src)], ctx.tmp)
        summary = json.loads((Path(src) / "bench.json").read_text(encoding="utf-8"))
        dest = RESULTS / "exploration-bench" / setting
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "bench.json").write_text(json.dumps(_clean_commands(summary, setting), indent=1) + "\n",
                                         encoding="utf-8")
        shutil.copyfile(Path(src) / "bench.png", DOCS / f"exploration_bench_{setting}.png")
        record = models_record(setting, summary["config"]["seeds"], _cache_dir(summary))
        (dest / "models.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def produce(ctx: Context) -> Result:
    """docs/exploration-bench.md's blocks from the committed benches; its two figures re-rendered."""
    if ctx.refresh:
        refresh(ctx, ctx.exploration_dirs)
    benches, blocks, figures, problems = {}, {}, [], []
    for setting in SETTINGS:
        try:
            b = benches[setting] = load(setting)
        except FileNotFoundError as exc:
            problems.append(f"exploration: {exc.filename} is missing (run --write --refresh)")
            continue
        bodies = (setup_block(b), table_block(b), aggregates_block(b), findings_block(b))
        blocks.update(zip(blocks_of(setting), bodies, strict=True))
        try:
            from seffi.experiment.bench_plots import bench_figure

            made = bench_figure(ctx.tmp / f"{setting}.png", b.s)
            figures.append((DOCS / f"exploration_bench_{setting}.png", made))
        except Exception as exc:  # a renamed plotting function is a problem to report, not a traceback
            problems.append(f"exploration: could not re-render the {setting} figure: {exc!r}")
    if len(benches) == len(SETTINGS):
        blocks["exploration-wall"] = wall_block(benches)
        blocks["exploration-verdict"] = verdict_block(benches)
    return Result(blocks, figures=figures, problems=problems)

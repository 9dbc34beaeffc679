"""The tables, correlations, files and W&B run of ``seffi bench exploration``.

Pure assembly (`method_row`, `checkpoint_points`, `correlations`,
`method_summary`) works on plain dicts so it can be checked against hand-computed inputs;
`finish` runs the pool comparisons (one per seed and labeler, every method against the base's
own iid with paired bootstraps) and writes ``bench.json``, ``bench.md``, ``bench.png``, the records
and the W&B run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seffi._convert import jsonable
from seffi._io import write_atomic
from seffi._seeding import seed_of
from seffi.errors import SeffiError
from seffi.experiment.bench_plots import bench_figure, console_lines, console_table, log_bench, markdown
from seffi.experiment.bench_stats import aggregate, prompt_gains
from seffi.experiment.runner import Runner
from seffi.models.surface import SURFACE_KEYS, rank_correlation

#: Numbers of a smoke run are a check of the code path, not a measurement.
SMOKE_NOTE = "--smoke: tiny models trained for seconds and 2 GRPO steps; these numbers are not results"
#: What each surface metric is compared with across methods and checkpoints.
TARGETS = ("coverage_k", "heldout_gain")


def _f(v: Any) -> float | None:
    return None if v is None or not np.isfinite(float(v)) else float(v)


# -- rows -----------------------------------------------------------------------------------------------


def method_row(
    slug: str,
    label: str,
    seed: int,
    budget: int,
    pool: Mapping[str, Mapping[str, Any]],
    final: Any,
    scalars: Mapping[str, float],
    surface: Mapping[str, float],
    base_valid_at_1: float,
    seconds: float,
) -> dict[str, Any]:
    """One table row.

    Args:
        slug: Method slug.
        label: Method label.
        seed: Model seed.
        budget: K.
        pool: ``{labeler: {"value", "lo", "hi", "fragile", "valid_rate", "prompts"}}``: the pool gain
            under each labeler (``prompts``: `prompt_aucs`).
        final: The last held-out `EvalResult`.
        scalars: Its ``PassAtKEval.scalars`` (gain vs base and its fragility flag, crossover).
        surface: Surface metrics of its groups of K.
        base_valid_at_1: The base's held-out valid@1 (the target's bar).
        seconds: Wall time of the method.
    """
    v = pool.get("validator", {})
    c = pool.get("classifier", {})
    found = scalars.get("seffi/eval/crossover_found", 0.0) > 0
    row = {
        "method": slug,
        "label": label,
        "seed": seed,
        "pool_gain": _f(v.get("value")),
        "pool_gain_lo": _f(v.get("lo")),
        "pool_gain_hi": _f(v.get("hi")),
        "pool_valid": _f(v.get("valid_rate")),
        "pool_gain_classifier": _f(c.get("value")),
        "pool_gain_classifier_lo": _f(c.get("lo")),
        "pool_gain_classifier_hi": _f(c.get("hi")),
        # Per pool prompt AUCs of the policy, the base's iid and the oracle (`prompt_aucs`): the pieces
        # the seed's pool gain is a ratio of, which the aggregates over seeds x prompts resample.
        "pool_prompts": {k: g["prompts"] for k, g in pool.items() if g.get("prompts")},
        "valid_at_1": float(final.valid_at_k[0]),
        "coverage_k": float(final.coverage[budget - 1]),
        "coverage_n": float(final.coverage[-1]),
        "n": int(final.n),
        "heldout_gain": _f(scalars.get("seffi/eval/gain_vs_base")),
        "heldout_gain_lo": _f(scalars.get("seffi/eval/gain_vs_base_lo")),
        "heldout_gain_hi": _f(scalars.get("seffi/eval/gain_vs_base_hi")),
        # Every shown gain carries its fragility flag (`seffi.coverage.Gain.fragile`).
        "pool_gain_fragile": bool(v.get("fragile")),
        "pool_gain_classifier_fragile": bool(c.get("fragile")),
        "heldout_gain_fragile": scalars.get("seffi/eval/gain_vs_base_fragile", 0.0) > 0,
        "crossover_k": int(scalars["seffi/eval/crossover_k"]) if found else None,
        "solvable": float(final.solvable),
        "base_valid_at_1": float(base_valid_at_1),
        "seconds": float(seconds),
    }
    row.update({k: _f(surface.get(k)) for k in SURFACE_KEYS})
    row["pool_ci_above_0"] = row["pool_gain_lo"] is not None and row["pool_gain_lo"] > 0
    row["meets_target"] = bool(row["pool_ci_above_0"] and row["valid_at_1"] >= base_valid_at_1)
    lo, hi = row["pool_gain_lo"], row["pool_gain_hi"]
    row["pool_ci_contains_0"] = lo is not None and hi is not None and lo <= 0.0 <= hi
    return row


def base_row(seed: int, budget: int, base: Any, surface: Mapping[str, float]) -> dict[str, Any]:
    """The reference (base) row of one seed: its held-out numbers."""
    row = {
        "method": "base",
        "label": "reference (base LM)",
        "seed": seed,
        "valid_at_1": float(base.valid_at_k[0]),
        "coverage_k": float(base.coverage[budget - 1]),
        "coverage_n": float(base.coverage[-1]),
        "n": int(base.n),
        "solvable": float(base.solvable),
        "pool_gain": 0.0,
        "heldout_gain": 0.0,
    }
    row.update({k: _f(surface.get(k)) for k in SURFACE_KEYS})
    return row


def method_summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per method over its seeds: mean and sd of the headline numbers, and the target count.

    Returns:
        One dict per method (first-seen order): ``method``, ``label``, ``seeds``, ``<field>_mean`` /
        ``<field>_sd`` for the pool gains, held-out valid@1, C(K), C(n) and gain, ``target_seeds``
        (seeds with the pool gain CI above 0 at held-out valid@1 >= the base's) and
        ``pool_ci_contains_0_seeds``.
    """
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        out.setdefault(r["method"], {"method": r["method"], "label": r["label"], "rows": []})["rows"].append(
            r
        )
    fields = (
        "pool_gain",
        "pool_gain_classifier",
        "pool_valid",
        "valid_at_1",
        "coverage_k",
        "coverage_n",
        "heldout_gain",
        "seconds",
    )
    result = []
    for m in out.values():
        rs = m.pop("rows")
        m["seeds"] = [r["seed"] for r in rs]
        for f in fields:
            vals = np.array([r[f] for r in rs if r.get(f) is not None], dtype=np.float64)
            m[f"{f}_mean"] = float(vals.mean()) if vals.size else None
            m[f"{f}_sd"] = float(vals.std(ddof=1)) if vals.size > 1 else None
        m["target_seeds"] = [r["seed"] for r in rs if r.get("meets_target")]
        m["pool_ci_contains_0_seeds"] = [r["seed"] for r in rs if r.get("pool_ci_contains_0")]
        result.append(m)
    return result


# -- aggregates over seeds x prompts --------------------------------------------------------------------

#: The baseline every method's probability of improvement and detectable difference is paired with.
REFERENCE = "validity"
#: The held-out valid@1 side of "widens": over the seeds, the method's held-out valid@1 minus the base's
#: (same seed, same prompts) averages at least 0.
VALID_RULE = "mean over seeds of (held-out valid@1 - the base's) >= 0"
#: Rows of benches that predate the per-prompt pool data cannot be aggregated over prompts.
NEEDS_PROMPTS = "needs per-prompt pool data (rows without pool_prompts)"


def _seed_gains(rows: Sequence[Mapping[str, Any]], labeler: str) -> dict[int, tuple[list[str], Any]]:
    """``{seed: (prompt ids sorted, per-prompt gains in that order)}`` of one method's rows."""
    out = {}
    for r in rows:
        pp = r["pool_prompts"][labeler]
        order = np.argsort(pp["input_ids"], kind="stable")
        g = prompt_gains(
            *(np.asarray(pp[k], dtype=np.float64)[order] for k in ("auc", "iid_auc", "oracle_auc"))
        )
        out[int(r["seed"])] = ([pp["input_ids"][i] for i in order], g)
    return out


def aggregates(rows: Sequence[Mapping[str, Any]], *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Per labeler and method, the aggregates over seeds x pool prompts (`seffi.experiment.bench_stats`).

    A method **widens** exact strategy coverage when its mean pool gain's interval (validator labels)
    lies above 0 and its held-out valid@1 meets `VALID_RULE`.

    Args:
        rows: `method_row` rows of every seed.
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed (the same draws for every method: paired comparisons of their intervals).

    Returns:
        ``{"reference", "valid_rule", "needs"}`` and ``"labelers": {labeler: {slug: aggregate}}``: each
        aggregate `bench_stats.aggregate`'s dict plus ``label``, ``seed_list``, ``valid_at_1_diff`` and
        ``widens``, or ``{"label", "reason"}`` when it cannot be computed. ``needs`` is `NEEDS_PROMPTS`
        (and ``labelers`` empty) when a row lacks per-prompt data.
    """
    out: dict[str, Any] = {"reference": REFERENCE, "valid_rule": VALID_RULE, "needs": None, "labelers": {}}
    if not rows or any(not r.get("pool_prompts") for r in rows):
        out["needs"] = NEEDS_PROMPTS
        return out
    by_method: dict[str, list[Mapping[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["seed"]):
        by_method.setdefault(r["method"], []).append(r)
    labelers = [lab for lab in ("validator", "classifier") if all(lab in r["pool_prompts"] for r in rows)]
    for lab in labelers:
        gains = {m: _seed_gains(rs, lab) for m, rs in by_method.items()}
        ref = gains.get(REFERENCE)
        res: dict[str, Any] = {}
        for m, rs in by_method.items():
            g = gains[m]
            seeds = sorted(g)
            entry: dict[str, Any] = {"label": rs[0]["label"], "seed_list": seeds}
            entry["valid_at_1_diff"] = float(np.mean([r["valid_at_1"] - r["base_valid_at_1"] for r in rs]))
            if any(not np.isfinite(g[s][1]).all() for s in seeds):
                entry["reason"] = "a seed's oracle does not lead its iid under these labels: no gain"
                res[m] = entry
                continue
            paired = (
                ref is not None
                and m != REFERENCE
                and all(s in ref and ref[s][0] == g[s][0] and np.isfinite(ref[s][1]).all() for s in seeds)
            )
            stats = aggregate(
                [g[s][1] for s in seeds],
                [ref[s][1] for s in seeds] if paired and ref is not None else None,
                n_boot=n_boot,
                seed=seed,
            )
            entry.update(stats)
            entry["widens"] = bool(stats["mean"]["lo"] > 0 and entry["valid_at_1_diff"] >= 0)
            res[m] = entry
        out["labelers"][lab] = res
    return out


def aggregates_markdown(summary: Mapping[str, Any]) -> list[str]:
    """``bench.md``'s section of the aggregates over seeds x prompts (validator labels)."""
    agg = summary.get("aggregates") or {}
    lines = ["", "## Aggregates over seeds x pool prompts", ""]
    if agg.get("needs") or "validator" not in agg.get("labelers", {}):
        return [*lines, f"Not computed: {agg.get('needs') or NEEDS_PROMPTS}.", ""]

    def ci(d: Mapping[str, Any] | None, sign: str = "+") -> str:
        return "—" if d is None else f"{d['value']:{sign}.3f} [{d['lo']:{sign}.3f}, {d['hi']:{sign}.3f}]"

    lines += [
        f"Per-prompt gains (a seed's room as the unit), two-stage bootstrap 95% intervals (seeds, then "
        f"prompts within a seed); probability of improvement paired by prompt; detectable: the smallest "
        f"difference a two-sided 5% test finds at 80% power. Widens: mean interval above 0 and "
        f"{agg['valid_rule']}.",
        "",
        "| method | seeds x prompts | mean [95% CI] | IQM [95% CI] | P(gain > 0) | P(> validity) "
        "| detectable vs 0 / vs validity | valid@1 − base | widens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for a in agg["labelers"]["validator"].values():
        if "reason" in a:
            lines.append(f"| {a['label']} | — | {a['reason']} | | | | | | |")
            continue
        det = f"{a['detectable_vs_0']:.3f} / " + (
            "—" if a["detectable_vs_reference"] is None else f"{a['detectable_vs_reference']:.3f}"
        )
        lines.append(
            f"| {a['label']} | {a['seeds']} x {a['prompts']} | {ci(a['mean'])} | {ci(a['iqm'])} | "
            f"{ci(a['poi_base'], '')} | {ci(a['poi_reference'], '')} | {det} | {a['valid_at_1_diff']:+.3f} | "
            f"{'yes' if a['widens'] else 'no'} |"
        )
    return [*lines, ""]


# -- surface vs strategy --------------------------------------------------------------------------------


def checkpoint_points(
    seed: int,
    budget: int,
    base: Any,
    base_surface: Mapping[str, float],
    histories: Mapping[str, Sequence[tuple[int, Any, Mapping[str, float]]]],
    surfaces: Mapping[str, Mapping[int, Mapping[str, float]]],
) -> list[dict[str, Any]]:
    """One point per (method, evaluation step) of a seed, plus the base at step 0.

    Each point holds ``seed``, ``method``, ``step``, ``coverage_k`` (held-out C(K)), ``coverage_n``,
    ``valid_at_1``, ``heldout_gain`` (vs the base; 0 for the base) and the surface metrics.
    """
    points = [
        {
            "seed": seed,
            "method": "base",
            "step": 0,
            "coverage_k": float(base.coverage[budget - 1]),
            "coverage_n": float(base.coverage[-1]),
            "valid_at_1": float(base.valid_at_k[0]),
            "heldout_gain": 0.0,
            **{k: _f(base_surface.get(k)) for k in SURFACE_KEYS},
        }
    ]
    for slug, history in histories.items():
        for step, res, sc in history:
            surf = surfaces.get(slug, {}).get(int(step), {})
            points.append(
                {
                    "seed": seed,
                    "method": slug,
                    "step": int(step),
                    "coverage_k": float(res.coverage[budget - 1]),
                    "coverage_n": float(res.coverage[-1]),
                    "valid_at_1": float(res.valid_at_k[0]),
                    "heldout_gain": _f(sc.get("seffi/eval/gain_vs_base")),
                    **{k: _f(surf.get(k)) for k in SURFACE_KEYS},
                }
            )
    return points


def _rho(points: Sequence[Mapping[str, Any]], a: str, b: str) -> tuple[float, int]:
    pairs = [(p[a], p[b]) for p in points if p.get(a) is not None and p.get(b) is not None]
    if len(pairs) < 2:
        return float("nan"), len(pairs)
    x, y = zip(*pairs, strict=True)
    return rank_correlation(list(x), list(y)), len(pairs)


def correlations(points: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Spearman's rho of each surface metric with strategy coverage and the gain.

    Args:
        points: `checkpoint_points` of every seed (methods x checkpoints, base included).
        rows: `method_row` rows (final numbers per method and seed).

    Returns:
        ``{"checkpoints": {metric: {target: {"rho", "n"}}}`` over every point pooled,
        ``"checkpoints_per_seed"`` (the same per seed), ``"final_pool_gain": {metric: {"rho", "n"}}``
        (final held-out surface vs the validator's pool gain across methods and seeds) and
        ``"winners"``: per seed and metric the method with the highest surface value and the one with
        the highest pool gain, and per metric the method whose surface rank and pool-gain rank differ
        most (pooled over seeds).
    """
    out: dict[str, Any] = {
        "checkpoints": {},
        "checkpoints_per_seed": {},
        "final_pool_gain": {},
        "winners": {},
    }
    for key in SURFACE_KEYS:
        out["checkpoints"][key] = {}
        for t in TARGETS:
            rho, n = _rho(points, key, t)
            out["checkpoints"][key][t] = {"rho": _f(rho), "n": n}
    for seed in sorted({p["seed"] for p in points}):
        sub = [p for p in points if p["seed"] == seed]
        out["checkpoints_per_seed"][str(seed)] = {
            key: {t: _f(_rho(sub, key, t)[0]) for t in TARGETS} for key in SURFACE_KEYS
        }
    finals = [r for r in rows if r.get("pool_gain") is not None]
    for key in SURFACE_KEYS:
        rho, n = _rho(finals, key, "pool_gain")
        out["final_pool_gain"][key] = {"rho": _f(rho), "n": n}
    for seed in sorted({r["seed"] for r in finals}):
        sub = [r for r in finals if r["seed"] == seed]
        best = max(sub, key=lambda r: r["pool_gain"])["method"]
        out["winners"][str(seed)] = {
            "pool_gain": best,
            **{
                key: max((r for r in sub if r.get(key) is not None), key=lambda r: r[key])["method"]
                for key in SURFACE_KEYS
                if any(r.get(key) is not None for r in sub)
            },
        }
    out["disagreement"] = {key: most_disagreeing(finals, key) for key in SURFACE_KEYS}
    return out


def most_disagreeing(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any] | None:
    """The method whose mean rank by ``key`` differs most from its mean rank by pool gain.

    Ranks are 1 = highest within each seed, averaged over the seeds a method has.
    """
    ranks: dict[str, list[tuple[float, float]]] = {}
    for seed in sorted({r["seed"] for r in rows}):
        sub = [r for r in rows if r["seed"] == seed and r.get(key) is not None]
        if len(sub) < 2:
            continue
        by_s = _desc_ranks([r[key] for r in sub])
        by_g = _desc_ranks([r["pool_gain"] for r in sub])
        for r, a, b in zip(sub, by_s, by_g, strict=True):
            ranks.setdefault(r["method"], []).append((a, b))
    if not ranks:
        return None
    mean = {
        m: (float(np.mean([a for a, _ in v])), float(np.mean([b for _, b in v]))) for m, v in ranks.items()
    }
    worst = max(mean, key=lambda m: (abs(mean[m][0] - mean[m][1]), m))
    return {"method": worst, "surface_rank": mean[worst][0], "gain_rank": mean[worst][1], "of": len(mean)}


def _desc_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, 1 = largest; ties share the mean rank."""
    x = -np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks.tolist()


# -- pool comparisons -----------------------------------------------------------------------------------


def pool_comparisons(seed_result: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Every method vs the base's iid: ``{labeler: {slug: {"value", "lo", "hi", "reason", "fragile", ...}}}``.

    Each entry also holds ``valid_rate`` and ``auc``.
    """
    from rich.progress import Progress

    ctx, runs = seed_result["context"], seed_result["runs"]
    cfg = ctx.cfg
    lad = cfg.ladder(0)
    runner = Runner(lad.run_config(), [], Progress(disable=True))
    strategies = tuple(ctx.task.strategies())
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in ctx.labelers:
        iid = ctx.iid[name]
        runner.rarity = iid
        iid_curves = iid.curves(cfg.budget, seed=seed_of(ctx.seed, 5))
        oracle = ctx.oracle[name].curves(cfg.budget, rarity=iid)
        rollouts = {slug: run.pool.rollouts[name] for slug, run in runs.items()}
        comp = runner.compare(
            ctx.task.name, strategies, 1, rollouts, iid_curves, oracle, seed_of(ctx.seed, 6), []
        )
        out[name] = {}
        for slug, p in zip(rollouts, comp.policies, strict=True):
            g = p.gain
            out[name][slug] = {
                "value": g.value,
                "lo": g.lo,
                "hi": g.hi,
                "reason": g.reason,
                "fragile": g.fragile,
                "valid_rate": float(rollouts[slug].valid.mean()),
                "auc": p.curves.auc,
                "prompts": prompt_aucs(
                    rollouts[slug].tracker.curves(cfg.budget, n_boot=0), iid_curves, oracle
                ),
            }
        out[name]["_iid_auc"] = {"value": float(iid_curves.auc)}
        out[name]["_oracle_auc"] = {"value": float(oracle.auc)}
    return out


def prompt_aucs(policy: Any, iid: Any, oracle: Any) -> dict[str, list[Any]]:
    """Per pool prompt, the three AUCs the pool gain is a ratio of.

    ``gain = mean(auc - iid_auc) / mean(oracle_auc - iid_auc)`` over these prompts is the pool gain
    (`seffi.coverage.gain.paired_gain` restricts the baselines to the policy's prompts the same way).

    Args:
        policy: The method's pool `Curves` (per-input AUCs, in its ``input_keys`` order).
        iid: The base's iid `Curves` (per input).
        oracle: The oracle's `Curves` (per input).

    Returns:
        ``{"input_ids", "auc", "iid_auc", "oracle_auc"}``: lists of length P, in the policy's order.
    """
    ids = [str(i) for _, i in policy.input_keys]
    pos = {str(i): j for j, (_, i) in enumerate(iid.input_keys)}
    opos = {str(i): j for j, (_, i) in enumerate(oracle.input_keys)}
    return {
        "input_ids": ids,
        "auc": [float(a) for a in policy.input_auc],
        "iid_auc": [float(iid.input_auc[pos[i]]) for i in ids],
        "oracle_auc": [float(oracle.input_auc[opos[i]]) for i in ids],
    }


# -- files ----------------------------------------------------------------------------------------------


def records(seed_result: Mapping[str, Any], slug: str) -> dict[str, Any]:
    """A method's saved samples: the labelled pool runs and the last held-out evaluation."""
    ctx, run = seed_result["context"], seed_result["runs"][slug]
    pool = {"input_ids": [x.id for x in ctx.pool], "texts": run.pool.texts}
    for name, ro in run.pool.rollouts.items():
        pool[name] = {
            "run_input_ids": ro.input_ids,
            "matches": [[list(m) for m in row] for row in ro.matches],
            "valid": ro.valid.tolist(),
        }
    texts, sets, valid = run.final_samples
    held = {
        "input_ids": [x.id for x in ctx.held_out],
        "texts": texts,
        "matches": {i: [sorted(m) for m in v] for i, v in sets.items()},
        "valid": valid,
    }
    history = [
        {
            "step": st,
            "valid_at_k": r.valid_at_k.tolist(),
            "coverage": r.coverage.tolist(),
            "solvable": r.solvable,
            "scalars": sc,
            "surface": run.surface.get(int(st)),
        }
        for st, r, sc in run.history
    ]
    return {
        "method": slug,
        "seed": seed_result["seed"],
        "budget": ctx.cfg.budget,
        "pool": pool,
        "held_out": held,
        "history": history,
        "train": run.train,
        "seconds": run.seconds,
    }


def write_json(path: Path, obj: Any) -> Path:
    """``obj`` as JSON at ``path`` (atomically; NaN and infinities as null)."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(jsonable(obj), indent=1, allow_nan=False))
    return path


def publish(config: Any, summary: dict[str, Any], out: Path, console: Any) -> dict[str, Path]:
    """Write ``bench.json``, ``bench.png`` and ``bench.md`` and the W&B run, and print the table.

    Returns:
        ``{name: path}`` of the files written.
    """
    files = {"bench.json": write_json(out / "bench.json", summary)}
    files["bench.png"] = bench_figure(out / "bench.png", summary)
    write_atomic(out / "bench.md", markdown(summary) + "\n".join(aggregates_markdown(summary)))
    files["bench.md"] = out / "bench.md"
    hint = log_bench(config, summary, files, out)
    console.print(console_table(summary))
    for line in console_lines(summary):
        console.print(line, markup=False, soft_wrap=True)
    if summary.get("smoke"):
        console.print(SMOKE_NOTE, markup=False)
    console.print(f"bench folder: {out}  ({summary['seconds']:.1f} s)", soft_wrap=True, markup=False)
    if hint:
        console.print(f"W&B offline run saved; upload it with: {hint}", soft_wrap=True, markup=False)
    return files


def combine_summaries(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One summary from several benches of the same settings on other seeds (e.g. one process per seed).

    Rows, base rows, checkpoints and per-seed facts are pooled; the per-method summary and the
    correlations are recomputed over all of them.

    Raises:
        SeffiError: No summary, settings that differ beyond the seeds, or a seed in two of them.
    """
    if not summaries:
        raise SeffiError("nothing to combine: give at least one bench folder")
    first = summaries[0]

    def settings(s: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s["config"].items() if k != "seeds"}

    seeds: list[int] = []
    for s in summaries:
        if s.get("format") != first.get("format") or settings(s) != settings(first):
            diff = sorted(
                k
                for k in set(settings(s)) | set(settings(first))
                if settings(s).get(k) != settings(first).get(k)
            )
            raise SeffiError(
                f"benches with other settings cannot be combined (they differ in {diff or ['format']})"
            )
        seeds += list(s["config"]["seeds"])
    if len(set(seeds)) != len(seeds):
        raise SeffiError(f"a seed appears in more than one bench: {sorted(seeds)}")
    rows = [r for s in summaries for r in s["rows"]]
    points = [p for s in summaries for p in s["points"]]
    out = dict(first)
    out.update(
        {
            "command": [s.get("command") for s in summaries],
            "config": {**first["config"], "seeds": sorted(seeds)},
            "rows": sorted(rows, key=lambda r: r["seed"]),
            "base": sorted((b for s in summaries for b in s["base"]), key=lambda b: b["seed"]),
            "points": points,
            "methods": method_summary(sorted(rows, key=lambda r: r["seed"])),
            "correlations": correlations(points, rows),
            "aggregates": aggregates(rows, n_boot=int(first["config"].get("bootstrap", 2000))),
            "seeds": {k: v for s in summaries for k, v in s["seeds"].items()},
            "seconds": float(sum(s["seconds"] for s in summaries)),
            "smoke": any(s.get("smoke") for s in summaries),
        }
    )
    return out


def finish(
    config: Any,
    seeds: Mapping[int, dict[str, Any]],
    out: Path,
    console: Any,
    seconds: float,
    command: str | None = None,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Assemble rows and correlations, write every file and the W&B run, print the table."""
    rows, bases, points, seed_facts = [], [], [], {}
    files: dict[str, Path] = {}
    for s, res in seeds.items():
        res["seed"] = s
        ctx, runs = res["context"], res["runs"]
        gains = pool_comparisons(res)
        bases.append(base_row(s, config.budget, ctx.base_eval, res["base_surface"]))
        base_v1 = float(ctx.base_eval.valid_at_k[0])
        for slug, run in runs.items():
            step, final, sc = run.history[-1]
            pool = {name: gains[name][slug] for name in gains}
            rows.append(
                method_row(
                    slug,
                    run.method.label,
                    s,
                    config.budget,
                    pool,
                    final,
                    sc,
                    run.surface.get(int(step), {}),
                    base_v1,
                    run.seconds,
                )
            )
            rows[-1]["pool_surface"] = run.pool.surface
            rows[-1]["train"] = run.train
            rows[-1]["cpu_seconds"] = run.cpu_seconds
            files[f"records/seed-{s}/{slug}"] = write_json(
                out / "records" / f"seed-{s}" / f"{slug}.json", records(res, slug)
            )
        points += checkpoint_points(
            s,
            config.budget,
            ctx.base_eval,
            res["base_surface"],
            {k: r.history for k, r in runs.items()},
            {k: r.surface for k, r in runs.items()},
        )
        seed_facts[str(s)] = {
            "measurement_seed": ctx.seed,
            "pool_ids": [x.id for x in ctx.pool],
            "held_out_ids": [x.id for x in ctx.held_out],
            "agreement": res["agreement"],
            "classifier_training_traces": res["classifier_rows"],
            "models_cached": res["models_cached"],
            "baseline_seconds": res["baseline_seconds"],
            "seconds": res.get("seconds"),
            "cpu_seconds": res.get("cpu_seconds"),
            "iid_auc": {n: g["_iid_auc"]["value"] for n, g in gains.items()},
            "oracle_auc": {n: g["_oracle_auc"]["value"] for n, g in gains.items()},
            "base_curves": {
                "valid_at_k": ctx.base_eval.valid_at_k.tolist(),
                "coverage": ctx.base_eval.coverage.tolist(),
            },
            "final_curves": {
                slug: {
                    "valid_at_k": r.history[-1][1].valid_at_k.tolist(),
                    "coverage": r.history[-1][1].coverage.tolist(),
                }
                for slug, r in runs.items()
            },
        }
    summary = {
        "format": "seffi.bench.exploration/1",
        "command": command,
        "smoke": bool(config.smoke),
        "note": SMOKE_NOTE if config.smoke else None,
        "config": config.public_dict(),
        "task_config": config.resolved_task_config(),
        "strategies": list(next(iter(seeds.values()))["context"].task.strategies()) if seeds else [],
        "rows": rows,
        "base": bases,
        "methods": method_summary(rows),
        "points": points,
        "correlations": correlations(points, rows),
        "aggregates": aggregates(rows, n_boot=int(config.bootstrap)),
        "seeds": seed_facts,
        "seconds": seconds,
    }
    files.update(publish(config, summary, out, console))
    return summary, files

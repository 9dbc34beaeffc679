"""What a reader sees of ``seffi bench exploration``: the markdown, the console table, the figure, W&B.

Everything here reads the summary dict ``bench.json`` holds (`seffi.experiment.bench_report.finish`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from seffi.models.surface import SURFACE_KEYS
from seffi.report.wandb_run import SafeWandbRun

SURFACE_NAMES = {
    "distinct_1": "d-1",
    "distinct_2": "d-2",
    "distinct_3": "d-3",
    "distinct_4": "d-4",
    "edit_distance": "edit",
    "distinct_rate": "distinct",
}


def _num(v: Any, fmt: str = "{:.3f}") -> str:
    return "—" if v is None else fmt.format(v)


def _ci(v: Any, lo: Any, hi: Any) -> str:
    if v is None:
        return "—"
    if lo is None or hi is None:
        return f"{v:+.3f}"
    return f"{v:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _cross(r: Mapping[str, Any]) -> str:
    if r.get("method") == "base":
        return "—"
    return "none within n" if r.get("crossover_k") is None else str(r["crossover_k"])


def _fragile(row: Mapping[str, Any], gain: str) -> str:
    """The mark after a gain whose row flags it fragile (``<gain>_fragile``), else nothing."""
    return " (fragile)" if row.get(f"{gain}_fragile") and row.get(gain) is not None else ""


def table_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    """The per-method-and-seed table as rows of cells (base rows first within each seed)."""
    out = []
    by_seed: dict[int, list[Mapping[str, Any]]] = {}
    for r in summary["rows"]:
        by_seed.setdefault(r["seed"], []).append(r)
    bases = {b["seed"]: b for b in summary["base"]}
    for seed in sorted(by_seed):
        for r in [bases[seed], *by_seed[seed]]:
            base = r["method"] == "base"
            out.append(
                [
                    r["label"],
                    str(seed),
                    "0 (its own iid)"
                    if base
                    else _ci(r["pool_gain"], r["pool_gain_lo"], r["pool_gain_hi"]) + _fragile(r, "pool_gain"),
                    "—"
                    if base
                    else _ci(
                        r["pool_gain_classifier"], r["pool_gain_classifier_lo"], r["pool_gain_classifier_hi"]
                    )
                    + _fragile(r, "pool_gain_classifier"),
                    "—" if base else _num(r.get("pool_valid")),
                    _num(r["valid_at_1"]),
                    f"{r['coverage_k']:.3f} / {r['coverage_n']:.3f}",
                    "0"
                    if base
                    else _ci(r["heldout_gain"], r["heldout_gain_lo"], r["heldout_gain_hi"])
                    + _fragile(r, "heldout_gain"),
                    _cross(r),
                    _num(r["solvable"], "{:.2f}"),
                    " / ".join(_num(r.get(f"distinct_{n}"), "{:.2f}") for n in (1, 2, 3, 4)),
                    _num(r.get("edit_distance")),
                    _num(r.get("distinct_rate")),
                    "—" if base else f"{r['seconds']:.0f}",
                ]
            )
    return out


HEADER = [
    "method",
    "seed",
    "pool gain [95% CI]",
    "pool gain, classifier labels",
    "pool valid",
    "held-out valid@1",
    "C(K) / C(n)",
    "held-out gain vs base [95% CI]",
    "crossover k",
    "solvable at n",
    "distinct-1/2/3/4",
    "edit dist.",
    "distinct rate",
    "wall s",
]


def table_markdown(summary: Mapping[str, Any]) -> list[str]:
    """The per-method-and-seed table (`HEADER`, `table_rows`) as markdown lines."""
    head = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return head + ["| " + " | ".join(row) + " |" for row in table_rows(summary)]


def console_table(summary: Mapping[str, Any]) -> Any:
    """The main table as a rich ``Table``."""
    from rich.table import Table

    cfg = summary["config"]
    t = Table(title=f"seffi bench exploration: {cfg['task']} ({cfg['setting']}), K = {cfg['budget']}")
    keep = [0, 1, 2, 3, 5, 6, 7, 8, 12, 13]
    for i in keep:
        t.add_column(HEADER[i], overflow="fold")
    for row in table_rows(summary):
        t.add_row(*[row[i] for i in keep])
    return t


def console_lines(summary: Mapping[str, Any]) -> list[str]:
    """The target and sanity lines and each surface metric's rank correlations, for the console."""
    c = summary["correlations"]
    out = [target_line(summary), sanity_line(summary), "surface metric vs strategy (Spearman rho):"]
    for key in SURFACE_KEYS:
        cov, gain, pool = _surface_rhos(c, key)
        out.append(
            f"  {key}: with held-out C(K) {cov}, with held-out gain {gain} "
            f"({c['checkpoints'][key]['coverage_k']['n']} checkpoints); "
            f"with the pool gain {pool} ({c['final_pool_gain'][key]['n']} runs)"
        )
    return out


def _surface_rhos(c: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A surface metric's Spearman rho with held-out C(K), held-out gain and the final pool gain, as text."""
    ck = c["checkpoints"][key]
    return tuple(
        _num(r["rho"], "{:+.2f}") for r in (ck["coverage_k"], ck["heldout_gain"], c["final_pool_gain"][key])
    )


def target_line(summary: Mapping[str, Any]) -> str:
    """Whether a method has its pool gain CI above 0 at held-out valid@1 >= the base's on >= 2 of 3 seeds."""
    seeds = len(summary["base"])
    need = 2 if seeds >= 3 else seeds
    hits = [m for m in summary["methods"] if len(m["target_seeds"]) >= need]
    if not hits:
        best = max(summary["methods"], key=lambda m: (len(m["target_seeds"]), m.get("pool_gain_mean") or -9))
        return (
            f"No method has its pool gain CI above 0 at held-out valid@1 >= the base's on {need} of {seeds} "
            f"seeds (closest: {best['label']}, on {len(best['target_seeds'])}: seeds {best['target_seeds']})."
        )
    names = "; ".join(f"{m['label']} (seeds {m['target_seeds']})" for m in hits)
    return f"Pool gain CI above 0 at held-out valid@1 >= the base's on >= {need} of {seeds} seeds: {names}."


def sanity_line(summary: Mapping[str, Any]) -> str:
    """Whether every lr = 0 pool-gain CI contains 0 (the sanity run is the base itself)."""
    rows = [r for r in summary["rows"] if r["method"] == "lr0"]
    if not rows:
        return "lr = 0 not run."
    cells = ", ".join(
        f"seed {r['seed']}: {_ci(r['pool_gain'], r['pool_gain_lo'], r['pool_gain_hi'])}" for r in rows
    )
    ok = all(r["pool_ci_contains_0"] for r in rows)
    return f"lr = 0 pool-gain CIs {'all contain' if ok else 'do not all contain'} 0 ({cells})."


def surface_lines(summary: Mapping[str, Any]) -> list[str]:
    """The surface-vs-strategy table (markdown lines)."""
    c = summary["correlations"]
    lines = [
        "| surface metric | rho with held-out C(K), checkpoints | rho with held-out gain, checkpoints | "
        "rho with pool gain, final | top method by metric (per seed) | top by pool gain | most disagreeing |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in SURFACE_KEYS:
        ck = c["checkpoints"][key]
        win = ", ".join(w.get(key, "—") for w in c["winners"].values())
        gw = ", ".join(w["pool_gain"] for w in c["winners"].values())
        d = c["disagreement"].get(key)
        dtxt = (
            "—"
            if d is None
            else f"{d['method']} (rank {d['surface_rank']:.1f} by metric, {d['gain_rank']:.1f} by gain, "
            f"of {d['of']})"
        )
        cov, gain, pool = _surface_rhos(c, key)
        lines.append(
            f"| {key} | {cov} (n = {ck['coverage_k']['n']}) | {gain} | {pool} "
            f"(n = {c['final_pool_gain'][key]['n']}) | {win} | {gw} | {dtxt} |"
        )
    return lines


def markdown(summary: Mapping[str, Any]) -> str:
    """``bench.md``: settings, the table, per-method summary, target and sanity lines, surface, labelers."""
    cfg, g = summary["config"], summary["config"]["grpo"]
    lines = [f"# seffi bench exploration: {cfg['task']}, setting {cfg['setting']}", ""]
    if summary.get("note"):
        lines += [f"**{summary['note']}.**", ""]
    commands = summary.get("command")
    if isinstance(commands, list):
        lines += ["Commands (one bench per seed, then `--combine`):", ""]
        lines += [f"    {c}" for c in commands if c] + [""]
    elif commands:
        lines += [f"Command: `{commands}`", ""]
    lines += [
        f"Task config {summary['task_config'] or '(the task default)'}; K = {cfg['budget']}; pool of "
        f"{cfg['n_inputs']} prompts; GRPO {g['steps']} steps x {g['prompts_per_step']} prompts x K, "
        f"lr {g['lr']:g}; pool: {g['pool_runs']} runs of K per prompt against "
        f"{g['iid_samples'] or 16 * cfg['budget']} base samples per prompt; held-out: {g['eval_inputs']} "
        f"prompts x n = {g['eval_samples']}, every {g['eval_every']} steps; "
        f"model seeds {cfg['seeds']}.",
        "",
        "## Per method and seed",
        "",
    ]
    lines += table_markdown(summary)
    lines += [
        "",
        "Gains marked (fragile) have little room to gain (AUC_oracle − AUC_iid < 0.05) or room held by "
        "fewer than 25% of the inputs: read them with care.",
        "",
        "## Per method over seeds",
        "",
        "| method | pool gain mean (sd) | classifier-label pool gain mean (sd) | held-out valid@1 | C(K) | "
        "held-out gain | seeds meeting the target | seeds whose pool CI contains 0 | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in summary["methods"]:
        lines.append(
            f"| {m['label']} | {_num(m['pool_gain_mean'], '{:+.3f}')} ({_num(m['pool_gain_sd'])}) | "
            f"{_num(m['pool_gain_classifier_mean'], '{:+.3f}')} ({_num(m['pool_gain_classifier_sd'])}) | "
            f"{_num(m['valid_at_1_mean'])} | {_num(m['coverage_k_mean'])} | "
            f"{_num(m['heldout_gain_mean'], '{:+.3f}')} | "
            f"{m['target_seeds']} | {m['pool_ci_contains_0_seeds']} | {_num(m['seconds_mean'], '{:.0f}')} |"
        )
    lines += [
        "",
        target_line(summary),
        "",
        sanity_line(summary),
        "",
        "## Surface metrics vs strategy coverage",
        "",
    ]
    lines += surface_lines(summary)
    lines += [
        "",
        "## Second labeler: classifier vs the validator (base held-out samples)",
        "",
        "| seed | training traces | traces compared | exact-set rate | mean kappa | pooled kappa | "
        "per-strategy kappa |",
        "|---|---|---|---|---|---|---|",
    ]
    for s, f in summary["seeds"].items():
        a = f["agreement"]
        per = ", ".join(f"{k} {_num(v['kappa'], '{:.2f}')}" for k, v in a["per_strategy"].items())
        lines.append(
            f"| {s} | {f['classifier_training_traces']} | {a['n']} | {_num(a['exact_set_rate'])} | "
            f"{_num(a['mean_kappa'])} | {_num(a['pooled']['kappa'])} | {per} |"
        )
    lines += ["", "## Wall time", ""]
    for s, f in summary["seeds"].items():
        lines.append(
            f"- seed {s}: {_num(f['seconds'], '{:.0f}')} s "
            f"(models {'cached' if f['models_cached'] else 'trained'};"
            f" baselines {f['baseline_seconds']:.0f} s; process CPU {_num(f.get('cpu_seconds'), '{:.0f}')} s)"
        )
    lines.append(f"- total: {summary['seconds']:.0f} s")
    return "\n".join(lines) + "\n"


def bench_figure(path: Path, summary: Mapping[str, Any]) -> Path:
    """Pool gain per method and seed, held-out C(k) and valid@k, surface vs C(K) per checkpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [m["method"] for m in summary["methods"]]
    labels = {m["method"]: m["label"] for m in summary["methods"]}
    fig, axes = plt.subplots(2, 3, figsize=(18, 9))
    ax = axes[0, 0]
    seeds = sorted({r["seed"] for r in summary["rows"]})
    for j, s in enumerate(seeds):
        for i, m in enumerate(methods):
            r = next((r for r in summary["rows"] if r["seed"] == s and r["method"] == m), None)
            if r is None or r["pool_gain"] is None:
                continue
            y = i + (j - (len(seeds) - 1) / 2) * 0.2
            lo, hi = r["pool_gain_lo"], r["pool_gain_hi"]
            xerr = None if lo is None else [[r["pool_gain"] - lo], [hi - r["pool_gain"]]]
            ax.errorbar(
                r["pool_gain"],
                y,
                xerr=xerr,
                fmt="o",
                color=f"C{j}",
                ms=4,
                capsize=2,
                label=f"seed {s}" if i == 0 else None,
            )
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(methods)), [labels[m] for m in methods], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("pool gain vs the base's own iid (95% CI)")
    ax.legend(fontsize=7)
    for ax, attr, name in (
        (axes[0, 1], "coverage", "held-out C(k)"),
        (axes[1, 0], "valid_at_k", "held-out valid@k"),
    ):
        curves = [np.array(f["base_curves"][attr]) for f in summary["seeds"].values()]
        ks = np.arange(1, len(curves[0]) + 1)
        ax.plot(ks, np.mean(curves, axis=0), "k--", label="reference (base)")
        for i, m in enumerate(methods):
            ys = [
                np.array(f["final_curves"][m][attr])
                for f in summary["seeds"].values()
                if m in f["final_curves"]
            ]
            if ys:
                ax.plot(
                    ks,
                    np.mean(ys, axis=0),
                    color=f"C{i % 10}",
                    ls="-" if i < 10 else ":",
                    label=labels[m],
                    lw=1,
                )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k (samples per held-out prompt)")
        ax.set_ylabel(f"{name}, mean over seeds")
        ax.legend(fontsize=6)
    ax = axes[1, 1]
    pts = [p for p in summary["points"] if p.get("distinct_2") is not None]
    for i, m in enumerate(["base", *methods]):
        mine = [p for p in pts if p["method"] == m]
        if mine:
            ax.scatter(
                [p["distinct_2"] for p in mine],
                [p["coverage_k"] for p in mine],
                s=14,
                color="k" if m == "base" else f"C{(i - 1) % 10}",
                marker="x" if i > 10 else "o",  # the 11th method reuses the first colour
                label=labels.get(m, "reference (base)"),
            )
    rho = summary["correlations"]["checkpoints"]["distinct_2"]["coverage_k"]["rho"]
    ax.set_title(f"every method x checkpoint x seed: Spearman rho = {_num(rho, '{:+.2f}')}", fontsize=9)
    ax.set_xlabel("distinct-2 of each group of K (surface)")
    ax.set_ylabel("held-out C(K) (strategy coverage)")
    ax.legend(fontsize=6)
    ax = axes[0, 2]
    c = summary["correlations"]
    x = np.arange(len(SURFACE_KEYS))
    bars = (
        ("held-out C(K), checkpoints", [c["checkpoints"][k]["coverage_k"]["rho"] for k in SURFACE_KEYS]),
        ("held-out gain, checkpoints", [c["checkpoints"][k]["heldout_gain"]["rho"] for k in SURFACE_KEYS]),
        ("pool gain, final", [c["final_pool_gain"][k]["rho"] for k in SURFACE_KEYS]),
    )
    for j, (name, vals) in enumerate(bars):
        ax.bar(x + (j - 1) * 0.27, [np.nan if v is None else v for v in vals], 0.27, label=name)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(x, [SURFACE_NAMES[k] for k in SURFACE_KEYS])
    ax.set_ylim(-1, 1)
    ax.set_ylabel("Spearman rho of the surface metric with ...")
    ax.legend(fontsize=7)
    ax = axes[1, 2]
    for i, m in enumerate(methods):
        rows = [r for r in summary["rows"] if r["method"] == m and r.get("pool_gain") is not None]
        ax.scatter(
            [r["distinct_2"] for r in rows],
            [r["pool_gain"] for r in rows],
            s=18,
            color=f"C{i % 10}",
            marker="x" if i >= 10 else "o",
            label=labels[m],
        )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("distinct-2 of the final held-out groups")
    ax.set_ylabel("pool gain vs the base's iid")
    ax.legend(fontsize=6)
    if summary.get("note"):
        fig.suptitle(summary["note"], color="red", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def log_bench(config: Any, summary: Mapping[str, Any], files: Mapping[str, Path], out: Path) -> str | None:
    """The bench's W&B run: one ``line_series`` of held-out C(k) per method, scalars per step, the figure.

    A failing W&B never loses anything: every file is written before this runs. Returns the sync hint.
    """
    if config.wandb == "disabled":
        return None
    run = SafeWandbRun(
        config.wandb,
        project=config.wandb_project,
        job_type="seffi-bench",
        config=summary["config"],
        name=f"bench-exploration-{config.setting}",
    )
    if not run.enabled:
        return None
    seed_facts = summary["seeds"]
    steps = sorted({p["step"] for p in summary["points"]})
    for step in steps:
        data: dict[str, float] = {}
        for m in ["base", *(m["method"] for m in summary["methods"])]:
            pts = [p for p in summary["points"] if p["method"] == m and p["step"] == step]
            for key in ("coverage_k", "coverage_n", "valid_at_1", "heldout_gain", *SURFACE_KEYS):
                vals = [p[key] for p in pts if p.get(key) is not None]
                if vals:
                    data[f"seffi/bench/{m}/{key}"] = float(np.mean(vals))
        run.log(data, step=int(step))
    last = steps[-1] if steps else 0
    for m in summary["methods"]:
        slug = m["method"]
        ys: dict[str, list[float]] = {}
        for s, f in seed_facts.items():
            if slug in f["final_curves"]:
                ys[f"{m['label']}, seed {s}"] = f["final_curves"][slug]["coverage"]
                ys[f"reference (base), seed {s}"] = f["base_curves"]["coverage"]
        n = len(next(iter(ys.values()))) if ys else 0
        run.log_line_series(
            f"seffi/bench/{slug}/coverage_curve",
            list(range(1, n + 1)),
            ys,
            f"held-out C(k): {m['label']} vs the base",
            "k",
            last,
        )
    if "bench.png" in files:
        run.log_image("seffi/bench/figure", files["bench.png"], step=last)
    run.update_summary(
        {
            f"seffi/bench/{m['method']}/{k}": m[k]
            for m in summary["methods"]
            for k in ("pool_gain_mean", "pool_gain_classifier_mean", "valid_at_1_mean", "coverage_k_mean")
            if m.get(k) is not None
        }
    )
    hint = run.sync_hint
    run.finish()
    return hint

"""``seffi ladder``'s report: tables, report.md sections and figures.

Figures: coverage per rung, latent vs strategy coverage, latent purity, valid@k per policy, and rung
3's valid@k / C(k) of the base vs the GRPO-trained models up to n samples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from seffi import __version__
from seffi._io import write_atomic, write_figure
from seffi.experiment.summary import SUMMARY_HEADER, summary_rows
from seffi.report.plots import budget_axis, finish, font, legend_label, styled_sets
from seffi.report.schema import Report

SCALAR_KEYS = (
    "rows_valid_rate",
    "base_valid_rate",
    "valid_gap",
    "tv_vs_law",
    "tv_vs_rows",
    "nmi",
    "nmi_valid",
    "nmi_unambiguous",
    "nmi_ceiling_rows",
    "nmi_ceiling_split",
    "nmi_train_assignments",
    "mixture_valid_rate",
)


def scalars(measurements: dict[str, Any]) -> dict[str, float]:
    """The finite rung-2 model measurements of ``SCALAR_KEYS``."""
    out = {}
    for k in SCALAR_KEYS:
        v = measurements.get(k)
        if isinstance(v, int | float) and np.isfinite(v):
            out[k] = float(v)
    return out


#: Panel titles of ladder_coverage.png, by rung.
RUNG_NAMES = {1: "oracle-labelled router", 2: "learned generators", 3: "GRPO on the base LM"}
#: What a ``--smoke`` run's console, report and plots say of its numbers.
SMOKE_NOTE = (
    "seffi ladder --smoke: tiny models trained for seconds, an end-to-end check; "
    "its numbers are not results (run without --smoke for them)"
)


def build_report(config: Any, comparisons: list[Any], measurements: dict[str, Any]) -> Any:
    """The ladder's [`Report`][seffi.report.Report] (``seffi run``'s schema)."""
    meta: dict[str, Any] = {"seffi_version": __version__, "command": "seffi ladder"}
    meta.update({f"rung2_{k}": round(v, 6) for k, v in scalars(measurements).items()})
    if config.smoke:
        meta.update(smoke=True, note=SMOKE_NOTE)
    return Report(
        title=f"seffi ladder: rungs 1-{len(comparisons)} on {config.task}"
        + (" (--smoke)" if config.smoke else ""),
        seed=config.seed,
        config=config.public_dict(),
        meta=meta,
        comparisons=comparisons,
    )


def ladder_table(report: Any) -> Any:
    """``seffi run``'s summary rows with a rung column and the iid source."""
    from types import SimpleNamespace

    from rich.table import Table

    budget = report.comparisons[0].budget if report.comparisons else "?"
    table = Table(title=f"seffi ladder: coverage at budget K={budget} (gain: 0 = iid, 1 = oracle)")
    for h in ("rung", *SUMMARY_HEADER):
        left = h in ("rung", "task", "policy")
        table.add_column(h, justify="left" if left else "right", no_wrap=left)
    for comp in report.comparisons:
        for row in summary_rows(SimpleNamespace(comparisons=[comp])):
            if row[1] == "iid":
                row[1] = f"iid ({comp.iid_source})"
            table.add_row(str(comp.rung), *row)
    return table


def measurement_table(m: dict[str, Any]) -> Any:
    """The rung-2 model measurements as a rich ``Table``."""
    from rich.table import Table

    table = Table(title=f"rung 2 models on {m['n_inputs']} held-out {m['task']} inputs")
    table.add_column("measure", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    rows = [
        ("training rows valid rate", f"{m['rows_valid_rate']:.3f}", ""),
        ("base LM valid rate (T=1)", f"{m['base_valid_rate']:.3f}", "within 0.1 of rows"),
        ("strategy TV vs training law", f"{m['tv_vs_law']:.3f}", "<= 0.1"),
        (f"NMI(latent, strategy), L={m['n_codes']}, z ~ prior", fmt(m.get("nmi_joint")), ">= 0.6"),
        ("NMI with every code equally likely", fmt(m["nmi"]), ""),
        ("NMI over unambiguous samples", fmt(m.get("nmi_unambiguous")), ""),
        ("NMI ceiling (row labels vs match sets)", fmt(m.get("nmi_ceiling_rows")), ""),
        (f"NMI ceiling, pure latent with L={m['n_codes']}", fmt(m.get("nmi_ceiling_split")), ""),
        ("NMI of EM assignments vs row labels", fmt(m["nmi_train_assignments"]), ""),
        ("mixture valid rate (z ~ prior)", f"{m['mixture_valid_rate']:.3f}", ""),
    ]
    for r in rows:
        table.add_row(*r)
    return table


def fmt(value: Any) -> str:
    """Three decimals, or a dash for a missing value."""
    return "—" if value is None or not np.isfinite(value) else f"{value:.3f}"


def append_markdown(out: Path, m: dict[str, Any], timings: dict[str, float]) -> None:
    """Add the rung-2 model measurements and the ladder plots to report.md."""
    md = out / "report.md"
    cols = m["purity_columns"]
    lines = [
        "",
        "## Rung 2 models (held-out inputs)",
        "",
        f"- training rows valid rate: {m['rows_valid_rate']:.3f}; base LM valid rate (temperature 1): "
        f"{m['base_valid_rate']:.3f} (target: within 0.1)",
        f"- pooled strategy-frequency TV, base LM vs training law: {m['tv_vs_law']:.3f} (target <= 0.1)",
        f"- NMI(latent, strategy), L = {m['n_codes']}, z from the latent prior: {fmt(m.get('nmi_joint'))} "
        f"(target >= 0.6; — when no sample matched a strategy); every code equally likely: "
        f"{fmt(m['nmi'])}; EM assignments vs row labels (post hoc): "
        f"{fmt(m['nmi_train_assignments'])}; over unambiguous samples: {fmt(m.get('nmi_unambiguous'))}; "
        f"ceiling (the rows' own labels vs their match sets): {fmt(m.get('nmi_ceiling_rows'))}",
        f"- latent prior ({m.get('prior_kind', 'global')}; mean over inputs): "
        f"{', '.join(f'{p:.3f}' for p in m['prior'])}",
        f"- models: {m['base_n_params']:,} parameters; training {timings.get('models_seconds', 0):.0f} s "
        f"({'cached' if timings.get('models_cached') else 'trained'})",
        "",
        "Latent purity (share of each code's samples following each strategy; `none`: matched nothing):",
        "",
        "| code | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for z, row in enumerate(m["purity"]):
        lines.append(f"| {z} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    lines += ["", "![coverage per rung](ladder_coverage.png)", "", "![latent purity](ladder_purity.png)", ""]
    write_atomic(md, md.read_text(encoding="utf-8") + "\n".join(lines) + "\n")


def ladder_plots(out: Path, report: Any, m: dict[str, Any]) -> dict[str, Path]:
    """The ladder's own figures: coverage per rung, latent vs strategy coverage, purity, valid@k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files: dict[str, Path] = {}
    comps = report.comparisons

    def save(fig: Any, name: str) -> None:
        path = out / f"{name}.png"
        if report.meta.get("smoke"):
            fig.suptitle(
                "--smoke: an end-to-end check; these numbers are not results", color="red", fontsize=9
            )
        fig.tight_layout()
        write_figure(fig, path, dpi=110)
        plt.close(fig)
        files[name] = path

    fig, axes = plt.subplots(1, len(comps), figsize=(5.5 * len(comps), 4.6), sharey=True, squeeze=False)
    for ax, comp in zip(axes[0], comps, strict=True):
        gains = {p.curves.label: p.gain for p in comp.policies}
        for cs, style in styled_sets(comp):
            g = gains.get(cs.label) if cs.role == "policy" else None
            gain = (
                "" if g is None or g.value is None else f", gain {_ci(g.value, g.lo, g.hi, g.fragile, '.2f')}"
            )
            marker = {"marker": "o", "ms": 3} if cs.role == "policy" else {}
            ax.plot(cs.k, cs.coverage, **style, **marker, label=f"{legend_label(cs)}{gain}")
        ax.set_title(f"rung {comp.rung}: {RUNG_NAMES.get(comp.rung, comp.env_id)}")
        ax.set_xlabel("k (samples per input)")
        budget_axis(ax, comp.budget)
        ax.legend(fontsize=font("note"), loc="lower right")
    axes[0][0].set_ylabel("strategy coverage C(k)")
    finish(fig)
    save(fig, "ladder_coverage")

    fig, axes = plt.subplots(1, len(comps), figsize=(5.5 * len(comps), 4), sharey=True, squeeze=False)
    for ax, comp in zip(axes[0], comps, strict=True):
        for i, p in enumerate(comp.policies):
            color = f"C{i}"
            ax.plot(p.curves.k, p.curves.coverage, color=color, label=f"{p.curves.label}: strategies")
            if p.latent is not None:
                ax.plot(
                    p.latent.k, p.latent.coverage, color=color, ls="--", label=f"{p.curves.label}: latents"
                )
        ax.set_title(f"rung {comp.rung}: latent (dashed) vs strategy coverage", fontsize=9)
        ax.set_xlabel("k")
        ax.legend(fontsize=7)
    save(fig, "ladder_latent_vs_strategy")

    matrix = np.asarray(m["purity"])
    fig, ax = plt.subplots(figsize=(1.2 * matrix.shape[1] + 2, 0.35 * matrix.shape[0] + 1.8))
    im = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(matrix.shape[1]), m["purity_columns"], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(matrix.shape[0]), [f"z={z} ({p:.2f})" for z, p in enumerate(m["prior"])], fontsize=8)
    for (i, j), v in np.ndenumerate(matrix):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.5 else "k")
    ax.set_title(f"latent purity (NMI {m['nmi']:.2f}); rows: code (prior)", fontsize=9)
    fig.colorbar(im, ax=ax)
    save(fig, "ladder_purity")

    fig, ax = plt.subplots(figsize=(6, 4))
    for comp in comps:
        for p in comp.policies:
            if p.curves.valid_at_k is not None:
                ax.plot(
                    p.curves.k,
                    p.curves.valid_at_k,
                    marker="o",
                    ms=3,
                    label=f"rung {comp.rung}: {p.curves.label}",
                )
        if comp.iid is not None and comp.iid.valid_at_k is not None:
            ax.plot(comp.iid.k, comp.iid.valid_at_k, "--", label=f"rung {comp.rung}: iid")
    ax.set_xlabel("k")
    ax.set_ylabel("valid@k (some sample valid)")
    ax.set_title("best-of-k correctness per policy", fontsize=9)
    ax.legend(fontsize=7)
    save(fig, "ladder_valid_at_k")
    return files


# -- rung 3 ---------------------------------------------------------------------------------------------


def rung3_summary(r3: Any) -> dict[str, Any]:
    """rung3.json: per run its facts and held-out evaluation history, plus the base model's curves.

    Facts: reward, lr, wall time, training AUC and valid rate; history: valid@k, C(k), crossover k,
    solvable share and gain vs the base at every evaluation.
    """
    return {
        "base": r3.base_eval.to_json() if r3.base_eval is not None else None,
        "runs": {
            label: {**facts, "final": r3.evals[label].to_json(), "history": r3.history.get(label, [])}
            for label, facts in r3.runs.items()
        },
    }


def rung3_plots(out: Path, r3: Any) -> dict[str, Path]:
    """``ladder_passk.png``: valid@k and C(k) for k up to n, base vs each GRPO-trained model."""
    from seffi.models.passk import plot_passk

    if r3.base_eval is None or not r3.evals:
        return {}
    return {"ladder_passk": plot_passk(out / "ladder_passk.png", r3.base_eval, r3.evals)}


def _ci(v: Any, lo: Any, hi: Any, fragile: Any = False, fmt: str = ".3f") -> str:
    if v is None:
        return "—"
    ci = "" if lo is None or hi is None else f" [{lo:{fmt}}, {hi:{fmt}}]"
    return f"{v:{fmt}}{ci}" + (" (fragile)" if fragile else "")


def append_rung3_markdown(out: Path, r3: Any, comparison: Any) -> None:
    """Add rung 3's table (pool gain with CI, held-out valid@k / C(k), crossover, solvable) to report.md."""
    base = r3.base_eval
    n = base.n
    k = comparison.budget
    gains = {p.curves.label: p.gain for p in comparison.policies}
    lines = [
        "",
        "## Rung 3: GRPO on the base LM",
        "",
        f"Pool gain: fresh runs of K = {k} completions per pool prompt after training, against the "
        "reference model's own samples (95% CI). Held-out: n = "
        f"{n} samples per prompt on {len(base.prompt_ids)} held-out prompts; crossover k = the first k at "
        "which the base model's valid@k is ahead of the trained model's beyond noise (paired 97.5% "
        "lower bound over prompts above 0).",
        "",
        f"| model | pool gain | valid rate | valid@1 | valid@{k} | valid@{n} | C({k}) | C({n}) "
        f"| solvable@{n} | crossover k | held-out gain vs base | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| reference (base) | 0 | {base.valid_rate:.3f} | {base.valid_at_k[0]:.3f} | "
        f"{base.valid_at_k[k - 1]:.3f} | {base.valid_at_k[-1]:.3f} | {base.coverage[k - 1]:.3f} | "
        f"{base.coverage[-1]:.3f} | {base.solvable:.3f} | — | — | — |",
    ]
    for label, res in r3.evals.items():
        g = gains.get(label)
        ev = r3.runs[label]["eval"]
        cross = f"{int(ev['crossover_k'])}" if ev.get("crossover_found") else f"none within {n}"
        lines.append(
            f"| {label} | {_ci(g.value, g.lo, g.hi, g.fragile) if g else '—'} | {res.valid_rate:.3f} | "
            f"{res.valid_at_k[0]:.3f} | {res.valid_at_k[k - 1]:.3f} | {res.valid_at_k[-1]:.3f} | "
            f"{res.coverage[k - 1]:.3f} | {res.coverage[-1]:.3f} | {res.solvable:.3f} | {cross} | "
            f"{_ci(*(ev.get(f'gain_vs_base{x}') for x in ('', '_lo', '_hi', '_fragile')))} | "
            f"{r3.runs[label]['seconds']:.0f} |"
        )
    lines += ["", "![valid@k and C(k), base vs trained](ladder_passk.png)", ""]
    md = out / "report.md"
    write_atomic(md, md.read_text(encoding="utf-8") + "\n".join(lines) + "\n")


def log_rung3_wandb(run: Any, r3: Any, step: int) -> None:
    """Rung 3 into the ladder's W&B run: final scalars per model and valid@k / C(k) line series."""
    data: dict[str, float] = {}
    for label, facts in r3.runs.items():
        slug = label.split()[1].lower().replace("=", "")
        for key, v in facts["eval"].items():
            if isinstance(v, int | float) and np.isfinite(v):
                data[f"seffi/rung3/{slug}/{key}"] = float(v)
    run.log(data, step=step)
    base = r3.base_eval
    ks = list(range(1, base.n + 1))
    for attr, title in (("valid_at_k", "valid@k"), ("coverage", "C(k)")):
        ys = {"reference (base)": getattr(base, attr).tolist()}
        ys.update({label: getattr(res, attr).tolist() for label, res in r3.evals.items()})
        run.log_line_series(f"seffi/rung3/{attr}", ks, ys, f"rung 3: {title}, base vs GRPO", "k", step)

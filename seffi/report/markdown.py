"""report.md: one summary table per comparison, the plots embedded, and how to read each plot."""

from __future__ import annotations

from collections.abc import Mapping

from seffi._convert import printable
from seffi.coverage.columns import COLUMNS, MARKDOWN_TAU, Column
from seffi.report.caveats import comparison_caveats
from seffi.report.schema import Comparison, CurveSet, Gain, Report

#: The table's metric columns, in table order.
_TABLE: tuple[Column, ...] = tuple(c for c in COLUMNS if c.header)

HOW_TO_READ: dict[str, str] = {
    "coverage": (
        "Coverage C(k): the expected share of the input's strategies found within k samples. Higher "
        "and earlier is better; iid (grey) is the base sampler, the oracle (black dashed) never "
        "repeats a strategy. Shaded bands are 95% CIs. The legend gives each sampler's AUC and each "
        "policy's gain vs iid with its 95% CI, on the iid = 0, oracle = 1 scale."
    ),
    "novelty": (
        "Novelty N(i): the probability that sample i reveals a strategy not seen before. A curve "
        "that falls fast means later samples are mostly repeats."
    ),
    "time_to_coverage": (
        "Time to coverage: survival curves Pr[T(τ) > k] (lower is better) and the per-run "
        "distribution of T; runs that never reach τ within K are censored: they sit in the shaded "
        "“> K” band, and a median that is censored is marked there."
    ),
    "valid_vs_raw": (
        "Raw vs valid coverage: solid lines count every matched strategy, dotted lines only those "
        "of correct solutions. A wide gap means coverage earned by invalid outputs."
    ),
    "coverage_by_rarity": (
        "Common vs rare strategies: each input's strategies are split into quantile bins of their "
        "base-model probability (q1 = most common, last = rarest). Top: the share of each bin's "
        "strategies found within k samples (when the oracle reaches full coverage; otherwise the "
        "coverage the bin contributes). Bottom: each sampler's AUC minus the iid AUC, split by bin; "
        "a sampler's bars sum to its AUC − AUC_iid. Gains in the common bins come from avoiding "
        "repeats; gains in the rare bins come from finding strategies the base model seldom produces."
    ),
    "barcode": (
        "Strategy barcode: one row per input, one column per sample, colour = strategy, white = no "
        "match, dot = first appearance; one panel per policy, same rows = same inputs. Long runs of "
        "one colour are redundancy."
    ),
    "gain_vs_step": (
        "Gain over training: the gain vs iid of each periodic evaluation (with its 95% CI band) against "
        "the training step at which it ran; the last point is the final evaluation."
    ),
    "latent": (
        "Latent coverage (diagnostic): how many of the router's latent codes were used. It describes "
        "the method, not the outcome; strategy coverage above is the evaluation target."
    ),
}


#: Characters that would let a name from report.json act in Markdown or HTML, as their escaped forms.
_MARKUP = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "[": "\\[", "]": "\\]", "`": "\\`"}
)


def text(value: object) -> str:
    """A name or note from report.json as inert Markdown: markup escaped, control characters a space.

    Examples:
        >>> text("sort <script>")
        'sort &lt;script&gt;'
    """
    return printable(value).translate(_MARKUP)


def _num(v: float | None, fmt: str = ".3f") -> str:
    return "–" if v is None else format(v, fmt)


def _ci(v: float | None, lo: float | None, hi: float | None) -> str:
    return _num(v) if v is None or lo is None or hi is None else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def _gain(g: Gain | None) -> str:
    """The gain with its interval ("unbounded" when it is), flagged "(fragile)" when `Gain.fragile`."""
    if g is None:
        return "–"
    if g.value is None:
        return f"undefined ({text(g.reason)})"
    shown = f"{g.value:.3f} [unbounded]" if g.unbounded else _ci(g.value, g.lo, g.hi)
    return shown + (" (fragile)" if g.fragile else "")


def _cell(col: Column, c: CurveSet, gain: Gain | None) -> str:
    """One metric cell: a per-k column at K, a scalar with its interval, T at ``MARKDOWN_TAU``."""
    if col.shape == "gain":
        return _gain(gain) if c.role == "policy" else "–"
    if col.shape == "tau":
        t = c.ttc(MARKDOWN_TAU)
        if t is None:
            return "–"
        return _num(t.median, "g") if t.median is not None else f"> {c.budget}"
    value = getattr(c, col.name)
    if col.shape == "k":
        return _num(None if value is None else value[-1])
    if col.report_ci:
        return _ci(value, getattr(c, f"{col.name}_lo"), getattr(c, f"{col.name}_hi"))
    return _num(value)


def _row(c: CurveSet, gain: Gain | None) -> str:
    cells = [text(c.label) + (f" ({text(c.method)})" if c.method else ""), text(c.role)]
    cells += [_cell(col, c, gain) for col in _TABLE]
    return "| " + " | ".join(cells) + " |"


def comparison_table(comp: Comparison) -> str:
    """The summary table of one comparison (policies, then iid and oracle)."""
    headers = ["sampler", "role"] + [str(col.header).format(K=comp.budget) for col in _TABLE]
    head = "| " + " | ".join(headers) + " |\n|" + "---|" * len(headers)
    gains = {id(p.curves): p.gain for p in comp.policies}
    rows = [_row(c, gains.get(id(c))) for c in comp.curve_sets()]
    return "\n".join([head, *rows])


def render_markdown(report: Report, plots: Mapping[str, str] | None = None) -> str:
    """report.md of ``report``, embedding ``plots`` (``{"<slug>/<plot>": relative path}``) in their order."""
    plots = dict(plots or {})
    lines = [f"# {text(report.title)}", ""]
    if report.seed is not None:
        lines += [f"Seed: `{report.seed}`", ""]
    if not report.comparisons:
        lines += ["_No comparisons were recorded._", ""]
    drawn = {name.partition("/")[0] for name in plots}
    if 0 < len(drawn) < len(report.comparisons):
        lines += [f"_Plots are drawn for {len(drawn)} of the {len(report.comparisons)} comparisons._", ""]
    for slug, comp in zip(report.slugs(), report.comparisons, strict=True):
        env = f" — {text(comp.env_id)}" if comp.env_id else ""
        lines += [f"## {text(comp.task)}{env}", ""]
        strategies = "" if comp.num_strategies is None else f", {comp.num_strategies} strategies per input"
        lines += [f"Budget K = {comp.budget} samples per input, {comp.n_inputs} inputs{strategies}.", ""]
        lines += [comparison_table(comp), ""]
        # Said next to the numbers they qualify (the rules live in seffi.report.caveats).
        lines += [f"> **Warning:** {text(note)}" for note in comparison_caveats(comp)]
        lines += [""] if lines[-1].startswith("> **Warning:**") else []
        lines += [f"- {text(note)}" for note in comp.notes] + ([""] if comp.notes else [])
        for name, rel in plots.items():
            prefix, _, plot = name.partition("/")
            if prefix == slug:
                lines += [f"### {plot.replace('_', ' ')}", "", f"![{plot}]({rel})", ""]
                lines += [f"_How to read:_ {HOW_TO_READ[plot]}", ""] if plot in HOW_TO_READ else []
    lines += [
        "## Definitions",
        "",
        "- AUC@K = (1/K) Σ_k C(k).",
        "- gain vs iid = (AUC − AUC_iid) / (AUC_oracle − AUC_iid); undefined when the denominator ≤ 0; "
        "may exceed 1 when traces match several strategies.",
        "- T(τ) = min{k : |S_k|/M ≥ τ}, censored at K (shown as “> K”).",
        "",
    ]
    return "\n".join(lines)

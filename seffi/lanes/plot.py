"""Small-multiples plot of every concept's corrections-to-competence curve.

One panel per concept: expected-token hits (y) against corrections taught (x), the saturation target
as a dashed line, the first hit (green circle) and the first saturated snapshot (red star) marked,
vault hits as a faint dotted line, and snapshots whose replay diverged as black crosses.
Matplotlib is imported lazily (importing seffi never pulls a plotting backend).
"""

from __future__ import annotations

import math
from pathlib import Path

from seffi.lanes.sample_efficiency import LaneReport

_NCOLS = 4


def plot_curves(report: LaneReport, path: str | Path) -> Path:
    """Render ``report``'s curves to a PNG at ``path`` and return the path."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    concepts = report.concepts or []
    n = max(len(concepts), 1)
    ncols = min(_NCOLS, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.5 * nrows + 0.9), squeeze=False)
    for ax in axes.flat[len(concepts) :]:
        ax.set_visible(False)
    for ax, c in zip(axes.flat, concepts, strict=False):
        ax.set_title(f"{c.id} ({c.split})", fontsize=9)
        ax.grid(alpha=0.3)
        if not c.curve:
            ax.text(0.5, 0.5, "error\n(see report.json)", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        ks = [p.k for p in c.curve]
        hits = [p.cumulative_token_hit_count for p in c.curve]
        ax.step(ks, hits, where="post", color="C0", lw=1.8, label="expected-token hits")
        ax.plot(ks, hits, "o", color="C0", ms=3)
        ax.plot(ks, [p.vault_hits for p in c.curve], ":", color="0.55", lw=1.2, label="vault hits")
        ax.axhline(c.n_expected_tokens, ls="--", color="0.4", lw=0.8, label="saturation target")
        if c.corrections_to_first_hit is not None:
            k = c.corrections_to_first_hit
            ax.plot([k], [hits[k]], "o", mfc="none", mec="green", ms=10, mew=2, label="first hit")
        if c.corrections_to_saturation is not None:
            k = c.corrections_to_saturation
            ax.plot([k], [hits[k]], "*", color="red", ms=13, label="saturation")
        bad = [p for p in c.curve if not p.replay_identical]
        if bad:
            ax.plot(
                [p.k for p in bad],
                [p.cumulative_token_hit_count for p in bad],
                "x",
                color="black",
                ms=9,
                mew=2,
                label="replay diverged",
            )
        if c.error:
            ax.text(
                0.02, 0.95, "error: partial curve", transform=ax.transAxes, va="top", fontsize=7, color="red"
            )
        ax.set_xticks(ks)
        ax.set_ylim(-0.3, c.n_expected_tokens + 0.6)
        ax.set_xlim(-0.3, max(ks) + 0.3)
        ax.tick_params(labelsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("corrections taught (k)", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("hits", fontsize=8)
    handles: dict[str, object] = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    agg = report.aggregate

    def fmt(x: float | None) -> str:
        return "—" if x is None else f"{x:.3g}"

    fig.suptitle(
        f"{report.pack.get('name', 'pack')} [{report.pack.get('split', '')}] on {report.learner}: "
        f"first hit {fmt(agg.mean_corrections_to_first_hit)}, saturation "
        f"{fmt(agg.mean_corrections_to_saturation)}, saturation rate {fmt(agg.saturation_rate)}, "
        f"replay determinism {fmt(agg.replay_determinism)} ({'pass' if agg.gate_passed else 'FAIL'})",
        fontsize=10,
    )
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="lower center",
        ncol=len(handles),
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.5 / (2.5 * nrows + 0.9), 1, 1 - 0.45 / (2.5 * nrows + 0.9)))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

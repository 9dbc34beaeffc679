"""The lane's curve figure: small multiples for a few concepts, an overview for many.

Up to `MAX_PANELS` concepts get one panel each: expected-token hits (y) against corrections
taught (x), the saturation target as a dashed line, the first hit (green circle) and the first saturated
snapshot (red star) marked, vault hits as a faint dotted line, and snapshots whose replay diverged as
black crosses. A larger pack gets one overview figure instead (a panel costs about 0.1 s, so 1,000
panels took minutes): every concept's curve as a fraction of its expected tokens with the mean
over concepts, and the distribution of corrections to first hit and to saturation. The per-concept
numbers are all in report.json either way. A run in which no concept produced a curve still gets a
figure that says so. Matplotlib is imported lazily (importing seffi never pulls a plotting backend).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from seffi._io import write_figure
from seffi.lanes.sample_efficiency import LaneReport, fmt_number

_NCOLS = 4
#: Most concepts drawn as one panel each; more get the overview figure (same file name).
MAX_PANELS = 24


_fmt = fmt_number


def _title(report: LaneReport) -> str:
    agg = report.aggregate
    # With no snapshot there was nothing to gate: "FAIL" would read as a determinism problem.
    verdict = "pass" if agg.gate_passed else "FAIL" if agg.n_snapshots else "nothing measured"
    title = (
        f"{report.pack.get('name', 'pack')} [{report.pack.get('split', '')}] on {report.learner}: "
        f"first hit {_fmt(agg.mean_corrections_to_first_hit)}, saturation "
        f"{_fmt(agg.mean_corrections_to_saturation)}, saturation rate {_fmt(agg.saturation_rate)}, "
        f"replay determinism {_fmt(agg.replay_determinism)} ({verdict})"
    )
    rc = report.recall_control
    if rc is not None:
        ra = rc.aggregate
        title += (
            "\nrecall control (repeats every correction): first hit "
            f"{_fmt(ra.mean_corrections_to_first_hit)}, saturation "
            f"{_fmt(ra.mean_corrections_to_saturation)}, saturation rate {_fmt(ra.saturation_rate)}"
        )
    return title


def _save(fig: Any, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_figure(fig, out, dpi=110)
    plt.close(fig)
    return out


def plot_curves(report: LaneReport, path: str | Path) -> Path:
    """Render ``report``'s curves to a PNG at ``path`` and return the path.

    Small multiples for up to `MAX_PANELS` concepts, `plot_overview` beyond, and a
    message figure when no concept produced a curve.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    concepts = report.concepts or []
    if not any(c.curve for c in concepts):
        return _plot_nothing(report, path)
    if len(concepts) > MAX_PANELS:
        return plot_overview(report, path)
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
        control = report.recall_control.hits.get(c.id) if report.recall_control else None
        if control:
            # Over the learner's curve (dashed, so both show where they are equal): what repeating
            # every taught correction scores on this metric.
            ax.step(
                range(len(control)),
                control,
                where="post",
                color="C1",
                lw=1.2,
                ls="--",
                label="recall control (repeats every correction)",
                gid=f"recall-control:{c.id}",
                zorder=3,
            )
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
    fig.suptitle(_title(report), fontsize=10)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="lower center",
        ncol=len(handles),
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.5 / (2.5 * nrows + 0.9), 1, 1 - 0.45 / (2.5 * nrows + 0.9)))
    return _save(fig, path)


def _plot_nothing(report: LaneReport, path: str | Path) -> Path:
    """The figure of a run without any curve: what happened, instead of an empty grid."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    ax.set_axis_off()
    n = len(report.concepts)
    what = "no concepts to run" if n == 0 else f"no concept produced a curve ({n} failed)"
    first = f"\nfirst error: {report.errors[0][:90]}" if report.errors else ""
    ax.text(0.5, 0.5, f"{what}{first}\n(see report.json)", ha="center", va="center", wrap=True)
    fig.suptitle(_title(report), fontsize=9)
    return _save(fig, path)


def plot_overview(report: LaneReport, path: str | Path) -> Path:
    """One figure for any number of concepts: all curves at once, and where they first hit/saturate.

    Left: each concept's hits as a fraction of its expected tokens against k (faint, drawn as one line
    collection so the cost does not grow with a panel per concept; a concept stopped by an error shows
    its partial curve), the mean over the concepts that reached each k (bold), and divergent replays
    (black crosses). Right: how many of the concepts that ran to the end first hit / saturate after k
    corrections, with "never" as the last bar.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.collections import LineCollection

    ok = [c for c in report.concepts if c.curve]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [3, 2]})
    segments, sums, counts, bad_k, bad_y = [], defaultdict(float), defaultdict(int), [], []
    for c in ok:
        target = max(c.n_expected_tokens, 1)
        ks = [p.k for p in c.curve]
        ys = [p.cumulative_token_hit_count / target for p in c.curve]
        # A post-step line: (k, y_k) -> (k + 1, y_k) -> (k + 1, y_{k+1}), as in the small multiples.
        xs_step = np.repeat(ks, 2)[1:]
        ys_step = np.repeat(ys, 2)[:-1]
        segments.append(np.column_stack([xs_step, ys_step]))
        for k, y in zip(ks, ys, strict=True):
            sums[k] += y
            counts[k] += 1
        for p in c.curve:
            if not p.replay_identical:
                bad_k.append(p.k)
                bad_y.append(p.cumulative_token_hit_count / target)
    alpha = min(0.6, max(0.03, 6 / len(ok)))
    left.add_collection(LineCollection(segments, colors="C0", alpha=alpha, linewidths=1.0))
    ks_mean = sorted(sums)
    means = [sums[k] / counts[k] for k in ks_mean]
    left.step(ks_mean, means, where="post", color="C3", lw=2.2, label="mean over concepts")
    left.plot(ks_mean, means, "o", color="C3", ms=4)
    left.plot([], [], color="C0", alpha=0.6, label=f"each concept ({len(ok)})")
    rc = report.recall_control
    if rc is not None and rc.hits:
        target = {c.id: max(c.n_expected_tokens, 1) for c in ok}
        rsum: dict[int, float] = defaultdict(float)
        rcount: dict[int, int] = defaultdict(int)
        for cid, hs in rc.hits.items():
            for k, h in enumerate(hs):
                if cid in target:
                    rsum[k] += h / target[cid]
                    rcount[k] += 1
        rks = sorted(rsum)
        left.step(
            rks,
            [rsum[k] / rcount[k] for k in rks],
            where="post",
            color="C1",
            lw=1.6,
            ls="--",
            label="recall control mean (repeats every correction)",
            gid="recall-control:mean",
        )
    if bad_k:
        left.plot(bad_k, bad_y, "x", color="black", ms=7, mew=1.5, label="replay diverged")
    left.axhline(1.0, ls="--", color="0.4", lw=0.8, label="saturation")
    left.set_xlim(-0.3, max(ks_mean) + 0.3)
    if max(ks_mean) <= 20:
        left.set_xticks(ks_mean)
    left.set_ylim(-0.05, 1.1)
    left.set_xlabel("corrections taught (k)")
    left.set_ylabel("fraction of expected tokens hit")
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc="upper left")
    n_max = max(ks_mean)
    never = n_max + 1
    bins = np.arange(never + 2) - 0.5
    # Concepts that stopped with an error never had the chance to hit or saturate: not "never".
    done = [c for c in ok if c.error is None]
    first = [never if c.corrections_to_first_hit is None else c.corrections_to_first_hit for c in done]
    sat = [never if c.corrections_to_saturation is None else c.corrections_to_saturation for c in done]
    if done:
        right.hist([first, sat], bins=bins, color=["green", "red"], label=["first hit", "saturation"])
        right.legend(fontsize=8)
    else:
        right.text(0.5, 0.5, "no concept ran to the end", ha="center", va="center", transform=right.transAxes)
    right.set_xticks(range(never + 1), [*map(str, range(never)), "never"], fontsize=8)
    right.set_xlabel("corrections taught (k)")
    right.set_ylabel("concepts")
    right.grid(alpha=0.3, axis="y")
    n_err = len(report.concepts) - len(ok)
    note = f"{len(report.concepts)} concepts" + (f", {n_err} without a curve" if n_err else "")
    fig.suptitle(f"{_title(report)}\n{note}; per-concept curves in report.json", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)

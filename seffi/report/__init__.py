"""seffi.report — sinks (local + W&B), the report.json schema, plots and report.md.

Modules (flat):

- :mod:`seffi.report.keys` — the W&B key scheme as functions (``coverage_key(k)``, ``auc_key()``,
  ``gain_key(bound=...)``, ``log_spaced_ks(K)``, ``scalars_from_curves(curves, gain=...)``,
  ``report_scalars(report)``).
- :mod:`seffi.report.wandb_run` — :class:`SafeWandbRun`: offline by default, never raises into
  training (one warning, then ``enabled=False``); ``run_dir``, ``sync_hint``, ``check_login()``;
  :func:`wandb_mode` (explicit, else ``WANDB_MODE``, else offline).
- :mod:`seffi.report.sinks` — :class:`Sink` protocol, :class:`LocalSink` (always on: metrics.jsonl,
  snapshots.jsonl, tracker_state.json, report.json/md, plots), :class:`WandbSink`, :class:`MultiSink`,
  :class:`NullSink`, :class:`ForwardingSink`, :func:`default_sinks`.
- :mod:`seffi.report.run_folder` — one run per folder: :func:`default_out_dir`, :func:`fresh_out_dir`
  (callbacks), ``prepare_run_folder`` (command line).
- :mod:`seffi.report.schema` — pydantic models of report.json (:class:`Report`, :class:`Comparison`,
  :class:`PolicyResult`, :class:`CurveSet`, :class:`Barcode`, :class:`LatentCurve`; :class:`Gain` and
  :class:`TimeToCoverage` are :mod:`seffi.coverage`'s own models).
- :mod:`seffi.report.files` — :func:`write_report` (report.json, plots, report.md), :func:`load_report`,
  :func:`dumps_report`.
- :mod:`seffi.report.plots` — matplotlib figures (``plot_coverage``, ``plot_coverage_by_rarity``
  (common vs rare strategies), ``plot_novelty``, ``plot_time_to_coverage``, ``plot_barcode`` /
  ``plot_barcodes`` (all policies side by side), ``plot_valid_vs_raw``, ``plot_latent``,
  ``plot_compare``, ``save_figure``, ``render_report_plots``).
- :mod:`seffi.report.markdown` — ``render_markdown(report, plots)``.

Usage (what a callback or ``seffi run`` does)::

    from seffi.report import default_sinks, keys, load_report, schema, write_report

    sink = default_sinks("runs/demo", wandb="offline", config={"budget": 16})  # LocalSink + WandbSink
    for step, curves, gain in training_progress():                         # your loop
        sink.log(keys.scalars_from_curves(curves, gain=gain), step)        # every log event
        sink.log_snapshot(comparison, step)      # W&B tables/images only every log_curves_every calls
    report = schema.Report(comparisons=[comparison], seed=0)
    sink.finish(report, tracker_state=tracker.state_dict())   # report.json/md + plots; W&B summary+artifact
    print(sink.wandb.run.sync_hint)                           # "wandb sync .../wandb/offline-run-..."

    # later: re-render from disk, no recomputation
    write_report("runs/demo", load_report("runs/demo"))

Offline W&B runs can be read back with ``wandb leet inspect <run_dir> --summary --json``.
Importing this package imports neither wandb nor matplotlib (both load on first use).
"""

from __future__ import annotations

from seffi.report import keys
from seffi.report.files import dumps_report, load_report, write_report
from seffi.report.run_folder import default_out_dir, fresh_out_dir
from seffi.report.schema import (
    Barcode,
    Comparison,
    CurveSet,
    Gain,
    LatentCurve,
    PolicyResult,
    Report,
    TimeToCoverage,
)
from seffi.report.sinks import ForwardingSink, LocalSink, MultiSink, NullSink, Sink, WandbSink, default_sinks
from seffi.report.wandb_run import SafeWandbRun, WandbSinkWarning, wandb_mode

__all__ = [
    "Barcode",
    "Comparison",
    "CurveSet",
    "ForwardingSink",
    "Gain",
    "LatentCurve",
    "LocalSink",
    "MultiSink",
    "NullSink",
    "PolicyResult",
    "Report",
    "SafeWandbRun",
    "Sink",
    "TimeToCoverage",
    "WandbSink",
    "WandbSinkWarning",
    "default_out_dir",
    "default_sinks",
    "dumps_report",
    "fresh_out_dir",
    "keys",
    "load_report",
    "wandb_mode",
    "write_report",
]

"""seffi.report: the report.json schema and files, report.md, plots, W&B keys and the sinks.

wandb and matplotlib load on first use. Typical use:

```python
sink = default_sinks("runs/demo", wandb="offline")          # LocalSink + WandbSink
sink.log(keys.scalars_from_curves(curves, gain=gain), step)
sink.finish(Report(comparisons=[comparison]), tracker_state=tracker.state_dict())
write_report("runs/demo", load_report("runs/demo"))        # re-render, no recomputation
```
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

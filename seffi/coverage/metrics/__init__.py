"""Per-input metrics: each module defines `seffi.coverage.input_metrics.InputMetric` subclasses.

The tracker records into every metric found here (`seffi.coverage.input_metrics.registered`); a
new metric is one module in this package and its test.
"""

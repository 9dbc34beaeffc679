"""seffi.coverage: how fast a sampler covers an input's strategy space, against iid and an oracle.

Public API::

    from seffi.coverage import CoverageTracker, IidBaseline, OracleBaseline, Curves, Gain
    t = CoverageTracker(strategies=("a", "b", "c"))
    t.update(input_id, matches, valid=True, stream=0)
    c = t.curves(K)
    gain = c.gain(IidBaseline.from_probabilities(p).curves(K), OracleBaseline(refs).curves(K))

Modules: ``curves`` (result container + pure metric functions), ``runs`` (curves of adaptive runs),
``estimators`` (exact iid formulas and unbiased rarefaction/extrapolation from samples),
``baselines`` (``IidBaseline``, ``OracleBaseline``), ``resampling`` (bootstrap), ``tracker``.
"""

import functools
from typing import Any

from seffi.coverage.baselines import IidBaseline, OracleBaseline
from seffi.coverage.curves import TAUS, Curves, Gain, TimeToCoverage
from seffi.coverage.tracker import CoverageTracker

__all__ = ["TAUS", "CoverageTracker", "Curves", "Gain", "IidBaseline", "OracleBaseline", "TimeToCoverage"]


def _with_input_keys(curves: Any) -> Any:
    """Shim: label a tracker's per-input AUCs with their (task, input_id), for the paired gain.

    ``CoverageTracker.curves`` (tracker.py, owned elsewhere) numbers its inputs in sorted
    (task, input_id) order but does not yet pass those keys to ``curves_from_runs(input_keys=)``.
    This wrapper adds them afterwards; it steps aside as soon as the tracker sets them itself.
    """
    if getattr(curves, "_seffi_input_keys_shim", False):
        return curves

    @functools.wraps(curves)
    def wrapper(self: CoverageTracker, *args: Any, **kwargs: Any) -> Curves:
        c = curves(self, *args, **kwargs)
        if c.input_keys is None and c.input_auc is not None:
            keys = sorted({key[:2] for key in self._runs})  # the unit order of CoverageTracker.curves
            if len(keys) == len(c.input_auc):
                c.input_keys = [(str(t), str(i)) for t, i in keys]
        return c

    wrapper._seffi_input_keys_shim = True  # type: ignore[attr-defined]
    return wrapper


CoverageTracker.curves = _with_input_keys(CoverageTracker.curves)  # type: ignore[method-assign]

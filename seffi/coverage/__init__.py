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

from seffi.coverage.baselines import IidBaseline, OracleBaseline
from seffi.coverage.curves import TAUS, Curves, Gain, TimeToCoverage
from seffi.coverage.tracker import CoverageTracker

__all__ = ["TAUS", "CoverageTracker", "Curves", "Gain", "IidBaseline", "OracleBaseline", "TimeToCoverage"]

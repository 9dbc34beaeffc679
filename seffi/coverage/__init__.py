"""seffi.coverage: how fast a sampler covers an input's strategy space, against iid and an oracle.

Examples:
    >>> from seffi.coverage import CoverageTracker, IidBaseline, OracleBaseline
    >>> ids = ("a", "b", "c")
    >>> t = CoverageTracker(strategies=ids)
    >>> for matches in ({"a"}, {"a"}, {"b", "c"}):
    ...     t.update("x1", matches)
    >>> c = t.curves(3, n_boot=0)
    >>> iid = IidBaseline.from_probabilities({"a": 0.8, "b": 0.15, "c": 0.05}, strategies=ids).curves(3)
    >>> round(c.gain(iid, OracleBaseline(strategies=ids).curves(3)).value, 3)
    0.534
"""

from seffi.coverage.curves import TAUS, Curves, Gain, TimeToCoverage
from seffi.coverage.iid import IidBaseline
from seffi.coverage.oracle import OracleBaseline
from seffi.coverage.tracker import CoverageTracker

__all__ = ["TAUS", "CoverageTracker", "Curves", "Gain", "IidBaseline", "OracleBaseline", "TimeToCoverage"]

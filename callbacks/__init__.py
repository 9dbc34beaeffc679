"""Drop-in coverage callbacks for training loops (imported as ``seffi.callbacks``).

One object in a training loop logs strategy coverage C(k), novelty and the gain vs iid to W&B
(offline by default) and a local report folder. [`CoverageMonitor`][seffi.callbacks.CoverageMonitor]
is framework-agnostic; [`MonitorConfig`][seffi.callbacks.MonitorConfig] declares every option;
[`CoverageEvaluator`][seffi.callbacks.CoverageEvaluator] evaluates periodically. The adapters
(``sb3``, ``rllib``, ``trl``, ``verl``, ``gym``) are imported explicitly, each with its extra.
"""

from __future__ import annotations

from seffi.callbacks.config import MonitorConfig
from seffi.callbacks.core import CoverageMonitor
from seffi.callbacks.evaluator import CoverageEvaluator
from seffi.episodes import EpisodeBatch, EpisodeRejected, parse_infos

__all__ = [
    "CoverageEvaluator",
    "CoverageMonitor",
    "EpisodeBatch",
    "EpisodeRejected",
    "MonitorConfig",
    "parse_infos",
]

"""Drop-in coverage callbacks for training loops (imported as ``seffi.callbacks``).

Add one object to a training loop and get strategy coverage C(k), novelty N(i) and the gain vs iid
sampling in Weights & Biases (offline by default) and in a local report folder (report.json,
report.md, plots, metrics.jsonl, tracker_state.json).

* [`CoverageMonitor`][seffi.callbacks.CoverageMonitor] — framework-agnostic:
  ``CoverageMonitor.for_env(envs, budget=K)``, then ``update_infos(infos, dones)`` and ``maybe_log(step)``
  each step, ``close()`` at the end; ``update(batch)`` records an
  [`EpisodeBatch`][seffi.episodes.EpisodeBatch].
* [`MonitorConfig`][seffi.callbacks.MonitorConfig] — every monitor option (W&B mode, out_dir, log_every,
  n_boot, ...), declared once; the monitor and every adapter take ``config=`` or its fields as keyword
  arguments.
* [`CoverageEvaluator`][seffi.callbacks.CoverageEvaluator] — periodic evaluation (like SB3's
  ``EvalCallback``).
* [`EpisodeBatch`][seffi.episodes.EpisodeBatch] — finished episodes as columns, what every parser of
  ``seffi.episodes`` returns (``parse_infos`` reads any info format).
* [`EpisodeRejected`][seffi.episodes.EpisodeRejected] — a finished episode that breaks the info contract (a
  ``SeffiError``).

Adapters, imported explicitly (each needs its extra): ``seffi.callbacks.sb3.CoverageCallback``,
``seffi.callbacks.rllib.CoverageCallback``, ``seffi.callbacks.trl``, and the Gymnasium wrappers in
``seffi.callbacks.gym``. Importing this package never imports torch, stable_baselines3, ray or trl.
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

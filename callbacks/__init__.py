"""Drop-in coverage callbacks for training loops (imported as ``seffi.callbacks``).

Add one object to a training loop and watch strategy coverage C(k), novelty N(i) and the gain vs iid
sampling in Weights & Biases (offline by default) and in a local report folder (always written:
metrics.jsonl, report.json, report.md, PNG plots, tracker_state.json).

Public API (stable; adapters for other frameworks build on the core):

* :class:`CoverageMonitor` (``seffi.callbacks.core``) — framework-agnostic. Construct with
  ``CoverageMonitor(budget=K, strategies=..., iid=..., oracle=..., sinks=...)`` or
  ``CoverageMonitor.for_env(env, budget=K)`` (strategies, exact iid baseline and oracle read from any
  seffi env: single, Gymnasium vector, SB3 VecEnv). Then:

  - ``ingest_infos(infos, dones=None)`` — one step's infos in any format: Gymnasium vector dict of
    arrays (``NEXT_STEP`` and ``SAME_STEP``/``final_info`` autoreset), SB3 list of dicts, or one
    single-env dict. Cost O(num_envs) numpy + O(finished episodes) Python. Returns the count ingested.
  - ``ingest_episode(info, env_index=0)`` — one finished episode's final-step info (RLlib, TRL).
  - ``ingest_end(EpisodeEnd)`` — already parsed episode (lowest level).
  - ``maybe_log(step)`` — logs when ``log_every`` episodes (or steps) passed; ``log(step)`` forces.
  - ``finalize(step=None)`` / ``close()`` — final log, report files, W&B summary + artifact.
  - ``tracker`` — the :class:`seffi.coverage.CoverageTracker` (mergeable: give each worker a
    distinct ``stream_offset`` and merge trackers on the driver).
  - ``curves()``, ``baselines()``, ``snapshot()``, ``report()`` — the numbers without logging.

  A run is one input's consecutive samples in one env row (seffi envs report ``run_index``); only
  its first K samples count. An episode end whose info lacks ``strategy_matches`` raises one
  :class:`~seffi.errors.SeffiError` naming the key and the env.
* :class:`CoverageEvaluator` — periodic evaluation (like SB3's ``EvalCallback``): ``evaluate(act,
  step)`` lets policy ``act(obs) -> action`` spend K samples on each eval input of a separate single
  env and logs that evaluation under ``seffi/eval/...``.
* :func:`episode_ends` / :func:`episode_from_info` / :class:`EpisodeEnd` — the info parsers.
* ``seffi.callbacks.sb3.CoverageCallback(budget=K, eval_env=None, ...)`` — an SB3 ``BaseCallback``
  (imports stable_baselines3; import it explicitly).
* ``seffi.callbacks.gym`` — the CleanRL-style loop pattern and ``CoverageVectorWrapper`` /
  ``CoverageWrapper`` that record coverage inside ``step``.

Faults: a failing W&B (init, network, quota) gives one warning and turns W&B off; training continues
and the local folder keeps everything. Logs at a step not above the last one are refused (one
warning) so out-of-order steps never reach W&B; the data stays in the tracker and the final report.

Importing this package never imports torch, stable_baselines3, ray or trl.
"""

from __future__ import annotations

from seffi.callbacks.core import (
    CoverageEvaluator,
    CoverageMonitor,
    EnvAccess,
    EpisodeEnd,
    episode_ends,
    episode_from_info,
    rollout_episodes,
)

__all__ = [
    "CoverageEvaluator",
    "CoverageMonitor",
    "EnvAccess",
    "EpisodeEnd",
    "episode_ends",
    "episode_from_info",
    "rollout_episodes",
]

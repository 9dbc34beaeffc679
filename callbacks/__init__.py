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
    single-env dict. Gymnasium dicts are read with numpy masks (no per-episode dicts); finished
    episodes are buffered and folded in batches (numpy) into per-run arrays and per-input sums.
    Returns the count ingested.
  - ``ingest_episode(info, env_index=0)`` — one finished episode's final-step info (RLlib, TRL);
    ``ingest_end(EpisodeEnd)`` / ``ingest_ends([...])`` / ``ingest_columns(EpisodeColumns)`` — parsed.
  - ``maybe_log(step)`` — logs when ``log_every`` episodes (or steps) passed; ``log(step)`` forces.
    A log costs O(inputs x K) (point estimates from the per-input sums, gain from cached per-input
    baseline AUCs); every ``log_curves_every``-th log is a *curve snapshot* with bootstrap
    intervals (gain ``_lo``/``_hi``, W&B table + image, a line of snapshots.jsonl).
  - ``finalize(step=None)`` / ``close()`` — final log, report files (curves from the tracker), W&B
    summary + artifact.
  - ``tracker`` — the :class:`seffi.coverage.CoverageTracker` of all counted samples (built on
    demand from the monitor's run arrays).
  - ``state_dict()`` / ``load_state_dict(state)`` — checkpoint and resume (open runs continue);
    ``merge(other)`` — exact, order-independent union (runs disjoint: distinct ``stream_offset``
    or ``CoverageMonitor.shift_streams``); ``load_states(states)`` — the exact union of many
    workers' states, each in its own block of streams (what the RLlib driver does).
  - ``curves()``, ``point_scalars()``, ``baselines()``, ``snapshot()``, ``report()`` — the numbers
    without logging.

  A run is one input's consecutive samples in one env row (seffi envs report ``run_index``); only
  its first K samples count. Every finished episode is checked as it arrives, by one set of rules on
  every path (``strategy_matches`` and ``input_id`` present; ``valid`` a bool; ``input_id`` a str or
  int; ``sample_index``/``run_index``/``z`` ints >= 0; ``dones`` booleans). A bad episode is
  rejected on its own: the good ones of the same call are recorded first, then
  :class:`EpisodeRejected` (a :class:`~seffi.errors.SeffiError`) names the key, the env and the
  sub-env; nothing recorded earlier is lost, so a caller may catch it and carry on.
* :class:`CoverageEvaluator` — periodic evaluation (like SB3's ``EvalCallback``): ``evaluate(act,
  step)`` lets policy ``act(obs) -> action`` spend K samples on each eval input of a separate single
  env and logs that evaluation under ``seffi/eval/...``.
* :func:`episode_ends` / :func:`episode_columns` / :func:`episode_from_info` / :class:`EpisodeEnd` /
  :class:`EpisodeColumns` — the info parsers.
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

from seffi.callbacks.core import CoverageMonitor
from seffi.callbacks.env_access import EnvAccess
from seffi.callbacks.evaluator import CoverageEvaluator, rollout_episodes
from seffi.callbacks.infos import EpisodeColumns, EpisodeEnd, episode_columns, episode_ends, episode_from_info
from seffi.callbacks.rules import EpisodeRejected

__all__ = [
    "CoverageEvaluator",
    "CoverageMonitor",
    "EnvAccess",
    "EpisodeColumns",
    "EpisodeEnd",
    "EpisodeRejected",
    "episode_columns",
    "episode_ends",
    "episode_from_info",
    "rollout_episodes",
]

"""verl: a batch reward function that records group coverage while verl trains.

verl's batch reward manager calls one function with every sample of a step.
`VerlCoverage.compute_score` is that function: it returns *your* per-sample scores unchanged and
records the step's groups in a `CoverageMonitor` (the samples of one prompt, ``extra_info[id_key]``,
form runs of K = ``rollout.n``), which logs every ``log_every`` steps and reports at exit or `close`.

Setup (``custom_reward_function.path``, ``reward_manager=batch``): docs/custom-llm.md.
"""

from __future__ import annotations

import atexit
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from seffi.callbacks.core import CoverageMonitor
from seffi.episodes import parse_generation
from seffi.errors import SeffiError
from seffi.labelers import as_labeler

__all__ = ["VerlCoverage"]


def _correct(score: Any) -> bool:
    if isinstance(score, Mapping):
        score = score.get("acc", score.get("score"))
    return bool(score is not None and score > 0)


class VerlCoverage:
    r"""Group coverage of a verl run, recorded by its batch reward function.

    Args:
        labeler: What reads the strategies off a solution (see `seffi.labelers.as_labeler`).
        score: Your per-sample reward, ``score(data_source, solution_str, ground_truth, extra_info)``;
            returned to verl as it is, ``> 0`` (a dict's ``"acc"``, else ``"score"``) is correct.
        id_key: The ``extra_info`` key naming each sample's prompt.
        budget: K, samples per run (default: the group size of the first step, ``rollout.n``).
        strategies: The declared strategy ids (default: the labeler's).
        **monitor_options: Passed to `CoverageMonitor` (``log_every`` in steps, ...).

    Examples:
        >>> cov = VerlCoverage({"loop": r"\bfor\b"}, score=lambda ds, s, gt, ei: float(gt in s),
        ...                    wandb="disabled", out_dir=None, plots=False)  # doctest: +SKIP
    """

    def __init__(
        self,
        labeler: Any,
        score: Callable[..., Any],
        *,
        id_key: str = "index",
        budget: int | None = None,
        strategies: Sequence[str] | None = None,
        **monitor_options: Any,
    ) -> None:
        self.labeler = as_labeler(labeler, strategies)
        self.score, self.id_key, self.budget = score, id_key, budget
        self.options = {"log_unit": "steps", "log_every": 1, "task_name": "verl", **monitor_options}
        self.monitor: CoverageMonitor | None = None
        self.steps = 0
        self._runs: Counter[str] = Counter()  # groups of each prompt so far: its next run index
        atexit.register(self.close)

    def compute_score(
        self,
        data_sources: Sequence[Any],
        solution_strs: Sequence[str],
        ground_truths: Sequence[Any],
        extra_infos: Sequence[Mapping[str, Any]] | None = None,
        **reward_kwargs: Any,
    ) -> list[Any]:
        """The batch reward function verl calls: your scores, the step's groups recorded aside."""
        n = len(solution_strs)
        infos = list(extra_infos) if extra_infos is not None else [{}] * n
        scores = [
            self.score(data_sources[i], solution_strs[i], ground_truths[i], infos[i], **reward_kwargs)
            for i in range(n)
        ]
        ids = []
        for info in infos:
            if not isinstance(info, Mapping) or info.get(self.id_key) is None:
                raise SeffiError(
                    f"a sample's extra_info has no {self.id_key!r} naming its prompt (keys: "
                    f"{sorted(info) if isinstance(info, Mapping) else type(info).__name__}); set id_key="
                )
            ids.append(str(info[self.id_key]))
        self.record(ids, solution_strs, [_correct(s) for s in scores])
        return scores

    def record(self, ids: Sequence[str], texts: Sequence[Any], correct: Sequence[bool]) -> None:
        """Record one training step: each prompt's samples (in order) are one group of runs."""
        sizes = Counter(ids)
        if self.monitor is None:
            budget = self.budget or max(sizes.values())
            self.monitor = CoverageMonitor(budget, list(self.labeler.strategies), **self.options)
        monitor, k = self.monitor, self.monitor.budget
        results = [self.labeler(x, t) for x, t in zip(ids, texts, strict=True)]
        position: Counter[str] = Counter()
        sample, run = np.empty(len(ids), np.int64), np.empty(len(ids), np.int64)
        for i, x in enumerate(ids):
            j = position[x]
            position[x] += 1
            sample[i], run[i] = j % k + 1, self._runs[x] + j // k
        for x, size in sizes.items():
            self._runs[x] += -(-size // k)  # this step's runs of x, a short last one included
        matches = [sorted(r.strategy_matches) for r in results]
        valid = np.array([r.parse_ok and r.valid and c for r, c in zip(results, correct, strict=True)])
        monitor.update(
            parse_generation(list(ids), matches, monitor.coder, valid, sample_index=sample, run_index=run)
        )
        self.steps += 1
        monitor.maybe_log(self.steps)

    def close(self) -> Any:
        """Write the report (idempotent; also runs when the process exits)."""
        return self.monitor.finalize(step=self.steps) if self.monitor is not None else None

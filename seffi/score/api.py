"""``score``: coverage of a policy's generation files against the base model's own files.

The base files give the iid baseline (`IidBaseline.from_samples` over each prompt's labelled base
samples); the oracle takes every declared strategy as feasible on every prompt; the policy files
stream through a `CoverageMonitor` in batches, each prompt's samples in file order forming runs of
``budget`` samples. The monitor writes the usual run folder and W&B run.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seffi._io import write_atomic
from seffi.callbacks.core import CoverageMonitor
from seffi.coverage import IidBaseline, OracleBaseline
from seffi.episodes import parse_generation
from seffi.errors import SeffiError
from seffi.labelers import Labeler
from seffi.score.agreement import Agreement
from seffi.score.files import Layout, Sample, read_samples
from seffi.score.labels import FieldLabels, label_input, sample_labels
from seffi.score.steps import StepCurves, step_scalars, write_steps

__all__ = ["score"]

#: Samples per batch handed to the monitor.
BATCH = 4096
#: Samples per call of the labeler (the judge asks for a chunk's uncached answers at once).
LABEL_CHUNK = 1024


def _declared_labels(paths: Sequence[Path], fields: dict[str, Any]) -> tuple[str, ...]:
    """Every id the label field names across ``paths``, sorted (a first pass: labels only)."""
    seen: set[str] = set()
    for _, s in read_samples(paths, **fields):
        v = s.label
        seen.update([v] if isinstance(v, str) else v if isinstance(v, list) else [])
    if not seen:
        raise SeffiError(
            f"the label field {fields['label']!r} names no strategy in any file; pass --strategies"
        )
    return tuple(sorted(map(str, seen)))


def _survey(paths: Sequence[Path], fields: dict[str, Any], labels: Any) -> Counter[tuple[int | None, str]]:
    """Samples per (step, prompt) of ``paths``: every row (and a label field's label) checked first."""
    counts: Counter[tuple[int | None, str]] = Counter()
    for _, s in read_samples(paths, **fields):
        counts[s.step, s.prompt_id] += 1
        if isinstance(labels, FieldLabels):
            labels(s)
    return counts


class _Labelled:
    """The labelled samples of some files, saying what layout it detected and what it could not label.

    Args:
        what: "policy" or "base" (for the statements).
        paths: The files.
        fields: Field names overriding detection.
        label: ``samples -> [(match set, valid, reason it could not be labelled or None)]``.
        say: Where the statements go.
        agreement: Compares each sample's match set with a second labeler's, or None.
    """

    def __init__(
        self,
        what: str,
        paths: Sequence[Path],
        fields: dict[str, Any],
        label: Callable,
        say: Callable,
        agreement: Agreement | None = None,
    ) -> None:
        self.what, self.paths, self.fields, self.label, self.say = what, paths, fields, label, say
        self.agreement = agreement
        self.samples, self.unlabelled, self.reason = 0, 0, ""

    def __iter__(self) -> Iterator[tuple[Sample, frozenset[str], bool]]:
        layout: Layout | None = None
        chunk: list[Sample] = []
        for lay, s in read_samples(self.paths, **self.fields):
            if lay is not layout:
                layout = lay
                self.say(f"{self.what} files: {lay.describe()}")
            chunk.append(s)
            if len(chunk) == LABEL_CHUNK:
                yield from self._labelled(chunk)
                chunk = []
        yield from self._labelled(chunk)
        if self.unlabelled:
            self.say(
                f"{self.what} files: {self.unlabelled} of {self.samples} samples could not be labelled "
                f"and match nothing (first: {self.reason})"
            )

    def _labelled(self, chunk: list[Sample]) -> Iterator[tuple[Sample, frozenset[str], bool]]:
        verdicts = self.label(chunk) if chunk else []
        if self.agreement is not None and chunk:
            self.agreement.add([m for m, _, _ in verdicts], chunk)
        for s, (matches, valid, reason) in zip(chunk, verdicts, strict=True):
            self.samples += 1
            if reason is not None:
                self.unlabelled += 1
                self.reason = self.reason or reason
            yield s, matches, valid


def _base(samples: _Labelled, strategies: Sequence[str]) -> IidBaseline:
    sets: dict[str, list[frozenset[str]]] = defaultdict(list)
    valid: dict[str, list[bool]] = defaultdict(list)
    for s, m, v in samples:
        sets[s.prompt_id].append(m)
        valid[s.prompt_id].append(v)
    try:
        return IidBaseline.from_samples(dict(sets), strategies=list(strategies), valid=dict(valid))
    except ValueError as exc:
        raise SeffiError(f"base files: {exc}") from None


def _batches(samples: _Labelled, budget: int) -> Iterator[tuple[list, ...]]:
    """Batches of labelled policy samples: ids, match lists, valid, sample index (1..K), run index, step."""
    seen: Counter[str] = Counter()
    cols: tuple[list, ...] = ([], [], [], [], [], [])
    for s, m, v in samples:
        n = seen[s.prompt_id]
        seen[s.prompt_id] = n + 1
        row = (s.prompt_id, sorted(m), v, n % budget + 1, n // budget, s.step)
        for col, value in zip(cols, row, strict=True):
            col.append(value)
        if len(cols[0]) >= BATCH:
            yield cols
            cols = ([], [], [], [], [], [])
    if cols[0]:
        yield cols


def score(
    policy: Sequence[str | Path],
    base: Sequence[str | Path],
    *,
    labeler: Labeler | None = None,
    label_field: str | None = None,
    strategies: Sequence[str] | None = None,
    budget: int | None = None,
    fields: dict[str, str | None] | None = None,
    compare_with: tuple[str, Labeler | FieldLabels] | None = None,
    max_calls: int | None = None,
    name: str = "policy",
    say: Callable[[str], None] = print,
    **monitor_options: Any,
) -> Any:
    """Coverage of the policy's generations against the base model's iid sampling and the oracle.

    Args:
        policy: The policy's generation files (JSONL or Parquet; layout detected, see `seffi.score.files`).
        base: The base model's generation files for the same prompts (its own iid samples).
        labeler: Labels each completion (`seffi.labelers`); or give ``label_field``.
        label_field: A field of the files holding each sample's strategy id(s).
        strategies: The declared strategy ids (default: the labeler's, or every id the label field names).
        budget: K, the samples per run (default: the most common number of samples a prompt has in one
            training step, or in all the files when they record no step).
        fields: Field names overriding detection: id, text, score, step, prompt.
        compare_with: (name, a second labeler) whose match sets are compared with the main labeler's
            on every sample: Cohen's kappa per strategy, in ``agreement.json`` and one line.
        max_calls: For a labeler that calls a service (the LLM judge): stop before any call when
            labelling the files takes more requests than this.
        name: The policy's name in the report.
        say: Where the one-line statements of what was detected go.
        **monitor_options: Passed to `CoverageMonitor`: ``out_dir``, ``wandb``, ``n_boot``, ``seed``, ...

    Returns:
        The monitor's final report (`seffi.report.schema.Report`).

    Raises:
        SeffiError: Bad files, a prompt of the policy without base samples, or no labeler.
    """
    policy_paths, base_paths = [Path(p) for p in policy], [Path(p) for p in base]
    if not policy_paths or not base_paths:
        raise SeffiError("need at least one policy file and one base file (--base)")
    if (labeler is None) == (label_field is None):
        raise SeffiError(
            "need exactly one labeler: --labels FIELD, --rubric FILE or --labeler module:function"
        )
    fields = {k: v for k, v in (fields or {}).items() if v}
    if label_field is not None:
        fields["label"] = label_field
        declared = tuple(strategies) if strategies else _declared_labels([*base_paths, *policy_paths], fields)
        labels: Labeler | FieldLabels = FieldLabels(declared)
    else:
        assert labeler is not None
        declared, labels = tuple(labeler.strategies), labeler
    label = sample_labels(labels)
    counts = _survey(policy_paths, fields, labels)  # a bad row stops here, before any output exists
    needed_calls = getattr(labels, "needed_calls", None)
    if max_calls is not None and needed_calls is not None:
        pairs = (
            (label_input(s), s.text)
            for paths in (base_paths, policy_paths)
            for _, s in read_samples(paths, **fields)
        )
        need = needed_calls(pairs)
        if need > max_calls:
            raise SeffiError(
                f"labelling these files takes {need} requests to the judge (answers not in its cache), "
                f"more than --max-calls {max_calls}"
            )
    agreement = None
    if compare_with is not None:
        agreement = Agreement(sample_labels(compare_with[1]), declared, ("labeler", compare_with[0]))
    per_prompt = Counter(counts.values())
    k = int(budget) if budget is not None else max(per_prompt, key=lambda n: (per_prompt[n], n))
    if k < 1:
        raise SeffiError(f"budget must be a positive number of samples, got {k}")
    iid = _base(_Labelled("base", base_paths, fields, label, say, agreement), declared)
    prompts = sorted(iid.strategy_sets())
    missing = sorted({pid for _, pid in counts} - set(prompts))
    if missing:
        raise SeffiError(
            f"{len(missing)} policy prompt(s) have no base samples (first: {missing[0]!r}); "
            "the base files must cover every prompt"
        )
    oracle = OracleBaseline({p: {s: {s} for s in declared} for p in prompts}, strategies=list(declared))
    shown = ", ".join(declared[:8]) + (", ..." if len(declared) > 8 else "")
    say(f"strategies: {len(declared)} ({shown}); budget K = {k}")
    monitor_options.setdefault("task_name", "files")
    monitor = CoverageMonitor(k, list(declared), iid=iid, oracle=oracle, label=name, **monitor_options)
    episodes, by_step = 0, StepCurves(declared, k)
    try:
        samples = _Labelled("policy", policy_paths, fields, label, say, agreement)
        for ids, matches, valid, sample, run, steps in _batches(samples, k):
            valid = np.asarray(valid)
            monitor.update(
                parse_generation(ids, matches, monitor.coder, valid, sample_index=sample, run_index=run)
            )
            by_step.add(steps, ids, matches, valid)
            episodes += len(ids)
        if by_step.trackers:  # one point per training step, logged at that step before the final log
            rows = by_step.rows(monitor.env_baselines, n_boot=monitor.n_boot, seed=monitor.seed)
            for row in rows:
                monitor.sinks.log(step_scalars(row), step=row["step"])
            if monitor.out_dir is not None:
                write_steps(monitor.out_dir, rows, plots=monitor.config.plots)
            say(f"by training step: {len(rows)} steps (steps.md)")
            episodes = max(episodes, rows[-1]["step"] + 1)
        if agreement is not None:
            say(agreement.line())
            if monitor.out_dir is not None:
                write_atomic(
                    monitor.out_dir / "agreement.json", json.dumps(agreement.summary(), indent=2) + "\n"
                )
        calls = getattr(labels, "calls", None)
        if calls is not None:
            say(f"judge: {calls} requests, {labels.cached} answers from its cache")
    except BaseException:  # Ctrl-C, a file changed under us: what was scored is kept, marked interrupted
        monitor.finalize(interrupted=True)
        raise
    return monitor.finalize(step=episodes)

"""``score``: coverage of a policy's generation files against the base model's own files.

The base files give the iid baseline (`IidBaseline.from_samples` over each prompt's labelled base
samples); the oracle takes every declared strategy as feasible on every prompt; the policy files
stream through a `CoverageMonitor` in batches, each prompt's samples in file order forming runs of
``budget`` samples. The monitor writes the usual run folder and W&B run.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import multiprocessing
import queue
import signal
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seffi._convert import clip
from seffi._io import write_atomic
from seffi.callbacks.core import CoverageMonitor
from seffi.coverage import IidBaseline, OracleBaseline
from seffi.coverage.samples import SamplePlan
from seffi.coverage.state import MAX_BUDGET
from seffi.episodes import parse_generation
from seffi.errors import SeffiError
from seffi.labelers import Labeler, RegexRubric
from seffi.report.sinks import NullSink
from seffi.score.agreement import Agreement
from seffi.score.files import Layout, Sample, read_samples
from seffi.score.labels import FieldLabels, label_input, sample_labels
from seffi.score.steps import StepCurves, step_scalars, write_steps

__all__ = ["score"]

#: Samples per batch handed to the monitor.
BATCH = 4096
#: Samples per call of the labeler (the judge asks for a chunk's uncached answers at once).
LABEL_CHUNK = 1024
#: Bytes of base files from which a second process reads them and computes their iid curves while
#: this one reads the policy's files and feeds the monitor (the two are independent until the gain).
BASE_PROCESS_BYTES = 8 << 20


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
        shard: ``(index, count)``: label only the prompts of that shard (`shard_of`), or None for all.
    """

    def __init__(
        self,
        what: str,
        paths: Sequence[Path],
        fields: dict[str, Any],
        label: Callable,
        say: Callable,
        agreement: Agreement | None = None,
        shard: tuple[int, int] | None = None,
    ) -> None:
        self.what, self.paths, self.fields, self.label, self.say = what, paths, fields, label, say
        self.agreement, self.shard = agreement, shard
        self.samples, self.unlabelled, self.reason = 0, 0, ""

    def __iter__(self) -> Iterator[tuple[Sample, frozenset[str], bool]]:
        for chunk, verdicts in self.chunks():
            for s, (matches, valid, _) in zip(chunk, verdicts, strict=True):
                yield s, matches, valid

    def chunks(self) -> Iterator[tuple[list[Sample], list[tuple[frozenset[str], bool, str | None]]]]:
        """The samples in chunks of `LABEL_CHUNK`, each with its verdicts (match set, valid, reason)."""
        layout: Layout | None = None
        chunk: list[Sample] = []
        for lay, s in read_samples(self.paths, **self.fields):
            if lay is not layout:
                layout = lay
                self.say(f"{self.what} files: {lay.describe()}")
            if self.shard is not None and shard_of(s.prompt_id, self.shard[1]) != self.shard[0]:
                continue
            chunk.append(s)
            if len(chunk) == LABEL_CHUNK:
                yield chunk, self._labelled(chunk)
                chunk = []
        if chunk:
            yield chunk, self._labelled(chunk)
        _say_unlabelled(self.say, self.what, self.unlabelled, self.samples, self.reason)

    def _labelled(self, chunk: list[Sample]) -> list[tuple[frozenset[str], bool, str | None]]:
        verdicts = self.label(chunk)
        if self.agreement is not None:
            self.agreement.add([m for m, _, _ in verdicts], chunk)
        self.samples += len(chunk)
        for _, _, reason in verdicts:
            if reason is not None:
                self.unlabelled += 1
                self.reason = self.reason or reason
        return verdicts


def _say_unlabelled(say: Callable, what: str, unlabelled: int, samples: int, reason: str) -> None:
    if unlabelled:
        what_happened = "could not be labelled and match nothing"
        say(f"{what} files: {unlabelled} of {samples} samples {what_happened} (first: {reason})")


def _on_ray(plan: dict[str, Any], workers: int) -> list[dict[str, Any]]:
    """`score_shard` of each of ``workers`` shards as Ray tasks (a local Ray unless one is running)."""
    try:
        import ray
    except ImportError as exc:
        raise SeffiError("--ray needs Ray (pip install 'ray[default]')") from exc
    if not ray.is_initialized():
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    task = ray.remote(score_shard)
    try:
        return ray.get([task.remote(plan, (i, workers)) for i in range(workers)])
    except ray.exceptions.RayTaskError as exc:  # a worker's SeffiError is the user's one line
        if isinstance(exc.cause, SeffiError):
            raise exc.cause from None
        raise


def shard_of(prompt_id: str, shards: int) -> int:
    """The shard a prompt belongs to: a hash of its id that is the same in every process."""
    return int.from_bytes(hashlib.blake2b(prompt_id.encode(), digest_size=8).digest(), "little") % shards


def _base_sets(samples: _Labelled) -> dict[str, tuple[list[frozenset[str]], list[bool]]]:
    """Each prompt's labelled base samples: (match sets, valid), equal match sets one object."""
    out: dict[str, tuple[list[frozenset[str]], list[bool]]] = {}
    distinct: dict[frozenset[str], frozenset[str]] = {}  # a few distinct sets among 10^6 samples
    for chunk, verdicts in samples.chunks():
        for s, (m, v, _) in zip(chunk, verdicts, strict=True):
            sets, valid = out.setdefault(s.prompt_id, ([], []))
            sets.append(distinct.setdefault(m, m))
            valid.append(v)
    return out


def _iid(
    base: dict[str, tuple[list[frozenset[str]], list[bool]]],
    strategies: Sequence[str],
    kind: type[IidBaseline] = IidBaseline,
) -> IidBaseline:
    """The iid baseline of the base samples, prompts in sorted order (the same however they were read)."""
    keys = sorted(base)
    try:
        return kind.from_samples(
            {k: base[k][0] for k in keys}, strategies=list(strategies), valid={k: base[k][1] for k in keys}
        )
    except ValueError as exc:
        raise SeffiError(f"base files: {exc}") from None


class _BaseProcess:
    """A second process that reads and labels the base files, then shares the work of their iid curves.

    It runs while this process reads the policy's files and feeds the monitor: the base's samples
    come back first (`sets`); once `ask` names the strategies and the arguments of
    ``IidBaseline.curves``, it computes blocks of their plan (``seffi.coverage.samples.SamplePlan``),
    taking each from a counter shared with this process, which takes the rest when the monitor asks
    for the curves (`blocks`). A block's sums do not depend on which process computed it, so the
    curves are those of one process. A process that ends early leaves its blocks to this one.

    Args:
        paths: The base files.
        fields: Field names overriding detection.
        labels: The labeler (a label field or a rubric: both are plain data, safe in another process).
    """

    def __init__(
        self, paths: Sequence[Path], fields: dict[str, Any], labels: FieldLabels | RegexRubric
    ) -> None:
        # fork on Linux: the child starts at once with everything imported; elsewhere spawn (fork
        # is unsafe on macOS).
        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self.conn, child = context.Pipe()
        self.counter = context.Value("q", 0)  # the next block to take
        self.results = context.Queue()  # (block, its sums) as the process computes them; None when done
        self.process = context.Process(
            target=_base_work, args=(child, self.counter, self.results, paths, fields, labels), daemon=True
        )
        self.process.start()
        child.close()
        self.asked: dict[str, Any] | None = None

    def sets(self, say: Callable[[str], None]) -> dict[str, tuple[list[frozenset[str]], list[bool]]] | None:
        """The labelled base samples (as `_base_sets`), its statements said here; None if it died."""
        try:
            said, sets, error = self.conn.recv()
        except (EOFError, OSError):  # the process died (killed, out of memory): this one reads the files
            return None
        for line in said:
            say(line)
        if error is not None:
            raise error
        return sets

    def ask(self, strategies: Sequence[str], prompts: Sequence[str], budget: int, seed: int) -> None:
        """Start the iid curves of ``prompts`` over ``strategies`` at K = ``budget`` with ``seed``."""
        self.asked = _curves_arguments(budget, seed=seed)
        try:
            self.conn.send((tuple(strategies), list(prompts), self.asked))
        except OSError:  # the process is gone: `blocks` takes every block here
            pass

    def blocks(self, plan: SamplePlan) -> Iterator[Any]:
        """Every block's sums of ``plan``, in block order: taken here in turn with the process's."""
        done: dict[int, Any] = {}
        running = self.process.is_alive()
        for want in range(plan.blocks):
            while want not in done:
                while running:  # what the process has finished so far
                    try:
                        item = self.results.get_nowait()
                    except queue.Empty:
                        break
                    running = item is not None
                    if running:
                        done[item[0]] = item[1]
                if want in done:
                    break
                b = _take(self.counter, plan.blocks)
                if b is not None:
                    done[b] = plan.block(b)
                    continue
                # Every block is taken: wait for the process's, or compute them here if it died.
                try:
                    item = self.results.get(timeout=1.0) if running else None
                except queue.Empty:
                    running = self.process.is_alive()
                    continue
                running = item is not None
                if running:
                    done[item[0]] = item[1]
                elif want not in done:
                    done[want] = plan.block(want)
            yield done.pop(want)

    def close(self) -> None:
        """Stop the process (done or not) and wait for it."""
        self.conn.close()
        self.process.join(timeout=1.0)
        if self.process.is_alive():  # an error here left it computing blocks nobody needs
            self.process.kill()
            self.process.join()
        self.results.close()
        self.results.cancel_join_thread()


def _curves_arguments(K: int, **kwargs: Any) -> dict[str, Any]:
    """Every argument of ``IidBaseline.curves(K, **kwargs)``, defaults filled in."""
    bound = inspect.signature(IidBaseline.curves).bind(None, K, **kwargs)
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k != "self"}


def _take(counter: Any, count: int) -> int | None:
    """The next block of ``count`` from a shared counter, or None when every block is taken."""
    with counter.get_lock():
        b = counter.value
        if b >= count:
            return None
        counter.value = b + 1
    return b


def _base_work(
    conn: Any, counter: Any, results: Any, paths: Sequence[Path], fields: dict[str, Any], labels: Any
) -> None:
    """`_BaseProcess`'s work: label the base files and send their samples; then compute blocks."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops this one
    said: list[str] = []
    try:
        sets = _base_sets(_Labelled("base", paths, fields, sample_labels(labels), said.append))
        answer: tuple[Any, ...] = (said, sets, None)
    except Exception as exc:  # the parent raises it, after saying what was said before it
        sets, answer = None, (said, None, exc)
    try:
        conn.send(answer)
        if sets is None:
            return
        strategies, prompts, arguments = conn.recv()
    except (EOFError, OSError):  # the parent stopped first (its own error) or needs no curves
        return
    try:
        arguments = dict(arguments)
        plan = _iid({p: sets[p] for p in prompts}, strategies)._plan(arguments.pop("K"), **arguments)
        while (b := _take(counter, plan.blocks)) is not None:
            results.put((b, plan.block(b)))
    except Exception:  # the parent computes what is missing, and meets the error itself
        pass
    finally:
        results.put(None)


class _BaseCurves(IidBaseline):
    """An `IidBaseline` whose curves at the arguments asked of its `_BaseProcess` share its blocks."""

    job: _BaseProcess | None = None
    _shared = False

    def curves(self, K: int, **kwargs: Any) -> Any:
        """``IidBaseline.curves``; at the arguments asked of the process, its blocks shared."""
        self._shared = self.job is not None and self.job.asked == _curves_arguments(K, **kwargs)
        try:
            return super().curves(K, **kwargs)
        finally:
            self._shared = False

    def _blocks(self, plan: SamplePlan) -> Iterable[Any]:
        if self._shared and self.job is not None:
            job, self.job = self.job, None  # its blocks are shared once
            return job.blocks(plan)
        return super()._blocks(plan)


def _kept(samples: _Labelled) -> list[tuple[str, frozenset[str], bool, int | None]]:
    """The labelled samples without their text, in file order: (prompt id, match set, valid, step).

    Equal prompt ids and equal match sets are one object each, so 10^6 samples take a tuple apiece.
    """
    names: dict[str, str] = {}
    distinct: dict[frozenset[str], frozenset[str]] = {}
    return [
        (names.setdefault(s.prompt_id, s.prompt_id), distinct.setdefault(m, m), v, s.step)
        for chunk, verdicts in samples.chunks()
        for s, (m, v, _) in zip(chunk, verdicts, strict=True)
    ]


def _record(
    samples: Iterable[tuple[str, frozenset[str], bool, int | None]],
    budget: int,
    monitor: CoverageMonitor,
    by_step: StepCurves,
) -> int:
    """Feed labelled policy samples to ``monitor`` and per step to ``by_step``; the samples fed.

    Args:
        samples: (prompt id, match set, valid, step) per sample, in file order.
        budget: K.
        monitor: The policy's monitor.
        by_step: The per-step trackers.
    """
    episodes = 0
    for ids, matches, valid, sample, run, steps in _batches(samples, budget):
        valid = np.asarray(valid)
        monitor.update(
            parse_generation(ids, matches, monitor.coder, valid, sample_index=sample, run_index=run)
        )
        by_step.add(steps, ids, matches, valid)
        episodes += len(ids)
    return episodes


def score_shard(plan: dict[str, Any], shard: tuple[int, int]) -> dict[str, Any]:
    """One shard's work in a worker: its prompts' base samples and policy monitor state, labelled here.

    Args:
        plan: policy, base, fields, labels (the labeler), declared, budget: what `score` decided.
        shard: (index, count).

    Returns:
        ``base`` (per prompt: match sets, valid), ``monitor`` (a `CoverageMonitor` state), ``steps``
        (per training step: a `CoverageTracker` state), ``episodes``, ``unlabelled`` (count, first
        reason) and ``agreement`` (the confusion counts, or None).
    """
    quiet = lambda _: None  # noqa: E731 (the driver says what was detected)
    label = sample_labels(plan["labels"])
    second = plan.get("compare_with")
    agreement = (
        Agreement(sample_labels(second[1]), plan["declared"], ("labeler", second[0])) if second else None
    )
    base = _Labelled("base", plan["base"], plan["fields"], label, quiet, agreement, shard)
    base_sets = _base_sets(base)
    monitor = CoverageMonitor(
        plan["budget"], list(plan["declared"]), sinks=NullSink(), log_every=2**62, task_name=plan["task_name"]
    )
    by_step = StepCurves(plan["declared"], plan["budget"])
    policy = _Labelled("policy", plan["policy"], plan["fields"], label, quiet, agreement, shard)
    rows = ((s.prompt_id, m, v, s.step) for s, m, v in policy)
    episodes = _record(rows, plan["budget"], monitor, by_step)
    return {
        "base": base_sets,
        "monitor": monitor.state_dict(),
        "steps": {step: t.state_dict() for step, t in by_step.trackers.items()},
        "episodes": episodes,
        "unlabelled": [(p.unlabelled, p.samples, p.reason) for p in (base, policy)],
        "agreement": None if agreement is None else (agreement.confusion, agreement.same),
        "requests": (getattr(plan["labels"], "calls", 0), getattr(plan["labels"], "cached", 0)),
    }


def _batches(
    samples: Iterable[tuple[str, frozenset[str], bool, int | None]], budget: int
) -> Iterator[tuple[list, ...]]:
    """Batches of labelled policy samples: ids, match lists, valid, sample index (1..K), run index, step."""
    seen: defaultdict[str, Iterator[int]] = defaultdict(itertools.count)  # each prompt's next sample
    ordered: dict[frozenset[str], list[str]] = {}  # a few distinct match sets, each sorted once
    rows = iter(samples)
    while batch := list(itertools.islice(rows, BATCH)):
        ids = [r[0] for r in batch]
        nth = [next(seen[pid]) for pid in ids]
        for _, m, _, _ in batch:
            if m not in ordered:
                ordered[m] = sorted(m)
        yield (
            ids,
            [ordered[r[1]] for r in batch],
            [r[2] for r in batch],
            [n % budget + 1 for n in nth],
            [n // budget for n in nth],
            [r[3] for r in batch],
        )


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
    workers: int | None = None,
    name: str = "policy",
    say: Callable[[str], None] = print,
    before_writing: Callable[[], Any] | None = None,
    **monitor_options: Any,
) -> Any:
    """Coverage of the policy's generations against the base model's iid sampling and the oracle.

    Args:
        policy: The policy's generation files (JSONL or Parquet; layout detected, see `seffi.score.files`).
        base: The base model's generation files for the same prompts (its own iid samples).
        labeler: Labels each completion (`seffi.labelers`); or give ``label_field``.
        label_field: A field of the files holding each sample's strategy id(s).
        strategies: The declared strategy ids (default: the labeler's, or every id the label field names);
            with a labeler, every strategy it emits and any others that count in M.
        budget: K, the samples per run (default: the most common number of samples a prompt has in one
            training step, or in all the files when they record no step).
        fields: Field names overriding detection: id, text, score, step, prompt.
        compare_with: (name, a second labeler) whose match sets are compared with the main labeler's
            on every sample: Cohen's kappa per strategy, in ``agreement.json`` and one line.
        workers: Shard the prompts over this many Ray tasks, which label and track their shard; the
            driver merges their trackers exactly (the same numbers as one process).
        max_calls: For a labeler that calls a service (the LLM judge): stop before any call when
            labelling the files takes more requests than this.
        name: The policy's name in the report.
        say: Where the one-line statements of what was detected go.
        before_writing: Called once every file is read and checked, before anything is written
            (``seffi score --overwrite`` replaces the earlier run there).
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
    # One pass over each file: the policy's samples are labelled and kept without their text while
    # they are counted. A label field without declared strategies declares the ids the files name,
    # read as the samples are (Ray's workers and a second labeler need them before, in a first pass).
    late = label_field is not None and not strategies and not workers and compare_with is None
    if label_field is None:
        assert labeler is not None
        declared, labels = tuple(strategies or labeler.strategies), labeler
        left_out = [s for s in labeler.strategies if s not in declared]
        if left_out:
            raise SeffiError(
                f"--strategies leaves out {left_out[0]!r}, which the labeler emits; declare every strategy "
                f"of the labeler ({', '.join(labeler.strategies)})"
            )
    elif late:
        declared, labels = (), FieldLabels(None)
    else:
        declared = tuple(strategies) if strategies else _declared_labels([*base_paths, *policy_paths], fields)
        labels = FieldLabels(declared)
    label = sample_labels(labels)
    needed_calls = getattr(labels, "needed_calls", None)
    if max_calls is not None and needed_calls is not None:  # before any request to the judge
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
    policy_said: list[str] = []
    kept = None
    job = None
    if (
        not workers
        and compare_with is None
        and isinstance(labels, FieldLabels | RegexRubric)
        and sum(p.stat().st_size for p in base_paths if p.is_file()) >= BASE_PROCESS_BYTES
    ):
        job = _BaseProcess(base_paths, fields, labels)
    try:
        if workers:
            counts = _survey(policy_paths, fields, labels)  # a bad row stops here, before any output exists
        else:  # labelled here, said after the base files' statements and the strategies line
            kept = _kept(_Labelled("policy", policy_paths, fields, label, policy_said.append, agreement))
            counts = Counter((step, pid) for pid, _, _, step in kept)
        per_prompt = Counter(counts.values())
        k = int(budget) if budget is not None else max(per_prompt, key=lambda n: (per_prompt[n], n))
        if not 1 <= k <= MAX_BUDGET:
            raise SeffiError(
                f"budget must be a positive number of samples up to {MAX_BUDGET} (seffi's cap on K), got {k}"
            )
        totals: Counter[str] = Counter()
        for (_, pid), n in counts.items():
            totals[pid] += n
        # The baselines the report shows are over the prompts the gain compares: those with a run of K.
        prompts = sorted(p for p, n in totals.items() if n >= k)
        if not prompts:
            raise SeffiError(
                f"no prompt has a run of K = {k} samples (the most a prompt has is "
                f"{max(totals.values(), default=0)}): no curve and no gain; pass a smaller --budget"
            )
        plan = dict(
            policy=policy_paths, base=base_paths, fields=fields, labels=labels, declared=declared, budget=k
        )
        monitor_options.setdefault("task_name", "files")
        plan |= {"compare_with": compare_with, "task_name": monitor_options["task_name"]}
        results = _on_ray(plan, workers) if workers else None
        if results is None:
            base_sets = job.sets(say) if job is not None else None
            if base_sets is None:  # read here (small files, or the base's process died)
                base_sets = _base_sets(_Labelled("base", base_paths, fields, label, say, agreement))
        else:
            for what, paths in (("base", base_paths), ("policy", policy_paths)):
                say(f"{what} files: {next(read_samples(paths, **fields))[0].describe()}")
            base_sets = {p: v for r in results for p, v in r["base"].items()}
            for what, i in (("base", 0), ("policy", 1)):
                parts = [r["unlabelled"][i] for r in results]
                _say_unlabelled(
                    say,
                    what,
                    sum(p[0] for p in parts),
                    sum(p[1] for p in parts),
                    next((p[2] for p in parts if p[2]), ""),
                )
            if agreement is not None:
                for r in results:
                    agreement.confusion += r["agreement"][0]
                    agreement.same += r["agreement"][1]
            if hasattr(labels, "calls"):  # the judge's requests were made in the workers
                labels.calls += sum(r["requests"][0] for r in results)
                labels.cached += sum(r["requests"][1] for r in results)
        if late:
            assert kept is not None
            sets = {m for _, m, _, _ in kept} | {m for ms, _ in base_sets.values() for m in ms}
            declared = tuple(sorted(frozenset().union(*sets)))
            if not declared:
                raise SeffiError(
                    f"the label field {label_field!r} names no strategy in any file; pass --strategies"
                )
        missing = sorted(totals.keys() - base_sets.keys())
        if missing:
            raise SeffiError(
                f"{len(missing)} policy prompt(s) have no base samples (first: {clip(repr(missing[0]))}); "
                "the base files must cover every prompt"
            )
        iid = _iid({p: base_sets[p] for p in prompts}, declared, IidBaseline if job is None else _BaseCurves)
        oracle = OracleBaseline({p: {s: {s} for s in declared} for p in prompts}, strategies=list(declared))
        shown = ", ".join(declared[:8]) + (", ..." if len(declared) > 8 else "")
        say(f"strategies: {len(declared)} ({shown}); budget K = {k}")
        for line in policy_said:
            say(line)
        if before_writing is not None:
            before_writing()
        monitor = CoverageMonitor(k, list(declared), iid=iid, oracle=oracle, label=name, **monitor_options)
        by_step = StepCurves(declared, k)
        if job is not None:  # the base's process computes the report's iid curves meanwhile
            assert isinstance(iid, _BaseCurves)
            iid.job = job
            job.ask(declared, prompts, monitor.budget, monitor.seed)
        try:
            if results is None:
                assert kept is not None
                episodes = _record(kept, k, monitor, by_step)
                kept = None  # fed: freed before the report's baselines take their memory
            else:  # the workers' trackers, merged exactly
                monitor.load_states([r["monitor"] for r in results])
                by_step.merge([r["steps"] for r in results])
                episodes = sum(r["episodes"] for r in results)
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
    finally:
        if job is not None:
            job.close()

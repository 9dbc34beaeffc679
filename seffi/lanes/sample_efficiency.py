"""The corrections-to-competence runner: curves per concept and the replay-determinism gate.

Protocol (seed ``000_a8222616b533fe34``): for each concept with curriculum ``c_0..c_{n-1}`` and fixed
probe ``q``, and for every ``k = 0..n``, a *fresh* learner is taught ``c_0..c_{k-1}`` and asked ``q``.
The snapshot records ``k``, the number of expected tokens found in the response (case-insensitive,
token-bounded, in ``surface`` or ``walk_surface``), ``vault_hits`` and a ``trace_hash`` that the runner
computes itself from the taught corrections, their review outcomes and the probe response — a learner
cannot report its own determinism. Each snapshot is then replayed on a second fresh learner; the
fraction of identical hashes is ``replay_determinism`` and the only gate (>= 0.95). Everything else
is reported as data ("plot, do not threshold").

Saturation uses the number of distinct expected tokens as its target. The contract says
``len(curriculum)``; the two are equal in every linted pack (one new token per correction), and the
token count is the only target a learner can actually reach when an unlinted pack differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from seffi.lanes._text import count_token_hits
from seffi.lanes.hashing import chain, first_divergence
from seffi.lanes.packs import Concept, ConceptError

#: The structural gate: curves are meaningful only when (almost) every snapshot replays identically.
GATE_THRESHOLD = 0.95


class TeachOutcome(BaseModel):
    """The learner's review verdict on one correction."""

    model_config = ConfigDict(frozen=True, strict=True)

    accepted: bool
    reason: str | None = None


class ProbeResponse(BaseModel):
    """The learner's answer to a probe.

    ``surface`` is what it says, ``walk_surface`` what its association walk adds, ``vault_hits`` how
    many stored items it retrieved directly.
    """

    model_config = ConfigDict(frozen=True, strict=True)

    surface: str
    walk_surface: str = ""
    vault_hits: int = Field(0, ge=0)


@runtime_checkable
class Learner(Protocol):
    """Anything that can be taught corrections and probed."""

    def teach(self, correction: str) -> TeachOutcome: ...

    def probe(self, question: str) -> ProbeResponse: ...


#: A zero-argument callable that builds a fresh learner (a class works).
LearnerFactory = Callable[[], Learner]


class CurvePoint(BaseModel):
    """One snapshot: the learner taught ``k`` corrections, then probed (plus its replay)."""

    k: int
    cumulative_token_hit_count: int
    vault_hits: int
    accepted: int
    trace_hash: str
    replay_trace_hash: str
    replay_identical: bool
    #: ``"correction[i]"`` or ``"probe"``: the first step whose chained hash differed in the replay.
    first_divergent_step: str | None = None


class ConceptResult(BaseModel):
    """The curve of one concept and its summary numbers (``None`` = never reached)."""

    id: str
    split: str
    probe: str
    n_corrections: int
    n_expected_tokens: int
    curve: list[CurvePoint]
    corrections_to_first_hit: int | None = None
    corrections_to_saturation: int | None = None
    saturation_score: float | None = None
    replay_determinism: float | None = None
    error: str | None = None


class Divergence(BaseModel):
    """Where a replay first differed: concept, snapshot ``k`` and the step inside the snapshot."""

    concept: str
    k: int
    step: str


class Aggregate(BaseModel):
    """Pack-level numbers over the concepts that ran without error."""

    n_concepts: int
    n_evaluated: int
    n_errors: int
    mean_corrections_to_first_hit: float | None
    mean_corrections_to_saturation: float | None
    saturation_rate: float | None
    replay_determinism: float | None
    n_snapshots: int
    n_identical_replays: int
    gate_threshold: float = GATE_THRESHOLD
    gate_passed: bool
    first_divergence: Divergence | None = None


class RecallControl(BaseModel):
    """The recall control's curves: what a learner that repeats every correction scores.

    ``hits`` maps each concept id to the control's cumulative token-hit count after k = 0..n
    corrections (the same probe and metric as the learner's curve); ``aggregate`` holds its pack-level
    numbers (first hit, saturation, saturation rate) for a side-by-side reading.
    """

    learner: str
    hits: dict[str, list[int]]
    aggregate: Aggregate


class LaneReport(BaseModel):
    """The full lane report (what ``report.json`` holds)."""

    lane: Literal["sample-efficiency"] = "sample-efficiency"
    pack: dict[str, str]
    learner: str
    concepts: list[ConceptResult]
    aggregate: Aggregate
    errors: list[str]
    #: The recall control (`seffi.lanes.learners.RecallLearner`) on the same concepts.
    recall_control: RecallControl | None = None


class LearnerFailure(Exception):
    """A learner broke the protocol inside one concept (raised, wrong type); the run continues."""


def _step_label(index: int, n_taught: int) -> str:
    return f"correction[{index}]" if index < n_taught else "probe"


def describe_exception(exc: BaseException) -> str:
    """``"Type: message"`` of an exception raised by learner code, which may not even print itself."""
    try:
        text = str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException:  # a learner's __str__ is learner code too
        text = "<unprintable>"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _call(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except KeyboardInterrupt:  # the person at the keyboard stops the whole run
        raise
    except BaseException as exc:
        # Any learner bug is that concept's error, never the end of the run. BaseException too: a
        # learner calling sys.exit(0) would otherwise end the lane with status 0 and no report.json.
        raise LearnerFailure(f"{what} raised {describe_exception(exc)}") from exc


def _coerce(value: Any, model: type[BaseModel], what: str) -> Any:
    """``value`` as an exact ``model`` instance, or `LearnerFailure`.

    Reading a returned object can run learner code (a subclass's properties, a dict subclass's
    ``__getitem__``), so every failure while reading it is the concept's error too. A subclass
    instance is rebuilt as the exact model, whose fields are then plain validated values.
    """
    try:
        if type(value) is model:
            return value
        if isinstance(value, model):
            return model(**{field: getattr(value, field) for field in model.model_fields})
        if isinstance(value, dict):  # a plain dict with the right fields is accepted (duck-typed learners)
            return model.model_validate(value)
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise LearnerFailure(f"{what} returned an invalid {model.__name__}: {msgs}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise LearnerFailure(f"reading what {what} returned raised {describe_exception(exc)}") from exc
    raise LearnerFailure(f"{what} returned {type(value).__name__}, expected {model.__name__}")


class Snapshot(BaseModel):
    """One run of (curriculum[:k], probe) on a fresh learner."""

    hashes: list[str]
    response: ProbeResponse
    accepted: int

    @property
    def trace_hash(self) -> str:
        return self.hashes[-1]


def run_snapshot(factory: LearnerFactory, corrections: Sequence[str], probe: str) -> Snapshot:
    """Teach ``corrections`` to a fresh learner, ask ``probe`` and hash every step.

    Raises:
        LearnerFailure: the factory or learner raised, or returned the wrong type.
    """
    learner = _call("the learner factory", factory)
    teach = _call("looking up teach()", getattr, learner, "teach", None)
    ask = _call("looking up probe()", getattr, learner, "probe", None)
    if not (callable(teach) and callable(ask)):
        raise LearnerFailure(
            f"the learner factory returned {type(learner).__name__}, which lacks teach()/probe()"
        )
    steps: list[dict[str, Any]] = []
    accepted = 0
    for i, correction in enumerate(corrections):
        outcome = _coerce(_call(f"teach(correction[{i}])", teach, correction), TeachOutcome, "teach")
        accepted += outcome.accepted
        steps.append(
            {
                "step": "teach",
                "index": i,
                "correction": correction,
                "accepted": outcome.accepted,
                "reason": outcome.reason,
            }
        )
    response = _coerce(_call("probe", ask, probe), ProbeResponse, "probe")
    steps.append(
        {
            "step": "probe",
            "question": probe,
            "surface": response.surface,
            "walk_surface": response.walk_surface,
            "vault_hits": response.vault_hits,
        }
    )
    return Snapshot(hashes=chain(steps), response=response, accepted=accepted)


def curve_metrics(hits: Sequence[int], n_tokens: int) -> tuple[int | None, int | None, float]:
    """First hit, saturation and saturation score of a hit curve.

    Args:
        hits: int sequence, shape (n + 1,): hit count after k = 0..n corrections.
        n_tokens: the saturation target (distinct expected tokens), > 0.

    Returns:
        ``(corrections_to_first_hit, corrections_to_saturation, saturation_score)``: the smallest k
        with >= 1 hit (``None`` if never), the smallest k with all tokens hit (``None`` if never), and
        the final hit count over ``n_tokens``.
    """
    first = next((k for k, h in enumerate(hits) if h >= 1), None)
    saturated = next((k for k, h in enumerate(hits) if h >= n_tokens), None)
    return first, saturated, hits[-1] / n_tokens


def run_concept(concept: Concept, factory: LearnerFactory) -> ConceptResult:
    """Measure one concept's curve with replays. Learner failures are returned in ``error``."""
    n_tokens = len({t.casefold() for t in concept.expected_tokens})
    result = ConceptResult(
        id=concept.id,
        split=concept.split,
        probe=concept.probe,
        n_corrections=len(concept.curriculum),
        n_expected_tokens=n_tokens,
        curve=[],
    )
    if not concept.curriculum:
        result.error = str(ConceptError(concept=concept.id, problem="empty curriculum"))
        return result
    if n_tokens == 0:
        result.error = str(ConceptError(concept=concept.id, problem="no expected tokens"))
        return result
    for k in range(len(concept.curriculum) + 1):
        taught = concept.curriculum[:k]
        try:
            first = run_snapshot(factory, taught, concept.probe)
            replay = run_snapshot(factory, taught, concept.probe)
        except LearnerFailure as exc:
            result.error = str(ConceptError(concept=concept.id, problem=f"{exc} (snapshot k={k})"))
            return result
        where = first_divergence(first.hashes, replay.hashes)
        result.curve.append(
            CurvePoint(
                k=k,
                cumulative_token_hit_count=count_token_hits(
                    concept.expected_tokens, first.response.surface, first.response.walk_surface
                ),
                vault_hits=first.response.vault_hits,
                accepted=first.accepted,
                trace_hash=first.trace_hash,
                replay_trace_hash=replay.trace_hash,
                replay_identical=where is None,
                first_divergent_step=None if where is None else _step_label(where, k),
            )
        )
    hits = [p.cumulative_token_hit_count for p in result.curve]
    (result.corrections_to_first_hit, result.corrections_to_saturation, result.saturation_score) = (
        curve_metrics(hits, n_tokens)
    )
    result.replay_determinism = sum(p.replay_identical for p in result.curve) / len(result.curve)
    return result


def fmt_number(x: float | None) -> str:
    """The one rounding of lane numbers in the console, the figure and the README: 3 decimals at most.

    ``None`` is "-", an int is itself, a float is rounded to 3 decimals with trailing zeros dropped
    (1.125 -> "1.125", 1.1875 -> "1.188", 1.0 -> "1.0"); report.json keeps the exact value.
    """
    if x is None:
        return "-"
    if isinstance(x, int):
        return str(x)
    text = f"{x:.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(results: Sequence[ConceptResult], *, n_unloadable: int = 0) -> Aggregate:
    """Pack-level numbers over the concepts without error.

    ``n_unloadable`` malformed concepts (that never ran) count in ``n_concepts`` and ``n_errors``.

    ``saturation_rate`` counts concepts at full coverage *at curriculum end* (``saturation_score ==
    1``), whereas ``mean_corrections_to_saturation`` averages over concepts that were saturated at any
    k — a learner that saturates and then forgets counts in the second, not the first.
    ``replay_determinism`` pools all snapshots (each snapshot weighs the same).
    """
    ok = [r for r in results if r.error is None]
    points = [p for r in ok for p in r.curve]
    identical = sum(p.replay_identical for p in points)
    determinism = identical / len(points) if points else None
    divergence = next(
        (
            Divergence(concept=r.id, k=p.k, step=p.first_divergent_step or "")
            for r in ok
            for p in r.curve
            if not p.replay_identical
        ),
        None,
    )
    return Aggregate(
        n_concepts=len(results) + n_unloadable,
        n_evaluated=len(ok),
        n_errors=len(results) - len(ok) + n_unloadable,
        mean_corrections_to_first_hit=_mean(
            [r.corrections_to_first_hit for r in ok if r.corrections_to_first_hit is not None]
        ),
        mean_corrections_to_saturation=_mean(
            [r.corrections_to_saturation for r in ok if r.corrections_to_saturation is not None]
        ),
        saturation_rate=(sum(r.saturation_score == 1.0 for r in ok) / len(ok)) if ok else None,
        replay_determinism=determinism,
        n_snapshots=len(points),
        n_identical_replays=identical,
        gate_passed=determinism is not None and determinism >= GATE_THRESHOLD,
        first_divergence=divergence,
    )


def run_lane(
    concepts: Iterable[Concept],
    factory: LearnerFactory,
    *,
    pack: dict[str, str] | None = None,
    learner: str = "",
    load_errors: Sequence[ConceptError] = (),
    on_concept: Callable[[ConceptResult], None] | None = None,
    control: LearnerFactory | None = None,
    control_name: str = "seffi.lanes.learners:RecallLearner",
) -> LaneReport:
    """Run every concept and assemble the report.

    Args:
        concepts: the concepts to measure (e.g. ``pack.select("public")``).
        factory: zero-argument callable building a fresh learner.
        pack: pack metadata copied into the report (name, version, split, source).
        learner: how the learner was specified, copied into the report.
        load_errors: concept errors found while loading the pack; reported alongside learner errors.
        on_concept: called after each concept (progress display).
        control: factory of the recall control (e.g.
            [`seffi.lanes.learners.RecallLearner`][seffi.lanes.RecallLearner]), measured on the same concepts
            into ``recall_control``; None leaves it out.
        control_name: how the control is named in the report.

    Returns:
        The report; ``errors`` lists every concept error and, when no concept produced a curve, one
        last line saying so.
    """
    results: list[ConceptResult] = []
    concepts_run = list(concepts)
    for concept in concepts_run:
        result = run_concept(concept, factory)
        results.append(result)
        if on_concept is not None:
            on_concept(result)
    errors = [str(e) for e in load_errors] + [r.error for r in results if r.error]
    agg = aggregate(results, n_unloadable=len(load_errors))
    if agg.n_evaluated == 0:
        # Nothing was measured, so there is no gate to pass or fail: this is the run's error (the
        # per-concept errors above say why), not a gate failure.
        errors.append(
            "no concepts to run (the pack or split is empty)"
            if agg.n_concepts == 0
            else f"no concept produced a complete curve ({agg.n_errors} of {agg.n_concepts} failed)"
        )
    recall = None
    if control is not None:
        controls = [run_concept(c, control) for c in concepts_run]
        recall = RecallControl(
            learner=control_name,
            hits={r.id: [p.cumulative_token_hit_count for p in r.curve] for r in controls if r.curve},
            aggregate=aggregate(controls),
        )
    return LaneReport(
        pack=dict(pack or {}),
        learner=learner,
        concepts=results,
        aggregate=agg,
        errors=errors,
        recall_control=recall,
    )

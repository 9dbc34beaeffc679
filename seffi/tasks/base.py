"""The task contract: inputs, reference traces per strategy, a never-raising validator, a base sampler.

``validate_y_text(x, y_text)`` says which strategies a trace followed (several when their traces
coincide on ``x``); a right procedure with a wrong answer keeps its matches with ``valid=False``,
which separates *raw* from *valid* coverage.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar, get_args, get_origin

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from seffi._seeding import SeedLike, rngs, seed_from_text, spawn, stable_id
from seffi.errors import SeffiError

#: Longest text ``validate_y_text`` will parse; longer input is rejected in O(1) with a reason.
MAX_TRACE_CHARS = 100_000


def coerce_text(y_text: Any, noun: str = "text") -> tuple[str, None] | tuple[None, str]:
    """``(text, None)`` for usable text (UTF-8 bytes decoded), else ``(None, why)`` naming ``noun``."""
    if isinstance(y_text, bytes | bytearray | memoryview):
        try:
            y_text = bytes(y_text).decode("utf-8")
        except UnicodeDecodeError:
            return None, "bytes are not valid UTF-8"
    if not isinstance(y_text, str):
        return None, f"expected text, got {type(y_text).__name__}"
    if len(y_text) > MAX_TRACE_CHARS:
        return None, f"{noun} too long ({len(y_text)} > {MAX_TRACE_CHARS} characters)"
    if not y_text.strip():
        return None, f"empty {noun}"
    return y_text, None


class ValidationResult(BaseModel):
    """What a validator concluded about one generated trace.

    Attributes:
        parse_ok: The text had the trace format (lines of known words, an answer line).
        valid: The trace is a correct solution: legal steps and the right answer.
        strategy_matches: Strategies whose procedure the steps follow (may be several, or none).
        error: Why parsing or validation failed, for people; ``None`` when valid.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    parse_ok: bool
    valid: bool
    strategy_matches: frozenset[str] = frozenset()
    error: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ValidationResult:
        if not self.parse_ok and (self.valid or self.strategy_matches):
            raise ValueError("an unparsable trace can be neither valid nor match a strategy")
        return self

    @classmethod
    def unparsable(cls, reason: str) -> ValidationResult:
        """A parse failure with ``reason``."""
        return cls(parse_ok=False, valid=False, error=reason)

    @classmethod
    def invalid(cls, reason: str, matches: frozenset[str] = frozenset()) -> ValidationResult:
        """A parsed but incorrect trace (``matches``: a right procedure with a wrong answer)."""
        return cls(parse_ok=True, valid=False, strategy_matches=matches, error=reason)

    @classmethod
    def correct(cls, matches: frozenset[str] | set[str] = frozenset()) -> ValidationResult:
        """A correct trace following ``matches`` (empty: off-strategy)."""
        return cls(parse_ok=True, valid=True, strategy_matches=frozenset(matches))


class TaskInput(BaseModel):
    """One input ``x``; tasks subclass it with their fields. ``id`` hashes the task name and fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str


class TaskConfig(BaseModel):
    """Settings of a task's base sampler, shared by all tasks; tasks add their own fields.

    Attributes:
        skew: Zipf exponent of the base sampler's strategy probabilities (0 = uniform); which
            strategy is rare is drawn per input from its id.
        invalid_rate: Probability that a base sample is an incorrect trace.
        off_strategy_rate: Probability that a base sample is correct but follows no strategy.
        ordered_fields: Class-level pairs ``(low, high)`` of fields that must hold ``low <= high``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ordered_fields: ClassVar[tuple[tuple[str, str], ...]] = ()

    skew: float = Field(1.0, ge=0.0, le=10.0)
    invalid_rate: float = Field(0.1, ge=0.0, le=1.0)
    off_strategy_rate: float = Field(0.05, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> TaskConfig:
        if self.invalid_rate + self.off_strategy_rate >= 1.0:
            raise ValueError("invalid_rate + off_strategy_rate must be < 1 (some samples follow a strategy)")
        for low, high in self.ordered_fields:
            if getattr(self, low) > getattr(self, high):
                raise ValueError(f"{low} must be <= {high}")
        return self


ModeKind = Literal["strategy", "invalid", "off_strategy"]


@dataclass(frozen=True)
class BaseMode:
    """One branch of the base sampler: its kind, its procedure (or None), its probability."""

    kind: ModeKind
    strategy: str | None
    probability: float


@dataclass(frozen=True)
class TrainingRow:
    """A labelled row for pretraining a generator (the validator, not the label, attributes outputs)."""

    input_id: str
    prompt: str
    y_text: str
    kind: ModeKind
    strategy: str | None


class Vocabulary:
    """A word-level vocabulary: ids 0..3 are ``<pad>``, ``<eos>``, ``<unk>`` and newline, then words.

    ``encode`` maps unknown words to ``<unk>``; ``decode(encode(t))`` is ``t`` in canonical form.
    """

    SPECIALS: ClassVar[tuple[str, ...]] = ("<pad>", "<eos>", "<unk>", "\n")
    PAD: ClassVar[int] = 0
    EOS: ClassVar[int] = 1
    UNK: ClassVar[int] = 2
    NEWLINE: ClassVar[int] = 3

    def __init__(self, words: tuple[str, ...] | list[str]) -> None:
        words = tuple(dict.fromkeys(words))  # de-duplicate, keep order
        if bad := [w for w in words if not w or any(c.isspace() for c in w) or w in self.SPECIALS]:
            raise ValueError(f"vocabulary words must be non-empty, without whitespace or specials: {bad!r}")
        self.tokens: tuple[str, ...] = self.SPECIALS + words
        self._index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and other.tokens == self.tokens

    def __hash__(self) -> int:
        return hash(self.tokens)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no ``<eos>`` appended)."""
        return [self._index.get(w, self.UNK) for w in re.findall(r"\n|\S+", text)]

    def decode(self, ids: Any) -> str:
        """Text of ``ids`` up to the first ``<eos>``; ``<pad>`` is skipped, ``<unk>`` kept as a word."""
        ids = list(map(int, ids))
        if self.EOS in ids:
            ids = ids[: ids.index(self.EOS)]
        n = len(self.tokens)
        words = [self.tokens[i] if 0 <= i < n else "<unk>" for i in ids if i != self.PAD]
        return "\n".join(line.strip(" ") for line in " ".join(words).split("\n"))


X = TypeVar("X", bound=TaskInput)
C = TypeVar("C", bound=TaskConfig)
R = TypeVar("R")


class Task(abc.ABC, Generic[X, C]):
    """A family of inputs with several solution strategies and a validator that attributes traces.

    Subclasses set ``name`` and implement the abstract methods; ``input_cls`` and ``config_cls`` come
    from ``Task[Input, Config]`` unless the class body sets them.
    """

    name: ClassVar[str]
    input_cls: ClassVar[type[TaskInput]]
    config_cls: ClassVar[type[TaskConfig]] = TaskConfig

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            if isinstance(origin := get_origin(base), type) and issubclass(origin, Task):
                for arg in (a for a in get_args(base) if isinstance(a, type)):  # not a type variable
                    for attr, kind in (("input_cls", TaskInput), ("config_cls", TaskConfig)):
                        if issubclass(arg, kind) and attr not in cls.__dict__:  # the class body wins
                            setattr(cls, attr, arg)

    def __init__(self, config: C | None = None, **overrides: Any) -> None:
        if config is not None and overrides:
            raise ValueError("pass either a config object or keyword overrides, not both")
        self.config: C = config if config is not None else self.config_cls(**overrides)  # type: ignore[assignment]
        if not isinstance(self.config, self.config_cls):
            raise ValueError(
                f"{self.name} expects a {self.config_cls.__name__}, got {type(self.config).__name__}"
            )
        self._solve_cache: dict[tuple[str, str], str | None] = {}
        self._modes_cache: dict[str, tuple[list[BaseMode], np.ndarray]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"

    @abc.abstractmethod
    def strategies(self) -> tuple[str, ...]:
        """The declared strategy ids; their number is the default coverage denominator M_x."""

    @abc.abstractmethod
    def _generate(self, rng: np.random.Generator) -> dict[str, Any]:
        """Draw the fields of one input (everything but ``id``) from ``rng``."""

    @abc.abstractmethod
    def prompt(self, x: X) -> str:
        """The text a generator is conditioned on."""

    @abc.abstractmethod
    def solve(self, x: X, strategy: str) -> str | None:
        """The reference trace of ``strategy`` on ``x``; ``None`` when the strategy has no valid trace."""

    @abc.abstractmethod
    def _validate(self, x: X, y_text: str) -> ValidationResult:
        """Attribute a trace. Called only with a ``str`` of at most ``MAX_TRACE_CHARS`` characters."""

    @abc.abstractmethod
    def off_strategy_trace(self, x: X, rng: np.random.Generator) -> str:
        """A correct trace that follows none of the strategies (validates with empty matches)."""

    @abc.abstractmethod
    def invalid_trace(self, x: X, strategy: str, rng: np.random.Generator) -> str:
        """``strategy``'s procedure with a wrong answer: ``valid=False``, the matches of ``solve``.

        The matches must not depend on ``rng``: the exact base law validates one per strategy.
        """

    @abc.abstractmethod
    def vocabulary(self) -> Vocabulary:
        """Words covering every prompt and reference trace under this config."""

    def make_inputs(self, n: int, seed: SeedLike = 0) -> list[X]:
        """``n`` distinct inputs, the i-th from the i-th stream spawned from ``seed`` (prefix-stable)."""
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a non-negative int, got {n!r}")
        inputs: dict[str, X] = {}
        for rng in rngs(seed, n):
            for _ in range(1000):
                x = self.make_input(**self._generate(rng))
                if x.id not in inputs:
                    break
            else:  # the config's input space is smaller than n (e.g. hanoi with 2-4 disks has 18)
                raise SeffiError(
                    f"{self.name}: could not draw {n} distinct inputs (found {len(inputs)}); "
                    f"widen the task config ({self.config!r}) or ask for fewer inputs"
                )
            inputs[x.id] = x
        return list(inputs.values())

    def make_input(self, **fields: Any) -> X:
        """Build an input from its fields, computing the content-hashed id."""
        payload = self.input_cls.model_construct(id="", **fields).model_dump(mode="json", exclude={"id"})
        return self.input_cls(id=stable_id(self.name, payload), **fields)  # type: ignore[return-value]

    def validate_y_text(self, x: X, y_text: Any) -> ValidationResult:
        """Which strategies ``y_text`` followed on ``x``; never raises (junk gives ``parse_ok=False``)."""
        text, reason = coerce_text(y_text, noun="trace")
        if text is None:
            return ValidationResult.unparsable(reason)
        try:
            return self._validate(x, text)
        except Exception as exc:  # a validator bug must not crash training; tests assert it never fires
            return ValidationResult.unparsable(f"internal validator error: {type(exc).__name__}: {exc}")

    def reference(self, x: X, strategy: str) -> str | None:
        """Cached ``solve`` (reference traces are pure functions of the input)."""
        return self._cached(self._solve_cache, x, strategy, self.solve)

    def _cached(
        self, cache: dict[tuple[str, str], R], x: X, strategy: str, compute: Callable[[X, str], R]
    ) -> R:
        key = (x.id, strategy)
        if key not in cache:
            if strategy not in self.strategies():
                raise ValueError(f"{self.name}: unknown strategy {strategy!r}; known: {self.strategies()}")
            cache[key] = compute(x, strategy)
        return cache[key]

    def feasible_strategies(self, x: X) -> tuple[str, ...]:
        """Strategies that have a valid trace on ``x`` (constraints can make some impossible)."""
        return tuple(s for s in self.strategies() if self.reference(x, s) is not None)

    def reference_match_sets(self, x: X) -> dict[str, frozenset[str]]:
        """Match set of each feasible strategy's reference trace (what the no-repeat oracle emits)."""
        return {
            s: self.validate_y_text(x, self.reference(x, s)).strategy_matches
            for s in self.feasible_strategies(x)
        }

    def strategy_weights(self, x: X) -> dict[str, float]:
        """The base sampler's strategy law given an on-strategy trace: Zipf over an id-seeded ranking."""
        feasible = self.feasible_strategies(x)
        if not feasible:
            return {}
        order = np.random.default_rng(seed_from_text(self.name, x.id, "rank")).permutation(len(feasible))
        w = (order + 1.0) ** (-self.config.skew)
        w = w / w.sum()
        return {s: float(wi) for s, wi in zip(feasible, w, strict=True)}

    def base_modes(self, x: X) -> list[BaseMode]:
        """Every branch of the base sampler with its exact probability (they sum to 1)."""
        weights = self.strategy_weights(x)
        inv, off = self.config.invalid_rate, self.config.off_strategy_rate
        if not weights:  # nothing feasible: every sample is off-strategy or invalid-free junk
            return [BaseMode("off_strategy", None, 1.0)]
        on = 1.0 - inv - off
        modes = [BaseMode("strategy", s, on * w) for s, w in weights.items()]
        if inv > 0:
            modes += [BaseMode("invalid", s, inv * w) for s, w in weights.items()]
        if off > 0:
            modes.append(BaseMode("off_strategy", None, off))
        return modes

    def base_distribution(self, x: X) -> dict[str, float]:
        """Probability that a base sample is each strategy's correct reference (rest: `base_remainder`)."""
        dist = dict.fromkeys(self.strategies(), 0.0)
        for m in self.base_modes(x):
            if m.kind == "strategy" and m.strategy is not None:
                dist[m.strategy] += m.probability
        return dist

    def base_remainder(self, x: X) -> dict[str, float]:
        """The base sampler's mass outside `base_distribution`: ``{"invalid": p, "off_strategy": q}``."""
        out = {"invalid": 0.0, "off_strategy": 0.0}
        for m in self.base_modes(x):
            if m.kind != "strategy" or m.strategy is None:
                out[m.kind] += m.probability
        return out

    def base_match_distribution(self, x: X, *, valid_only: bool = False) -> dict[frozenset[str], float]:
        """The exact law ``{match set: probability}`` of a base sample (``valid_only``: if valid)."""
        probe = np.random.default_rng(seed_from_text(self.name, x.id, "probe"))
        law: dict[frozenset[str], float] = {}
        for m in self.base_modes(x):
            if m.kind == "off_strategy" or m.strategy is None:
                matches: frozenset[str] = frozenset()
            elif m.kind == "invalid":
                res = self.validate_y_text(x, self.invalid_trace(x, m.strategy, probe))
                matches = frozenset() if valid_only else res.strategy_matches
            else:
                matches = self.validate_y_text(x, self.reference(x, m.strategy)).strategy_matches
            law[matches] = law.get(matches, 0.0) + m.probability
        return law

    def sample_mode(self, x: X, rng: np.random.Generator) -> BaseMode:
        """Draw one branch of the base sampler."""
        if x.id not in self._modes_cache:  # sampling is the hot path of Monte Carlo and training rows
            modes = self.base_modes(x)
            p = np.array([m.probability for m in modes])
            self._modes_cache[x.id] = (modes, p / p.sum())
        modes, p = self._modes_cache[x.id]
        return modes[int(rng.choice(len(modes), p=p))]

    def emit(self, x: X, mode: BaseMode, rng: np.random.Generator) -> str:
        """The trace a mode produces."""
        if mode.kind == "off_strategy" or mode.strategy is None:
            return self.off_strategy_trace(x, rng)
        if mode.kind == "invalid":
            return self.invalid_trace(x, mode.strategy, rng)
        trace = self.reference(x, mode.strategy)
        assert trace is not None  # base_modes only lists feasible strategies
        return trace

    def sample_y_text(self, x: X, rng: np.random.Generator) -> str:
        """One draw of the base sampler (the iid base model) for ``x``."""
        return self.emit(x, self.sample_mode(x, rng), rng)

    def training_rows(self, n_inputs: int, rows_per_input: int, seed: SeedLike = 0) -> Iterator[TrainingRow]:
        """Labelled rows (x, y_text, strategy) drawn with the base skew, for pretraining a generator."""
        input_seed, row_seed = spawn(seed, 2)
        inputs = self.make_inputs(n_inputs, input_seed)
        for x, rng in zip(inputs, rngs(row_seed, n_inputs), strict=True):
            for _ in range(rows_per_input):
                mode = self.sample_mode(x, rng)
                yield TrainingRow(x.id, self.prompt(x), self.emit(x, mode, rng), mode.kind, mode.strategy)

    def describe(self) -> Mapping[str, Any]:
        """Name, strategies and config, for listings and reports."""
        return {"name": self.name, "strategies": list(self.strategies()), "config": self.config.model_dump()}


_REGISTRY: dict[str, type[Task[Any, Any]]] = {}
T = TypeVar("T", bound=type)


def register_task(cls: T) -> T:
    """Class decorator adding a task to the registry under ``cls.name``."""
    name = cls.name  # type: ignore[attr-defined]
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"a task named {name!r} is already registered ({_REGISTRY[name].__qualname__})")
    _REGISTRY[name] = cls  # type: ignore[assignment]
    return cls


def list_tasks() -> list[str]:
    """Names of all registered tasks, sorted."""
    return sorted(_REGISTRY)


def task_class(name: str) -> type[Task[Any, Any]]:
    """The class registered as ``name``; a `SeffiError` listing the known names otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SeffiError(f"unknown task {name!r}; known tasks: {', '.join(list_tasks())}") from None


def get_task(name: str, **config: Any) -> Task[Any, Any]:
    """Instantiate a registered task with config overrides (unknown keys are an error)."""
    return task_class(name)(**config)

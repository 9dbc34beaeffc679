"""Labelers named on the command line: a field of the file, a rubric file, or a Python entry point."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from seffi._convert import clip
from seffi.errors import SeffiError
from seffi.labelers import CallableLabeler, Labeler, RegexRubric
from seffi.score.files import Sample

__all__ = ["FieldLabels", "label_input", "load_entry_point", "load_rubric", "sample_labels"]


class FieldLabels:
    """Strategy ids read from a field of each row: one id, a list of ids, or null/empty for none.

    Args:
        strategies: The declared ids; a label outside them is an error naming the row's prompt.
            None: any id (the declared ones are then the ids the files name).
    """

    def __init__(self, strategies: Iterable[str] | None) -> None:
        self.strategies = tuple(strategies or ())
        self._known = None if strategies is None else frozenset(self.strategies)
        self._seen: dict[Any, frozenset[str]] = {}

    def __call__(self, sample: Sample) -> frozenset[str]:
        value = sample.label
        key = tuple(value) if type(value) is list else value
        try:  # a few distinct labels among 10^6 rows: each checked once
            return self._seen[key]
        except (KeyError, TypeError):  # new, or not hashable (then not a valid label either)
            pass
        ids = [] if value is None else [value] if isinstance(value, str) else value
        if not isinstance(ids, list) or not all(isinstance(s, str) for s in ids):
            raise SeffiError(
                f"prompt {clip(repr(sample.prompt_id))}: the label field holds {clip(repr(value))}; "
                "need an id or a list of ids"
            )
        unknown = set(ids) - self._known if self._known is not None else ()
        if unknown:
            raise SeffiError(
                f"prompt {clip(repr(sample.prompt_id))}: label {clip(repr(sorted(unknown)[0]))} is not a "
                "declared strategy "
                f"({', '.join(self.strategies)})"
            )
        out = self._seen[key] = frozenset(ids)
        return out


def load_rubric(path: str | Path) -> RegexRubric:
    """A `RegexRubric` from a YAML file ``{strategy: regex, ..., valid: regex}`` (``valid`` optional).

    Raises:
        SeffiError: The file is missing, not YAML, not a mapping of strings, or a regex does not compile.
    """
    try:
        spec = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SeffiError(f"{path}: cannot read the rubric ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise SeffiError(f"{path}: cannot read the rubric (not UTF-8: {exc})") from None
    except yaml.YAMLError as exc:
        raise SeffiError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(spec, dict) or not spec or not all(isinstance(v, str) for v in spec.values()):
        raise SeffiError(f"{path}: a rubric is a mapping {{strategy: regex}} with an optional valid: regex")
    valid = spec.pop("valid", None)
    if not spec:
        raise SeffiError(f"{path}: the rubric declares no strategy")
    try:
        return RegexRubric({str(k): v for k, v in spec.items()}, valid=valid)
    except ValueError as exc:
        raise SeffiError(f"{path}: {exc}") from None


def load_entry_point(spec: str, strategies: Iterable[str] | None) -> Labeler:
    """The labeler at ``module:attribute``: a `Labeler`, or a function ``fn(x, text)`` with ``strategies``.

    Raises:
        SeffiError: The module or attribute is missing, or a plain function comes without strategies.
    """
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise SeffiError(f"--labeler {spec!r}: need module:function")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # any error of the user's module as it is imported: one line
        raise SeffiError(f"--labeler {spec!r}: {exc.__class__.__name__}: {exc}") from None
    # A function with a ``strategies`` attribute passes the Protocol's check, yet returns ids.
    if isinstance(obj, Labeler) and not inspect.isroutine(obj):
        return obj
    if not callable(obj):
        raise SeffiError(f"--labeler {spec!r} is not callable")
    declared = strategies or getattr(obj, "strategies", None)
    if not declared:
        raise SeffiError(f"--labeler {spec!r}: a function labeler needs --strategies")
    return CallableLabeler(obj, strategies=tuple(declared))


Verdict = tuple[frozenset[str], bool, str | None]


def label_input(s: Sample) -> Any:
    """What a labeler gets as ``x``: the prompt text where the file has it, else the prompt id."""
    return s.prompt if s.prompt is not None else s.prompt_id


def sample_labels(labeler: Labeler | FieldLabels) -> Callable[[Sequence[Sample]], list[Verdict]]:
    """``samples -> [(match set, valid, why it could not be labelled or None)]``.

    A sample is valid when the labeler says so and the file does not score it incorrect; a text the
    labeler cannot parse (not a string, empty, too long) matches nothing and is not valid. A labeler
    with ``label_many`` (the LLM judge) gets each batch in one call.
    """
    if isinstance(labeler, FieldLabels):
        return lambda samples: [(labeler(s), s.correct is not False, None) for s in samples]
    many = getattr(labeler, "label_many", None)

    def label(samples: Sequence[Sample]) -> list[Verdict]:
        pairs = [(label_input(s), s.text) for s in samples]
        results = many(pairs) if many is not None else [labeler(x, t) for x, t in pairs]
        return [
            (
                frozenset(r.strategy_matches),
                r.parse_ok and r.valid and s.correct is not False,
                r.error if not r.parse_ok else None,
            )
            for s, r in zip(samples, results, strict=True)
        ]

    return label

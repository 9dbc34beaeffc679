"""Concept packs: the JSON model, a per-concept tolerant loader and the shipped standard pack.

A pack is ``{"name", "version", "concepts": [{"id", "split", "probe", "expected_tokens",
"curriculum"}]}``. A broken pack *file* (unreadable, not JSON, no concept list) is a
`SeffiError`; a broken *concept* is reported as a [`ConceptError`][seffi.lanes.ConceptError] naming it,
and the other concepts still load, so one typo does not throw away a whole run.
The model checks structure only; the anti-overfitting discipline lives in `seffi.lanes.lint`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from seffi.errors import SeffiError
from seffi.report.safe_load import read_text

Split = Literal["public", "holdout"]
#: Split selector accepted by `ConceptPack.select` and the CLI.
SPLITS: tuple[str, ...] = ("public", "holdout", "all")
#: File name (inside ``seffi/lanes/packs``) of the pack written for this project.
STANDARD_PACK = "standard.json"
#: Deepest nesting a pack file may have (a valid pack needs 4: pack, concepts, concept, curriculum).
MAX_DEPTH = 16
#: Largest pack file read, in bytes (the standard pack is about 20 kB; a pack of a thousand concepts
#: stays under 2 MB), so a wrong path such as /dev/zero is one error line, never a MemoryError.
MAX_PACK_BYTES = 8 * 2**20


class Concept(BaseModel):
    """One probed concept: a fixed probe and an ordered curriculum of corrections."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: str = Field(min_length=1)
    split: Split
    probe: str
    expected_tokens: tuple[str, ...]
    curriculum: tuple[str, ...]


class ConceptError(BaseModel):
    """A problem confined to one concept; the message always names the concept."""

    model_config = ConfigDict(frozen=True)

    concept: str
    problem: str

    def __str__(self) -> str:
        return f"concept {self.concept!r}: {self.problem}"


class ConceptPack(BaseModel):
    """A named, versioned set of concepts."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    concepts: tuple[Concept, ...]

    def select(self, split: str) -> list[Concept]:
        """Concepts of ``split`` (``"public"``, ``"holdout"`` or ``"all"``), in pack order."""
        if split not in SPLITS:
            raise SeffiError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        return [c for c in self.concepts if split == "all" or c.split == split]


def concept_label(raw: Any, index: int) -> str:
    """How a raw concept entry is named in messages: its ``id`` when it has a usable one, else ``#index``."""
    if isinstance(raw, Mapping) and isinstance(raw.get("id"), str) and raw["id"].strip():
        return raw["id"]
    return f"#{index}"


def _describe(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors(include_url=False)
    )


def read_pack_data(source: str | Path | Mapping[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """Read a pack's raw JSON and a label for it (``None`` = the standard pack).

    Raises:
        SeffiError: the file is missing/unreadable, not UTF-8, not JSON, nested deeper than
            `MAX_DEPTH`, holds a string that is not valid Unicode, or is not a JSON object.
    """
    if isinstance(source, Mapping):
        data = dict(source)
        _check_structure(data, "<mapping>")
        return data, "<mapping>"
    if source is None:
        label = f"standard pack ({STANDARD_PACK})"
        text = resources.files("seffi.lanes").joinpath("packs", STANDARD_PACK).read_text(encoding="utf-8")
    else:
        path = Path(source)
        label = str(path)
        text = read_text(path, what="pack", max_bytes=MAX_PACK_BYTES)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SeffiError(f"pack {label} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:  # the decoder recurses per level: "[[[[..." would end in a traceback
        raise SeffiError(f"pack {label} is nested too deeply (more than {MAX_DEPTH} levels)") from None
    except ValueError as exc:  # e.g. an integer literal longer than Python's digit limit
        raise SeffiError(f"pack {label} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SeffiError(f"pack {label} must be a JSON object with name, version and concepts")
    _check_structure(data, label)
    return data, label


def _check_structure(data: Any, label: str) -> None:
    r"""Bound the nesting depth and require valid Unicode in every string, before anything else reads it.

    Iterative, so a deep or (for a mapping given in Python) cyclic structure is reported, never a
    RecursionError. A ``\ud800`` escape is valid JSON but not a character: printing or writing it
    as UTF-8 fails much later, so a lone surrogate anywhere is rejected here, with where it is.

    Raises:
        SeffiError: deeper than `MAX_DEPTH`, or a string (value or key) holds a lone surrogate.
    """
    # Each entry carries its trail (parent trail, key or index), turned into a path only for a message.
    stack: list[tuple[Any, int, Any]] = [(data, 1, None)]
    while stack:
        value, depth, trail = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and not _is_unicode(value):
                raise SeffiError(f"pack {label}: the string at {_path(trail)} {_SURROGATE}")
        elif isinstance(value, Mapping | list | tuple):
            if depth > MAX_DEPTH:
                raise SeffiError(f"pack {label} is nested too deeply (more than {MAX_DEPTH} levels)")
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if isinstance(key, str) and not key.isascii() and not _is_unicode(key):
                        raise SeffiError(f"pack {label}: a key at {_path(trail)} {_SURROGATE}")
                    stack.append((item, depth + 1, (trail, key)))
            else:
                stack.extend((item, depth + 1, (trail, i)) for i, item in enumerate(value))


_SURROGATE = "holds a lone surrogate escape (not valid Unicode)"


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _path(trail: Any) -> str:
    """``concepts[3].id`` from a (parent trail, key) chain; ``top level`` for the root."""
    parts: list[str] = []
    while trail is not None:
        trail, key = trail
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return "".join(reversed(parts)).lstrip(".") or "top level"


def parse_pack(data: Mapping[str, Any], label: str = "<pack>") -> tuple[ConceptPack, list[ConceptError]]:
    """Build a pack from raw JSON, keeping every well-formed concept.

    Returns:
        The pack of valid concepts and one [`ConceptError`][seffi.lanes.ConceptError] per malformed concept
        (duplicate ids are malformed too: results are keyed by id).

    Raises:
        SeffiError: the pack-level fields are missing or of the wrong type.
    """
    missing = [key for key in ("name", "version", "concepts") if key not in data]
    if missing:
        raise SeffiError(f"pack {label} lacks {', '.join(missing)}")
    name, version, raw_concepts = data["name"], data["version"], data["concepts"]
    if not isinstance(name, str) or not name.strip():
        raise SeffiError(f"pack {label}: name must be a non-empty string")
    if isinstance(version, bool) or not isinstance(version, str | int):
        raise SeffiError(f"pack {label}: version must be a string or an integer")
    if not isinstance(raw_concepts, list):
        raise SeffiError(f"pack {label}: concepts must be a list")
    unknown = sorted(set(data) - {"name", "version", "concepts", "description"})
    if unknown:
        raise SeffiError(f"pack {label}: unknown top-level keys {unknown}")
    concepts: list[Concept] = []
    errors: list[ConceptError] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_concepts):
        labelled = concept_label(raw, index)
        # JSON arrays arrive as lists; the strict model wants tuples (immutability), so convert first.
        fixed = (
            {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
            if isinstance(raw, Mapping)
            else raw
        )
        try:
            concept = Concept.model_validate(fixed)
        except ValidationError as exc:
            errors.append(ConceptError(concept=labelled, problem=f"malformed: {_describe(exc)}"))
            continue
        if concept.id in seen:
            errors.append(ConceptError(concept=labelled, problem="duplicate concept id"))
            continue
        seen.add(concept.id)
        concepts.append(concept)
    return ConceptPack(name=name, version=str(version), concepts=tuple(concepts)), errors


def load_pack(
    source: str | Path | Mapping[str, Any] | None = None,
) -> tuple[ConceptPack, list[ConceptError]]:
    """Read and parse a pack file (``None`` = the standard pack); see `parse_pack`."""
    data, label = read_pack_data(source)
    return parse_pack(data, label)


def standard_pack() -> ConceptPack:
    """The shipped standard pack (it loads without errors; the test-suite lints it clean)."""
    pack, errors = load_pack(None)
    if errors:  # a packaging bug, not a user error
        raise RuntimeError("; ".join(map(str, errors)))
    return pack

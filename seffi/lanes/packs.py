"""Concept packs: the JSON model, a per-concept tolerant loader and the shipped standard pack.

A pack is ``{"name", "version", "concepts": [{"id", "split", "probe", "expected_tokens",
"curriculum"}]}``. A broken pack *file* (unreadable, not JSON, no concept list) is a
:class:`~seffi.errors.SeffiError`; a broken *concept* is reported as a :class:`ConceptError` naming it,
and the other concepts still load, so one typo does not throw away a whole run.
The model checks structure only; the anti-overfitting discipline lives in :mod:`seffi.lanes.lint`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from seffi.errors import SeffiError

Split = Literal["public", "holdout"]
#: Split selector accepted by :meth:`ConceptPack.select` and the CLI.
SPLITS: tuple[str, ...] = ("public", "holdout", "all")
#: File name (inside ``seffi/lanes/packs``) of the pack written for this project.
STANDARD_PACK = "standard.json"


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
        SeffiError: the file is missing/unreadable, not JSON, or not a JSON object.
    """
    if isinstance(source, Mapping):
        return dict(source), "<mapping>"
    if source is None:
        label = f"standard pack ({STANDARD_PACK})"
        text = resources.files("seffi.lanes").joinpath("packs", STANDARD_PACK).read_text(encoding="utf-8")
    else:
        path = Path(source)
        label = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SeffiError(f"cannot read pack {label}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise SeffiError(f"pack {label} is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SeffiError(f"pack {label} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise SeffiError(f"pack {label} must be a JSON object with name, version and concepts")
    return data, label


def parse_pack(data: Mapping[str, Any], label: str = "<pack>") -> tuple[ConceptPack, list[ConceptError]]:
    """Build a pack from raw JSON, keeping every well-formed concept.

    Returns:
        The pack of valid concepts and one :class:`ConceptError` per malformed concept (duplicate ids
        are malformed too: results are keyed by id).

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
    """Read and parse a pack file (``None`` = the standard pack); see :func:`parse_pack`."""
    data, label = read_pack_data(source)
    return parse_pack(data, label)


def standard_pack() -> ConceptPack:
    """The shipped standard pack (it loads without errors; the test-suite lints it clean)."""
    pack, errors = load_pack(None)
    if errors:  # a packaging bug, not a user error
        raise RuntimeError("; ".join(map(str, errors)))
    return pack

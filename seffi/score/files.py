"""Files of generations -> samples: the layouts researchers' tools write, detected from the first row.

A *sample* is one completion of one prompt: its prompt id, the prompt text where the file has it,
the completion text, its correctness where the file scores it, a strategy label where the file
carries one, and a training step where the file records it. Four layouts are known:

* ``rows`` — one row per sample: an id (``prompt_id``, ``uid``, ``task_id``, ``doc_id`` or ``id``),
  a text (``completion``, ``output``, ``response``), optionally ``score``/``correct``/``reward``,
  ``step`` and ``prompt``.
* ``noveltybench`` — one row per prompt: ``{id, prompt, model, generations: [text, ...]}``.
* ``verl`` — ``trainer.rollout_data_dir`` / ``validation_data_dir`` dumps (``{step}.jsonl``):
  ``{input, output, gts, score, step, ...}`` plus the reward function's extra fields. The prompt text
  ``input`` is the id (the ``uid`` some trainers add names one sample, not its prompt); a sample is
  correct when its ``acc`` extra says so, else when ``score > 0``.
* ``lm-eval`` — lm-evaluation-harness ``--log_samples``: ``{doc_id, doc, arguments, resps,
  filtered_resps, filter, metrics, <metric>: value, ...}``, one line per document and filter: the
  lines of the first filter are read, and every response in ``resps`` (``[[r1, ..., rN]]`` with
  ``repeats: N``) is one sample. The metric scores one filtered answer, so it is each sample's
  correctness only when a document has one response.
* ``vllm-batch`` — ``vllm run-batch`` output (the OpenAI batch format): ``{id, custom_id, response:
  {body: {choices: [...]}}}``, ``custom_id`` the prompt id and every choice one sample.

Rows are read one at a time (JSONL line by line, Parquet by record batch), never a whole file.
Every problem with a file is one `SeffiError` naming the file and line.
"""

from __future__ import annotations

import json
import json.scanner
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from seffi._convert import clip
from seffi.errors import SeffiError

__all__ = ["Layout", "Sample", "detect", "read_samples"]

ID_FIELDS = ("prompt_id", "uid", "task_id", "doc_id", "id")
TEXT_FIELDS = ("completion", "output", "response", "generation", "text")
SCORE_FIELDS = ("correct", "score", "reward", "acc", "exact_match")
PROMPT_FIELDS = ("prompt", "input", "question")


class Sample(NamedTuple):
    """One completion of one prompt, as read from a file (a named tuple: one is made per row).

    Attributes:
        prompt_id: The prompt's id (a string).
        prompt: The prompt text, or None where the file has none.
        text: The completion (any JSON value: a labeler turns non-strings into ``parse_ok=False``).
        correct: Whether the file scores it correct (``score > 0``), or None without a score field.
        label: The value of the label field (a strategy id or a list of them), or None.
        step: The training step, or None.
    """

    prompt_id: str
    prompt: Any
    text: Any
    correct: bool | None
    label: Any
    step: int | None


@dataclass(frozen=True)
class Layout:
    """Where a file keeps each part of a sample.

    Attributes:
        name: ``rows``, ``noveltybench``, ``verl``, ``lm-eval`` or ``custom``.
        id: The prompt-id field.
        text: The completion field (a list of completions for ``noveltybench`` and ``lm-eval``).
        score: The correctness field, or None.
        step: The training-step field, or None.
        prompt: The prompt-text field, or None.
        label: The strategy-label field, or None.
    """

    name: str
    id: str
    text: str
    score: str | None = None
    step: str | None = None
    prompt: str | None = None
    label: str | None = None

    def describe(self) -> str:
        """One line: the layout and the field behind each part."""
        parts = [f"id={self.id}", f"text={self.text}"]
        parts += [f"{k}={v}" for k in ("score", "step", "prompt", "label") if (v := getattr(self, k))]
        return f"{self.name} ({', '.join(parts)})"


def _first(keys: Mapping[str, Any], names: Sequence[str]) -> str | None:
    return next((n for n in names if n in keys), None)


def detect(row: Mapping[str, Any], **fields: str | None) -> Layout:
    """The layout of a file from its first row; ``fields`` (id, text, score, step, prompt, label) override.

    Args:
        row: The file's first row.
        **fields: Field names the user gave (None: detect).

    Returns:
        The layout.

    Raises:
        SeffiError: No id or text field can be found.

    Examples:
        >>> detect({"uid": "a", "input": "2+2?", "output": "4", "gts": "4", "score": 1.0, "step": 3}).name
        'verl'
    """
    given = {k: v for k, v in fields.items() if v}
    if "generations" in row and "id" in row:
        found = Layout("noveltybench", "id", "generations", prompt="prompt")
    elif "resps" in row and "doc_id" in row:
        metrics = row.get("metrics")
        score = next((m for m in metrics if m in row), None) if isinstance(metrics, list) else None
        found = Layout("lm-eval", "doc_id", "resps", score=score or _first(row, SCORE_FIELDS))
    elif "custom_id" in row and "response" in row:
        found = Layout("vllm-batch", "custom_id", "response")
    elif {"input", "output", "score"} <= row.keys() and ("gts" in row or "step" in row):
        found = Layout("verl", "input", "output", "acc" if "acc" in row else "score", "step", "input")
    else:
        idf, text = _first(row, ID_FIELDS), _first(row, TEXT_FIELDS)
        if (idf or given.get("id")) is None or (text or given.get("text")) is None:
            keys = clip(", ".join(sorted(map(str, row))[:12]), 200)
            what = "prompt id" if (idf or given.get("id")) is None else "completion"
            raise SeffiError(
                f"no {what} field in the first row (keys: {keys}); name it with --id-field / --text-field"
            )
        found = Layout(
            "rows",
            idf or "",
            text or "",
            _first(row, SCORE_FIELDS),
            _first(row, ("step",)),
            _first(row, PROMPT_FIELDS),
        )
    if given:
        found = replace(found, name="custom" if {"id", "text"} & given.keys() else found.name, **given)
    return found


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row) of a JSONL or Parquet file, one at a time."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise SeffiError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from exc
        try:
            line = 0
            for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
                for row in batch.to_pylist():
                    line += 1
                    yield line, row
        except (OSError, ValueError) as exc:  # pyarrow's errors for a file that is not Parquet
            raise SeffiError(f"{path}: not a readable Parquet file ({exc})") from exc
        return
    try:
        with path.open("rb") as fh:
            line = 0
            while block := fh.readlines(BLOCK_BYTES):
                yield from _block_rows(path, line, block)
                line += len(block)
    except OSError as exc:
        raise SeffiError(f"{path}: cannot read ({exc.strerror or exc})") from None


#: Bytes of JSON lines parsed per block (whole lines, at least one): scanning each line where it stands
#: in the block's text is 3-5x cheaper than parsing it alone, and memory stays a few blocks.
BLOCK_BYTES = 1 << 16
_SCAN = json.scanner.make_scanner(json.JSONDecoder())
_SPACE = re.compile(r"[ \t\r]*")  # JSON whitespace within a line


def _block_rows(path: Path, start: int, block: list[bytes]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row) of the JSON lines ``block`` (line ``start + 1`` first).

    The block's text is decoded once and each line's value scanned in it where it stands; a line the
    scan does not take whole (a BOM, bad bytes, anything but one value) goes through ``_line`` alone,
    so every row and every error is ``json.loads`` of that line's bytes.
    """
    try:
        text = b"".join(block).decode("utf-8")
    except UnicodeDecodeError:
        for i, raw in enumerate(block, start + 1):
            if raw.strip():
                yield i, _line(path, i, raw)
        return
    pos = 0
    for i, raw in enumerate(block, start + 1):
        nl = text.find("\n", pos)
        stop = len(text) if nl < 0 else nl
        at = _SPACE.match(text, pos).end()
        try:
            if at == stop:  # blank
                pos = stop + 1
                continue
            row, end = _SCAN(text, at)
            end = _SPACE.match(text, end).end()
        except (StopIteration, ValueError, RecursionError):
            end = -1
        if end != stop:
            if raw.strip():
                yield i, _line(path, i, raw)
        else:
            yield i, row
        pos = stop + 1


def _line(path: Path, line: int, raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON or bytes, an int of > 4300 digits, deep nesting
        raise SeffiError(f"{path}:{line}: not a JSON line ({exc.__class__.__name__}: {exc})") from None


def _correct(value: Any, where: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and not math.isnan(value):
        return value > 0
    raise SeffiError(f"{where}: the score field holds {value!r}; need a number or true/false")


def _step(value: Any, where: str) -> int | None:
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())  # inf, NaN: not
    if isinstance(value, bool) or not whole:
        raise SeffiError(f"{where}: the step field holds {value!r}; need a whole number")
    return int(value)


def _texts(value: Any, layout: Layout, where: str) -> list[Any]:
    """The completions a row holds: one for one-row-per-sample layouts, a list otherwise."""
    if layout.name == "lm-eval":  # resps: one list per request, each with that request's responses
        if not isinstance(value, list):
            raise SeffiError(f"{where}: 'resps' holds {type(value).__name__}; need a list of lists")
        return [t for group in value for t in (group if isinstance(group, list) else [group])]
    if layout.name == "vllm-batch":  # a failed request has response null and error set: no samples
        body = value.get("body") if isinstance(value, dict) else None
        choices = body.get("choices") if isinstance(body, dict) else None
        if value is not None and not isinstance(choices, list):
            raise SeffiError(f"{where}: 'response' has no body.choices list")
        return [
            (c.get("message") or {}).get("content", c.get("text"))
            for c in choices or []
            if isinstance(c, dict)
        ]
    if layout.name == "noveltybench":
        if not isinstance(value, list):
            raise SeffiError(f"{where}: 'generations' holds {type(value).__name__}; need a list of texts")
        return value
    return [value]


def read_samples(paths: Sequence[str | Path], **fields: str | None) -> Iterator[tuple[Layout, Sample]]:
    """Every sample of ``paths``, in file order, with the layout of its file.

    The layout is detected per file from its first row (``fields`` override it), and every file of
    one call must have the same layout.

    Args:
        paths: JSONL (``.jsonl``/``.json`` lines) or ``.parquet`` files.
        **fields: id, text, score, step, prompt, label: field names that override detection.

    Yields:
        (the file's layout, one sample).

    Raises:
        SeffiError: A file is missing, empty, not JSONL/Parquet, mixes layouts, or a row lacks a field.
    """
    first: Layout | None = None
    for path in map(Path, paths):
        if not path.is_file():
            what = "a folder" if path.is_dir() else "not a regular file" if path.exists() else "no such file"
            raise SeffiError(f"{path}: {what}; need a JSONL or Parquet file")
        layout: Layout | None = None
        first_filter = None
        for line, row in _rows(path):
            if type(row) is not dict:
                raise SeffiError(f"{path}:{line}: a row is {type(row).__name__}; need a JSON object per line")
            if layout is None:
                try:
                    layout = detect(row, **fields)
                except SeffiError as exc:
                    raise SeffiError(f"{path}:{line}: {exc}") from None
                if first is None:
                    first = layout
                elif layout != first:
                    raise SeffiError(
                        f"{path}: layout {layout.describe()} differs from the first file's {first.describe()}"
                    )
                # The layout's fields, looked up once per file.
                idf, textf, scoref, stepf = layout.id, layout.text, layout.score, layout.step
                promptf, labelf, name = layout.prompt, layout.label, layout.name
                one = name not in ("lm-eval", "vllm-batch", "noveltybench")  # one completion per row
            try:
                pid, value = row[idf], row[textf]
            except KeyError:
                lost = idf if idf not in row else textf
                raise SeffiError(f"{path}:{line}: no {lost!r} field (the {name} layout needs it)") from None
            if type(pid) is not str:  # the common case costs one test
                if not isinstance(pid, str | int) or isinstance(pid, bool):
                    raise SeffiError(
                        f"{path}:{line}: the id field {idf!r} holds {clip(repr(pid))}; "
                        "need a string or an int"
                    )
                pid = str(pid)
            correct = step = None
            if scoref:
                correct = row.get(scoref)
                if type(correct) is not bool:
                    correct = _correct(correct, f"{path}:{line}")
            if stepf:
                step = row.get(stepf)
                if type(step) is not int:
                    step = _step(step, f"{path}:{line}")
            if name == "lm-eval":
                first_filter = first_filter or row.get("filter")
                if row.get("filter") != first_filter:  # the same responses again, under another filter
                    continue
            prompt = row.get(promptf) if promptf else None
            label = row.get(labelf) if labelf else None
            if one:
                yield layout, Sample(pid, prompt, value, correct, label, step)
                continue
            texts = _texts(value, layout, f"{path}:{line}")
            if name == "lm-eval" and len(texts) > 1:
                correct = None
            for text in texts:
                yield layout, Sample(pid, prompt, text, correct, label, step)
        if layout is None:
            raise SeffiError(f"{path}: the file holds no rows")

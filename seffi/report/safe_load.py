"""Read the JSON and YAML files a user hands to seffi: any problem is one `SeffiError` line."""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from seffi.errors import SeffiError

DEFAULT_MAX_BYTES = 64 * 2**20
#: Each mapping or list level counts one; a scalar at the top is 0.
DEFAULT_MAX_DEPTH = 64


@contextlib.contextmanager
def os_errors(what: str) -> Iterator[None]:
    """Raise an `OSError` of the block as one `SeffiError` line, ``"<what>: <reason>"``."""
    try:
        yield
    except OSError as exc:
        raise SeffiError(f"{what}: {exc.strerror or exc}") from None


def read_text(path: str | Path, *, what: str = "file", max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The UTF-8 text of ``path``; `SeffiError` unless a regular, small, UTF-8 file."""
    path = Path(path)
    with os_errors(f"cannot read {what} {path}"):
        info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise SeffiError(f"{what} {path} is not a regular file")
    if info.st_size > max_bytes:
        raise SeffiError(f"{what} {path} is larger than {max_bytes:,} bytes")
    with os_errors(f"cannot read {what} {path}"), path.open("rb") as fh:
        raw = fh.read(max_bytes + 1)  # never more than the cap in memory
    if len(raw) > max_bytes:
        raise SeffiError(f"{what} {path} is larger than {max_bytes:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SeffiError(
            f"{what} {path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    return text.removeprefix("\ufeff")


def check_depth(data: Any, *, source: str, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Raise one `SeffiError` line when ``data`` nests lists/dicts deeper than ``max_depth``."""
    stack: list[tuple[Any, int]] = [(data, 1)] if isinstance(data, dict | list | tuple) else []
    while stack:
        obj, depth = stack.pop()  # a mapping or list, ``depth`` levels down
        if depth > max_depth:
            raise SeffiError(f"{source} is nested deeper than {max_depth} levels")
        children = obj.values() if isinstance(obj, dict) else obj
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows (use null for a missing value)")


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):  # only then look for the culprit
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"duplicate key {key!r}")
            seen.add(key)
    return data


def loads_json(text: str, *, source: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse JSON text; `SeffiError` naming ``source`` on bad JSON, a duplicate key, NaN, or deep nesting."""
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise SeffiError(
            f"{source} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:  # the C decoder guards its own recursion
        raise SeffiError(f"{source} is nested deeper than {max_depth} levels") from None
    except _DuplicateKey as exc:
        raise SeffiError(f"{source}: {exc}") from None
    except ValueError as exc:  # NaN/Infinity, or an integer beyond Python's digit limit
        raise SeffiError(f"{source} is not valid JSON: {str(exc).split(';')[0]}") from None
    check_depth(data, source=source, max_depth=max_depth)
    return data


def _yaml_loader(max_depth: int) -> tuple[Any, type[Exception]]:
    """A ``yaml.SafeLoader`` subclass (no aliases, no duplicate keys, bounded nesting) and its refusal."""
    import yaml
    from yaml.constructor import ConstructorError
    from yaml.events import AliasEvent
    from yaml.nodes import MappingNode

    class Refused(ConstructorError):
        """YAML that parses but is refused: an alias, a duplicate key, too deep."""

    class Loader(yaml.SafeLoader):
        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, AliasEvent):
                # Reject every alias: expansion ("billion laughs") is the only thing they add to a config.
                raise Refused(None, None, f"aliases (*{event.anchor}) are not allowed", event.start_mark)
            self._depth += 1
            try:
                if self._depth > max_depth + 1:  # the top-level node is depth 1 here, 0 in check_depth
                    raise Refused(None, None, f"nested deeper than {max_depth} levels", event.start_mark)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                        seen.add(key)
                    except TypeError:  # unhashable: the base class reports it
                        continue
                    if duplicate:
                        raise Refused(None, None, f"duplicate key {key!r}", key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

    return Loader, Refused


def loads_yaml(text: str, *, source: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse YAML safely; `SeffiError` on bad YAML, an alias, a duplicate key or deep nesting."""
    import yaml

    loader_class, refused = _yaml_loader(max_depth)
    loader = None
    try:
        loader = loader_class(text)  # the reader checks characters here already
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = exc.problem or exc.context or "parse error"
        if isinstance(exc, refused):
            raise SeffiError(f"{source}: {problem}{where}") from None
        raise SeffiError(f"{source} is not valid YAML: {problem}{where}") from None
    except yaml.YAMLError as exc:
        raise SeffiError(f"{source} is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:  # belt and braces: the composer's depth check should come first
        raise SeffiError(f"{source} is nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise SeffiError(f"{source} is not valid YAML: {str(exc).split(';')[0]}") from None
    finally:
        if loader is not None:
            loader.dispose()
    check_depth(data, source=source, max_depth=max_depth)
    return data


def load_json_file(
    path: str | Path,
    *,
    what: str = "file",
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """Read and parse a JSON file; any problem is one `SeffiError` line naming the file."""
    text = read_text(path, what=what, max_bytes=max_bytes)
    return loads_json(text, source=f"{what} {path}", max_depth=max_depth)

"""Task registry: ``get_task(name, **config)`` and ``list_tasks()``."""

from __future__ import annotations

from typing import Any, TypeVar

from seffi.errors import SeffiError
from seffi.tasks.base import Task

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

"""Synthetic-sequence tasks whose traces can be attributed to strategies.

Example:
    >>> from seffi.tasks import get_task, list_tasks
    >>> "hanoi" in list_tasks()
    True
"""

from seffi.tasks import hanoi as _hanoi  # noqa: F401  (registers the task)
from seffi.tasks.base import (
    MAX_TRACE_CHARS,
    BaseMode,
    Task,
    TaskConfig,
    TaskInput,
    TrainingRow,
    ValidationResult,
    Vocabulary,
)
from seffi.tasks.registry import get_task, list_tasks, register_task, task_class

__all__ = [
    "MAX_TRACE_CHARS",
    "BaseMode",
    "Task",
    "TaskConfig",
    "TaskInput",
    "TrainingRow",
    "ValidationResult",
    "Vocabulary",
    "get_task",
    "list_tasks",
    "register_task",
    "task_class",
]

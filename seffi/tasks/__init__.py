"""Synthetic-sequence tasks whose traces can be attributed to strategies.

Built-in tasks: ``sort_swaps``, ``graph_traversal``, ``coin_sum``, ``countdown``, ``grid_routes``,
``edit_script`` and the negative control ``hanoi`` (every strategy yields the same trace).
``seffi tasks`` lists them with their measured ambiguity rates; docs/custom-task.md describes each
one's strategies and trace format.
"""

# Importing a task module registers it.
from seffi.tasks import coin_sum, countdown, edit_script, graph_traversal, grid_routes, hanoi, sort_swaps  # noqa: F401
from seffi.tasks.base import (
    MAX_TRACE_CHARS,
    BaseMode,
    Task,
    TaskConfig,
    TaskInput,
    TrainingRow,
    ValidationResult,
    Vocabulary,
    get_task,
    list_tasks,
    register_task,
    task_class,
)

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

"""Assertions shared by the task-specific test modules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seffi.tasks import Task


def assert_illegal(task: Task[Any, Any], x: Any, cases: Mapping[str, str]) -> None:
    """Each trace of ``cases`` parses, is not valid, matches no strategy and its error names the reason.

    Args:
        task: The task that validates the traces.
        x: An input of ``task``.
        cases: ``{trace text: a substring its error must contain}``.
    """
    for text, reason in cases.items():
        r = task.validate_y_text(x, text)
        assert r.parse_ok and not r.valid and not r.strategy_matches and reason in r.error, (text, r)

"""Benchmark records: the tasks an evaluation runs, one row per task::

    {"task_id", "prompt", "environment", "domain", "task_set",
     "expected_answer": "42",     # JSON text of the answer (42 → "42", "Paris" → "\\"Paris\\"")
     "checker", "answer_schema"}

``expected_answer`` is JSON text so that a column can hold numbers, strings, lists and null
side by side (``json.loads`` gives the value back exactly). A task of a coding domain is checked
by its test command rather than an answer; its files and setup stay in the task set, which is
where an evaluation run reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from trainer_core.datasets.items import ExportStats, canonical_json
from trainer_core.errors import InputError
from trainer_core.tasks.model import Task, coerce_task

__all__ = ["benchmark_records"]


def benchmark_records(
    tasks: Iterable[Task | dict[str, Any]], *, stats: ExportStats | None = None
) -> Iterator[dict[str, Any]]:
    """Benchmark rows from tasks (``Task`` objects or dicts of task fields)."""
    stats = stats if stats is not None else ExportStats()
    for number, raw in enumerate(tasks):
        task = coerce_task(raw)
        if task is None:
            raise InputError(f"task #{number} is empty")
        stats.rows += 1
        yield {
            "task_id": task.id,
            "prompt": task.prompt,
            "environment": task.environment,
            "domain": task.domain,
            "task_set": str(task.metadata.get("task_set") or ""),
            "expected_answer": canonical_json(task.expected_answer),
            "checker": task.checker,
            "answer_schema": task.answer_schema,
        }

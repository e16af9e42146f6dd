"""Tasks: the task model, task files (JSONL / YAML), outcome checkers, built-in suites."""

from trainer_core.tasks.model import Task, coerce_task

__all__ = ["Task", "coerce_task"]

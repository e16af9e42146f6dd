"""The queues workers consume. Settings route tasks to them by name (CELERY_TASK_ROUTES)."""

from __future__ import annotations

import enum


class Queue(enum.StrEnum):
    DEFAULT = "default"  # diagnostics, imports, exports, scoring bookkeeping
    ROLLOUTS = "rollouts"  # episodes in sandboxes
    JUDGE = "judge"  # LLM-judge calls (rate limited)
    GPU = "gpu"  # training and local-model inference; one task at a time per GPU worker


ALL_QUEUES = [q.value for q in Queue]

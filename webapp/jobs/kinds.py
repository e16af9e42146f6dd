"""Job kinds: what each kind of job is called, which task runs it, on which queue.

Each app registers its kinds in ``<app>/jobs.py`` (``register()``, called from its
``AppConfig.ready()``); the kind names are in ``webapp/jobs/names.py``. The job page renders the kind's
``detail_template`` partial (owned by the app) beside the generic parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webapp.jobs.names import ALL_QUEUES, Queue


@dataclass(frozen=True)
class JobKind:
    name: str
    label: str
    task_name: str
    queue: str = Queue.DEFAULT
    # True when re-running the job after its worker died is safe and skips finished work.
    resumable: bool = False
    # A template partial shown on the job page, e.g. "jobs/diagnostic_detail.html".
    detail_template: str | None = None
    description: str = ""
    # Called with the job's params once a job of this kind has ended, whatever its status and
    # whoever ended it (its worker, a cancel, the reaper); removes what only the job needed
    # (e.g. an import's staged upload). It must be idempotent and must not raise.
    on_end: Callable[[dict[str, Any]], None] | None = None


_KINDS: dict[str, JobKind] = {}


def register_kind(kind: JobKind) -> JobKind:
    if kind.queue not in ALL_QUEUES:
        raise ValueError(
            f"job kind {kind.name!r}: unknown queue {kind.queue!r}; use one of {ALL_QUEUES}"
        )
    existing = _KINDS.get(kind.name)
    if existing is not None and existing != kind:
        raise ValueError(f"job kind {kind.name!r} is registered twice with different settings")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> JobKind:
    try:
        return _KINDS[name]
    except KeyError:
        known = ", ".join(sorted(_KINDS)) or "none"
        raise KeyError(f"unknown job kind {name!r} (registered: {known})") from None


def find_kind(name: str) -> JobKind | None:
    return _KINDS.get(name)


def all_kinds() -> list[JobKind]:
    return sorted(_KINDS.values(), key=lambda k: k.label)

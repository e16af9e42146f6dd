"""Reads of tasks and task sets."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404

from webapp.tasks.models import Task, TaskQuarantine, TaskSet


def task_set_list(*, domain: str = ""):
    qs = TaskSet.objects.annotate(task_count=Count("tasks"))
    if domain:
        qs = qs.filter(domain=domain)
    return qs.order_by("name")


def task_list(*, task_set: TaskSet | None = None, domain: str = "", query: str = ""):
    qs = Task.objects.select_related("task_set")
    if task_set is not None:
        qs = qs.filter(task_set=task_set)
    if domain:
        qs = qs.filter(domain=domain)
    if query:
        qs = qs.filter(prompt__icontains=query) | qs.filter(external_id__icontains=query)
    return qs.order_by("task_set__name", "external_id")


def domains_in_use() -> list[str]:
    return sorted(set(TaskSet.objects.values_list("domain", flat=True)) - {""})


def task_set_get(*, id: int) -> TaskSet:
    """The task set; Http404 when there is none."""
    return get_object_or_404(TaskSet, pk=id)


def task_set_find(*, name: str) -> TaskSet | None:
    """The task set named ``name``, or None (the CLI says so and where to look)."""
    return TaskSet.objects.filter(name=name).first()


def task_page(*, task_set: TaskSet, query: str = "", page: str | int | None = None):
    """One page (50) of a task set's tasks matching ``query``."""
    return Paginator(task_list(task_set=task_set, query=query), 50).get_page(page)


def task_get(*, id: int) -> Task:
    """The task with its set; Http404 when there is none."""
    return get_object_or_404(Task.objects.select_related("task_set"), pk=id)


def task_keyset(
    *, task_set: TaskSet, query: str = "", after_id: int | None, limit: int
) -> list[Task]:
    """Up to ``limit`` tasks of ``task_set`` matching ``query``, by id, after ``after_id``."""
    qs = Task.objects.select_related("task_set").filter(task_set=task_set)
    if query:
        qs = qs.filter(prompt__icontains=query) | qs.filter(external_id__icontains=query)
    if after_id is not None:
        qs = qs.filter(pk__gt=after_id)
    return list(qs.order_by("pk")[:limit])


def task_set_summary(*, id: int) -> TaskSet:
    """The task set with its ``task_count``; Http404 when there is none."""
    return get_object_or_404(TaskSet.objects.annotate(task_count=Count("tasks")), pk=id)


# --- quarantine (docs/task-health.md) -------------------------------------------------------------


def quarantined_task_ids_query():
    """The ids of the tasks in quarantine now, as a subquery (``.exclude(task_id__in=...)``)."""
    return TaskQuarantine.objects.filter(released_at__isnull=True).values("task_id")


def quarantined_task_ids(*, task_ids=None) -> set[int]:
    """The ids of the tasks in quarantine now (among ``task_ids`` when given)."""
    qs = TaskQuarantine.objects.filter(released_at__isnull=True)
    if task_ids is not None:
        qs = qs.filter(task_id__in=list(task_ids))
    return set(qs.values_list("task_id", flat=True))


def task_quarantine_current(*, task: Task) -> TaskQuarantine | None:
    """The quarantine in force on ``task`` (with who set it), or None."""
    return (
        TaskQuarantine.objects.select_related("quarantined_by")
        .filter(task=task, released_at__isnull=True)
        .first()
    )


def task_quarantine_history(*, task: Task, limit: int = 20) -> list[TaskQuarantine]:
    """The task's quarantines, newest first (at most ``limit``)."""
    return list(
        TaskQuarantine.objects.select_related("quarantined_by", "released_by")
        .filter(task=task)
        .order_by("-quarantined_at", "-id")[:limit]
    )


def task_set_quarantined(*, task_set: TaskSet, limit: int = 200) -> list[TaskQuarantine]:
    """The quarantines in force on ``task_set``'s tasks (at most ``limit``), by task id."""
    return list(
        TaskQuarantine.objects.select_related("task", "quarantined_by")
        .filter(task__task_set=task_set, released_at__isnull=True)
        .order_by("task__external_id")[:limit]
    )


def task_find(*, task_set_name: str, external_id: str) -> Task | None:
    """The task ``external_id`` of the set ``task_set_name``, or None (the CLI says so)."""
    return (
        Task.objects.select_related("task_set")
        .filter(task_set__name=task_set_name, external_id=external_id)
        .first()
    )

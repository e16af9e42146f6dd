from __future__ import annotations

from django.db.models import Count

from webapp.tasks.models import Task, TaskSet


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

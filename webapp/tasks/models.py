"""Agent tasks and task sets. (Celery code never lives here: see workers/.)"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.common.models import CreatedModel


class TaskSet(CreatedModel):
    class Source(models.TextChoices):
        BUILTIN = "builtin", "Built in"
        IMPORT = "import", "Imported"

    name = models.CharField(max_length=120, unique=True)
    description = models.TextField(blank=True)
    domain = models.CharField(max_length=64, db_index=True, blank=True)
    environment = models.CharField(max_length=120, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.IMPORT)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="tasks")
    external_id = models.CharField(max_length=200)
    domain = models.CharField(max_length=64, db_index=True)
    environment = models.CharField(max_length=120, blank=True)
    prompt = models.TextField()
    checker = models.CharField(max_length=64, blank=True)
    # The whole task as trainer_core.tasks.model.Task validates it.
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["task_set", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["task_set", "external_id"], name="task_set_external_id")
        ]

    def __str__(self) -> str:
        return f"{self.task_set.name}/{self.external_id}"


class TaskQuarantine(models.Model):
    """A task taken out of dataset builds, evaluation runs, pipelines and RL runs until it is
    released (docs/task-health.md): who quarantined it, when and why (required), and who
    released it and when. A task has at most one quarantine in force (``released_at`` NULL);
    released ones stay as its history."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="quarantines")
    reason = models.TextField()
    quarantined_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    quarantined_at = models.DateTimeField(auto_now_add=True)
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    released_at = models.DateTimeField(null=True, blank=True, db_index=True)
    release_note = models.TextField(blank=True)

    class Meta:
        ordering = ["task", "-quarantined_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["task"],
                condition=models.Q(released_at__isnull=True),
                name="task_quarantine_one_in_force",
            )
        ]

    def __str__(self) -> str:
        state = "released" if self.released_at else "in force"
        return f"quarantine of task {self.task_id} ({state})"

    @property
    def in_force(self) -> bool:
        return self.released_at is None

"""Job: the one record of execution for anything that takes longer than a request."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


class Job(models.Model):
    kind = models.CharField(max_length=64, db_index=True)
    status = models.CharField(
        max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True
    )
    queue = models.CharField(max_length=32, default="default")
    params = models.JSONField(default=dict, blank=True)

    progress = models.FloatField(default=0.0)
    message = models.CharField(max_length=500, blank=True)
    log_tail = models.TextField(blank=True)
    # What the job produced, for its page (a summary; big outputs live in domain rows or files).
    result = models.JSONField(default=dict, blank=True)
    # The job's own checkpoint: what a resumed run needs to skip finished work.
    state = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)

    celery_task_id = models.CharField(max_length=64, blank=True, db_index=True)
    # "hostname:pid" of the process executing the job now; empty when none claims it.
    worker = models.CharField(max_length=255, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    # The stage a job that schedules children is in ("" at first; a child that fans out in
    # turn, like a pipeline's collect run, has stages of its own).
    stage = models.CharField(max_length=64, blank=True)
    # A parent that has scheduled children and returned; the last child's end advances it.
    awaiting_children = models.BooleanField(default=False)

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "queue"], name="job_status_queue"),
            models.Index(fields=["kind", "status"], name="job_kind_status"),
            models.Index(fields=["parent", "status"], name="job_parent_status"),
        ]

    def __str__(self) -> str:
        return f"Job {self.pk} ({self.kind}, {self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def percent(self) -> int:
        return round(max(0.0, min(1.0, self.progress)) * 100)


class JobMetricPoint(models.Model):
    """One point of a job's metrics time series: a step and its named values."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="metric_points")
    step = models.BigIntegerField()
    values = models.JSONField(default=dict)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["step", "id"]
        indexes = [models.Index(fields=["job", "step"], name="jobmetric_job_step")]

    def __str__(self) -> str:
        return f"job {self.job_id} step {self.step}"


class WorkerPresence(models.Model):
    """A Celery worker's last report: which queues it consumes and when it was last seen."""

    hostname = models.CharField(max_length=255, unique=True)
    queues = models.JSONField(default=list)
    pid = models.IntegerField(default=0)
    concurrency = models.IntegerField(default=0)
    pool = models.CharField(max_length=32, blank=True)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname

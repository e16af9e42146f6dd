"""The trajectory store: Trajectory and Step rows with indexed summary columns; the raw source
of imports kept compressed for audit."""

from __future__ import annotations

import zlib

from django.conf import settings
from django.db import models
from django.db.models import Q


class SourceFile(models.Model):
    """An imported file, compressed, kept for audit (one row per distinct file content)."""

    name = models.CharField(max_length=500)
    format = models.CharField(max_length=64)
    format_version = models.CharField(max_length=64, blank=True)
    sha256 = models.CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    data = models.BinaryField()  # zlib-compressed bytes
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    def raw_bytes(self) -> bytes:
        return zlib.decompress(bytes(self.data))


class Trajectory(models.Model):
    class Source(models.TextChoices):
        ROLLOUT = "rollout", "Rollout"
        IMPORT = "import", "Import"
        LIVE = "live", "Live (pushed by a running agent)"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"

    task = models.ForeignKey(
        "tasks.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories"
    )
    task_ref = models.CharField(max_length=300, blank=True, db_index=True)
    task_set_name = models.CharField(max_length=200, blank=True, db_index=True)
    prompt = models.TextField(blank=True)
    domain = models.CharField(max_length=64, blank=True, db_index=True)
    agent = models.CharField(max_length=120, blank=True, db_index=True)
    model = models.CharField(max_length=200, blank=True, db_index=True)
    policy = models.CharField(max_length=200, blank=True, db_index=True)
    environment = models.CharField(max_length=120, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, db_index=True)
    source_format = models.CharField(max_length=64, blank=True, db_index=True)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.FINISHED, db_index=True
    )
    success = models.BooleanField(null=True, db_index=True)
    reward = models.FloatField(null=True, blank=True, db_index=True)
    step_count = models.IntegerField(default=0, db_index=True)  # tool-call steps
    message_count = models.IntegerField(default=0)  # message steps (dialogue turns)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    outcome = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    # Imports: a hash of the ordered (tool, params, observation) sequence, unique among imports.
    content_hash = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL for rollouts
    # Rollouts: (run, task, episode, seed); begin() with the same key returns the same row.
    idempotency_key = models.CharField(max_length=300, null=True, blank=True, unique=True)  # noqa: DJ001
    source_file = models.ForeignKey(
        SourceFile, null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories"
    )
    schema_version = models.CharField(max_length=16, default="1.1")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Live (pushed) trajectories: the last push; one idle too long is failed as abandoned.
    last_activity_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["content_hash"],
                condition=Q(source="import"),
                name="trajectory_import_content_hash",
            )
        ]
        indexes = [
            models.Index(fields=["domain", "-created_at"], name="traj_domain_created"),
            models.Index(fields=["agent", "model"], name="traj_agent_model"),
        ]

    def __str__(self) -> str:
        return f"Trajectory {self.pk} ({self.agent or self.source_format}, {self.step_count} steps)"


class Step(models.Model):
    """A tool call (``kind`` tool) or a message (``kind`` message: ``role`` user, assistant or
    system, and its ``text``), at its ``index`` in the trajectory."""

    class Kind(models.TextChoices):
        TOOL = "tool", "Tool call"
        MESSAGE = "message", "Message"

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="steps")
    index = models.IntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.TOOL)
    role = models.CharField(max_length=16, blank=True)  # a message's: user, assistant, system
    text = models.TextField(blank=True)  # a message's text
    thought = models.TextField(blank=True)
    tool = models.CharField(max_length=200, db_index=True, blank=True)
    params = models.JSONField(default=dict, blank=True)
    observation = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)  # noqa: DJ001 - NULL: no error
    started_at = models.DateTimeField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True)
    tokens_in = models.IntegerField(null=True, blank=True)
    tokens_out = models.IntegerField(null=True, blank=True)
    reward = models.FloatField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["trajectory", "index"]
        constraints = [
            models.UniqueConstraint(fields=["trajectory", "index"], name="step_trajectory_index")
        ]

    def __str__(self) -> str:
        return f"step {self.index} of trajectory {self.trajectory_id}"

    @property
    def is_message(self) -> bool:
        return self.kind == self.Kind.MESSAGE

    @property
    def is_assistant_turn(self) -> bool:
        """A turn of the agent's own (a tool call or an assistant message): what step scores and
        labels are about."""
        return self.kind != self.Kind.MESSAGE or self.role == "assistant"


class TrajectoryGdi(models.Model):
    """A trajectory's GDI ("global desirability index", docs/gdi.md): its four components (each
    0..1, computed by ``trainer_core.evaluation.gdi``) and their weighted total, kept beside the
    trajectory (not on its hot row) and recomputed by ``webapp.trajectories.gdi`` whenever an
    input changes. The human feedback is kept here as what it was derived from (the mean of the
    settled human signals and their count), so a recompute re-reads it, never resets it."""

    trajectory = models.OneToOneField(
        Trajectory, primary_key=True, on_delete=models.CASCADE, related_name="gdi"
    )
    reward = models.FloatField(default=0.0)
    reward_source = models.CharField(max_length=120, blank=True)  # e.g. "reward model v3"
    builds = models.IntegerField(default=0)  # dataset builds that included it
    reuse = models.FloatField(default=0.0)
    feedback = models.FloatField(default=0.5)
    feedback_mean = models.FloatField(null=True, blank=True)  # None: nobody judged it yet
    feedback_signals = models.IntegerField(default=0)
    recency = models.FloatField(default=1.0)
    recency_from = models.DateTimeField()  # the trajectory's time (finished, else created)
    total = models.FloatField()
    computed_at = models.DateTimeField()  # recency is as of this moment

    class Meta:
        indexes = [models.Index(fields=["-total", "-trajectory"], name="traj_gdi_total")]

    def __str__(self) -> str:
        return f"GDI {self.total:.3f} of trajectory {self.trajectory_id}"


class TrajectoryReuse(models.Model):
    """A dataset build that included the trajectory (one row per build: a re-run export job
    counts once). ``dataset_id`` is the datasets app's snapshot id (no foreign key: this app sits
    below datasets)."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="+")
    dataset_id = models.BigIntegerField(db_index=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["trajectory", "dataset_id"], name="trajreuse_trajectory_dataset"
            )
        ]

    def __str__(self) -> str:
        return f"trajectory {self.trajectory_id} in dataset {self.dataset_id}"

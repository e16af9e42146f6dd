"""Training runs and their checkpoints; a checkpoint registers as a local-model Policy."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.common.models import CreatedModel


class TrainingRun(CreatedModel):
    class Method(models.TextChoices):
        SFT = "sft", "SFT"
        DPO = "dpo", "DPO"
        GRPO = "grpo", "GRPO"

    name = models.CharField(max_length=120, blank=True)
    method = models.CharField(max_length=8, choices=Method.choices)
    dataset = models.ForeignKey(
        "datasets.DatasetSnapshot", null=True, blank=True, on_delete=models.PROTECT
    )
    base_model = models.CharField(max_length=500)  # a local model directory
    base_checkpoint = models.ForeignKey(
        "training.Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    config = models.JSONField(default=dict)  # the trainer's config dataclass as a dict
    config_yaml = models.TextField(blank=True)  # exactly what was previewed and launched
    output_dir = models.CharField(max_length=500, blank=True)
    result = models.JSONField(default=dict, blank=True)
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="training_run"
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name or f"training run {self.pk}"


class Checkpoint(models.Model):
    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.PositiveIntegerField()
    path = models.CharField(max_length=500)
    metrics = models.JSONField(default=dict, blank=True)
    policy = models.ForeignKey(
        "rollouts.Policy", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="checkpoint_run_step")]

    def __str__(self) -> str:
        return f"{self.run} step {self.step}"


class RLRun(CreatedModel):
    """A decoupled GRPO run: sampler jobs stream groups into SampleGroup rows, a trainer job
    consumes them in arrival order and publishes PolicyVersion rows (issue 19).

    The run's TrainingRun (method grpo) holds the trainer's DecoupledConfig in ``config``; this
    row holds what the samplers and the page need."""

    training_run = models.OneToOneField(TrainingRun, on_delete=models.CASCADE, related_name="rl")
    # The parent job (training.rl); the trainer child is ``training_run.job`` (its metrics are
    # the run's curve), the samplers are the parent's other children.
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="rl_run"
    )
    task_set = models.ForeignKey("tasks.TaskSet", on_delete=models.PROTECT, related_name="+")
    # The Task ids the samplers draw from, frozen at launch (a task set edited later does not
    # change which task a group index plays).
    task_ids = models.JSONField(default=list)
    environment = models.CharField(max_length=120)
    samplers = models.PositiveIntegerField(default=2)  # sampler jobs asked for at launch
    # None: samplers load each version from disk (a local model); else an inference-server
    # policy that is synced to each version.
    sampler_policy = models.ForeignKey(
        "rollouts.Policy", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Scores each finished episode (step totals feed the process/mixed estimators); None: the
    # environment's own reward only.
    reward_model = models.ForeignKey(
        "rewards.RewardModel", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    seed = models.BigIntegerField(default=0)
    # Groups ready and not yet taken above which samplers wait (0: four times batch_size).
    max_queue = models.PositiveIntegerField(default=0)
    next_index = models.PositiveIntegerField(default=0)  # the next group's index (F() claimed)
    stopping = models.BooleanField(default=False)  # samplers end when set
    stop_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"rl run {self.pk}"


class PolicyVersion(models.Model):
    """A published policy weights snapshot of an RL run: 0 is the start model, then 1, 2, ...
    with no gap; ``path`` is the checkpoint directory samplers load."""

    run = models.ForeignKey(RLRun, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    path = models.CharField(max_length=500)
    step = models.PositiveIntegerField(default=0)  # optimizer updates done when published
    published_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "version"]
        constraints = [
            models.UniqueConstraint(fields=["run", "version"], name="policyversion_run_version")
        ]

    def __str__(self) -> str:
        return f"{self.run} v{self.version}"


class SampleGroup(models.Model):
    """One group (G episodes of one task, all sampled by one version) of an RL run.

    sampling (a sampler claimed the index) -> ready (stored; arrival order = ready_at, id) ->
    taken (the trainer claimed it) -> consumed (trained at ``step``) or dropped (too stale)."""

    class Status(models.TextChoices):
        SAMPLING = "sampling", "Sampling"
        READY = "ready", "Ready"
        TAKEN = "taken", "Taken"
        CONSUMED = "consumed", "Consumed"
        DROPPED = "dropped", "Dropped"

    run = models.ForeignKey(RLRun, on_delete=models.CASCADE, related_name="groups")
    index = models.PositiveIntegerField()  # the run's group counter value
    task = models.ForeignKey(
        "tasks.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    seed = models.BigIntegerField(default=0)
    version = models.PositiveIntegerField()  # the policy version that sampled every episode
    sampler_job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.SAMPLING, db_index=True
    )
    # trainer_core Group.to_dict() plus "trajectory_ids" (the stored episodes, in order)
    payload = models.JSONField(default=dict, blank=True)
    episodes = models.PositiveIntegerField(default=0)
    reward_mean = models.FloatField(null=True, blank=True)
    success_rate = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    step = models.PositiveIntegerField(null=True, blank=True)  # trained or dropped at
    staleness = models.PositiveIntegerField(null=True, blank=True)  # at consumption or drop
    weight = models.FloatField(null=True, blank=True)  # the group weight it was trained with

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="samplegroup_run_index")
        ]
        indexes = [
            models.Index(fields=["run", "status", "ready_at", "id"], name="samplegroup_arrival"),
            models.Index(fields=["run", "step"], name="samplegroup_run_step"),
        ]

    def __str__(self) -> str:
        return f"{self.run} group {self.index}"


class RunFlag(models.Model):
    """A reward-hacking flag (issue 21): one flag of ``trainer_core.evaluation.flags`` that fired
    over one window of a training run's steps, or of a pipeline's evaluation rounds, with the
    statistic, window and threshold it was held against and the trajectories behind it.

    ``pipeline_ref`` is the evaluation app's Pipeline id (a plain number: training sits below
    evaluation and does not point at its tables). A human's answer (confirmed: real reward
    hacking; rejected: a false alarm) is kept here with who and when; the annotation queue made
    from the samples is ``queue``."""

    class Source(models.TextChoices):
        TRAINING = "training", "Training"
        EVALUATION = "evaluation", "Evaluation"

    class Review(models.TextChoices):
        PENDING = "", "Not reviewed"
        CONFIRMED = "confirmed", "Confirmed (reward hacking)"
        REJECTED = "rejected", "Rejected (a false alarm)"

    key = models.CharField(max_length=300, unique=True)  # source, owner, kind, metric, window
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.TRAINING)
    training_run = models.ForeignKey(
        TrainingRun, null=True, blank=True, on_delete=models.CASCADE, related_name="flags"
    )
    pipeline_ref = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    kind = models.CharField(max_length=32, db_index=True)
    metric = models.CharField(max_length=200, blank=True)  # behaviour_shift: what rose
    start_step = models.IntegerField()
    end_step = models.IntegerField()
    statistic = models.CharField(max_length=64)
    value = models.FloatField(null=True, blank=True)
    threshold = models.FloatField()
    window = models.PositiveIntegerField()
    p_value = models.FloatField(null=True, blank=True)
    message = models.CharField(max_length=300, blank=True)
    details = models.JSONField(default=dict, blank=True)
    config = models.JSONField(default=dict, blank=True)  # the FlagConfig it was computed with
    trajectory_ids = models.JSONField(default=list, blank=True)  # the samples behind it
    queue = models.ForeignKey(
        "calibration.AnnotationQueue",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    review = models.CharField(max_length=16, choices=Review.choices, blank=True, default="")
    review_note = models.CharField(max_length=500, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["start_step", "kind", "metric", "id"]

    def __str__(self) -> str:
        return f"{self.kind} flag, steps {self.start_step}-{self.end_step}"

"""Evaluation runs (a policy × a task set × k seeded samples per task) and pipelines (the
online loop: collect → score → dataset → train → register → evaluate, for several iterations).

Neither keeps a status or progress of its own: that is their Job's. An evaluation run plays its
episodes through a collect run (its Job's child), so everything a collect run guarantees — seeded
episodes, crash-safe resume, live episodes table — holds for evaluations too.
"""

from __future__ import annotations

from django.db import models

from webapp.common.models import CreatedModel


class EvaluationRun(CreatedModel):
    name = models.CharField(max_length=200, blank=True)
    policy = models.ForeignKey(
        "rollouts.Policy", on_delete=models.PROTECT, related_name="evaluations"
    )
    task_set = models.ForeignKey(
        "tasks.TaskSet", on_delete=models.PROTECT, related_name="evaluations"
    )
    samples_per_task = models.PositiveIntegerField(default=1)  # k
    max_steps = models.PositiveIntegerField(default=10)
    concurrency = models.PositiveIntegerField(default=2)
    seed = models.BigIntegerField(default=0)
    # the checkpoint this run evaluates, for a training run's checkpoint curve
    checkpoint = models.ForeignKey(
        "training.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="evaluations",
    )
    collect_run = models.OneToOneField(
        "rollouts.CollectRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="evaluation",
    )
    # the summary (success with its Wilson interval, pass@k, pass^k, reward with its bootstrap
    # interval, mean steps / tokens / cost), written when the episodes are done
    metrics = models.JSONField(default=dict, blank=True)
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="evaluation_run"
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name or f"evaluation {self.pk}"

    @property
    def label(self) -> str:
        return f"{self.policy.name} (eval {self.pk})"


class Pipeline(CreatedModel):
    """The online loop. ``config`` holds the iterations, each with its stages' parameters."""

    name = models.CharField(max_length=200, unique=True)
    base_policy = models.ForeignKey("rollouts.Policy", on_delete=models.PROTECT, related_name="+")
    train_task_set = models.ForeignKey("tasks.TaskSet", on_delete=models.PROTECT, related_name="+")
    eval_task_set = models.ForeignKey("tasks.TaskSet", on_delete=models.PROTECT, related_name="+")
    reward_model = models.ForeignKey(
        "rewards.RewardModel", on_delete=models.PROTECT, related_name="+"
    )
    base_model = models.CharField(max_length=500)  # the first training run's model directory
    config = models.JSONField(default=dict)
    config_yaml = models.TextField(blank=True)
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="pipeline"
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name


class PipelineStage(models.Model):
    """One stage of one iteration; created with its child job in one transaction, so a pipeline
    that resumes finds what it launched and never launches it twice."""

    class Name(models.TextChoices):
        BASELINE = "baseline", "Evaluate the starting policy"
        COLLECT = "collect", "Collect"
        SCORE = "score", "Score"
        CALIBRATE = "calibrate", "Calibrate the reward model (simulated labels)"
        DATASET = "dataset", "Build the dataset"
        TRAIN = "train", "Train"
        REGISTER = "register", "Register the checkpoint as a policy"
        EVALUATE = "evaluate", "Evaluate"

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="stages")
    iteration = models.PositiveIntegerField()  # 0 for the baseline, then 1..n
    name = models.CharField(max_length=16, choices=Name.choices)
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    collect_run = models.ForeignKey(
        "rollouts.CollectRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    scoring_run = models.ForeignKey(
        "rewards.ScoringRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    dataset = models.ForeignKey(
        "datasets.DatasetSnapshot",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    training_run = models.ForeignKey(
        "training.TrainingRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    policy = models.ForeignKey(
        "rollouts.Policy", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    evaluation = models.ForeignKey(
        EvaluationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pipeline", "iteration", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline", "iteration", "name"], name="pipeline_stage_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.pipeline} iteration {self.iteration} {self.name}"

"""Training runs and their checkpoints; a checkpoint registers as a local-model Policy."""

from __future__ import annotations

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

"""Dataset snapshots: what was exported, from which query, reward-model version and labels."""

from __future__ import annotations

from django.db import models

from webapp.common.models import CreatedModel


class DatasetSnapshot(CreatedModel):
    class Kind(models.TextChoices):
        SFT = "sft", "SFT (conversational messages with tool calls)"
        SFT_KNOWLYR = "sft_knowlyr", "SFT, knowlyr-compatible instruction/input/response"
        DPO = "dpo", "DPO (prompt / chosen / rejected)"
        GRPO = "grpo", "GRPO groups (a prompt, its trajectories and rewards)"
        PRM = "prm", "PRM stepwise supervision (prompt / completions / labels)"
        BENCH = "bench", "Benchmark records (tasks)"

    class LabelSource(models.TextChoices):
        MODEL = "model", "Reward-model scores"
        HUMAN = "human", "Human labels and pairs"

    name = models.CharField(max_length=120, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    query = models.JSONField(default=dict)  # the trajectory filters and thresholds
    reward_model = models.ForeignKey(
        "rewards.RewardModel", null=True, blank=True, on_delete=models.PROTECT
    )
    label_source = models.CharField(
        max_length=16, choices=LabelSource.choices, default=LabelSource.MODEL
    )
    # what the labels were when exported: counts and the newest label edit, for provenance
    label_snapshot = models.JSONField(default=dict, blank=True)
    seed = models.BigIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)  # per split, duplicates, skipped
    files = models.JSONField(default=dict, blank=True)  # name -> {"path", "sha256", "bytes"}
    directory = models.CharField(max_length=500, blank=True)
    # the drift check of the export for a policy (trainer_core.training.drift.DriftReport as a
    # dict, with "policy"); empty when the export named no policy
    token_check = models.JSONField(default=dict, blank=True)
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="dataset"
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def total(self) -> int:
        return sum(
            v for k, v in (self.counts or {}).items() if k in ("train", "validation", "test")
        )

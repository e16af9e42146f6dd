"""Rubrics, reward-model versions, scores, scoring runs and preference pairs.

Weight precedence: a domain profile's default weights seed its Rubric rows, and a new profile
version whose rubric weights changed carries the changed weights into them (the latest edit of a
rubric's weight wins, on the rubrics page or in the profile); creating a RewardModel version
snapshots the rubric rows and the layer weights and freezes the domain profile version current
then (its tool categories and outcome fields, which the rule layer reads); scoring reads only the
version, so editing a profile never changes what an existing version computes; scores are never
overwritten (a new version scores again beside the old one) and each records the profile version
it was scored with.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.common.models import CreatedModel


class Rubric(models.Model):
    class Evaluator(models.TextChoices):
        RULE = "rule", "Rule"
        MODEL = "model", "Model (LLM judge)"
        HUMAN = "human", "Human"

    domain = models.CharField(max_length=64, db_index=True)  # the domain profile's name
    rubric_id = models.CharField(max_length=64)
    description = models.TextField()
    evaluator = models.CharField(max_length=16, choices=Evaluator.choices)
    weight = models.FloatField()
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["domain", "-weight", "rubric_id"]
        constraints = [
            models.UniqueConstraint(fields=["domain", "rubric_id"], name="rubric_domain_id")
        ]

    def __str__(self) -> str:
        return f"{self.domain}/{self.rubric_id}"


class RewardModel(CreatedModel):
    """One version of a domain's reward model: an immutable snapshot of what scoring reads."""

    domain = models.CharField(max_length=64, db_index=True)
    version = models.PositiveIntegerField()
    # trainer_core.rewards.scoring.RewardConfig.to_dict(): rubrics, layer and total weights
    config = models.JSONField()
    judge = models.JSONField(default=dict, blank=True)  # JudgeConfig.to_dict(), {} = no judge
    calibration = models.JSONField(default=dict, blank=True)  # filled by the calibration issue
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL)
    note = models.CharField(max_length=300, blank=True)
    # The domain profile version this version scores with, frozen at creation. None: no profile
    # of this name was in the database then; it scores with the built-in profile of that name
    # (fixed in code), or infers tool categories from tool names when there is none.
    profile = models.ForeignKey(
        "domains.DomainProfile",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reward_models",
    )

    class Meta:
        ordering = ["domain", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["domain", "version"], name="rewardmodel_domain_version")
        ]

    def __str__(self) -> str:
        return f"{self.domain} v{self.version}"

    @property
    def label(self) -> str:
        judge = self.judge.get("model") if self.judge else None
        return f"{self.domain} v{self.version}" + (f" (judge {judge})" if judge else " (rules)")


class TrajectoryScore(models.Model):
    reward_model = models.ForeignKey(RewardModel, on_delete=models.PROTECT, related_name="scores")
    trajectory = models.ForeignKey(
        "trajectories.Trajectory", on_delete=models.CASCADE, related_name="scores"
    )
    total = models.FloatField(null=True, blank=True, db_index=True)
    process = models.FloatField(null=True, blank=True)
    outcome = models.FloatField(null=True, blank=True)
    efficiency = models.FloatField(null=True, blank=True)
    unscored_reason = models.CharField(max_length=300, blank=True)
    judge_calls = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    scored_at = models.DateTimeField(auto_now_add=True)
    # The domain profile version the score was computed with (the version's frozen one); None:
    # the built-in profile, or a score made before scores recorded it with no profile then.
    profile = models.ForeignKey(
        "domains.DomainProfile", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["reward_model", "trajectory"], name="trajscore_model_trajectory"
            )
        ]

    def __str__(self) -> str:
        return f"{self.reward_model} on trajectory {self.trajectory_id}"


class StepScore(models.Model):
    """The scores of one step by one version: ``rubrics`` maps a rubric id to
    ``{"value": float|None, "layer": str, "rationale": str, "interpolated": bool}``."""

    reward_model = models.ForeignKey(RewardModel, on_delete=models.PROTECT)
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.CASCADE)
    index = models.IntegerField()
    total = models.FloatField(null=True, blank=True)
    # before the version's calibration (None when the version has none): what a new fit uses
    raw_total = models.FloatField(null=True, blank=True)
    rubrics = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["reward_model", "trajectory", "index"], name="stepscore_model_traj_index"
            )
        ]

    def __str__(self) -> str:
        return f"{self.reward_model} step {self.index} of {self.trajectory_id}"


class JudgeCacheEntry(models.Model):
    key = models.CharField(max_length=64, unique=True)
    value = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"judge cache {self.key[:12]}"


class ScoringRun(CreatedModel):
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="scoring_run"
    )
    reward_model = models.ForeignKey(RewardModel, on_delete=models.PROTECT, related_name="runs")
    trajectory_ids = models.JSONField(default=list)  # what to score, fixed at launch
    spend_cap_usd = models.FloatField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    scored = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)  # already scored by this version
    judge_calls = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    stop_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"scoring run {self.pk}"


class PreferencePair(CreatedModel):
    class Source(models.TextChoices):
        RULES = "rules", "Built from reward scores"
        HUMAN = "human", "Human judgement"

    class Status(models.TextChoices):
        PAIR = "pair", "Pair"
        CANDIDATE = "candidate", "Candidate for human judgement"

    task_ref = models.CharField(max_length=300, db_index=True)
    chosen = models.ForeignKey(
        "trajectories.Trajectory", on_delete=models.CASCADE, related_name="chosen_in"
    )
    rejected = models.ForeignKey(
        "trajectories.Trajectory", on_delete=models.CASCADE, related_name="rejected_in"
    )
    source = models.CharField(max_length=16, choices=Source.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PAIR)
    method = models.CharField(max_length=32, blank=True)
    margin = models.FloatField(null=True, blank=True)
    reward_model = models.ForeignKey(RewardModel, null=True, blank=True, on_delete=models.PROTECT)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["chosen", "rejected", "source", "reward_model", "method"],
                name="pair_unique_per_source",
            )
        ]

    def __str__(self) -> str:
        return f"{self.chosen_id} > {self.rejected_id} ({self.source})"

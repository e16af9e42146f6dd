"""Annotation queues, human labels with their full edit history, and fitted calibrations.

A queue holds items (a trajectory, or a pair of trajectories of one task). Each item is shown to
``annotators_per_item`` different annotators (blind: nobody sees another's labels). An
annotator reserves an item for ``reservation_minutes``; an expired reservation returns the item
to the pool, and labels and submissions are refused without a live reservation (unless the queue
allows ``free_labelling``). Until an item is complete for everyone, an annotator sees only their
own labels, submission and history of it; admins see everything. Each annotator's labels are
their own rows, so two annotators never overwrite each other; every change to a row is kept in
``LabelEdit`` and rows carry a version number for optimistic locking (a stale edit is refused with
a clear message, never applied silently).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.common.models import CreatedModel


class AnnotationQueue(CreatedModel):
    class Mode(models.TextChoices):
        STEPS = "steps", "Score every step"
        FIRST_ERROR = "first_error", "Mark the first error"
        PAIRWISE = "pairwise", "Compare two trajectories (A / B / equal)"

    class Source(models.TextChoices):
        SELECTION = "selection", "A trajectory selection or filter"
        UNCERTAIN = "uncertain", "Uncertain reward-model scores"
        DISAGREEMENT = "disagreement", "Judge and rule layers disagree"
        FAILED_HIGH = "failed_high", "High process score on a failed outcome"
        VERSIONS = "versions", "Two reward-model versions disagree"
        SIMULATED = "simulated", "Simulated annotator (scripted labels from the reference)"

    name = models.CharField(max_length=120, unique=True)
    guidelines = models.TextField(blank=True)
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.STEPS)
    scale_points = models.PositiveSmallIntegerField(default=5)  # keys 1..N → 0..1
    annotators_per_item = models.PositiveSmallIntegerField(default=1)
    reservation_minutes = models.PositiveIntegerField(default=30)
    # False (the default): labelling and submitting an item needs a live reservation of it;
    # True: anyone with the annotator role may label any item (and change what they submitted)
    free_labelling = models.BooleanField(default=False)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.SELECTION)
    reward_model = models.ForeignKey(
        "rewards.RewardModel", null=True, blank=True, on_delete=models.SET_NULL
    )
    other_reward_model = models.ForeignKey(
        "rewards.RewardModel",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    budget = models.PositiveIntegerField(default=100)
    seed = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name

    def level_value(self, key: int) -> float:
        """The 0..1 value of scale key ``key`` (1..scale_points)."""
        if self.scale_points <= 1:
            return 1.0
        return (key - 1) / (self.scale_points - 1)


class QueueItem(models.Model):
    queue = models.ForeignKey(AnnotationQueue, on_delete=models.CASCADE, related_name="items")
    trajectory = models.ForeignKey(
        "trajectories.Trajectory", on_delete=models.CASCADE, related_name="queue_items"
    )
    other = models.ForeignKey(  # the B side in pairwise mode
        "trajectories.Trajectory",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="queue_items_as_b",
    )
    position = models.PositiveIntegerField()
    stratum = models.CharField(max_length=200, blank=True)
    reason = models.CharField(max_length=300, blank=True)  # why it was picked
    completed = models.PositiveSmallIntegerField(default=0)  # submissions so far

    class Meta:
        ordering = ["queue", "position"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "position"], name="queueitem_position")
        ]

    def __str__(self) -> str:
        return f"{self.queue} item {self.position}"


class Reservation(models.Model):
    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="reservations")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator"], name="reservation_item_user")
        ]

    def __str__(self) -> str:
        return f"{self.item} reserved by {self.annotator_id}"


class Submission(models.Model):
    """An annotator's whole-item answer: the trajectory-level score, the comment, the pairwise
    choice. Submitting counts the item once for that annotator."""

    class Choice(models.TextChoices):
        A = "A", "A is better"
        B = "B", "B is better"
        EQUAL = "E", "Equal"

    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="submissions")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    trajectory_value = models.FloatField(null=True, blank=True)
    comment = models.TextField(blank=True)
    choice = models.CharField(max_length=1, choices=Choice.choices, blank=True)
    first_error = models.IntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator"], name="submission_item_user")
        ]

    def __str__(self) -> str:
        return f"{self.item} by {self.annotator_id}"


class StepLabel(models.Model):
    """One annotator's label of one step. ``value`` is 0..1 (bad..good) on the queue's scale;
    ``neutral`` is a deliberate "neither" (value None), distinct from no row at all."""

    class Origin(models.TextChoices):
        KEY = "key", "Labelled"
        FIRST_ERROR = "first_error", "From a first-error mark"
        DOWNSTREAM = "downstream", "After the first error (not judged)"

    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="labels")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.CASCADE)
    index = models.IntegerField()
    value = models.FloatField(null=True, blank=True)
    neutral = models.BooleanField(default=False)
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.KEY)
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["item", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "annotator", "index"], name="steplabel_item_user_index"
            )
        ]

    def __str__(self) -> str:
        return f"step {self.index} of {self.trajectory_id} by {self.annotator_id}"


class LabelEdit(models.Model):
    """Every change to a label or a submission: who, when, old value, new value, reason."""

    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="edits")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    index = models.IntegerField(null=True, blank=True)  # None: the submission
    field = models.CharField(max_length=32)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    reason = models.CharField(max_length=300, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "at", "id"]

    def __str__(self) -> str:
        return f"edit of {self.field} on {self.item} by {self.annotator_id}"


class Calibration(CreatedModel):
    """A calibration fitted from human labels against one reward-model version."""

    reward_model = models.ForeignKey(
        "rewards.RewardModel", on_delete=models.CASCADE, related_name="calibrations"
    )
    result = models.JSONField()  # trainer_core.calibration.fit.CalibrationResult.to_dict()
    labels = models.PositiveIntegerField(default=0)
    applied_as = models.ForeignKey(
        "rewards.RewardModel",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="applied_from",
    )
    rescoring_run = models.ForeignKey(
        "rewards.ScoringRun", null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"calibration {self.pk} of {self.reward_model}"


class SimulatedAnnotation(CreatedModel):
    """A simulated annotator's pass (``trainer_core.calibration.simulated``) through the real
    calibration path: a queue over some training trajectories, every step labelled by the
    ``simulated-annotator`` user with the same services a person's labels go through, a
    calibration fitted on that queue's labels and applied as a new reward-model version, and the
    re-scoring of ``rescore_ids`` with it. The labeller reads each task's reference solution (the
    rule layer it calibrates never does); its errors are seeded flips at ``error_rate``.
    ``labels`` keeps, per queued trajectory, its step indexes, the reference-path truth and the
    labels given ({trajectory id: {"index": [...], "truth": [...], "given": [...]}}), so a
    version's step scores can be measured against the truth
    (:func:`webapp.calibration.selectors.truth_auroc`)."""

    name = models.CharField(max_length=120)
    reward_model = models.ForeignKey(
        "rewards.RewardModel", on_delete=models.CASCADE, related_name="simulated_annotations"
    )
    task_set = models.ForeignKey(  # the training task set the trajectories must come from
        "tasks.TaskSet", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    trajectory_ids = models.JSONField(default=list)  # candidates to queue (a sample is taken)
    rescore_ids = models.JSONField(default=list)  # re-scored with the new version
    error_rate = models.FloatField(default=0.0)
    seed = models.BigIntegerField(default=0)
    max_trajectories = models.PositiveIntegerField(default=50)
    max_steps = models.PositiveIntegerField(default=50)
    folds = models.PositiveSmallIntegerField(default=5)
    queue = models.OneToOneField(
        AnnotationQueue,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="simulated_annotation",
    )
    calibration = models.OneToOneField(
        Calibration,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="simulated_annotation",
    )
    labels = models.JSONField(default=dict, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    job = models.OneToOneField(
        "jobs.Job",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="simulated_annotation",
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name or f"simulated annotation {self.pk}"

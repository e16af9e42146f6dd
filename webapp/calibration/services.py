"""Annotation queues (creation, reservations, labels with history, submissions) and
calibrations (fit, apply)."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from trainer_core.calibration.fit import fit_calibration
from trainer_core.errors import InputError
from webapp.calibration.models import (
    AnnotationQueue,
    Calibration,
    LabelEdit,
    QueueItem,
    Reservation,
    StepLabel,
    Submission,
)
from webapp.calibration.selectors import labelled_steps
from webapp.common.errors import ApplicationError
from webapp.rewards.models import PreferencePair, StepScore, TrajectoryScore
from webapp.rewards.services import reward_model_create, scoring_launch
from webapp.trajectories.models import Trajectory


class LabelConflict(ApplicationError):
    """An edit based on a stale version of a label (another tab or person changed it)."""


# --- creating queues --------------------------------------------------------------------------


def _candidates(source: str, reward_model, other_reward_model) -> list[tuple[int, float, str]]:
    """(trajectory id, priority, reason) for the automatic sources, most untrustworthy first."""
    if reward_model is None:
        raise ApplicationError("Choose the reward-model version whose scores pick the items.")
    out: list[tuple[int, float, str]] = []
    if source == AnnotationQueue.Source.UNCERTAIN:
        nearest: dict[int, float] = {}
        for tid, total in StepScore.objects.filter(
            reward_model=reward_model, total__isnull=False
        ).values_list("trajectory_id", "total"):
            distance = abs(total - 0.5)
            nearest[tid] = min(distance, nearest.get(tid, 1.0))
        out = [
            (tid, 1.0 - 2 * d, f"a step scored {0.5 - d:.2f}–{0.5 + d:.2f}, near the middle")
            for tid, d in nearest.items()
            if d <= 0.2
        ]
    elif source == AnnotationQueue.Source.DISAGREEMENT:
        worst: dict[int, float] = {}
        for tid, rubrics in StepScore.objects.filter(reward_model=reward_model).values_list(
            "trajectory_id", "rubrics"
        ):
            layers: dict[str, list[float]] = defaultdict(list)
            for score in (rubrics or {}).values():
                if score.get("value") is not None:
                    layers[score.get("layer", "")].append(score["value"])
            if layers.get("rule") and layers.get("model"):
                gap = abs(
                    sum(layers["rule"]) / len(layers["rule"])
                    - sum(layers["model"]) / len(layers["model"])
                )
                worst[tid] = max(gap, worst.get(tid, 0.0))
        out = [
            (tid, gap, f"judge and rules differ by {gap:.2f} on a step")
            for tid, gap in worst.items()
            if gap >= 0.4
        ]
    elif source == AnnotationQueue.Source.FAILED_HIGH:
        rows = TrajectoryScore.objects.filter(
            reward_model=reward_model, process__gte=0.7, trajectory__success=False
        ).values_list("trajectory_id", "process")
        out = [(tid, p, f"process score {p:.2f} on a failed outcome") for tid, p in rows]
    elif source == AnnotationQueue.Source.VERSIONS:
        if other_reward_model is None:
            raise ApplicationError("Choose the second reward-model version to compare with.")
        first = dict(
            TrajectoryScore.objects.filter(
                reward_model=reward_model, total__isnull=False
            ).values_list("trajectory_id", "total")
        )
        for tid, total in TrajectoryScore.objects.filter(
            reward_model=other_reward_model, trajectory_id__in=list(first), total__isnull=False
        ).values_list("trajectory_id", "total"):
            gap = abs(total - first[tid])
            if gap >= 0.2:
                out.append((tid, gap, f"the two versions differ by {gap:.2f}"))
    existing = set(
        Trajectory.objects.filter(pk__in=[c[0] for c in out]).values_list("pk", flat=True)
    )
    return sorted((c for c in out if c[0] in existing), key=lambda c: (-c[1], c[0]))


def stratified_sample(
    *, candidates: list[tuple[int, float, str]], strata: dict[int, str], budget: int, seed: int
) -> list[tuple[int, float, str]]:
    """At most ``budget`` candidates spread over strata in proportion to their sizes (at least
    one from each stratum while the budget allows), chosen at random (seeded) within a stratum
    among its most untrustworthy half."""
    groups: dict[str, list[tuple[int, float, str]]] = defaultdict(list)
    for candidate in candidates:
        groups[strata.get(candidate[0], "")].append(candidate)
    if len(candidates) <= budget:
        return candidates
    rng = random.Random(seed)
    total = len(candidates)
    names = sorted(groups, key=lambda g: (-len(groups[g]), g))
    quota = {g: max(1, round(budget * len(groups[g]) / total)) for g in names}
    while sum(quota.values()) > budget:  # trim the largest quotas first
        largest = max(quota, key=lambda g: (quota[g], g))
        quota[largest] -= 1
        if quota[largest] == 0:
            del quota[largest]
    chosen = []
    for g in names:
        if g not in quota:
            continue
        pool = groups[g][: max(quota[g], (len(groups[g]) + 1) // 2)]
        chosen.extend(rng.sample(pool, min(quota[g], len(pool))))
    return sorted(chosen, key=lambda c: (-c[1], c[0]))


def queue_create(
    *,
    name: str,
    mode: str = AnnotationQueue.Mode.STEPS,
    guidelines: str = "",
    scale_points: int = 5,
    annotators_per_item: int = 1,
    reservation_minutes: int = 30,
    source: str = AnnotationQueue.Source.SELECTION,
    trajectory_ids: list[int] | None = None,
    reward_model=None,
    other_reward_model=None,
    budget: int = 100,
    seed: int = 0,
    user=None,
) -> AnnotationQueue:
    if AnnotationQueue.objects.filter(name=name).exists():
        raise ApplicationError(f"A queue named {name!r} exists already; choose another name.")
    if not 2 <= scale_points <= 10:
        raise ApplicationError("The scale must have 2 to 10 points (number keys 1..N).")
    if annotators_per_item < 1 or budget < 1:
        raise ApplicationError("Annotators per item and the budget must be at least 1.")
    if source == AnnotationQueue.Source.SELECTION:
        ids = list(dict.fromkeys(int(i) for i in (trajectory_ids or [])))
        if not ids:
            raise ApplicationError("Select trajectories (or a filter) for the queue.")
        found = set(Trajectory.objects.filter(pk__in=ids).values_list("pk", flat=True))
        picked = [(i, 0.0, "selected") for i in ids if i in found]
    else:
        picked = _candidates(source, reward_model, other_reward_model)
    meta = {
        pk: (task or f"#{pk}", f"{domain or '-'} · {policy or agent or '-'}")
        for pk, task, domain, policy, agent in Trajectory.objects.filter(
            pk__in=[p[0] for p in picked]
        ).values_list("pk", "task_ref", "domain", "policy", "agent")
    }
    if mode == AnnotationQueue.Mode.PAIRWISE:
        by_task: dict[str, list[tuple[int, float, str]]] = defaultdict(list)
        for candidate in picked:
            by_task[meta[candidate[0]][0]].append(candidate)
        pairs = []
        for task, group in by_task.items():
            for a, b in zip(group[0::2], group[1::2], strict=False):
                pairs.append(((a[0], b[0]), max(a[1], b[1]), f"same task {task}"))
        if not pairs:
            raise ApplicationError(
                "Pairwise mode needs at least two trajectories of the same task."
            )
        pairs = pairs[:budget]
        entries = [(a, b, reason, meta[a][1]) for (a, b), _, reason in pairs]
    else:
        strata = {pk: m[1] for pk, m in meta.items()}
        sampled = stratified_sample(candidates=picked, strata=strata, budget=budget, seed=seed)
        if not sampled:
            raise ApplicationError(
                "No trajectory matches: score trajectories with that version first, or pick "
                "another source."
            )
        entries = [(pk, None, reason, strata.get(pk, "")) for pk, _, reason in sampled]
    with transaction.atomic():
        queue = AnnotationQueue.objects.create(
            name=name,
            mode=mode,
            guidelines=guidelines,
            scale_points=scale_points,
            annotators_per_item=annotators_per_item,
            reservation_minutes=reservation_minutes,
            source=source,
            reward_model=reward_model,
            other_reward_model=other_reward_model,
            budget=budget,
            seed=seed,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        QueueItem.objects.bulk_create(
            [
                QueueItem(
                    queue=queue,
                    trajectory_id=a,
                    other_id=b,
                    position=position,
                    stratum=stratum[:200],
                    reason=reason[:300],
                )
                for position, (a, b, reason, stratum) in enumerate(entries)
            ]
        )
    return queue


# --- reservations -------------------------------------------------------------------------------


def next_item(*, queue: AnnotationQueue, user, exclude: int | None = None) -> QueueItem | None:
    """The item this annotator works on next: one they already hold, else a fresh reservation
    of the first item that still needs annotators and that they have not submitted. Blind
    overlap: an item goes to ``annotators_per_item`` different people."""
    now = timezone.now()
    held = (
        Reservation.objects.filter(item__queue=queue, annotator=user, expires_at__gt=now)
        .exclude(item_id=exclude)
        .select_related("item")
        .order_by("item__position")
        .first()
    )
    if held is not None:
        return held.item
    Reservation.objects.filter(item__queue=queue, expires_at__lte=now).delete()
    done_by_me = Submission.objects.filter(
        item__queue=queue, annotator=user, submitted_at__isnull=False
    ).values_list("item_id", flat=True)
    candidates = (
        QueueItem.objects.filter(queue=queue)
        .exclude(pk__in=list(done_by_me))
        .exclude(pk=exclude)
        .annotate(
            holders=Count(
                "reservations",
                filter=Q(reservations__expires_at__gt=now) & ~Q(reservations__annotator=user),
                distinct=True,
            )
        )
        .filter(completed__lt=queue.annotators_per_item)
        .order_by("position")
    )
    for item in candidates[:50]:
        if item.completed + item.holders >= queue.annotators_per_item:
            continue
        try:
            with transaction.atomic():
                Reservation.objects.create(
                    item=item,
                    annotator=user,
                    expires_at=now + timedelta(minutes=queue.reservation_minutes),
                )
        except IntegrityError:
            continue
        return item
    return None


# --- labels ---------------------------------------------------------------------------------------


def _record(item, user, index, field, old, new, reason=""):
    LabelEdit.objects.create(
        item=item, annotator=user, index=index, field=field, old=old, new=new, reason=reason[:300]
    )


def _as_json(label: StepLabel | None) -> dict[str, Any] | None:
    if label is None:
        return None
    return {"value": label.value, "neutral": label.neutral, "origin": label.origin}


def label_set(
    *,
    item: QueueItem,
    user,
    index: int,
    key: int | None = None,
    neutral: bool = False,
    clear: bool = False,
    expected_version: int | None = None,
    reason: str = "",
) -> StepLabel | None:
    """Set (key 1..N), mark neutral, or clear one step label of this annotator. With
    ``expected_version`` (the version the page showed; 0 = no label yet) a label changed since is
    refused with LabelConflict instead of being overwritten."""
    queue = item.queue
    if key is not None and not 1 <= key <= queue.scale_points:
        raise ApplicationError(f"Use the keys 1 to {queue.scale_points} on this queue's scale.")
    if not item.trajectory.steps.filter(index=index).exists():
        raise ApplicationError(f"Trajectory {item.trajectory_id} has no step {index}.")
    with transaction.atomic():
        label = (
            StepLabel.objects.select_for_update()
            .filter(item=item, annotator=user, index=index)
            .first()
        )
        current = label.version if label is not None else 0
        if expected_version is not None and expected_version != current:
            when = timezone.localtime(label.updated_at).strftime("%H:%M:%S") if label else ""
            raise LabelConflict(
                f"Step {index} was changed at {when} since this page loaded (in another tab?): "
                "it now reads "
                + (
                    "neutral"
                    if label and label.neutral
                    else f"{label.value:.2f}"
                    if label and label.value is not None
                    else "unmarked"
                )
                + ". Reload the item to see the current labels; nothing was overwritten."
            )
        old = _as_json(label)
        if clear:
            if label is not None:
                label.delete()
            _record(item, user, index, "step", old, None, reason)
            return None
        value = None if neutral else queue.level_value(int(key)) if key is not None else None
        if label is None:
            label = StepLabel(
                item=item, annotator=user, trajectory_id=item.trajectory_id, index=index
            )
        else:
            label.version += 1
        label.value = value
        label.neutral = neutral
        label.origin = StepLabel.Origin.KEY
        label.save()
        _record(item, user, index, "step", old, _as_json(label), reason)
        return label


def first_error_set(*, item: QueueItem, user, index: int, reason: str = "") -> None:
    """Mark step ``index`` as the first bad step: earlier steps become good, the step bad, later
    ones downstream (not judged)."""
    steps = list(item.trajectory.steps.order_by("index").values_list("index", flat=True))
    if index not in steps:
        raise ApplicationError(f"Trajectory {item.trajectory_id} has no step {index}.")
    with transaction.atomic():
        existing = {
            label.index: label
            for label in StepLabel.objects.select_for_update().filter(item=item, annotator=user)
        }
        for step in steps:
            value, origin = (
                (1.0, StepLabel.Origin.FIRST_ERROR)
                if step < index
                else (0.0, StepLabel.Origin.FIRST_ERROR)
                if step == index
                else (None, StepLabel.Origin.DOWNSTREAM)
            )
            label = existing.get(step)
            old = _as_json(label)
            if label is None:
                label = StepLabel(
                    item=item, annotator=user, trajectory_id=item.trajectory_id, index=step
                )
            else:
                label.version += 1
            label.value, label.neutral, label.origin = value, False, origin
            label.save()
            if old != _as_json(label):
                _record(item, user, step, "step", old, _as_json(label), reason or "first error")
        submission, _ = Submission.objects.get_or_create(item=item, annotator=user)
        _record(item, user, None, "first_error", submission.first_error, index, reason)
        submission.first_error = index
        submission.save()


def submit(
    *,
    item: QueueItem,
    user,
    trajectory_key: int | None = None,
    comment: str = "",
    choice: str = "",
    expected_version: int | None = None,
) -> Submission:
    """Finish this item for this annotator: the trajectory-level score, the comment, and in
    pairwise mode the choice (A / B / E). A/B becomes a human preference pair."""
    queue = item.queue
    if queue.mode == AnnotationQueue.Mode.PAIRWISE and choice not in ("A", "B", "E"):
        raise ApplicationError("Choose A, B or E (equal) before submitting.")
    if trajectory_key is not None and not 1 <= trajectory_key <= queue.scale_points:
        raise ApplicationError(f"The trajectory score must be 1 to {queue.scale_points}.")
    with transaction.atomic():
        submission, created = Submission.objects.select_for_update().get_or_create(
            item=item, annotator=user
        )
        if expected_version is not None and not created and expected_version != submission.version:
            raise LabelConflict(
                "This item was changed since the page loaded (in another tab?); reload it. "
                "Nothing was overwritten."
            )
        old = {
            "trajectory_value": submission.trajectory_value,
            "comment": submission.comment,
            "choice": submission.choice,
            "submitted": submission.submitted_at is not None,
        }
        first_time = submission.submitted_at is None
        submission.trajectory_value = (
            queue.level_value(trajectory_key) if trajectory_key is not None else None
        )
        submission.comment = comment
        submission.choice = choice
        submission.submitted_at = timezone.now()
        if not created:
            submission.version += 1
        submission.save()
        new = {
            "trajectory_value": submission.trajectory_value,
            "comment": submission.comment,
            "choice": submission.choice,
            "submitted": True,
        }
        _record(item, user, None, "submission", old, new)
        if first_time:
            QueueItem.objects.filter(pk=item.pk).update(completed=F("completed") + 1)
        Reservation.objects.filter(item=item, annotator=user).delete()
        if queue.mode == AnnotationQueue.Mode.PAIRWISE:
            PreferencePair.objects.filter(
                source=PreferencePair.Source.HUMAN,
                created_by=user,
                method=f"queue:{queue.pk}",
                chosen_id__in=[item.trajectory_id, item.other_id],
                rejected_id__in=[item.trajectory_id, item.other_id],
            ).delete()
        if queue.mode == AnnotationQueue.Mode.PAIRWISE and choice in ("A", "B"):
            chosen, rejected = (
                (item.trajectory_id, item.other_id)
                if choice == "A"
                else (item.other_id, item.trajectory_id)
            )
            PreferencePair.objects.create(
                task_ref=item.trajectory.task_ref[:300],
                chosen_id=chosen,
                rejected_id=rejected,
                source=PreferencePair.Source.HUMAN,
                method=f"queue:{queue.pk}",
                created_by=user if getattr(user, "is_authenticated", False) else None,
            )
    return submission


# --- calibrations -----------------------------------------------------------------------------------


def calibration_fit(*, reward_model, user=None, folds: int = 5, seed: int = 0) -> Calibration:
    """Fit rubric weights and an isotonic map from the human step labels against this version's
    step scores, with cross-validation."""
    rows = [
        {"rubrics": r["rubrics"], "model": r["raw_model"], "human": r["human"]}
        for r in labelled_steps(reward_model=reward_model)
        if r["raw_model"] is not None
    ]
    rubric_ids = [r["id"] for r in reward_model.config.get("rubrics", [])]
    try:
        result = fit_calibration(rows, rubric_ids, folds=folds, seed=seed)
    except InputError as exc:
        raise ApplicationError(f"Cannot fit a calibration: {exc}") from None
    return Calibration.objects.create(
        reward_model=reward_model,
        result=result.to_dict(),
        labels=len(rows),
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def calibration_apply(*, calibration: Calibration, user=None) -> Calibration:
    """A new reward-model version carrying the calibration, and a job re-scoring everything the
    old version scored. The old version's scores stay as they are."""
    if calibration.applied_as_id:
        raise ApplicationError(f"This calibration is applied already as {calibration.applied_as}.")
    old = calibration.reward_model
    with transaction.atomic():
        new = reward_model_create(
            domain=old.domain,
            layers=old.config.get("layers"),
            totals=old.config.get("totals"),
            judge=old.judge or None,
            note=f"calibrated from {old.label} ({calibration.labels} labels)",
            user=user,
            parent=old,
            rubrics=old.config.get("rubrics"),
            calibration=calibration.result,
        )
        ids = list(
            TrajectoryScore.objects.filter(reward_model=old).values_list("trajectory_id", flat=True)
        )
        run = scoring_launch(reward_model=new, trajectory_ids=ids, user=user) if ids else None
        calibration.applied_as = new
        calibration.rescoring_run = run
        calibration.save(update_fields=["applied_as", "rescoring_run"])
    return calibration

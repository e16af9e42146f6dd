"""Annotation queues (creation, reservations, labels with history, submissions) and
calibrations (fit, apply)."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from trainer_core.calibration.fit import MIN_LABELS, fit_calibration
from trainer_core.calibration.simulated import simulate_labels
from trainer_core.errors import InputError
from webapp.accounts.models import Role
from webapp.calibration.models import (
    AnnotationQueue,
    Calibration,
    LabelEdit,
    QueueItem,
    Reservation,
    SimulatedAnnotation,
    StepLabel,
    Submission,
)
from webapp.calibration.selectors import (
    HELD_OUT_SPLITS,
    labelled_steps,
    simulation_inputs,
    truth_auroc,
)
from webapp.common.errors import ApplicationError
from webapp.jobs.models import JobStatus
from webapp.jobs.names import Kinds
from webapp.jobs.services import job_enqueue
from webapp.rewards.models import PreferencePair, StepScore, TrajectoryScore
from webapp.rewards.services import reward_model_create, scoring_launch
from webapp.trajectories.gdi import gdi_recompute_on_commit
from webapp.trajectories.models import Trajectory


class LabelConflict(ApplicationError):
    """An edit based on a stale version of a label (another tab or person changed it)."""


class NotHeld(ApplicationError):
    """A label or submission by someone who does not hold the item's reservation."""


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
    free_labelling: bool = False,
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
    if source in (AnnotationQueue.Source.SELECTION, AnnotationQueue.Source.SIMULATED):
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
            free_labelling=bool(free_labelling),
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


def item_hold(*, item: QueueItem, user) -> str:
    """Make sure ``user`` may label ``item`` now, reserving it when a place is free (opening an
    item's page does this). Returns "" when they may, else why not (the page shows it and the
    item is read-only for them)."""
    queue = item.queue
    if queue.free_labelling:
        return ""
    now = timezone.now()
    expires = now + timedelta(minutes=queue.reservation_minutes)
    if Reservation.objects.filter(item=item, annotator=user, expires_at__gt=now).exists():
        return ""
    if Submission.objects.filter(item=item, annotator=user, submitted_at__isnull=False).exists():
        return (
            "You submitted this item already; in this queue a submitted item is not changed "
            "again. Start annotating from the queue for the next one."
        )
    with transaction.atomic():
        QueueItem.objects.select_for_update().filter(pk=item.pk).first()  # one taker at a time
        completed = QueueItem.objects.filter(pk=item.pk).values_list("completed", flat=True)[0]
        holders = (
            Reservation.objects.filter(item=item, expires_at__gt=now)
            .exclude(annotator=user)
            .count()
        )
        if completed + holders >= queue.annotators_per_item:
            return (
                "Other annotators hold or have completed every place of this item, so it is "
                "read-only for you. Start annotating from the queue to get an item of your own."
            )
        Reservation.objects.update_or_create(
            item=item, annotator=user, defaults={"expires_at": expires}
        )
    return ""


def _require_hold(item: QueueItem, user) -> None:
    """Refuse (NotHeld, nothing written) a label or submission by someone without a live
    reservation of the item, unless the queue allows free labelling; a live one is extended by
    the queue's reservation time (the annotator is working on it)."""
    if item.completed >= item.queue.annotators_per_item:  # settled: its feedback may change
        gdi_recompute_on_commit(ids=(item.trajectory_id, item.other_id))  # docs/gdi.md
    queue = item.queue
    if queue.free_labelling:
        return
    now = timezone.now()
    extended = Reservation.objects.filter(item=item, annotator=user, expires_at__gt=now).update(
        expires_at=now + timedelta(minutes=queue.reservation_minutes)
    )
    if extended:
        return
    lapsed = Reservation.objects.filter(item=item, annotator=user).first()
    why = (
        f"your reservation of it ran out at {timezone.localtime(lapsed.expires_at):%H:%M}"
        if lapsed is not None
        else "it is not reserved for you"
    )
    raise NotHeld(
        f"Nothing was saved: {why}. Open the item again (it is reserved for you if a place is "
        "still free), or start annotating from the queue for another one."
    )


# --- labels ---------------------------------------------------------------------------------------


def _record(item, user, index, field, old, new, reason=""):
    LabelEdit.objects.create(
        item=item, annotator=user, index=index, field=field, old=old, new=new, reason=reason[:300]
    )


def _as_json(label: StepLabel | None) -> dict[str, Any] | None:
    if label is None:
        return None
    return {"value": label.value, "neutral": label.neutral, "origin": label.origin}


def _labelled_step(item: QueueItem, index: int) -> None:
    """Refuse a step that does not exist or is not the agent's (a user or system message)."""
    step = item.trajectory.steps.filter(index=index).only("kind", "role").first()
    if step is None:
        raise ApplicationError(f"Trajectory {item.trajectory_id} has no step {index}.")
    if not step.is_assistant_turn:
        raise ApplicationError(
            f"Step {index} is a {step.role} message: only the agent's turns (tool calls and "
            "its replies) are labelled."
        )


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
    _labelled_step(item, index)
    with transaction.atomic():
        _require_hold(item, user)
        label = (
            StepLabel.objects.select_for_update()
            .filter(item=item, annotator=user, index=index)
            .first()
        )
        current = label.version if label is not None else 0
        if expected_version is not None and expected_version != current:
            when = f" at {timezone.localtime(label.updated_at):%H:%M:%S}" if label else ""
            reads = "unmarked" if label is None or label.value is None else f"{label.value:.2f}"
            raise LabelConflict(
                f"Step {index} was changed{when} since this page loaded (in another tab?): it now "
                f"reads {'neutral' if label and label.neutral else reads} (version {current}). "
                "Reload the item to see the current labels; nothing was overwritten."
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
    ones downstream (not judged). An earlier step the annotator labelled by hand (a key or
    neutral) keeps that label; only earlier steps with no label, or with one an earlier
    first-error mark made, become good."""
    _labelled_step(item, index)
    steps = list(  # the agent's turns: user and system messages are never labelled
        item.trajectory.steps.filter(Q(kind="tool") | Q(role="assistant"))
        .order_by("index")
        .values_list("index", flat=True)
    )
    with transaction.atomic():
        _require_hold(item, user)
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
            if step < index and label is not None and label.origin == StepLabel.Origin.KEY:
                continue  # typed by the annotator: a first-error mark never overwrites it
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
        _require_hold(item, user)
        submission, created = Submission.objects.select_for_update().get_or_create(
            item=item, annotator=user
        )
        if expected_version is not None and not created and expected_version != submission.version:
            raise LabelConflict(_submission_changed(submission))
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
            _human_pairs_sync(item)
        gdi_recompute_on_commit(ids=(item.trajectory_id, item.other_id))  # may settle it
    return submission


def _submission_changed(now: Submission) -> str:
    """Why an edit of a stale submission is refused: what the item reads now, what to do."""
    reads = [
        "no score" if now.trajectory_value is None else f"score {now.trajectory_value:.2f}",
        f"choice {now.choice}" if now.choice else "",
        "" if now.first_error is None else f"first error at step {now.first_error}",
        "submitted" if now.submitted_at else "not submitted",
    ]
    return (
        f"This item was changed at {timezone.localtime(now.updated_at):%H:%M:%S} since the page "
        f"loaded (in another tab?): it now reads {', '.join(r for r in reads if r)} (version "
        f"{now.version}). Reload it; nothing was overwritten."
    )


def _human_pairs_sync(item: QueueItem) -> None:
    """The human preference pairs of a pairwise item: one per annotator who chose A or B, made
    only once the item is complete for everyone (blind overlap: the pairs page would otherwise
    show one annotator's choice to the next)."""
    queue = item.queue
    both = [item.trajectory_id, item.other_id]
    PreferencePair.objects.filter(
        source=PreferencePair.Source.HUMAN,
        method=f"queue:{queue.pk}",
        chosen_id__in=both,
        rejected_id__in=both,
    ).delete()
    completed = QueueItem.objects.filter(pk=item.pk).values_list("completed", flat=True)[0]
    if completed < queue.annotators_per_item:
        return
    for submission in Submission.objects.filter(
        item=item, submitted_at__isnull=False, choice__in=("A", "B")
    ).select_related("annotator"):
        chosen, rejected = both if submission.choice == "A" else both[::-1]
        PreferencePair.objects.create(
            task_ref=item.trajectory.task_ref[:300],
            chosen_id=chosen,
            rejected_id=rejected,
            source=PreferencePair.Source.HUMAN,
            method=f"queue:{queue.pk}",
            created_by=submission.annotator,
        )


# --- calibrations -----------------------------------------------------------------------------------


def calibration_fit(
    *, reward_model, user=None, folds: int = 5, seed: int = 0, queue: AnnotationQueue | None = None
) -> Calibration:
    """Fit rubric weights and an isotonic map from the human step labels (every label, or one
    queue's; of items complete for everyone: blind overlap keeps the others private) against
    this version's step scores, with cross-validation."""
    rows = [
        {"rubrics": r["rubrics"], "model": r["raw_model"], "human": r["human"]}
        for r in labelled_steps(reward_model=reward_model, queue=queue)
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


def calibration_apply(
    *,
    calibration: Calibration,
    user=None,
    trajectory_ids: list[int] | None = None,
    parent_job=None,
) -> Calibration:
    """A new reward-model version carrying the calibration, and a job re-scoring everything the
    old version scored (or only ``trajectory_ids``, as a pipeline's calibrate stage does: its
    iteration's trajectories, the job a child of ``parent_job``). The old version's scores stay
    as they are."""
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
            profile=old.profile,  # the profile the calibrated scores were made with
        )
        ids = (
            list(
                TrajectoryScore.objects.filter(reward_model=old).values_list(
                    "trajectory_id", flat=True
                )
            )
            if trajectory_ids is None
            else list(trajectory_ids)
        )
        run = (
            scoring_launch(reward_model=new, trajectory_ids=ids, user=user, parent_job=parent_job)
            if ids
            else None
        )
        calibration.applied_as = new
        calibration.rescoring_run = run
        calibration.save(update_fields=["applied_as", "rescoring_run"])
    return calibration


# --- the simulated annotator ------------------------------------------------------------------------

SIMULATED_USERNAME = "simulated-annotator"
SIMULATED_KEYS = {True: 2, False: 1}  # the queue's 2-point scale: 1 bad, 2 good


def simulated_annotator_user():
    """The user the simulated annotator's labels are recorded under (created inactive, with no
    password, the first time): every label, submission and edit it makes names it."""
    users = get_user_model()
    user = users.objects.filter(username=SIMULATED_USERNAME).first()
    if user is not None:
        return user
    try:
        with transaction.atomic():
            user = users(
                username=SIMULATED_USERNAME,
                role=Role.ANNOTATOR,
                is_active=False,
                first_name="Simulated",
                last_name="annotator",
            )
            user.set_unusable_password()
            user.save()
    except IntegrityError:  # created meanwhile by another job
        user = users.objects.get(username=SIMULATED_USERNAME)
    return user


def simulated_calibration_launch(
    *,
    name: str,
    reward_model,
    trajectory_ids: list[int],
    rescore_ids: list[int] | None = None,
    task_set=None,
    error_rate: float = 0.0,
    seed: int = 0,
    max_trajectories: int = 50,
    max_steps: int = 50,
    folds: int = 5,
    user=None,
    parent_job=None,
) -> SimulatedAnnotation:
    """A job that queues up to ``max_trajectories`` of ``trajectory_ids`` (training trajectories:
    of ``task_set`` when given, never of a held-out split), labels their steps as the simulated
    annotator, fits a calibration of ``reward_model`` on that queue, applies it, and re-scores
    ``rescore_ids`` (default: the queued trajectories) with the new version."""
    ids = sorted({int(i) for i in trajectory_ids})
    if not ids:
        raise ApplicationError("Give the trajectories the simulated annotator should label.")
    if not 0.0 <= float(error_rate) <= 1.0:
        raise ApplicationError(f"The error rate must be from 0 to 1, not {error_rate}.")
    if max_trajectories < 1 or max_steps < 1 or folds < 2:
        raise ApplicationError("Label at least 1 trajectory and 1 step, with at least 2 folds.")
    with transaction.atomic():
        annotation = SimulatedAnnotation.objects.create(
            name=name[:120],
            reward_model=reward_model,
            task_set=task_set,
            trajectory_ids=ids,
            rescore_ids=sorted({int(i) for i in rescore_ids}) if rescore_ids else [],
            error_rate=float(error_rate),
            seed=seed,
            max_trajectories=max_trajectories,
            max_steps=max_steps,
            folds=folds,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        annotation.job = job_enqueue(
            kind=Kinds.CALIBRATE_SIMULATED,
            params={"annotation_id": annotation.pk},
            user=user,
            parent=parent_job,
            message=f"Waiting for a worker to label up to {max_trajectories} trajectories.",
        )
        annotation.save(update_fields=["job"])
    return annotation


def _simulated_pick(annotation: SimulatedAnnotation) -> dict[str, dict[str, list]]:
    """The trajectories to queue (a seeded sample) with their step indexes, truth and given
    labels. Refuses trajectories of a held-out split or of another task set than the run's."""
    inputs = simulation_inputs(trajectory_ids=annotation.trajectory_ids)
    usable = []
    for tid, data in sorted(inputs.items()):
        if data["split"] in HELD_OUT_SPLITS or (
            annotation.task_set_id and data["task"] and data["task_set"] != annotation.task_set_id
        ):
            raise ApplicationError(
                f"Trajectory {tid} is of a task outside the training tasks (split "
                f"{data['split'] or '?'}, task set {data['task_set']}): the simulated annotator "
                "labels training trajectories only."
            )
        if data["spec"] is not None and data["reference"] and data["spec"].steps:
            usable.append(tid)
    if not usable:
        raise ApplicationError(
            f"None of the {len(annotation.trajectory_ids)} trajectories has steps and a task "
            "with a reference solution: the simulated annotator has nothing to label."
        )
    if len(usable) > annotation.max_trajectories:
        usable = sorted(random.Random(annotation.seed).sample(usable, annotation.max_trajectories))
    picked = {}
    for tid in usable:
        spec, reference = inputs[tid]["spec"], inputs[tid]["reference"]
        labels = simulate_labels(
            spec, reference, error_rate=annotation.error_rate, seed=annotation.seed, key=tid
        )
        steps = sorted(spec.steps, key=lambda s: s.index)[: annotation.max_steps]
        n = len(steps)
        picked[str(tid)] = {
            "index": [s.index for s in steps],
            "truth": labels.truth[:n],
            "given": labels.given[:n],
        }
    return picked


def simulated_queue(*, annotation: SimulatedAnnotation) -> AnnotationQueue:
    """The annotation's queue (created once): a 2-point step queue over the picked
    trajectories, its source "simulated annotator", its guidelines saying how it was labelled."""
    if annotation.queue_id is not None:
        return annotation.queue
    picked = _simulated_pick(annotation)
    guidelines = (
        "Labelled by the simulated annotator, not a person: a step is good (2) when it and every "
        "step before it make the task's reference-solution call at their position, else bad "
        f"(1); each label flipped with probability {annotation.error_rate:g} (seed "
        f"{annotation.seed}). It reads the reference solution; the rule layer never does."
    )
    with transaction.atomic():
        queue = queue_create(
            name=f"{annotation.name} · simulated {annotation.pk}"[:120],
            mode=AnnotationQueue.Mode.STEPS,
            guidelines=guidelines,
            scale_points=2,
            source=AnnotationQueue.Source.SIMULATED,
            trajectory_ids=[int(t) for t in picked],
            reward_model=annotation.reward_model,
            budget=len(picked),
            seed=annotation.seed,
            user=annotation.created_by,
        )
        annotation.queue = queue
        annotation.labels = picked
        annotation.summary = {
            "trajectories": len(picked),
            "steps": sum(len(p["index"]) for p in picked.values()),
            "good": sum(sum(p["truth"]) for p in picked.values()),
            "flipped": sum(
                sum(t != g for t, g in zip(p["truth"], p["given"], strict=True))
                for p in picked.values()
            ),
        }
        annotation.save(update_fields=["queue", "labels", "summary"])
    return queue


def simulated_label(*, annotation: SimulatedAnnotation, report=None) -> int:
    """Label every item of the annotation's queue as the simulated annotator, through the
    services a person's labels go through (``next_item`` → ``label_set`` per step → ``submit``);
    items it submitted before (a resumed job) are skipped. ``report(done, total)`` after each
    item. Returns the number of items submitted now."""
    queue = simulated_queue(annotation=annotation)
    annotator = simulated_annotator_user()
    total = queue.items.count()
    done = Submission.objects.filter(
        item__queue=queue, annotator=annotator, submitted_at__isnull=False
    ).count()
    reason = f"simulated annotator (error rate {annotation.error_rate:g}, seed {annotation.seed})"
    submitted = 0
    while (item := next_item(queue=queue, user=annotator)) is not None:
        entry = annotation.labels[str(item.trajectory_id)]
        for index, good in zip(entry["index"], entry["given"], strict=True):
            label_set(
                item=item, user=annotator, index=index, key=SIMULATED_KEYS[good], reason=reason
            )
        submit(item=item, user=annotator, comment=f"Labelled by the {reason}.")
        submitted += 1
        if report is not None:
            report(done + submitted, total)
    return submitted


def simulated_fit_apply(*, annotation: SimulatedAnnotation, parent_job=None) -> Calibration:
    """Fit a calibration of the annotation's reward model on its queue's labels (once), and
    apply it (once): a new reward-model version, and a re-scoring job (a child of
    ``parent_job``) of ``rescore_ids``, else of the queued trajectories."""
    if annotation.calibration_id is None:
        labelled = [
            r
            for r in labelled_steps(reward_model=annotation.reward_model, queue=annotation.queue)
            if r["raw_model"] is not None
        ]
        if len(labelled) < MIN_LABELS:
            raise ApplicationError(
                f"The simulated annotator labelled {len(labelled)} scored steps; a calibration "
                f"needs at least {MIN_LABELS}. Queue more trajectories (calibrate.trajectories) "
                "or collect more episodes."
            )
        with transaction.atomic():
            annotation.calibration = calibration_fit(
                reward_model=annotation.reward_model,
                user=annotation.created_by,
                folds=annotation.folds,
                seed=annotation.seed,
                queue=annotation.queue,
            )
            annotation.save(update_fields=["calibration"])
    calibration = annotation.calibration
    if not calibration.applied_as_id:
        ids = annotation.rescore_ids or [int(t) for t in annotation.labels]
        calibration_apply(
            calibration=calibration,
            user=annotation.created_by,
            trajectory_ids=ids,
            parent_job=parent_job,
        )
    return calibration


def simulated_finish(*, annotation: SimulatedAnnotation) -> dict[str, Any]:
    """After the re-scoring: refuse a failed one; record the AUROC of the old and the new
    version's step totals against the annotator's truth on the labelled steps."""
    calibration = annotation.calibration
    run = calibration.rescoring_run if calibration is not None else None
    if calibration is None or calibration.applied_as_id is None:
        raise ApplicationError(f"{annotation}: the calibration was never fitted and applied.")
    if run is not None and run.job is not None and run.job.status != JobStatus.SUCCEEDED:
        raise ApplicationError(
            f"{annotation}: re-scoring with {calibration.applied_as.label} ended {run.job.status} "
            f"(job {run.job_id}: {run.job.error or run.job.message})."
        )
    before = truth_auroc(reward_model=annotation.reward_model, labels=annotation.labels)
    after = truth_auroc(reward_model=calibration.applied_as, labels=annotation.labels)
    annotation.summary = {
        **annotation.summary,
        "labels": calibration.labels,
        "calibration": calibration.pk,
        "reward_model": annotation.reward_model_id,
        "new_reward_model": calibration.applied_as_id,
        "rescored": run.total if run is not None else 0,
        "auroc_before": before["auroc"],
        "auroc_after": after["auroc"],
    }
    annotation.save(update_fields=["summary"])
    return annotation.summary

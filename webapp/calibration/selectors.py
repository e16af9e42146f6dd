"""Reads for the annotation and calibration pages: queues and their items, labelled steps joined
with reward-model scores, the agreement figures computed from them, and what a calibration
changed."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, F, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from trainer_core.calibration import agreement as stats
from trainer_core.calibration.simulated import auroc, truth_labels
from webapp.accounts.permissions import Need, user_can
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
from webapp.common.errors import ApplicationError
from webapp.rewards.models import RewardModel, StepScore, TrajectoryScore
from webapp.rewards.selectors import step_scores
from webapp.trajectories.gdi import ids_filter
from webapp.trajectories.models import Step, Trajectory
from webapp.trajectories.selectors import diff_context, trajectory_specs

OBSERVATION_PREVIEW = 1500


# --- blind overlap: who may see whose labels ---------------------------------------------------


def sees_every_label(*, user) -> bool:
    """Admins see every annotator's labels, submissions and history at any time."""
    return user_can(user, Need.ADMINISTER)


def item_complete(*, item: QueueItem) -> bool:
    """Whether every annotator the item is meant for has submitted it (blind overlap ends)."""
    return item.completed >= item.queue.annotators_per_item


def visible_to(*, rows: QuerySet, user) -> QuerySet:
    """The ``rows`` (labels, submissions, edits: anything with an annotator and an item)
    that ``user`` may read: their own, and everyone's on items complete for everyone; all of
    them for an admin. ``user=None`` (what the server computes for everyone to see: a fitted
    calibration, a dataset export): only the settled ones, of items complete for everyone."""
    if user is not None and sees_every_label(user=user):
        return rows
    complete = Q(item__completed__gte=F("item__queue__annotators_per_item"))
    return rows.filter(complete if user is None else complete | Q(annotator=user))


def human_labels(
    *, queue: AnnotationQueue | None = None, user=None
) -> list[tuple[str, int, float]]:
    """(unit, annotator, value) for every step label with a value (neutral and downstream
    labels carry no value and are left out) that ``user`` may see (:func:`visible_to`)."""
    qs = visible_to(rows=StepLabel.objects.filter(value__isnull=False), user=user)
    if queue is not None:
        qs = qs.filter(item__queue=queue)
    return [
        (f"{tid}:{index}", annotator, value)
        for tid, index, annotator, value in qs.values_list(
            "trajectory_id", "index", "annotator_id", "value"
        )
    ]


def labelled_steps(
    *, reward_model, queue: AnnotationQueue | None = None, user=None
) -> list[dict[str, Any]]:
    """Each labelled step with the mean human value, its tool and domain, and this version's
    step total and rubric scores (None when the version did not score it). Only the labels
    ``user`` may see (:func:`visible_to`; None: those of items complete for everyone)."""
    by_step: dict[tuple[int, int], list[float]] = defaultdict(list)
    qs = visible_to(rows=StepLabel.objects.filter(value__isnull=False), user=user)
    if queue is not None:
        qs = qs.filter(item__queue=queue)
    for tid, index, value in qs.values_list("trajectory_id", "index", "value"):
        by_step[(tid, index)].append(value)
    if not by_step:
        return []
    trajectory_ids = sorted({tid for tid, _ in by_step})
    scores = {
        (s.trajectory_id, s.index): s
        for s in StepScore.objects.filter(
            reward_model=reward_model, trajectory_id__in=trajectory_ids
        )
    }
    tools = {
        (tid, index): (tool, domain)
        for tid, index, tool, domain in Step.objects.filter(
            trajectory_id__in=trajectory_ids
        ).values_list("trajectory_id", "index", "tool", "trajectory__domain")
    }
    rows = []
    for (tid, index), values in sorted(by_step.items()):
        score = scores.get((tid, index))
        tool, domain = tools.get((tid, index), ("", ""))
        rows.append(
            {
                "trajectory": tid,
                "index": index,
                "tool": tool,
                "domain": domain or "—",
                "human": sum(values) / len(values),
                "annotators": len(values),
                "model": score.total if score is not None else None,
                # what a new calibration is fitted on: the total before this version's own one
                "raw_model": (
                    score.raw_total
                    if score is not None and score.raw_total is not None
                    else score.total
                    if score is not None
                    else None
                ),
                "rubrics": {
                    rubric: data.get("value")
                    for rubric, data in (score.rubrics if score is not None else {}).items()
                },
            }
        )
    return rows


def agreement(
    *, reward_model, queue: AnnotationQueue | None = None, seed: int = 0, user=None
) -> dict[str, Any]:
    """Human-to-human (the ceiling) and human-to-model figures with bootstrap intervals, overall
    and per rubric, tool and domain, plus a reliability curve and a confusion matrix; from the
    labels ``user`` may see (blind overlap: their own and those of complete items)."""
    labels = human_labels(queue=queue, user=user)
    ceiling = stats.human_agreement(labels) if labels else {}
    rows = [
        r
        for r in labelled_steps(reward_model=reward_model, queue=queue, user=user)
        if r["model"] is not None
    ]
    human = [r["human"] for r in rows]
    model = [r["model"] for r in rows]
    overall = stats.model_agreement(human, model) if rows else {}
    breakdowns: dict[str, list[dict[str, Any]]] = {}
    for key in ("tool", "domain"):
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            groups[r[key]].append(r)
        breakdowns[key] = [
            {
                "name": name,
                "n": len(group),
                "figures": stats.model_agreement(
                    [g["human"] for g in group], [g["model"] for g in group], n_resamples=300
                )
                if len(group) >= 3
                else {},
            }
            for name, group in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:20]
        ]
    per_rubric = []
    for rubric in [r["id"] for r in reward_model.config.get("rubrics", [])]:
        pairs = [(r["human"], r["rubrics"].get(rubric)) for r in rows]
        pairs = [(h, m) for h, m in pairs if m is not None]
        per_rubric.append(
            {
                "name": rubric,
                "n": len(pairs),
                "figures": stats.model_agreement(
                    [h for h, _ in pairs], [m for _, m in pairs], n_resamples=300
                )
                if len(pairs) >= 3
                else {},
            }
        )
    breakdowns["rubric"] = per_rubric
    scale = queue.scale_points if queue is not None else 5
    levels = [i / (scale - 1) for i in range(scale)]
    confusion = stats.confusion_matrix(human, model, levels) if rows else None
    if confusion is not None:
        confusion["rows"] = [
            {"level": level, "counts": counts}
            for level, counts in zip(confusion["levels"], confusion["counts"], strict=True)
        ]
    return {
        "n_labels": len(labels),
        "n_steps": len(rows),
        "ceiling": ceiling,
        "overall": overall,
        "breakdowns": breakdowns,
        "reliability": stats.reliability_curve(model, human, bins=10) if rows else [],
        "confusion": confusion,
    }


# --- queues and items --------------------------------------------------------------------------


def queue_progress(*, queue: AnnotationQueue) -> dict[str, Any]:
    """Items, submissions needed and done, per annotator."""
    per_annotator = list(
        Submission.objects.filter(item__queue=queue, submitted_at__isnull=False)
        .values("annotator__username")
        .annotate(n=Count("id"))
        .order_by("-n")
    )
    needed = queue.items.count() * queue.annotators_per_item
    done = sum(row["n"] for row in per_annotator)
    return {
        "items": queue.items.count(),
        "needed": needed,
        "done": done,
        "percent": int(100 * done / needed) if needed else 0,
        "per_annotator": per_annotator,
    }


def queue_rows(*, limit: int = 100) -> list[tuple[AnnotationQueue, dict[str, Any]]]:
    """The queues with their progress, for the queue list."""
    queues = AnnotationQueue.objects.select_related("reward_model")[:limit]
    return [(q, queue_progress(queue=q)) for q in queues]


def queue_keyset(*, before_id: int | None, limit: int) -> list[AnnotationQueue]:
    """Queues newest first (the queue list's order), ``limit`` of them below ``before_id``."""
    qs = AnnotationQueue.objects.select_related("reward_model").order_by("-id")
    if before_id is not None:
        qs = qs.filter(pk__lt=before_id)
    return list(qs[:limit])


def item_reservation(*, item: QueueItem, user) -> Reservation | None:
    """``user``'s live reservation of ``item`` (None: they hold none now)."""
    return Reservation.objects.filter(
        item=item, annotator=user, expires_at__gt=timezone.now()
    ).first()


def queue_get(*, id: int) -> AnnotationQueue:
    """The queue with its reward-model version; Http404 when there is none."""
    return get_object_or_404(AnnotationQueue.objects.select_related("reward_model"), pk=id)


def queue_items(*, queue: AnnotationQueue, limit: int = 500) -> QuerySet[QueueItem]:
    return queue.items.select_related("trajectory", "other")[:limit]


def item_get(*, queue_id: int, id: int) -> QueueItem:
    """An item of the queue, with its trajectories; Http404 when there is none in that queue."""
    return get_object_or_404(
        QueueItem.objects.select_related("queue", "trajectory", "other", "queue__reward_model"),
        pk=id,
        queue_id=queue_id,
    )


def item_steps(*, item: QueueItem, user) -> list[Step]:
    """The item's steps, each with its observation preview, this version's score and the
    annotator's own label."""
    reward_model = item.queue.reward_model
    trajectory = item.trajectory
    scores = (
        step_scores(reward_model_id=reward_model.pk, trajectory_id=trajectory.pk)
        if reward_model
        else {}
    )
    mine = {label.index: label for label in StepLabel.objects.filter(item=item, annotator=user)}
    steps = list(trajectory.steps.order_by("index"))
    for step in steps:
        step.preview = step.observation[:OBSERVATION_PREVIEW]
        step.cut = len(step.observation) > OBSERVATION_PREVIEW
        step.score = scores.get(step.index)
        step.label = mine.get(step.index)
    return steps


def item_submission(*, item: QueueItem, user) -> Submission | None:
    return Submission.objects.filter(item=item, annotator=user).first()


def item_pair(*, item: QueueItem) -> dict[str, Any]:
    """A pairwise item's step-aligned diff (nothing for a single trajectory)."""
    if not item.other_id:
        return {}
    diff = diff_context(left=item.trajectory, right=item.other, count=None)
    return {k: diff[k] for k in ("left", "right", "rows", "first_divergence", "scored_by")}


def labels_of(*, item: QueueItem, user) -> QuerySet[StepLabel]:
    return StepLabel.objects.filter(item=item, annotator=user)


def item_edits(*, item: QueueItem, user) -> QuerySet[LabelEdit]:
    """The item's history as ``user`` may read it: only their own edits until the item is
    complete for everyone (blind overlap), everyone's after that or for an admin."""
    edits = LabelEdit.objects.filter(item=item).select_related("annotator")
    return visible_to(rows=edits, user=user)


# --- agreement and calibration -------------------------------------------------------------------


def version_for_page(*, raw: str | None) -> RewardModel | None:
    """The version a calibration page is about: ``raw`` (an id; Http404 when unknown), else the
    newest."""
    if raw and raw.isdigit():
        return get_object_or_404(RewardModel, pk=int(raw))
    return RewardModel.objects.order_by("-created_at").first()


def calibration_page(
    *, version: RewardModel | None, queue_id: str | None, user=None
) -> dict[str, Any]:
    """The agreement figures of ``version`` (on one queue's labels, or all; those ``user`` may
    see), with what the page offers to choose from and the calibrations fitted on that
    version."""
    queue = queue_get(id=int(queue_id)) if queue_id and queue_id.isdigit() else None
    figures = agreement(reward_model=version, queue=queue, user=user) if version else None
    return {
        "version": version,
        "queue": queue,
        "versions": RewardModel.objects.order_by("domain", "-version"),
        "queues": AnnotationQueue.objects.all()[:100],
        "figures": figures,
        "reliability": reliability_plot(curve=figures["reliability"]) if figures else None,
        "calibrations": Calibration.objects.filter(reward_model=version)[:10] if version else [],
    }


PLOT_SIZE, PLOT_PAD = 240, 24


def reliability_plot(*, curve: list[dict]) -> dict[str, Any]:
    """The geometry of the reliability plot (mean human label per model-score bin) that
    ``calibration/partials/reliability.html`` draws as SVG: the frame, the diagonal of perfect
    calibration and one point per bin with labels."""
    span = PLOT_SIZE - 2 * PLOT_PAD

    def xy(x: float, y: float) -> tuple[float, float]:
        return round(PLOT_PAD + x * span, 1), round(PLOT_SIZE - PLOT_PAD - y * span, 1)

    points = [
        xy(b["mean_model"], b["mean_human"])
        for b in curve
        if b.get("n") and b.get("mean_model") is not None and b.get("mean_human") is not None
    ]
    (x0, y0), (x1, y1) = xy(0, 0), xy(1, 1)
    return {
        "size": PLOT_SIZE,
        "pad": PLOT_PAD,
        "span": span,
        "diagonal": {"x0": x0, "y0": y0, "x1": x1, "y1": y1},
        "points": [{"x": x, "y": y} for x, y in points],
        "line": " ".join(f"{x},{y}" for x, y in points),
        "baseline": PLOT_SIZE - 6,
    }


def calibration_get(*, id: int) -> Calibration:
    """The calibration with its versions and re-scoring run; Http404 when there is none."""
    return get_object_or_404(
        Calibration.objects.select_related("reward_model", "applied_as", "rescoring_run__job"),
        pk=id,
    )


def calibration_detail(*, calibration: Calibration) -> dict[str, Any]:
    """A fitted calibration's page: its result, the new weights by size, the old weights."""
    return {
        "calibration": calibration,
        "result": calibration.result,
        "weights": sorted(
            (calibration.result.get("rubric_weights") or {}).items(), key=lambda kv: -kv[1]
        ),
        "old_weights": {
            r["id"]: r["weight"] for r in calibration.reward_model.config.get("rubrics", [])
        },
    }


THRESHOLD = 0.5
LIMIT = 300


def _label(total: float | None) -> str:
    if total is None:
        return "unscored"
    return "good" if total >= THRESHOLD else "bad"


def _ranks(scores: dict[int, float | None], tasks: dict[int, str]) -> dict[int, int]:
    by_task: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for tid, total in scores.items():
        if total is not None:
            by_task[tasks.get(tid, "")].append((total, tid))
    ranks: dict[int, int] = {}
    for group in by_task.values():
        for rank, (_, tid) in enumerate(sorted(group, key=lambda g: (-g[0], g[1])), start=1):
            ranks[tid] = rank
    return ranks


def compare_versions(*, old, new) -> dict[str, Any]:
    """What a calibration changed: step labels (good/bad at 0.5) and trajectory ranks per task,
    between the version it was fitted on (``old``) and the version that applies it (``new``)."""
    old_steps = {
        (t, i): total
        for t, i, total in StepScore.objects.filter(reward_model=old).values_list(
            "trajectory_id", "index", "total"
        )
    }
    step_changes = []
    compared = 0
    for t, i, total in StepScore.objects.filter(reward_model=new).values_list(
        "trajectory_id", "index", "total"
    ):
        if (t, i) not in old_steps:
            continue
        compared += 1
        before = old_steps[(t, i)]
        if _label(before) != _label(total):
            step_changes.append(
                {"trajectory": t, "index": i, "old": before, "new": total,
                 "old_label": _label(before), "new_label": _label(total)}
            )  # fmt: skip
    old_totals = dict(
        TrajectoryScore.objects.filter(reward_model=old).values_list("trajectory_id", "total")
    )
    new_totals = dict(
        TrajectoryScore.objects.filter(reward_model=new).values_list("trajectory_id", "total")
    )
    common = set(old_totals) & set(new_totals)
    tasks = dict(Trajectory.objects.filter(pk__in=common).values_list("pk", "task_ref"))
    old_ranks = _ranks({t: old_totals[t] for t in common}, tasks)
    new_ranks = _ranks({t: new_totals[t] for t in common}, tasks)
    rank_changes = sorted(
        (
            {
                "trajectory": t,
                "task": tasks.get(t, ""),
                "old_rank": old_ranks.get(t),
                "new_rank": new_ranks.get(t),
                "old": old_totals[t],
                "new": new_totals[t],
            }
            for t in common
            if old_ranks.get(t) != new_ranks.get(t)
        ),  # fmt: skip
        key=lambda r: (r["task"], r["new_rank"] or 0),
    )
    return {
        "steps_compared": compared,
        "step_changes": step_changes[:LIMIT],
        "step_changes_total": len(step_changes),
        "trajectories_compared": len(common),
        "rank_changes": rank_changes[:LIMIT],
        "rank_changes_total": len(rank_changes),
    }


# --- the simulated annotator ---------------------------------------------------------------------

#: task splits a simulated annotator never labels: what recipes are chosen and judged on
HELD_OUT_SPLITS = ("heldout", "validation", "test")


def simulated_for_job(*, annotation_id: int | None) -> SimulatedAnnotation:
    """The simulated annotation a job runs (ApplicationError: deleted since launch)."""
    annotation = (
        SimulatedAnnotation.objects.select_related(
            "reward_model", "queue", "calibration", "calibration__applied_as", "created_by"
        )
        .filter(pk=annotation_id)
        .first()
    )
    if annotation is None:
        raise ApplicationError(f"Simulated annotation {annotation_id} no longer exists.")
    return annotation


def simulation_inputs(*, trajectory_ids: list[int]) -> dict[int, dict[str, Any]]:
    """What the simulated annotator reads of each trajectory: its steps (the canonical spec), its
    task's reference solution, the task's split and task set (None for a trajectory without a
    task)."""
    rows = Trajectory.objects.filter(pk__in=trajectory_ids).values_list(
        "pk", "task_id", "task__task_set_id", "task__data"
    )
    specs = trajectory_specs(ids=list(trajectory_ids))
    out = {}
    for pk, task_id, task_set_id, data in rows:
        data = data or {}
        out[pk] = {
            "spec": specs.get(pk),
            "task": task_id,
            "task_set": task_set_id,
            "reference": list(data.get("reference_solution") or []),
            "split": str((data.get("metadata") or {}).get("split") or ""),
        }
    return out


def truth_auroc(*, reward_model, labels: dict[str, dict[str, list]]) -> dict[str, Any]:
    """The AUROC of ``reward_model``'s step totals against the simulated annotator's TRUTH labels
    (``SimulatedAnnotation.labels``): the chance that a step on the reference path scores above
    one off it. Steps the version did not score are left out; ``auroc`` is None when either class
    is empty."""
    ids = [int(tid) for tid in labels]
    totals = {
        (tid, index): total
        for tid, index, total in StepScore.objects.filter(
            reward_model=reward_model, trajectory_id__in=ids
        ).values_list("trajectory_id", "index", "total")
    }
    scores, truth = [], []
    for tid, entry in labels.items():
        for index, good in zip(entry["index"], entry["truth"], strict=True):
            total = totals.get((int(tid), index))
            if total is not None:
                scores.append(total)
                truth.append(bool(good))
    return {
        "auroc": auroc(scores, truth),
        "steps": len(scores),
        "good": sum(truth),
        "bad": len(truth) - sum(truth),
    }


def reference_truth(*, trajectory_ids: list[int]) -> dict[str, dict[str, list]]:
    """The simulated annotator's truth for any trajectories (in ``SimulatedAnnotation.labels``'
    shape, without ``given``): for measuring a version with :func:`truth_auroc` on a set that
    was never labelled. Trajectories without a task reference solution are left out."""
    out: dict[str, dict[str, list]] = {}
    for tid, data in sorted(simulation_inputs(trajectory_ids=trajectory_ids).items()):
        if data["spec"] is None or not data["reference"] or not data["spec"].steps:
            continue
        steps = sorted(data["spec"].steps, key=lambda s: s.index)
        out[str(tid)] = {
            "index": [s.index for s in steps],
            "truth": truth_labels(data["spec"], data["reference"]),
        }
    return out


def queue_item_keyset(
    *, queue: AnnotationQueue, after_position: int | None, limit: int
) -> list[QueueItem]:
    """Up to ``limit`` items of ``queue`` in queue order, after ``after_position``."""
    qs = queue.items.order_by("position")
    if after_position is not None:
        qs = qs.filter(position__gt=after_position)
    return list(qs[:limit])


def gdi_feedback(*, ids: list[int]) -> dict[int, list[float]]:
    """The human feedback on trajectories ``ids`` for their GDI (``webapp.trajectories.gdi``),
    settled answers only (items complete for everyone, as a dataset export reads them): each
    annotator's trajectory score (0..1), each annotator's mean step label on an item, and each
    pairwise choice (the chosen side 1, the other 0, equal 0.5 to both)."""
    signals: dict[int, list[float]] = defaultdict(list)
    submitted = visible_to(
        rows=Submission.objects.filter(submitted_at__isnull=False).filter(
            ids_filter(field="item__trajectory_id", ids=ids)
            | ids_filter(field="item__other_id", ids=ids)
        ),
        user=None,
    )
    for a, b, value, choice in submitted.values_list(
        "item__trajectory_id", "item__other_id", "trajectory_value", "choice"
    ):
        if b is not None and choice in ("A", "B", "E"):
            won = {"A": (1.0, 0.0), "B": (0.0, 1.0), "E": (0.5, 0.5)}[choice]
            signals[a].append(won[0])
            signals[b].append(won[1])
        elif value is not None:
            signals[a].append(value)
    labels = visible_to(
        rows=StepLabel.objects.filter(
            ids_filter(field="trajectory_id", ids=ids), value__isnull=False
        ),
        user=None,
    )
    per_item: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for tid, item, annotator, value in labels.values_list(
        "trajectory_id", "item_id", "annotator_id", "value"
    ):
        per_item[(tid, item, annotator)].append(value)
    for (tid, _, _), values in sorted(per_item.items()):
        signals[tid].append(sum(values) / len(values))
    wanted = set(ids)
    return {pk: values for pk, values in signals.items() if pk in wanted}

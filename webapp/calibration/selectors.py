"""Reads for the annotation and calibration pages: labelled steps joined with reward-model
scores, and the agreement figures computed from them."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from webapp.calibration.models import AnnotationQueue, StepLabel


def human_labels(queue: AnnotationQueue | None = None) -> list[tuple[str, int, float]]:
    """(unit, annotator, value) for every step label with a value (neutral and downstream
    labels carry no value and are left out)."""
    qs = StepLabel.objects.filter(value__isnull=False)
    if queue is not None:
        qs = qs.filter(item__queue=queue)
    return [
        (f"{tid}:{index}", annotator, value)
        for tid, index, annotator, value in qs.values_list(
            "trajectory_id", "index", "annotator_id", "value"
        )
    ]


def labelled_steps(reward_model, queue: AnnotationQueue | None = None) -> list[dict[str, Any]]:
    """Each labelled step with the mean human value, its tool and domain, and this version's
    step total and rubric scores (None when the version did not score it)."""
    from webapp.rewards.models import StepScore
    from webapp.trajectories.models import Step

    by_step: dict[tuple[int, int], list[float]] = defaultdict(list)
    qs = StepLabel.objects.filter(value__isnull=False)
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
    reward_model, queue: AnnotationQueue | None = None, *, seed: int = 0
) -> dict[str, Any]:
    """Human-to-human (the ceiling) and human-to-model figures with bootstrap intervals, overall
    and per rubric, tool and domain, plus a reliability curve and a confusion matrix."""
    from trainer_core.calibration import agreement as stats

    labels = human_labels(queue)
    ceiling = stats.human_agreement(labels) if labels else {}
    rows = [r for r in labelled_steps(reward_model, queue) if r["model"] is not None]
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

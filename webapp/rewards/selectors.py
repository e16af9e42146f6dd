"""Reads for the reward pages and for the trajectory pages' score panels."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count

from webapp.rewards.models import RewardModel, StepScore, TrajectoryScore

BINS = 10


def versions_for(trajectory_id: int) -> list[RewardModel]:
    ids = TrajectoryScore.objects.filter(trajectory_id=trajectory_id).values_list(
        "reward_model_id", flat=True
    )
    return list(RewardModel.objects.filter(pk__in=list(ids)).order_by("-created_at"))


def step_scores(reward_model_id: int, trajectory_id: int) -> dict[int, StepScore]:
    return {
        s.index: s
        for s in StepScore.objects.filter(
            reward_model_id=reward_model_id, trajectory_id=trajectory_id
        )
    }


def common_version(left_id: int, right_id: int) -> RewardModel | None:
    """The newest version that scored both trajectories."""
    left = set(
        TrajectoryScore.objects.filter(trajectory_id=left_id).values_list(
            "reward_model_id", flat=True
        )
    )
    right = set(
        TrajectoryScore.objects.filter(trajectory_id=right_id).values_list(
            "reward_model_id", flat=True
        )
    )
    both = left & right
    return RewardModel.objects.filter(pk__in=both).order_by("-created_at").first() if both else None


def histogram(values: list[float]) -> list[dict[str, Any]]:
    """Counts of totals in BINS equal bins over 0..1, with the bar width in percent."""
    counts = [0] * BINS
    for v in values:
        counts[min(BINS - 1, max(0, int(v * BINS)))] += 1
    peak = max(counts) or 1
    return [
        {
            "low": i / BINS,
            "high": (i + 1) / BINS,
            "count": c,
            "width": round(100 * c / peak),
        }
        for i, c in enumerate(counts)
    ]


def distributions(reward_model: RewardModel, *, by: str) -> list[dict[str, Any]]:
    """Score distributions of one version grouped by ``policy`` (policy or agent/model) or
    ``task``: count, mean, unscored count and a histogram per group (largest groups first)."""
    field = "trajectory__task_ref" if by == "task" else "trajectory__policy"
    groups: dict[str, list[float]] = defaultdict(list)
    unscored: dict[str, int] = defaultdict(int)
    rows = TrajectoryScore.objects.filter(reward_model=reward_model).values_list(
        field, "trajectory__agent", "trajectory__model", "total"
    )
    for key, agent, model, total in rows:
        name = key or (f"{agent} · {model}" if by != "task" else "") or "—"
        if total is None:
            unscored[name] += 1
        else:
            groups[name].append(total)
    out = []
    for name in sorted(set(groups) | set(unscored), key=lambda n: -len(groups.get(n, []))):
        values = groups.get(name, [])
        out.append(
            {
                "name": name,
                "count": len(values),
                "unscored": unscored.get(name, 0),
                "mean": sum(values) / len(values) if values else None,
                "bins": histogram(values),
            }
        )
    return out[:50]


def versions_overview() -> list[RewardModel]:
    return list(
        RewardModel.objects.annotate(
            scored=Count("scores", distinct=True), run_count=Count("runs", distinct=True)
        ).order_by("domain", "-version")
    )

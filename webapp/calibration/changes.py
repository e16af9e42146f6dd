"""What a calibration changed: step labels (good/bad at 0.5) and trajectory ranks per task,
between the version it was fitted on and the version that applies it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

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


def compare_versions(old, new) -> dict[str, Any]:
    from webapp.rewards.models import StepScore, TrajectoryScore
    from webapp.trajectories.models import Trajectory

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

"""Reading evaluations: comparisons of two runs, leaderboards, checkpoint and pipeline curves.

The maths is ``trainer_core.evaluation``'s; this module picks the runs and joins the answers with
what a page links to (the trajectories behind a cell, the diff of two policies on one task).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from webapp.evaluation.models import EvaluationRun, Pipeline, PipelineStage
from webapp.jobs.models import JobStatus


def finished_runs() -> QuerySet[EvaluationRun]:
    return EvaluationRun.objects.filter(job__status=JobStatus.SUCCEEDED).select_related(
        "policy", "task_set", "collect_run"
    )


def leaderboard_runs(task_set, *, every_run: bool = False) -> list[EvaluationRun]:
    """The finished runs on ``task_set``: each policy's newest one (all of them with
    ``every_run``)."""
    runs = list(finished_runs().filter(task_set=task_set).order_by("-pk"))
    if every_run:
        return runs
    seen: set[int] = set()
    newest = []
    for run in runs:
        if run.policy_id not in seen:
            seen.add(run.policy_id)
            newest.append(run)
    return newest


def leaderboard(
    task_set, *, metric: str = "success", correction: str = "holm", every_run: bool = False
) -> dict[str, Any]:
    from trainer_core.evaluation.leaderboard import Entry, build_leaderboard
    from webapp.evaluation.services import episode_records

    runs = leaderboard_runs(task_set, every_run=every_run)
    by_key = {f"run{run.pk}": run for run in runs}
    entries = [
        Entry(key=key, label=run.label, episodes=episode_records(run))
        for key, run in by_key.items()
    ]
    entries = [e for e in entries if e.episodes]
    if not entries:
        return {"rows": [], "matrix": [], "runs": {}, "metric": metric, "correction": correction}
    board = build_leaderboard(entries, metric=metric, correction=correction)
    rows = [{"row": row, "run": by_key[row.key]} for row in board.rows]
    order = [row.key for row in board.rows]
    matrix = []
    for a in order:
        cells = []
        for b in order:
            result = board.matrix.get((a, b)) or board.matrix.get((b, a))
            cells.append({"a": by_key[a], "b": by_key[b], "same": a == b, "test": result})
        matrix.append({"run": by_key[a], "cells": cells})
    return {
        "rows": rows,
        "matrix": matrix,
        "runs": by_key,
        "metric": metric,
        "correction": correction,
    }


def leaderboard_index() -> list[dict[str, Any]]:
    """Task sets that have finished evaluations, grouped by domain."""
    from webapp.tasks.models import TaskSet

    counts: dict[int, int] = {}
    done = EvaluationRun.objects.filter(job__status=JobStatus.SUCCEEDED)
    for task_set_id in done.values_list("task_set_id", flat=True):
        counts[task_set_id] = counts.get(task_set_id, 0) + 1
    sets = TaskSet.objects.filter(pk__in=counts).order_by("name")
    groups: dict[str, list[dict[str, Any]]] = {}
    for task_set in sets:
        domain = getattr(task_set, "domain", "") or task_set.environment or "other"
        groups.setdefault(str(domain), []).append(
            {"task_set": task_set, "runs": counts[task_set.pk]}
        )
    return [{"domain": d, "sets": s} for d, s in sorted(groups.items())]


def comparison(run_a: EvaluationRun, run_b: EvaluationRun, *, correction: str = "holm"):
    """The statistics of two runs on their shared tasks, and per task the outcomes with the
    trajectories to open and diff."""
    from trainer_core.evaluation.compare import compare_runs
    from webapp.evaluation.services import episode_records

    records_a, records_b = episode_records(run_a), episode_records(run_b)
    result = compare_runs(records_a, records_b, correction=correction, seed=run_a.seed)
    first_a, first_b = _first_trajectories(run_a), _first_trajectories(run_b)
    tasks = sorted({r.task for r in records_a} | {r.task for r in records_b})
    per_task = []
    for task in tasks:
        a = [r for r in records_a if r.task == task]
        b = [r for r in records_b if r.task == task]
        per_task.append(
            {
                "task": task,
                "a": f"{sum(r.success for r in a)}/{len(a)}" if a else "—",
                "b": f"{sum(r.success for r in b)}/{len(b)}" if b else "—",
                "changed": bool(a and b)
                and (sum(r.success for r in a) / len(a) != sum(r.success for r in b) / len(b)),
                "trajectory_a": first_a.get(task),
                "trajectory_b": first_b.get(task),
            }
        )
    return {"result": result, "per_task": per_task}


def _first_trajectories(run: EvaluationRun) -> dict[str, int]:
    """Task id → the trajectory of its first episode in the run."""
    from webapp.rollouts.models import Episode

    if run.collect_run_id is None:
        return {}
    found: dict[str, int] = {}
    episodes = (
        Episode.objects.filter(run_id=run.collect_run_id, trajectory__isnull=False)
        .order_by("task__external_id", "index")
        .values_list("task__external_id", "trajectory_id")
    )
    for task, trajectory in episodes:
        found.setdefault(task, trajectory)
    return found


def _point(label: str, step: int, run: EvaluationRun | None) -> dict[str, Any]:
    metrics = (run.metrics or {}) if run is not None else {}
    return {
        "label": label,
        "step": step,
        "run": run.pk if run is not None else None,
        "success_rate": metrics.get("success_rate"),
        "success_low": metrics.get("success_low"),
        "success_high": metrics.get("success_high"),
        "mean_reward": metrics.get("mean_reward"),
        "n": metrics.get("n", 0),
    }


def checkpoint_curve(training_run) -> list[dict[str, Any]]:
    """Success and reward against training step, one point per evaluated checkpoint (the newest
    evaluation of each)."""
    points = []
    for checkpoint in training_run.checkpoints.order_by("step"):
        run = finished_runs().filter(checkpoint=checkpoint).order_by("-pk").first()
        if run is not None:
            points.append(_point(f"step {checkpoint.step}", checkpoint.step, run))
    return points


def _mcnemar_between(a: EvaluationRun | None, b: EvaluationRun | None) -> dict[str, Any] | None:
    from trainer_core.evaluation.compare import mcnemar
    from webapp.evaluation.services import episode_records

    if a is None or b is None or not a.metrics or not b.metrics:
        return None
    left, right = _keyed(episode_records(a)), _keyed(episode_records(b))
    shared = sorted(set(left) & set(right))
    if not shared:
        return None
    test = mcnemar([left[k] for k in shared], [right[k] for k in shared])
    return test.as_dict()


def _keyed(records) -> dict[tuple[str, int], bool]:
    """(task, j) → success of the task's j-th sample: evaluations of one pipeline use the same
    seeds, so sample j of a task is the same episode seed in both runs."""
    seen: dict[str, int] = {}
    out = {}
    for r in records:
        j = seen.get(r.task, 0)
        out[(r.task, j)] = bool(r.success)
        seen[r.task] = j + 1
    return out


def pipeline_curve(pipeline: Pipeline) -> dict[str, Any]:
    """Held-out success per iteration (the baseline first) and the paired McNemar test of each
    evaluation against the one before and against the baseline."""
    rows = {
        (s.iteration, s.name): s
        for s in PipelineStage.objects.filter(pipeline=pipeline).select_related(
            "evaluation", "training_run"
        )
    }
    points = []
    runs: list[EvaluationRun | None] = []
    baseline = rows.get((0, "baseline"))
    if baseline is not None:
        points.append(_point("start", 0, baseline.evaluation))
        runs.append(baseline.evaluation)
    for it in range(1, len(pipeline.config.get("iterations", [])) + 1):
        stage = rows.get((it, "evaluate"))
        if stage is None:
            break
        method = (pipeline.config["iterations"][it - 1].get("train") or {}).get("method", "")
        points.append(_point(f"iteration {it} ({method.upper()})", it, stage.evaluation))
        runs.append(stage.evaluation)
    comparisons = []
    for i in range(1, len(runs)):
        comparisons.append(
            {
                "label": f"{points[i - 1]['label']} → {points[i]['label']}",
                "mcnemar": _mcnemar_between(runs[i - 1], runs[i]),
            }
        )
        if i > 1:
            comparisons.append(
                {
                    "label": f"{points[0]['label']} → {points[i]['label']}",
                    "mcnemar": _mcnemar_between(runs[0], runs[i]),
                }
            )
    return {"points": points, "comparisons": comparisons}

"""Reading evaluations: comparisons of two runs, leaderboards, checkpoint and pipeline curves.

The maths is ``trainer_core.evaluation``'s; this module picks the runs and joins the answers with
what a page links to (the trajectories behind a cell, the diff of two policies on one task).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import reverse

from trainer_core.evaluation.compare import compare_runs, mcnemar
from trainer_core.evaluation.leaderboard import Entry, build_leaderboard
from trainer_core.evaluation.stats import EpisodeRecord
from webapp.common.errors import ApplicationError
from webapp.evaluation.forms import CheckpointsEvaluationForm
from webapp.evaluation.models import EvaluationRun, Pipeline, PipelineStage
from webapp.evaluation.pipeline_config import parse_config, plan
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts.models import Episode
from webapp.tasks.models import TaskSet
from webapp.training.models import Checkpoint
from webapp.training.selectors import estimator_of


def finished_runs() -> QuerySet[EvaluationRun]:
    return EvaluationRun.objects.filter(job__status=JobStatus.SUCCEEDED).select_related(
        "policy", "task_set", "collect_run"
    )


def leaderboard_runs(*, task_set, every_run: bool = False) -> list[EvaluationRun]:
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
    *, task_set, metric: str = "success", correction: str = "holm", every_run: bool = False
) -> dict[str, Any]:
    runs = leaderboard_runs(task_set=task_set, every_run=every_run)
    by_key = {f"run{run.pk}": run for run in runs}
    entries = [
        Entry(key=key, label=run.label, episodes=episode_records(run=run))
        for key, run in by_key.items()
    ]
    entries = [e for e in entries if e.episodes]
    if not entries:
        return {
            "rows": [],
            "matrix": [],
            "runs": {},
            "metric": metric,
            "correction": correction,
            "board": None,
        }
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
        "board": board,  # the Leaderboard itself (its tests, oriented; its notes)
    }


def leaderboard_index() -> list[dict[str, Any]]:
    """Task sets that have finished evaluations, grouped by domain."""
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


def comparison(*, run_a: EvaluationRun, run_b: EvaluationRun, correction: str = "holm"):
    """The statistics of two runs on their shared tasks, and per task the outcomes with the
    trajectories to open and diff."""
    records_a, records_b = episode_records(run=run_a), episode_records(run=run_b)
    for run, records in ((run_a, records_a), (run_b, records_b)):
        if not records:
            raise ApplicationError(
                f"Evaluation run {run.pk} has no played episodes (status "
                f"{run.job.status if run.job_id else 'unknown'}): compare runs that have "
                "finished."
            )
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
        # the evaluation's episodes: what a click on the point opens (issue 21)
        "url": _episodes_url(run),
    }


def _episodes_url(run: EvaluationRun | None) -> str | None:
    """The trajectories of an evaluation's episodes (its collect run), else its page."""
    if run is None:
        return None
    if run.collect_run_id:
        return f"{reverse('trajectories:list')}?collect_run={run.collect_run_id}"
    return reverse("evaluation:run", args=[run.pk])


def checkpoint_curve(*, training_run) -> list[dict[str, Any]]:
    """Success and reward against training step, one point per evaluated checkpoint (the newest
    evaluation of each)."""
    points = []
    for checkpoint in training_run.checkpoints.order_by("step"):
        run = finished_runs().filter(checkpoint=checkpoint).order_by("-pk").first()
        if run is not None:
            points.append(_point(f"step {checkpoint.step}", checkpoint.step, run))
    return points


def _mcnemar_between(a: EvaluationRun | None, b: EvaluationRun | None) -> dict[str, Any] | None:
    if a is None or b is None or not a.metrics or not b.metrics:
        return None
    left, right = _keyed(episode_records(run=a)), _keyed(episode_records(run=b))
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


def pipeline_curve(*, pipeline: Pipeline) -> dict[str, Any]:
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


# --- runs and what they played -------------------------------------------------------------------


def episode_records(*, run: EvaluationRun) -> list[EpisodeRecord]:
    """The run's played episodes as ``EpisodeRecord``s keyed by task (skipped ones left out: they
    were never played). An episode that failed (the policy or environment broke) counts as a
    failure: leaving it out would flatter the policy."""
    if run.collect_run_id is None:
        return []
    episodes = (
        Episode.objects.filter(
            run_id=run.collect_run_id,
            status__in=[Episode.Status.FINISHED, Episode.Status.FAILED],
        )
        .select_related("task")
        .order_by("task__external_id", "index")
    )
    return [
        EpisodeRecord(
            task=e.task.external_id,
            success=bool(e.success),
            reward=e.reward if e.reward is not None else (1.0 if e.success else 0.0),
            steps=e.steps,
            tokens=e.tokens_in + e.tokens_out,
            cost=e.cost_usd,
        )
        for e in episodes
    ]


def episode_counts(*, run: EvaluationRun) -> dict[str, int]:
    """Failed and skipped episodes of the run's collect run (they are reported beside the
    statistics)."""
    if run.collect_run_id is None:
        return {}
    episodes = Episode.objects.filter(run_id=run.collect_run_id)
    return {
        "episodes_failed": episodes.filter(status=Episode.Status.FAILED).count(),
        "episodes_skipped": episodes.filter(status=Episode.Status.SKIPPED).count(),
    }


def evaluation_list(*, limit: int = 50) -> QuerySet[EvaluationRun]:
    return EvaluationRun.objects.select_related("policy", "task_set", "job")[:limit]


def evaluation_keyset(*, before_id: int | None, limit: int) -> list[EvaluationRun]:
    """Up to ``limit`` evaluation runs, newest (highest id) first, before ``before_id``."""
    runs = EvaluationRun.objects.select_related("policy", "task_set", "job").order_by("-pk")
    if before_id is not None:
        runs = runs.filter(pk__lt=before_id)
    return list(runs[:limit])


def evaluation_get(*, id: int | str) -> EvaluationRun:
    """The run with its policy, task set, job and collect run; Http404 when there is none."""
    return get_object_or_404(
        EvaluationRun.objects.select_related("policy", "task_set", "job", "collect_run"), pk=id
    )


def evaluation_find(*, id: int) -> EvaluationRun | None:
    return EvaluationRun.objects.select_related("policy", "task_set").filter(pk=id).first()


def evaluation_for_job(*, run_id: int | None) -> EvaluationRun:
    """The run an evaluation job works on (ApplicationError: deleted since launch)."""
    run = EvaluationRun.objects.select_related("policy", "task_set").filter(pk=run_id).first()
    if run is None:
        raise ApplicationError(f"Evaluation run {run_id} no longer exists.")
    return run


def evaluation_exists(*, checkpoint: Checkpoint, task_set: TaskSet, samples_per_task: int) -> bool:
    """Whether this checkpoint was evaluated on this task set with this k already."""
    return EvaluationRun.objects.filter(
        checkpoint=checkpoint, task_set=task_set, samples_per_task=samples_per_task
    ).exists()


def pass_rows(*, metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """pass@k and pass^k by k, for the run's table."""
    return [
        {
            "k": k,
            "pass_at_k": (metrics.get("pass_at_k") or {}).get(k),
            "pass_hat_k": (metrics.get("pass_hat_k") or {}).get(k),
        }
        for k in sorted((metrics.get("pass_at_k") or {}), key=int)
    ]


def training_run_section(*, run) -> dict[str, Any]:
    """The checkpoint curve section of a training run's page (``training.hooks``)."""
    return {
        "curve": checkpoint_curve(training_run=run),
        "evaluate_form": CheckpointsEvaluationForm(),
    }


# --- pipelines -----------------------------------------------------------------------------------


def pipeline_list(*, limit: int = 200) -> QuerySet[Pipeline]:
    return Pipeline.objects.select_related("job", "base_policy")[:limit]


def pipeline_keyset(*, before_id: int | None, limit: int) -> list[Pipeline]:
    """Up to ``limit`` pipelines, newest (highest id) first, before ``before_id``."""
    rows = Pipeline.objects.select_related("job", "base_policy").order_by("-pk")
    if before_id is not None:
        rows = rows.filter(pk__lt=before_id)
    return list(rows[:limit])


def pipeline_get(*, id: int) -> Pipeline:
    """The pipeline with its job, policy and task sets; Http404 when there is none."""
    return get_object_or_404(
        Pipeline.objects.select_related("job", "base_policy", "train_task_set", "eval_task_set"),
        pk=id,
    )


def pipeline_find(*, id: int) -> Pipeline | None:
    return Pipeline.objects.filter(pk=id).first()


def pipeline_for_job(*, pipeline_id: int | None) -> Pipeline:
    """The pipeline a pipeline job runs (ApplicationError: deleted since launch)."""
    pipeline = (
        Pipeline.objects.select_related("base_policy", "eval_task_set", "train_task_set")
        .filter(pk=pipeline_id)
        .first()
    )
    if pipeline is None:
        raise ApplicationError(f"Pipeline {pipeline_id} no longer exists.")
    return pipeline


def pipeline_stage(*, pipeline: Pipeline, iteration: int, name: str) -> PipelineStage | None:
    return PipelineStage.objects.filter(pipeline=pipeline, iteration=iteration, name=name).first()


def pipeline_stage_ended(*, pipeline: Pipeline, iteration: int, name: str) -> bool:
    """Whether that stage has ended (its job is over, or it ran without one), or the pipeline
    itself has (it will never get there)."""
    row = PipelineStage.objects.filter(pipeline=pipeline, iteration=iteration, name=name).first()
    if row is not None:
        return row.job_id is None or Job.objects.get(pk=row.job_id).is_terminal
    job = Job.objects.filter(pk=pipeline.job_id).first()
    return job is None or job.is_terminal


def pipeline_stages(*, pipeline: Pipeline) -> QuerySet[PipelineStage]:
    return PipelineStage.objects.filter(pipeline=pipeline).select_related("job")


def _last_registration(pipeline: Pipeline, iteration: int) -> PipelineStage | None:
    return (
        PipelineStage.objects.filter(
            pipeline=pipeline, name="register", iteration__lt=iteration, policy__isnull=False
        )
        .order_by("-iteration")
        .select_related("policy")
        .first()
    )


def current_policy(*, pipeline: Pipeline, iteration: int):
    """The policy iteration ``iteration`` starts from: the last registered one, else the base."""
    before = _last_registration(pipeline, iteration)
    return before.policy if before else pipeline.base_policy


def current_checkpoint(*, pipeline: Pipeline, iteration: int) -> Checkpoint | None:
    """The checkpoint iteration ``iteration`` trains from (None: the pipeline's base model)."""
    before = _last_registration(pipeline, iteration)
    if before is None:
        return None
    return Checkpoint.objects.filter(policy=before.policy).order_by("-pk").first()


def _calibrations(pipeline: Pipeline, iteration: int | None = None) -> QuerySet[PipelineStage]:
    """The pipeline's calibrate stages that made a new reward-model version (up to an
    iteration), newest first."""
    rows = PipelineStage.objects.filter(
        pipeline=pipeline,
        name="calibrate",
        job__simulated_annotation__calibration__applied_as__isnull=False,
    )
    if iteration is not None:
        rows = rows.filter(iteration__lte=iteration)
    return rows.order_by("-iteration").select_related(
        "job__simulated_annotation__calibration__applied_as",
        "job__simulated_annotation__queue",
    )


def current_reward_model(*, pipeline: Pipeline, iteration: int):
    """The reward-model version iteration ``iteration`` scores and builds its dataset with: the
    one made by the last calibrate stage up to it (that iteration's own once it has run), else
    the pipeline's."""
    row = _calibrations(pipeline, iteration).first()
    return row.job.simulated_annotation.calibration.applied_as if row else pipeline.reward_model


def pipeline_context(*, pipeline: Pipeline) -> dict[str, Any]:
    """A pipeline's page: its plan by iteration with each stage's row, and its curve."""
    config = parse_config(pipeline.config)
    rows = {(s.iteration, s.name): s for s in pipeline.stages.select_related("job")}
    calibrated = list(_calibrations(pipeline))
    annotations = {r.iteration: r.job.simulated_annotation for r in calibrated}
    iterations = []
    steps = plan(config)
    raw = (pipeline.config or {}).get("iterations") or []
    for it in sorted({it for it, _ in steps}):
        train = (raw[it - 1].get("train") or {}) if 0 < it <= len(raw) else {}
        iterations.append(
            {
                "number": it,
                "stages": [
                    {"name": name, "row": rows.get((it, name)), "annotation": annotations.get(it)}
                    for i, name in steps
                    if i == it
                ],
                **estimator_of(config=train.get("values") or {}, method=train.get("method", "")),
            }
        )
    return {
        "pipeline": pipeline,
        "iterations": iterations,
        "curve": pipeline_curve(pipeline=pipeline),
        # the reward-model versions the pipeline moved to by calibrating, oldest first
        "calibrated_versions": [
            (r.iteration, r.job.simulated_annotation.calibration.applied_as)
            for r in reversed(calibrated)
        ],
    }


def pipeline_outcomes(*, pipeline: Pipeline) -> list[tuple[str, dict[str, bool]]]:
    """Each evaluation of the pipeline in order (the baseline, then each iteration's), as
    (the trained method or "base", {task id: solved}) — a task's first sample; an episode that
    failed counts as not solved."""
    out: list[tuple[str, dict[str, bool]]] = []
    rows = PipelineStage.objects.filter(pipeline=pipeline).select_related("evaluation")
    by_key = {(s.iteration, s.name): s for s in rows}
    iterations = pipeline.config.get("iterations", [])
    keys = [(0, "baseline", "base")] + [
        (it, "evaluate", ((iterations[it - 1].get("train") or {}).get("method") or "").upper())
        for it in range(1, len(iterations) + 1)
    ]
    for it, name, label in keys:
        stage = by_key.get((it, name))
        if stage is None or stage.evaluation is None:
            continue
        solved: dict[str, bool] = {}
        for record in episode_records(run=stage.evaluation):
            solved.setdefault(record.task, bool(record.success))
        out.append((label, solved))
    return out

"""Evaluation runs: a policy × a task set × k seeded samples per task, played by a collect run
(the evaluation job's child: episodes on the ``rollouts`` queue, a local model's on ``gpu``),
then summarised with honest statistics (``trainer_core.evaluation``).

Also: evaluating every checkpoint of a training run (a checkpoint curve). Pipelines live in
``webapp/evaluation/pipeline.py``; comparisons and leaderboards in ``selectors.py``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.common.errors import ApplicationError
from webapp.evaluation.models import EvaluationRun
from webapp.jobs import kinds, task_names
from webapp.jobs.context import JobContext
from webapp.jobs.models import Job

EVAL_KIND = "evaluation.run"
PIPELINE_KIND = "evaluation.pipeline"


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=EVAL_KIND,
            label="Evaluate a policy",
            task_name=task_names.EVALUATE,
            queue="default",
            resumable=True,
            detail_template="evaluation/partials/evaluation_job_detail.html",
            description="k seeded samples per task of a task set, then success, pass@k, pass^k "
            "and reward with intervals.",
        )
    )
    kinds.register_kind(
        kinds.JobKind(
            name=PIPELINE_KIND,
            label="Pipeline (online loop)",
            task_name=task_names.PIPELINE,
            queue="default",
            resumable=True,
            detail_template="evaluation/partials/pipeline_job_detail.html",
            description="Iterations of collect → score → dataset → train → register → evaluate.",
        )
    )


def evaluation_launch(
    *,
    policy,
    task_set,
    samples_per_task: int = 1,
    max_steps: int = 10,
    concurrency: int = 2,
    seed: int = 0,
    name: str = "",
    checkpoint=None,
    user=None,
    parent_job: Job | None = None,
) -> EvaluationRun:
    """Create the run and its job; the job starts the collect run that plays the episodes."""
    from webapp.jobs.services import job_enqueue
    from webapp.rollouts.services import build

    if samples_per_task < 1 or samples_per_task > 100:
        raise ApplicationError("Samples per task (k) must be between 1 and 100.")
    if max_steps < 1 or concurrency < 1:
        raise ApplicationError("Max steps and concurrency must be at least 1.")
    if not task_set.environment:
        raise ApplicationError(f"Task set {task_set.name!r} names no environment.")
    if not task_set.tasks.exists():
        raise ApplicationError(f"Task set {task_set.name!r} has no tasks.")
    build(policy)  # fail now, in the form, when the policy cannot be built
    with transaction.atomic():
        run = EvaluationRun.objects.create(
            name=name[:200],
            policy=policy,
            task_set=task_set,
            samples_per_task=samples_per_task,
            max_steps=max_steps,
            concurrency=concurrency,
            seed=seed,
            checkpoint=checkpoint,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        run.job = job_enqueue(
            kind=EVAL_KIND,
            params={"run_id": run.pk},
            user=user,
            parent=parent_job,
            message=f"Waiting for a worker to evaluate {policy.name} on {task_set.name}.",
        )
        run.save(update_fields=["job"])
    return run


def episode_records(run: EvaluationRun) -> list[Any]:
    """The run's played episodes as ``EpisodeRecord``s keyed by task (skipped ones left out: they
    were never played). An episode that failed (the policy or environment broke) counts as a
    failure: leaving it out would flatter the policy."""
    from trainer_core.evaluation.stats import EpisodeRecord
    from webapp.rollouts.models import Episode

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


def evaluation_summarize(run: EvaluationRun) -> dict[str, Any]:
    from trainer_core.evaluation.stats import summarize
    from webapp.rollouts.models import Episode

    records = episode_records(run)
    metrics: dict[str, Any] = {}
    if records:
        metrics = summarize(records, k=run.samples_per_task, seed=run.seed).as_dict()
    if run.collect_run_id is not None:
        episodes = Episode.objects.filter(run_id=run.collect_run_id)
        metrics["episodes_failed"] = episodes.filter(status=Episode.Status.FAILED).count()
        metrics["episodes_skipped"] = episodes.filter(status=Episode.Status.SKIPPED).count()
        metrics["tasks"] = len({r.task for r in records})
    run.metrics = metrics
    run.save(update_fields=["metrics"])
    return metrics


def evaluation_job(*, ctx: JobContext) -> None:
    """Stage "": start the collect run (once: the run row remembers it); "summarize": the
    statistics."""
    from webapp.rollouts.services import collect_launch

    run = EvaluationRun.objects.select_related("policy", "task_set").filter(
        pk=ctx.params.get("run_id")
    )
    found = run.first()
    if found is None:
        raise ApplicationError(f"Evaluation run {ctx.params.get('run_id')} no longer exists.")
    if ctx.stage == "":
        with transaction.atomic():
            locked = EvaluationRun.objects.select_for_update().get(pk=found.pk)
            if locked.collect_run_id is None:
                collect = collect_launch(
                    task_set=found.task_set,
                    policy=found.policy,
                    episodes_per_task=found.samples_per_task,
                    max_steps=found.max_steps,
                    concurrency=found.concurrency,
                    seed=found.seed,
                    user=found.created_by,
                    parent_job=Job.objects.get(pk=ctx.job_id),
                )
                locked.collect_run = collect
                locked.save(update_fields=["collect_run"])
                ctx.log(f"collect run {collect.pk}: {collect.episodes_total} episodes")
        ctx.progress(0.05, "Playing the episodes…", force=True)
        return ctx.wait_for_children(next_stage="summarize")

    collect_job = found.collect_run.job if found.collect_run else None
    metrics = evaluation_summarize(found)
    if not metrics.get("n"):
        reason = collect_job.error if collect_job is not None else "no collect run"
        raise ApplicationError(f"No episode of the evaluation was played: {reason}")
    ctx.set_result(**{k: v for k, v in metrics.items() if not isinstance(v, dict)})
    low, high = metrics["success_low"], metrics["success_high"]
    ctx.progress(
        1.0,
        f"Success {metrics['success_rate']:.1%} [{low:.1%}, {high:.1%}] over {metrics['n']} "
        f"episodes of {metrics.get('tasks', 0)} tasks.",
        force=True,
    )


def checkpoints_evaluate(
    *,
    training_run,
    task_set,
    samples_per_task: int = 1,
    max_steps: int = 10,
    seed: int = 0,
    user=None,
) -> list[EvaluationRun]:
    """Register every checkpoint of ``training_run`` as a policy and evaluate each one (those
    already evaluated on this task set with this k are not run again)."""
    from webapp.training.services import checkpoint_register

    checkpoints = list(training_run.checkpoints.order_by("step"))
    if not checkpoints:
        raise ApplicationError(f"{training_run} has no checkpoints yet.")
    launched = []
    for checkpoint in checkpoints:
        if EvaluationRun.objects.filter(
            checkpoint=checkpoint, task_set=task_set, samples_per_task=samples_per_task
        ).exists():
            continue
        policy = checkpoint_register(checkpoint=checkpoint, user=user)
        launched.append(
            evaluation_launch(
                policy=policy,
                task_set=task_set,
                samples_per_task=samples_per_task,
                max_steps=max_steps,
                seed=seed,
                checkpoint=checkpoint,
                name=f"{training_run} step {checkpoint.step}",
                user=user,
            )
        )
    return launched

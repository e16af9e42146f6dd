"""Evaluation runs (a policy × a task set × k seeded samples per task, played by a collect run
that is the evaluation job's child, then summarised with honest statistics from
``trainer_core.evaluation``), evaluating every checkpoint of a training run, and pipelines (the
online loop). The runners are in ``jobs.py``; comparisons and leaderboards in ``selectors.py``.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.db import transaction

from trainer_core.evaluation.stats import summarize
from webapp.common.errors import ApplicationError
from webapp.evaluation import selectors
from webapp.evaluation.models import EvaluationRun, Pipeline
from webapp.evaluation.pipeline_config import parse_config
from webapp.jobs.models import Job
from webapp.jobs.names import Kinds
from webapp.jobs.services import job_enqueue
from webapp.rollouts.services import collect_launch, policy_build
from webapp.tasks.selectors import quarantined_task_ids_query, task_set_find
from webapp.training.services import checkpoint_register, form_fields


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
    if samples_per_task < 1 or samples_per_task > 100:
        raise ApplicationError("Samples per task (k) must be between 1 and 100.")
    if max_steps < 1 or concurrency < 1:
        raise ApplicationError("Max steps and concurrency must be at least 1.")
    if not task_set.environment:
        raise ApplicationError(f"Task set {task_set.name!r} names no environment.")
    if not task_set.tasks.exists():
        raise ApplicationError(f"Task set {task_set.name!r} has no tasks.")
    if not task_set.tasks.exclude(pk__in=quarantined_task_ids_query()).exists():
        raise ApplicationError(
            f"Every task of {task_set.name!r} is quarantined; release some on its health page."
        )
    policy_build(policy=policy)  # fail now, in the form, when the policy cannot be built
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
            kind=Kinds.EVALUATE,
            params={"run_id": run.pk},
            user=user,
            parent=parent_job,
            message=f"Waiting for a worker to evaluate {policy.name} on {task_set.name}.",
        )
        run.save(update_fields=["job"])
    return run


def evaluation_summarize(*, run: EvaluationRun) -> dict[str, Any]:
    """Compute and store the run's statistics from the episodes it played."""
    records = selectors.episode_records(run=run)
    metrics: dict[str, Any] = {}
    if records:
        metrics = summarize(records, k=run.samples_per_task, seed=run.seed).as_dict()
    if run.collect_run_id is not None:
        metrics.update(selectors.episode_counts(run=run))
        metrics["tasks"] = len({r.task for r in records})
    run.metrics = metrics
    run.save(update_fields=["metrics"])
    return metrics


def evaluation_start_collect(*, run: EvaluationRun, parent_job: Job):
    """The collect run that plays the evaluation's episodes, started once: the run row remembers
    it under a row lock, so a resumed job never starts a second. Returns it (None: it existed)."""
    with transaction.atomic():
        locked = EvaluationRun.objects.select_for_update().get(pk=run.pk)
        if locked.collect_run_id is not None:
            return None
        collect = collect_launch(
            task_set=run.task_set,
            policy=run.policy,
            episodes_per_task=run.samples_per_task,
            max_steps=run.max_steps,
            concurrency=run.concurrency,
            seed=run.seed,
            user=run.created_by,
            parent_job=parent_job,
        )
        locked.collect_run = collect
        locked.save(update_fields=["collect_run"])
    return collect


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
    checkpoints = list(training_run.checkpoints.order_by("step"))
    if not checkpoints:
        raise ApplicationError(f"{training_run} has no checkpoints yet.")
    launched = []
    for checkpoint in checkpoints:
        if selectors.evaluation_exists(
            checkpoint=checkpoint, task_set=task_set, samples_per_task=samples_per_task
        ):
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


def pipeline_launch(
    *,
    name: str,
    base_policy,
    train_task_set,
    eval_task_set,
    reward_model,
    config: Any,
    user=None,
) -> Pipeline:
    parsed = parse_config(config)
    for number, iteration in enumerate(parsed.iterations):
        known = {f["name"] for f in form_fields(method=iteration.train.method)}
        unknown = sorted(set(iteration.train.values) - known)
        if unknown:
            raise ApplicationError(
                f"The pipeline configuration is invalid: iterations.{number}.train.values: "
                f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
                f"{iteration.train.method.upper()} option(s); the options are "
                f"{', '.join(sorted(known))}."
            )
    if Pipeline.objects.filter(name=name).exists():
        raise ApplicationError(f"A pipeline named {name!r} exists already; choose another name.")
    base_model = (base_policy.parameters or {}).get("model_dir") or base_policy.model
    if base_policy.kind != "local" or not base_model:
        raise ApplicationError(
            "The starting policy must be a local model (its directory is what the first "
            "training run starts from)."
        )
    if train_task_set.pk == eval_task_set.pk:
        raise ApplicationError(
            "Train and evaluation task sets must differ: held-out success is measured on tasks "
            "the policy never trained on."
        )
    for number, iteration in enumerate(parsed.iterations):
        named = iteration.collect.task_set
        if not named:
            continue
        found = task_set_find(name=named)
        if found is None:
            raise ApplicationError(
                f"The pipeline configuration is invalid: iterations.{number}.collect.task_set: "
                f"no task set is named {named!r} (import it; the demo's and the ablation "
                "presets' sets are made by `steplab demo`)."
            )
        if found.pk == eval_task_set.pk:
            raise ApplicationError(
                f"The pipeline configuration is invalid: iterations.{number}.collect.task_set: "
                f"{named!r} is the evaluation task set; collect on training tasks only."
            )
    dumped = parsed.model_dump(mode="json")
    with transaction.atomic():
        pipeline = Pipeline.objects.create(
            name=name,
            base_policy=base_policy,
            train_task_set=train_task_set,
            eval_task_set=eval_task_set,
            reward_model=reward_model,
            base_model=base_model,
            config=dumped,
            config_yaml=yaml.safe_dump(dumped, sort_keys=False),
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        pipeline.job = job_enqueue(
            kind=Kinds.PIPELINE,
            params={"pipeline_id": pipeline.pk},
            user=user,
            message=f"Waiting for a worker to start pipeline {name}.",
        )
        pipeline.save(update_fields=["job"])
    return pipeline

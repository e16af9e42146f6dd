"""Pipelines: the online loop, as a parent job advanced stage by stage.

A pipeline's plan is an optional baseline evaluation of the starting policy, then per iteration:
collect (the current policy, or a named one such as ``scripted`` for reference trajectories) →
score (a reward-model version) → build a dataset (SFT / GRPO / ...) from that collect run's
trajectories → train (from the current model) → register the newest checkpoint as a policy →
evaluate it on the held-out task set. The registered policy is the next iteration's current one.

Each stage but "register" is a child job (the app's own collect / scoring / export / training /
evaluation jobs, with their own parameters); the parent schedules it and returns, and the child's
end advances the parent to the next stage (the jobs foundation's stage mechanism). A stage row
(``PipelineStage``) is created together with its child job in one transaction, under a row lock
of the pipeline: a parent that resumes after its worker was killed finds what it launched, so no
stage runs twice and no child is duplicated; a child killed mid-way is resumed by the reaper like
any job of its kind.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from webapp.common.errors import ApplicationError
from webapp.evaluation.models import Pipeline, PipelineStage
from webapp.jobs.context import JobContext
from webapp.jobs.models import Job, JobStatus

# --- configuration ----------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CollectStage(_Strict):
    policy: str = Field(
        "current",
        description="'current' (the starting policy, then each iteration's trained one) or the "
        "name of a policy, e.g. 'scripted' for reference trajectories.",
    )
    episodes_per_task: int = Field(1, ge=1, le=64)
    max_steps: int = Field(6, ge=1, le=200)
    concurrency: int = Field(2, ge=1, le=64)
    temperature: float | None = Field(
        None, ge=0, description="Sampling temperature for a local model (None: the policy's own)."
    )
    num_tasks: int = Field(0, ge=0, description="Play only N tasks of the set (0: all).")
    task_offset: int = Field(0, ge=0, description="...starting at this position (by task id).")


class DatasetStage(_Strict):
    kind: Literal["sft", "sft_knowlyr", "dpo", "grpo", "prm"] = "sft"
    outcome: Literal["", "success", "failure"] = Field(
        "", description="Keep only trajectories with this outcome ('' keeps all)."
    )
    min_score: float | None = Field(None, description="Keep trajectories scoring at least this.")


class TrainStage(_Strict):
    method: Literal["sft", "dpo", "grpo"] = "sft"
    values: dict[str, Any] = Field(default_factory=dict, description="Trainer config fields.")


class Iteration(_Strict):
    collect: CollectStage = Field(default_factory=CollectStage)
    dataset: DatasetStage = Field(default_factory=DatasetStage)
    train: TrainStage = Field(default_factory=TrainStage)


class EvaluateStage(_Strict):
    samples_per_task: int = Field(1, ge=1, le=100)
    max_steps: int = Field(6, ge=1, le=200)
    concurrency: int = Field(2, ge=1, le=64)
    seed: int = 0


class PipelineConfig(_Strict):
    baseline: bool = Field(True, description="Evaluate the starting policy first.")
    seed: int = 0
    evaluate: EvaluateStage = Field(default_factory=EvaluateStage)
    iterations: list[Iteration] = Field(min_length=1, max_length=50)


def parse_config(data: Any) -> PipelineConfig:
    """A pipeline configuration from a dict or YAML text, with errors that say which field."""
    if isinstance(data, str):
        try:
            data = yaml.safe_load(data) or {}
        except yaml.YAMLError as exc:
            raise ApplicationError(f"The pipeline configuration is not valid YAML: {exc}") from None
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in exc.errors()
        )
        raise ApplicationError(f"The pipeline configuration is invalid: {problems}") from None


# --- launching ----------------------------------------------------------------------------------


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
    from webapp.jobs.services import job_enqueue
    from webapp.training.services import form_fields

    parsed = parse_config(config)
    for number, iteration in enumerate(parsed.iterations):
        known = {f["name"] for f in form_fields(iteration.train.method)}
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
            kind="evaluation.pipeline",
            params={"pipeline_id": pipeline.pk},
            user=user,
            message=f"Waiting for a worker to start pipeline {name}.",
        )
        pipeline.save(update_fields=["job"])
    return pipeline


# --- the plan -----------------------------------------------------------------------------------

ITERATION_STAGES = ("collect", "score", "dataset", "train", "register", "evaluate")


def plan(config: PipelineConfig) -> list[tuple[int, str]]:
    steps: list[tuple[int, str]] = [(0, "baseline")] if config.baseline else []
    for number in range(1, len(config.iterations) + 1):
        steps += [(number, name) for name in ITERATION_STAGES]
    return steps


def stage_key(iteration: int, name: str) -> str:
    return f"{iteration}:{name}"


def _stage(pipeline: Pipeline, iteration: int, name: str) -> PipelineStage | None:
    return PipelineStage.objects.filter(pipeline=pipeline, iteration=iteration, name=name).first()


def current_policy(pipeline: Pipeline, iteration: int):
    """The policy iteration ``iteration`` starts from: the last registered one, else the base."""
    before = (
        PipelineStage.objects.filter(
            pipeline=pipeline, name="register", iteration__lt=iteration, policy__isnull=False
        )
        .order_by("-iteration")
        .select_related("policy")
        .first()
    )
    return before.policy if before else pipeline.base_policy


def _current_checkpoint(pipeline: Pipeline, iteration: int):
    from webapp.training.models import Checkpoint

    before = (
        PipelineStage.objects.filter(
            pipeline=pipeline, name="register", iteration__lt=iteration, policy__isnull=False
        )
        .order_by("-iteration")
        .first()
    )
    if before is None:
        return None
    return Checkpoint.objects.filter(policy=before.policy).order_by("-pk").first()


def _sampling_policy(policy, temperature: float | None):
    """``policy`` itself, or a sibling with another sampling temperature (for GRPO groups)."""
    from webapp.rollouts.models import Policy

    if temperature is None or policy.kind != "local":
        return policy
    if float((policy.parameters or {}).get("temperature", 0.0)) == float(temperature):
        return policy
    name = f"{policy.name}@t{temperature:g}"[:120]
    sibling, _ = Policy.objects.get_or_create(
        name=name,
        defaults={
            "kind": policy.kind,
            "model": policy.model,
            "prompt_format": policy.prompt_format,
            "parameters": {**(policy.parameters or {}), "temperature": float(temperature)},
            "description": f"{policy.name} sampling at temperature {temperature:g}.",
        },
    )
    return sibling


PROMPT_PARAMETERS = ("system", "list_tools", "max_new_tokens", "top_p", "device")


def prompt_parameters(policy) -> dict[str, Any]:
    """How the starting policy is prompted and decodes: every policy the pipeline registers is
    prompted the same way, and its training data carries the same system prompt."""
    parameters = policy.parameters or {}
    return {k: parameters[k] for k in PROMPT_PARAMETERS if k in parameters}


def training_system(policy) -> str | None:
    """The system prompt to train with when it is not the tools' listing (``list_tools`` off)."""
    from trainer_core.policies.chat_format import DEFAULT_INSTRUCTIONS

    parameters = policy.parameters or {}
    if parameters.get("list_tools", True):
        return None
    return (parameters.get("system") or DEFAULT_INSTRUCTIONS).strip()


def _check_finished(pipeline: Pipeline, iteration: int, name: str) -> None:
    """Refuse to go on when the stage before did not succeed (with what to do)."""
    row = _stage(pipeline, iteration, name)
    what = f"iteration {iteration} {name}" if iteration else "the baseline evaluation"
    if row is None:
        raise ApplicationError(f"Pipeline {pipeline}: {what} never started.")
    if row.job_id is not None:
        job = Job.objects.get(pk=row.job_id)
        if job.status != JobStatus.SUCCEEDED:
            raise ApplicationError(
                f"Pipeline {pipeline}: {what} ended {job.status} (job {job.pk}: "
                f"{job.error or job.message}). Fix it and launch a new pipeline."
            )
    if name == "dataset" and row.dataset is not None:
        rows = int((row.dataset.counts or {}).get("train", 0))
        if rows == 0:
            raise ApplicationError(
                f"Pipeline {pipeline}: the dataset of iteration {iteration} has no training rows "
                f"({row.dataset.counts}); loosen its filters (outcome, min_score) or collect more."
            )


def _launch(ctx: JobContext, pipeline: Pipeline, config: PipelineConfig, it: int, name: str):
    """Create the stage row and its child job (inside the caller's transaction). Returns the row."""
    from webapp.datasets.services import snapshot_create
    from webapp.evaluation.services import evaluation_launch
    from webapp.rewards.services import scoring_launch
    from webapp.rollouts.models import Policy
    from webapp.rollouts.services import collect_launch
    from webapp.training.services import checkpoint_register, training_launch
    from webapp.trajectories.models import Trajectory

    parent = Job.objects.get(pk=ctx.job_id)
    user = pipeline.created_by
    row = PipelineStage(pipeline=pipeline, iteration=it, name=name)
    ev = config.evaluate
    prefix = f"{pipeline.name} i{it}"
    if name in ("baseline", "evaluate"):
        if name == "evaluate":
            row.policy = _stage(pipeline, it, "register").policy
            checkpoint = _current_checkpoint(pipeline, it + 1)
        else:
            row.policy, checkpoint = pipeline.base_policy, None
        run = evaluation_launch(
            policy=row.policy,
            task_set=pipeline.eval_task_set,
            samples_per_task=ev.samples_per_task,
            max_steps=ev.max_steps,
            concurrency=ev.concurrency,
            seed=ev.seed,
            checkpoint=checkpoint,
            name=f"{prefix} {name}",
            user=user,
            parent_job=parent,
        )
        row.evaluation, row.job = run, run.job
    elif name == "collect":
        spec = config.iterations[it - 1].collect
        if spec.policy == "current":
            base = current_policy(pipeline, it)
        else:
            base = Policy.objects.filter(name=spec.policy).first()
            if base is None:
                raise ApplicationError(f"Pipeline {pipeline}: no policy named {spec.policy!r}.")
        row.policy = _sampling_policy(base, spec.temperature)
        task_set = pipeline.train_task_set
        run = collect_launch(
            task_set=task_set,
            policy=row.policy,
            episodes_per_task=spec.episodes_per_task,
            max_steps=spec.max_steps,
            concurrency=spec.concurrency,
            seed=config.seed * 1000 + it,
            user=user,
            parent_job=parent,
            task_offset=spec.task_offset,
            num_tasks=spec.num_tasks,
        )
        row.collect_run, row.job = run, run.job
    elif name == "score":
        collect = _stage(pipeline, it, "collect").collect_run
        ids = list(
            Trajectory.objects.filter(
                idempotency_key__startswith=f"collect-{collect.pk}:", status="finished"
            ).values_list("pk", flat=True)
        )
        if not ids:
            statuses = sorted(collect.episodes.values_list("status", flat=True))
            raise ApplicationError(
                f"Pipeline {pipeline}: iteration {it} collected no finished trajectory (collect "
                f"run {collect.pk}, episodes {statuses}); see the collect run's episodes."
            )
        run = scoring_launch(
            reward_model=pipeline.reward_model, trajectory_ids=ids, user=user, parent_job=parent
        )
        row.scoring_run, row.job = run, run.job
    elif name == "dataset":
        spec = config.iterations[it - 1].dataset
        collect = _stage(pipeline, it, "collect").collect_run
        query: dict[str, Any] = {"collect_run": collect.pk, "splits": {"train": 1.0}}
        system = training_system(pipeline.base_policy)
        if system is not None:
            query["system"] = system
        if spec.outcome:
            query["outcome"] = spec.outcome
        if spec.min_score is not None:
            query["min_score"] = spec.min_score
        snapshot = snapshot_create(
            name=f"{prefix} {spec.kind}"[:120],
            kind=spec.kind,
            query=query,
            reward_model=pipeline.reward_model,
            seed=config.seed,
            user=user,
            parent_job=parent,
        )
        row.dataset, row.job = snapshot, snapshot.job
    elif name == "train":
        spec = config.iterations[it - 1].train
        dataset = _stage(pipeline, it, "dataset").dataset
        checkpoint = _current_checkpoint(pipeline, it)
        values = dict(spec.values)
        if spec.method == "grpo" and "group_size" not in values:
            # offline GRPO takes at most group_size completions of a group: all of them
            values["group_size"] = config.iterations[it - 1].collect.episodes_per_task
        run = training_launch(
            method=spec.method,
            dataset=dataset,
            base_model="" if checkpoint else pipeline.base_model,
            checkpoint=checkpoint,
            values=values,
            name=f"{prefix} {spec.method}",
            user=user,
            parent_job=parent,
        )
        row.training_run, row.job = run, run.job
    elif name == "register":
        training = _stage(pipeline, it, "train").training_run
        checkpoint = training.checkpoints.order_by("-step").first()
        if checkpoint is None:
            raise ApplicationError(f"Pipeline {pipeline}: {training} wrote no checkpoint.")
        row.policy = checkpoint_register(
            checkpoint=checkpoint, name=f"{pipeline.name}-i{it}"[:120], user=user
        )
        inherited = prompt_parameters(pipeline.base_policy)
        if inherited:
            row.policy.parameters = {**row.policy.parameters, **inherited}
            row.policy.save(update_fields=["parameters"])
        row.training_run = training
        row.note = f"checkpoint step {checkpoint.step}"
    row.save()
    return row


def pipeline_job(*, ctx: JobContext) -> Any:
    """Run the pipeline from the stage it is in: check that the stage before succeeded, launch
    this stage's child (once) and wait for it; "register" runs inline and goes straight on."""
    pipeline = (
        Pipeline.objects.select_related("base_policy", "eval_task_set", "train_task_set")
        .filter(pk=ctx.params.get("pipeline_id"))
        .first()
    )
    if pipeline is None:
        raise ApplicationError(f"Pipeline {ctx.params.get('pipeline_id')} no longer exists.")
    config = parse_config(pipeline.config)
    steps = plan(config)
    keys = [stage_key(it, name) for it, name in steps]
    index = keys.index(ctx.stage) if ctx.stage in keys else (len(keys) if ctx.stage else 0)
    while True:
        if index > 0:
            _check_finished(pipeline, *steps[index - 1])
        if index >= len(steps):
            return _finish(ctx, pipeline)
        it, name = steps[index]
        with transaction.atomic():
            Pipeline.objects.select_for_update().get(pk=pipeline.pk)
            row = _stage(pipeline, it, name) or _launch(ctx, pipeline, config, it, name)
        label = f"iteration {it}: {name}" if it else "baseline evaluation"
        ctx.log(f"{label}: {'job ' + str(row.job_id) if row.job_id else row.note or 'done'}")
        ctx.progress(index / len(steps), f"Pipeline at {label}.", force=True)
        next_key = keys[index + 1] if index + 1 < len(keys) else "finish"
        if row.job_id is not None:
            return ctx.wait_for_children(next_stage=next_key)
        index += 1


def _finish(ctx: JobContext, pipeline: Pipeline) -> None:
    from webapp.evaluation.selectors import pipeline_curve

    curve = pipeline_curve(pipeline)
    ctx.set_result(curve=curve["points"], comparisons=curve["comparisons"])
    last = curve["points"][-1] if curve["points"] else None
    message = "Pipeline done."
    if last is not None and last.get("success_rate") is not None:
        message = (
            f"Pipeline done: held-out success {last['success_rate']:.1%} after {last['label']}."
        )
    ctx.progress(1.0, message, force=True)

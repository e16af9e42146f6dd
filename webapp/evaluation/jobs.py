"""The evaluation app's job kinds: an evaluation run, and a pipeline (the online loop).

- An evaluation (``evaluation.run``) starts its collect run once (stage ""), waits for it, then
  summarises the episodes with honest statistics (stage "summarize").
- A pipeline (``evaluation.pipeline``) is a parent job advanced stage by stage along its plan
  (``pipeline_config.plan``): an optional baseline evaluation, then per iteration collect → score
  → [calibrate] → dataset → train → register → evaluate. Each stage but "register" is a child
  job (the app's own collect / scoring / simulated-calibration / export / training / evaluation
  jobs); the parent schedules it and
  returns, and the child's end advances the parent to the next stage. A stage row
  (``PipelineStage``) is created together with its child job in one transaction, under a row
  lock of the pipeline: a parent that resumes after its worker was killed finds what it
  launched, so no stage runs twice and no child is duplicated; a child killed mid-way is resumed
  by the reaper like any job of its kind.
- The reward-model version an iteration scores and builds its dataset with is the pipeline's,
  until a calibrate stage makes a new one (``selectors.current_reward_model``): from then on,
  that iteration's dataset and every later iteration use the calibrated version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from webapp.calibration.services import simulated_calibration_launch
from webapp.common.errors import ApplicationError
from webapp.datasets.services import snapshot_create
from webapp.evaluation import selectors, services
from webapp.evaluation.flags import pipeline_flags_refresh
from webapp.evaluation.models import Pipeline, PipelineStage
from webapp.evaluation.pipeline_config import (
    PipelineConfig,
    parse_config,
    plan,
    prompt_parameters,
    stage_key,
    training_system,
)
from webapp.jobs import kinds
from webapp.jobs.context import JobContext
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.names import Kinds, Queue, Tasks
from webapp.rewards.services import scoring_launch
from webapp.rollouts.selectors import policy_find, reusable_collect_run
from webapp.rollouts.services import collect_launch, policy_add_parameters, policy_with_temperature
from webapp.tasks.selectors import task_set_find
from webapp.training.services import checkpoint_register, training_launch
from webapp.trajectories.selectors import collected_ids


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.EVALUATE,
            label="Evaluate a policy",
            task_name=Tasks.EVALUATE,
            queue=Queue.DEFAULT,
            resumable=True,
            detail_template="evaluation/partials/evaluation_job_detail.html",
            description="k seeded samples per task of a task set, then success, pass@k, pass^k "
            "and reward with intervals.",
        )
    )
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.PIPELINE,
            label="Pipeline (online loop)",
            task_name=Tasks.PIPELINE,
            queue=Queue.DEFAULT,
            resumable=True,
            detail_template="evaluation/partials/pipeline_job_detail.html",
            description="Iterations of collect → score → [calibrate] → dataset → train → register "
            "→ evaluate.",
        )
    )


# --- evaluation runs -----------------------------------------------------------------------------


def evaluation_run(*, ctx: JobContext) -> None:
    """Stage "": start the collect run (once: the run row remembers it); "summarize": the
    statistics."""
    run = selectors.evaluation_for_job(run_id=ctx.params.get("run_id"))
    if ctx.stage == "":
        collect = services.evaluation_start_collect(
            run=run, parent_job=Job.objects.get(pk=ctx.job_id)
        )
        if collect is not None:
            ctx.log(f"collect run {collect.pk}: {collect.episodes_total} episodes")
        ctx.progress(0.05, "Playing the episodes…", force=True)
        return ctx.wait_for_children(next_stage="summarize")

    collect_job = run.collect_run.job if run.collect_run else None
    metrics = services.evaluation_summarize(run=run)
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


# --- pipelines: one launcher per stage -------------------------------------------------------------


class _Stage:
    """What a stage launcher needs: the pipeline, its config, the iteration, the stage row to
    fill in, and the parent job its child hangs under."""

    def __init__(self, ctx: JobContext, pipeline: Pipeline, config: PipelineConfig, it: int, name):
        self.pipeline = pipeline
        self.config = config
        self.it = it
        self.row = PipelineStage(pipeline=pipeline, iteration=it, name=name)
        self.parent = Job.objects.get(pk=ctx.job_id)
        self.user = pipeline.created_by
        self.prefix = f"{pipeline.name} i{it}"

    def earlier(self, name: str) -> PipelineStage:
        """A stage of this iteration that ran before (it exists: the plan is in order)."""
        return selectors.pipeline_stage(pipeline=self.pipeline, iteration=self.it, name=name)

    @property
    def iteration(self):
        return self.config.iterations[self.it - 1]


def _launch_evaluation(stage: _Stage) -> None:
    pipeline, ev = stage.pipeline, stage.config.evaluate
    if stage.row.name == "evaluate":
        stage.row.policy = stage.earlier("register").policy
        checkpoint = selectors.current_checkpoint(pipeline=pipeline, iteration=stage.it + 1)
    else:
        stage.row.policy, checkpoint = pipeline.base_policy, None
    run = services.evaluation_launch(
        policy=stage.row.policy,
        task_set=pipeline.eval_task_set,
        samples_per_task=ev.samples_per_task,
        max_steps=ev.max_steps,
        concurrency=ev.concurrency,
        seed=ev.seed,
        checkpoint=checkpoint,
        name=f"{stage.prefix} {stage.row.name}",
        user=stage.user,
        parent_job=stage.parent,
    )
    stage.row.evaluation, stage.row.job = run, run.job


def _collect_task_set(pipeline: Pipeline, name: str):
    """The task set an iteration collects on: the pipeline's train set, or the one named —
    never the evaluation set (what is reported must not be trained on)."""
    if not name:
        return pipeline.train_task_set
    task_set = task_set_find(name=name)
    if task_set is None:
        raise ApplicationError(f"Pipeline {pipeline}: no task set named {name!r} to collect on.")
    if task_set.pk == pipeline.eval_task_set_id:
        raise ApplicationError(
            f"Pipeline {pipeline}: an iteration collects on {name!r}, the evaluation task set; "
            "collect on training tasks only."
        )
    return task_set


def _launch_collect(stage: _Stage) -> None:
    spec, pipeline = stage.iteration.collect, stage.pipeline
    if spec.policy == "current":
        base = selectors.current_policy(pipeline=pipeline, iteration=stage.it)
    else:
        base = policy_find(name=spec.policy)
        if base is None:
            raise ApplicationError(f"Pipeline {pipeline}: no policy named {spec.policy!r}.")
    stage.row.policy = policy_with_temperature(policy=base, temperature=spec.temperature)
    task_set = _collect_task_set(pipeline, spec.task_set)
    seed = stage.config.seed * 1000 + stage.it
    if spec.reuse and not (spec.task_offset or spec.num_tasks):
        earlier = reusable_collect_run(
            policy=stage.row.policy,
            task_set=task_set,
            episodes_per_task=spec.episodes_per_task,
            max_steps=spec.max_steps,
            seed=seed,
        )
        if earlier is not None:  # no job: the pipeline goes straight on to scoring
            stage.row.collect_run = earlier
            stage.row.note = (
                f"reused collect run {earlier.pk}: the same episodes of the same policy "
                f"({earlier.episodes_total}, {earlier.successes} successful)"
            )
            return
    run = collect_launch(
        task_set=task_set,
        policy=stage.row.policy,
        episodes_per_task=spec.episodes_per_task,
        max_steps=spec.max_steps,
        concurrency=spec.concurrency,
        seed=seed,
        user=stage.user,
        parent_job=stage.parent,
        task_offset=spec.task_offset,
        num_tasks=spec.num_tasks,
    )
    stage.row.collect_run, stage.row.job = run, run.job


def _launch_score(stage: _Stage) -> None:
    collect = stage.earlier("collect").collect_run
    ids = collected_ids(collect_run_id=collect.pk)
    if not ids:
        statuses = sorted(collect.episodes.values_list("status", flat=True))
        raise ApplicationError(
            f"Pipeline {stage.pipeline}: iteration {stage.it} collected no finished trajectory "
            f"(collect run {collect.pk}, episodes {statuses}); see the collect run's episodes."
        )
    run = scoring_launch(
        reward_model=selectors.current_reward_model(pipeline=stage.pipeline, iteration=stage.it),
        trajectory_ids=ids,
        user=stage.user,
        parent_job=stage.parent,
    )
    stage.row.scoring_run, stage.row.job = run, run.job


def _launch_calibrate(stage: _Stage) -> None:
    """The simulated annotator labels (up to ``trajectories`` of) this iteration's collected
    trajectories — the train task set's — through a queue; the calibration fitted on them is
    applied as a new version, which re-scores all of them before the dataset is built."""
    spec = stage.iteration.calibrate
    ids = collected_ids(collect_run_id=stage.earlier("collect").collect_run_id)
    reward_model = selectors.current_reward_model(pipeline=stage.pipeline, iteration=stage.it)
    annotation = simulated_calibration_launch(
        name=f"{stage.prefix} calibrate",
        reward_model=reward_model,
        trajectory_ids=ids,
        rescore_ids=ids,
        task_set=_collect_task_set(stage.pipeline, stage.iteration.collect.task_set),
        error_rate=spec.error_rate,
        seed=spec.seed,
        max_trajectories=spec.trajectories,
        max_steps=spec.max_steps,
        folds=spec.folds,
        user=stage.user,
        parent_job=stage.parent,
    )
    stage.row.job = annotation.job
    stage.row.note = (
        f"{spec.annotator} annotator, error rate {spec.error_rate:g}, up to {spec.trajectories} "
        f"of {len(ids)} trajectories; calibrates {reward_model.label}"
    )[:500]


def _launch_dataset(stage: _Stage) -> None:
    spec = stage.iteration.dataset
    collect = stage.earlier("collect").collect_run
    query: dict[str, Any] = {"collect_run": collect.pk, "splits": {"train": 1.0}}
    system = training_system(stage.pipeline.base_policy)
    if system is not None:
        query["system"] = system
    if spec.outcome:
        query["outcome"] = spec.outcome
    if spec.min_score is not None:
        query["min_score"] = spec.min_score
    snapshot = snapshot_create(
        name=f"{stage.prefix} {spec.kind}"[:120],
        kind=spec.kind,
        query=query,
        reward_model=selectors.current_reward_model(pipeline=stage.pipeline, iteration=stage.it),
        seed=stage.config.seed,
        # a DPO dataset pairs this iteration's own samples by the version's totals
        build_pairs={"method": "outside_in"} if spec.kind == "dpo" else None,
        user=stage.user,
        parent_job=stage.parent,
    )
    stage.row.dataset, stage.row.job = snapshot, snapshot.job


def _launch_train(stage: _Stage) -> None:
    spec = stage.iteration.train
    checkpoint = selectors.current_checkpoint(pipeline=stage.pipeline, iteration=stage.it)
    values = dict(spec.values)
    if spec.method == "grpo" and "group_size" not in values:
        # offline GRPO takes at most group_size completions of a group: all of them
        values["group_size"] = stage.iteration.collect.episodes_per_task
    run = training_launch(
        method=spec.method,
        dataset=stage.earlier("dataset").dataset,
        base_model="" if checkpoint else stage.pipeline.base_model,
        checkpoint=checkpoint,
        values=values,
        name=f"{stage.prefix} {spec.method}",
        user=stage.user,
        parent_job=stage.parent,
    )
    stage.row.training_run, stage.row.job = run, run.job


def _register(stage: _Stage) -> None:
    """Inline (no child job): the newest checkpoint becomes the next iteration's policy,
    prompted like the starting policy."""
    training = stage.earlier("train").training_run
    checkpoint = training.checkpoints.order_by("-step").first()
    if checkpoint is None:
        raise ApplicationError(f"Pipeline {stage.pipeline}: {training} wrote no checkpoint.")
    policy = checkpoint_register(
        checkpoint=checkpoint, name=f"{stage.pipeline.name}-i{stage.it}"[:120], user=stage.user
    )
    stage.row.policy = policy_add_parameters(
        policy=policy, parameters=prompt_parameters(stage.pipeline.base_policy)
    )
    stage.row.training_run = training
    stage.row.note = f"checkpoint step {checkpoint.step}"


LAUNCHERS: dict[str, Callable[[_Stage], None]] = {
    "baseline": _launch_evaluation,
    "collect": _launch_collect,
    "score": _launch_score,
    "calibrate": _launch_calibrate,
    "dataset": _launch_dataset,
    "train": _launch_train,
    "register": _register,
    "evaluate": _launch_evaluation,
}


def _launch(ctx: JobContext, pipeline: Pipeline, config: PipelineConfig, it: int, name: str):
    """Create the stage row and its child job (inside the caller's transaction). Returns the row."""
    stage = _Stage(ctx, pipeline, config, it, name)
    LAUNCHERS[name](stage)
    stage.row.save()
    return stage.row


def _check_finished(pipeline: Pipeline, iteration: int, name: str) -> None:
    """Refuse to go on when the stage before did not succeed (with what to do)."""
    row = selectors.pipeline_stage(pipeline=pipeline, iteration=iteration, name=name)
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


def pipeline_run(*, ctx: JobContext) -> Any:
    """Run the pipeline from the stage it is in: check that the stage before succeeded, launch
    this stage's child (once) and wait for it; "register" runs inline and goes straight on."""
    pipeline = selectors.pipeline_for_job(pipeline_id=ctx.params.get("pipeline_id"))
    config = parse_config(pipeline.config)
    steps = plan(config)
    keys = [stage_key(it, name) for it, name in steps]
    index = keys.index(ctx.stage) if ctx.stage in keys else (len(keys) if ctx.stage else 0)
    while True:
        if index > 0:
            _check_finished(pipeline, *steps[index - 1])
            if steps[index - 1][1] == PipelineStage.Name.EVALUATE:  # flags over its rounds
                pipeline_flags_refresh(pipeline=pipeline, say=ctx.log)
        if index >= len(steps):
            return _finish(ctx, pipeline)
        it, name = steps[index]
        with transaction.atomic():
            Pipeline.objects.select_for_update().get(pk=pipeline.pk)
            row = selectors.pipeline_stage(pipeline=pipeline, iteration=it, name=name) or _launch(
                ctx, pipeline, config, it, name
            )
        label = f"iteration {it}: {name}" if it else "baseline evaluation"
        ctx.log(f"{label}: {'job ' + str(row.job_id) if row.job_id else row.note or 'done'}")
        ctx.progress(index / len(steps), f"Pipeline at {label}.", force=True)
        next_key = keys[index + 1] if index + 1 < len(keys) else "finish"
        if row.job_id is not None:
            return ctx.wait_for_children(next_stage=next_key)
        index += 1


def _finish(ctx: JobContext, pipeline: Pipeline) -> None:
    curve = selectors.pipeline_curve(pipeline=pipeline)
    ctx.set_result(curve=curve["points"], comparisons=curve["comparisons"])
    last = curve["points"][-1] if curve["points"] else None
    message = "Pipeline done."
    if last is not None and last.get("success_rate") is not None:
        message = (
            f"Pipeline done: held-out success {last['success_rate']:.1%} after {last['label']}."
        )
    ctx.progress(1.0, message, force=True)

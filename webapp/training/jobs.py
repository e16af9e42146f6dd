"""The training app's job kinds: training a policy (``training.train``, on the ``gpu`` queue),
building a tiny starter model (``training.create_tiny_model``, on the ``default`` queue), and a
decoupled RL run's parent, samplers and trainer (``training.rl``, ``training.rl_sampler`` on the
``rollouts`` queue, ``training.rl_trainer`` on ``gpu``; their runners are in ``rl_jobs.py``).

The job trains with the run's stored config (exactly what was previewed), reporting every
step's metrics; resumable from the newest complete checkpoint after a crash. At the end each
checkpoint becomes a Checkpoint row that registers as a policy in one click.
"""

from __future__ import annotations

import dataclasses

from trainer_core.errors import ConfigError
from trainer_core.training.checkpoint import list_checkpoints
from trainer_core.training.config import config_from_dict
from trainer_core.training.methods import train_method
from webapp.common.errors import ApplicationError
from webapp.datasets import token_check
from webapp.jobs import kinds
from webapp.jobs.context import JobContext
from webapp.jobs.names import Kinds, Queue, Tasks
from webapp.training import flag_services, rl_services, selectors, services


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.TRAIN,
            label="Train a policy",
            task_name=Tasks.TRAIN,
            queue=Queue.GPU,
            resumable=True,
            detail_template="training/partials/train_job_detail.html",
            description="SFT / DPO / GRPO on a dataset snapshot; checkpoints become policies.",
        )
    )
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.CREATE_TINY_MODEL,
            label="Create a tiny starter model",
            task_name=Tasks.CREATE_TINY_MODEL,
            queue=Queue.DEFAULT,
            resumable=True,
            detail_template="training/partials/tiny_model_job_detail.html",
            description="A tokenizer trained here and a random-weight tiny Llama, to train from.",
        )
    )
    _register_rl()


def _register_rl() -> None:
    """A decoupled RL run's kinds (runners in ``rl_jobs.py``)."""
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.RL,
            detail_template="training/partials/rl_job_detail.html",
            label="Decoupled RL run",
            task_name=Tasks.RL,
            queue=Queue.DEFAULT,
            resumable=True,
            description="Starts a run's samplers and trainer, waits for them, summarises the run.",
        )
    )
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.RL_SAMPLER,
            detail_template="training/partials/rl_job_detail.html",
            label="RL sampler",
            task_name=Tasks.RL_SAMPLER,
            queue=Queue.ROLLOUTS,
            resumable=True,
            description="Plays groups with the newest policy version and stores them for the "
            "trainer, until the run stops.",
        )
    )
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.RL_TRAINER,
            detail_template="training/partials/rl_job_detail.html",
            label="RL trainer",
            task_name=Tasks.RL_TRAINER,
            queue=Queue.GPU,
            resumable=True,
            description="Trains on the samplers' groups as they arrive (staleness bound, "
            "importance weights) and publishes policy versions.",
            on_end=rl_services.trainer_ended,
        )
    )


def train_run(*, ctx: JobContext) -> None:
    run = selectors.run_for_job(run_id=ctx.params.get("run_id"))
    data = dict(run.config)
    existing = list_checkpoints(run.output_dir)
    if existing and ctx.resumed:
        data["resume_from"] = str(existing[-1][1])
        ctx.log(f"attempt {ctx.attempt}: resuming from {existing[-1][1]}")
    config = config_from_dict(services.config_class(method=run.method), data)
    ctx.progress(0.0, f"Training {run.method.upper()} from {run.base_model}…", force=True)
    estimator = selectors.estimator_of(config=run.config or {}, method=run.method)
    if estimator:
        ctx.log(f"advantage estimator: {estimator['estimator']}")
        if "estimator_note" in estimator:
            ctx.log(estimator["estimator_note"])
    _token_check(ctx, run)
    on_progress = ctx.on_progress
    if run.method == run.Method.GRPO:  # reward-hacking flags, every window and at the end
        on_progress = flag_services.progress_with_flags(
            on_progress, run=run, say=ctx.log, flush=ctx.flush
        )
    try:
        result = train_method(run.method, config, on_progress=on_progress)
    except ConfigError as exc:
        raise ApplicationError(f"Training cannot start: {exc}") from None
    summary = {
        key: value
        for key, value in (
            dataclasses.asdict(result) if dataclasses.is_dataclass(result) else dict(result)
        ).items()
        if isinstance(value, (int, float, str)) or value is None
    }
    checkpoints = services.training_run_record(run=run, summary=summary)
    if run.method == run.Method.GRPO:
        flag_services.run_flags_refresh(run=run, say=ctx.log)
    ctx.set_result(checkpoints=[c.step for c in checkpoints], **summary)
    ctx.progress(1.0, f"Done: {len(checkpoints)} checkpoint(s).", force=True)


def _token_check(ctx: JobContext, run) -> None:
    """The drift check a run starts with (issue 21): the dataset file the trainer reads, the base
    model's tokenizer; recorded on the run, and a mismatch fails the job before training."""
    data_path = str((run.config or {}).get("dataset") or "")
    if run.dataset_id is None or not data_path:
        return
    ctx.progress(0.0, "Checking the dataset's tokens against the base model's tokenizer…")
    check = token_check.training_token_check(data_path=data_path, model_dir=run.base_model)
    services.training_run_token_check(run=run, check=check)
    ctx.log(check.get("summary", ""))
    if check.get("status") == "mismatch":
        raise ApplicationError(f"Training blocked. {check['summary']}")


def tiny_model_run(*, ctx: JobContext) -> None:
    """Build the tiny model the job names; a job delivered again finds it built and is done."""
    name = str(ctx.params.get("name") or "")
    ctx.progress(0.05, f"Training a tokenizer and writing tiny model {name}…", force=True)
    path = services.tiny_model_build(
        name=name, seed=int(ctx.params.get("seed") or 0), exist_ok=ctx.resumed
    )
    ctx.set_result(name=path.name, path=str(path), **selectors.model_summary(path=path))
    ctx.progress(1.0, f"Created {path.name} in {path}.", force=True)

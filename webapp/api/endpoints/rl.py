"""Decoupled RL runs (issue 19): launch one (the RL form's fields and checks: every bad option
named in a 422), list them, read one's overview (samplers online and their episodes per minute,
the queue of ready groups, the version timeline, the staleness histogram, the curve with the
groups of each step), list the groups a step trained on and dropped, add a sampler, cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Query, Router, Schema
from pydantic import ConfigDict, Field

from webapp.accounts.permissions import Need
from webapp.api.access import access
from webapp.api.endpoints.training import JobLaunched, _form_value
from webapp.api.errors import ApiError
from webapp.api.formdata import refused
from webapp.api.pages import LIMIT_DEFAULT, LIMIT_MAX, id_cursor, next_id_cursor
from webapp.api.schemas import Page
from webapp.common.errors import ApplicationError
from webapp.training import rl_pages, rl_selectors, rl_services

router = Router(tags=["rl"])


class RLRunIn(Schema):
    """The RL form's fields; ``config`` holds the decoupled trainer's options by name (JSON
    values): max_staleness, stale_groups, importance_cap, publish_every, synchronous, ... and
    GRPO's."""

    model_config = ConfigDict(extra="forbid")

    task_set: int = Field(description="the task set the samplers play (its id)")
    environment: str = Field("", max_length=120, description="empty: the task set's environment")
    base_model: str = Field(
        "", description="a local model directory under the model roots (or give checkpoint)"
    )
    checkpoint: int | None = Field(None, description="start from this earlier checkpoint")
    samplers: int = Field(2, ge=1, le=rl_pages.MAX_SAMPLERS, description="sampler jobs to start")
    sampler_policy: int | None = Field(
        None,
        description="an inference-server policy Steplab updates to each version (its id); "
        "null: the run's own model, each version loaded from its checkpoint",
    )
    reward_model: int | None = Field(
        None, description="the reward-model version that scores every episode (its id)"
    )
    max_queue: int = Field(
        0, ge=0, description="ready groups above which samplers wait (0: four steps' worth)"
    )
    name: str = Field("", max_length=120)
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="the decoupled trainer's options (see the RL form's help); the others keep "
        "their defaults",
    )


class RLRunOut(Schema):
    id: int
    name: str
    training_run_id: int = Field(description="its checkpoints: /training-runs/{id}")
    job_id: int | None = Field(description="the run's job, parent of the samplers and the trainer")
    trainer_job_id: int | None = Field(description="the trainer's job (its every metric)")
    status: str | None = Field(description="the run's job's status")
    stopping: bool = Field(description="the samplers are asked to end")
    stop_reason: str
    task_set_id: int
    environment: str
    samplers: int = Field(description="sampler jobs asked for at launch")
    sampler_policy_id: int | None
    reward_model_id: int | None
    created_at: datetime


class RLRunPage(Page):
    items: list[RLRunOut]


class VersionOut(Schema):
    version: int
    step: int = Field(description="optimizer updates done when it was published")
    path: str
    published_at: datetime
    groups: int = Field(description="groups it sampled")


class SamplerOut(Schema):
    job_id: int
    status: str
    online: bool = Field(description="running, with a heartbeat younger than the dead limit")
    state: str = Field(description="what the page says of it")
    worker: str
    attempts: int
    groups: int
    episodes_per_min: float = Field(description="over the last two minutes")


class StalenessOut(Schema):
    staleness: int
    consumed: int
    dropped: int


class CurvePointOut(Schema):
    step: int
    metrics: dict[str, Any] = Field(description="the trainer's report of the step")
    consumed_ids: list[int] = Field(description="the groups it trained on")
    dropped_ids: list[int] = Field(description="the groups it dropped as too stale")


class RLRunOverview(RLRunOut):
    config: dict[str, Any]
    counts: dict[str, int] = Field(description="groups per status")
    queue_depth: int = Field(description="groups ready and not yet taken by the trainer")
    dropped_total: int
    staleness_mean: float | None
    staleness_max: int | None
    versions: list[VersionOut]
    samplers_online: int
    sampler_jobs: list[SamplerOut]
    staleness: list[StalenessOut]
    curve: list[CurvePointOut]


class EpisodeOut(Schema):
    episode: int
    trajectory_id: int | None = Field(description="its trajectory: /trajectories/{id}")
    reward: float | None
    success: bool | None


class SampleGroupOut(Schema):
    id: int
    index: int = Field(description="the run's group counter value")
    status: str = Field(description="consumed (trained on) or dropped")
    task_id: int | None
    task: str | None = Field(description="the task's external id")
    version: int = Field(description="the policy version that sampled every episode")
    step: int | None
    staleness: int | None
    weight: float | None = Field(description="the loss weight it was trained with")
    reward_mean: float | None
    success_rate: float | None
    sampler_job_id: int | None
    ready_at: datetime | None
    episodes: list[EpisodeOut]


class SampleGroupPage(Page):
    items: list[SampleGroupOut]


RUN_FIELDS = (
    "training_run_id", "job_id", "stopping", "stop_reason", "task_set_id", "environment",
    "samplers", "sampler_policy_id", "reward_model_id", "created_at",
)  # fmt: skip


def rl_run_out(run) -> dict[str, Any]:
    trainer = rl_selectors.trainer_job(run=run)
    return {
        "id": run.pk,
        "name": run.training_run.name,
        "status": run.job.status if run.job is not None else None,
        "trainer_job_id": trainer.pk if trainer is not None else None,
        **{name: getattr(run, name) for name in RUN_FIELDS},
    }


def rl_run_overview(run) -> dict[str, Any]:
    page = rl_pages.run_page(run=run)
    return {
        **rl_run_out(run),
        "config": run.training_run.config or {},
        "counts": page["counts"],
        "queue_depth": page["queue_depth"],
        "dropped_total": page["dropped_total"],
        "staleness_mean": page["staleness_mean"],
        "staleness_max": page["staleness_max"],
        "versions": page["versions"],
        "samplers_online": page["samplers_online"],
        "sampler_jobs": [
            {
                "job_id": s["job"].pk,
                "status": s["job"].status,
                "online": s["online"],
                "state": s["state"],
                "worker": s["job"].worker,
                "attempts": s["job"].attempts,
                "groups": s["groups"],
                "episodes_per_min": s["episodes_per_min"],
            }
            for s in page["samplers"]
        ],
        "staleness": [
            {k: row[k] for k in ("staleness", "consumed", "dropped")} for row in page["staleness"]
        ],
        "curve": page["curve"],
    }


def _group_out(group) -> dict[str, Any]:
    return {
        "id": group.pk,
        "index": group.index,
        "status": group.status,
        "task_id": group.task_id,
        "task": group.task.external_id if group.task is not None else None,
        "version": group.version,
        "step": group.step,
        "staleness": group.staleness,
        "weight": group.weight,
        "reward_mean": group.reward_mean,
        "success_rate": group.success_rate,
        "sampler_job_id": group.sampler_job_id,
        "ready_at": group.ready_at,
        "episodes": group.episode_rows,
    }


def _checked(payload: RLRunIn) -> tuple[dict[str, Any], dict[str, str]]:
    """The form's choices (task set, base model or checkpoint, sampler policy, reward model) and
    its config values, each checked; a 422 naming every problem."""
    values = {k: _form_value(v) for k, v in payload.config.items() if v is not None}
    data = {
        name: "" if value is None else str(value)
        for name, value in payload.dict(exclude={"config"}).items()
    }
    choices, problems = rl_pages.launch_problems(data=data, values=values)
    if problems:
        names = ", ".join(sorted({p["field"] for p in problems}))
        raise ApiError(
            422, "invalid", f"The RL run is invalid ({names}): see fields.", fields=problems
        )
    return choices, values


@router.post(
    "/rl-runs",
    response={202: RLRunOverview},
    auth=access(Need.OPERATE),
    summary="Launch a decoupled RL run: samplers on the rollouts queue, a streaming trainer on "
    "the gpu queue (the RL form's validation)",
)
def rl_run_launch(request, payload: RLRunIn):
    choices, values = _checked(payload)
    try:
        run = rl_services.rl_run_create(
            **rl_pages.launch_inputs(choices=choices), values=values, user=request.auth
        )
    except ApplicationError as exc:
        raise refused(exc) from None
    return 202, rl_run_overview(rl_pages.rl_run_page_get(id=run.pk))


@router.get(
    "/rl-runs",
    response=RLRunPage,
    auth=access(Need.READ),
    summary="Decoupled RL runs, newest first (cursor pages)",
)
def rl_run_list(
    request,
    cursor: str = Query("", max_length=40, description="next_cursor of the previous page"),
    limit: int = Query(LIMIT_DEFAULT, ge=1, le=LIMIT_MAX),
):
    rows = rl_pages.rl_run_keyset(before_id=id_cursor(cursor), limit=limit + 1)
    items, next_cursor = next_id_cursor(rows, limit)
    return {"items": [rl_run_out(run) for run in items], "next_cursor": next_cursor}


@router.get(
    "/rl-runs/{int:run_id}",
    response=RLRunOverview,
    auth=access(Need.READ),
    summary="One RL run: samplers (online, episodes/min), queue depth, versions, staleness "
    "histogram, dropped total, and the curve with the groups of each step",
)
def rl_run_get(request, run_id: int):
    return rl_run_overview(rl_pages.rl_run_page_get(id=run_id))


@router.get(
    "/rl-runs/{int:run_id}/steps/{int:step}/groups",
    response=SampleGroupPage,
    auth=access(Need.READ),
    summary="The groups one optimizer step trained on and dropped, with each episode's "
    "trajectory (cursor pages)",
)
def rl_step_groups(
    request,
    run_id: int,
    step: int,
    cursor: str = Query("", max_length=40, description="next_cursor of the previous page"),
    limit: int = Query(LIMIT_DEFAULT, ge=1, le=LIMIT_MAX),
):
    run = rl_pages.rl_run_page_get(id=run_id)
    rows = rl_pages.step_groups(run=run, step=step, after_id=id_cursor(cursor), limit=limit + 1)
    items, next_cursor = next_id_cursor(rows, limit)
    return {"items": [_group_out(g) for g in items], "next_cursor": next_cursor}


@router.post(
    "/rl-runs/{int:run_id}/samplers",
    response={202: JobLaunched},
    auth=access(Need.OPERATE),
    summary="Add a sampler job to a running RL run",
)
def rl_run_add_sampler(request, run_id: int):
    run = rl_pages.rl_run_page_get(id=run_id)
    try:
        job = rl_services.rl_run_add_sampler(run=run, user=request.auth)
    except ApplicationError as exc:
        raise ApiError(400, "refused", exc.message) from None
    return 202, {"job_id": job.pk}


@router.post(
    "/rl-runs/{int:run_id}/cancel",
    response=RLRunOverview,
    auth=access(Need.OPERATE),
    summary="Cancel an RL run: its samplers and trainer stop; its groups and versions stay",
)
def rl_run_cancel(request, run_id: int):
    run = rl_pages.rl_run_page_get(id=run_id)
    if run.job is None or run.job.is_terminal:
        raise ApiError(
            400, "refused", f"RL run {run.pk} has already ended: there is nothing to cancel."
        )
    try:
        rl_services.rl_run_cancel(run=run, user=request.auth)
    except ApplicationError as exc:
        raise ApiError(400, "refused", exc.message) from None
    return rl_run_overview(rl_pages.rl_run_page_get(id=run.pk))

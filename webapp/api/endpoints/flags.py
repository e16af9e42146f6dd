"""Reward-hacking flags (issue 21): a training run's stored flags, computing them again with any
setting, one flag with its samples, the annotation queue of its samples (one call), and a
human's confirm/reject answer kept with the flag."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Router, Schema
from pydantic import ConfigDict, Field

from webapp.accounts.permissions import Need
from webapp.api.access import access
from webapp.api.errors import ApiError
from webapp.api.formdata import refused
from webapp.common.errors import ApplicationError
from webapp.evaluation.flags import pipeline_flag_rows
from webapp.evaluation.selectors import pipeline_find
from webapp.training import flag_selectors, flag_services

router = Router(tags=["flags"])


class FlagOut(Schema):
    id: int
    source: str = Field(description="training or evaluation")
    training_run_id: int | None
    pipeline_id: int | None
    kind: str = Field(
        description="process_vs_outcome, failed_high_process, behaviour_shift or layer_divergence"
    )
    metric: str = Field(description="behaviour_shift: length, repetition or tool:<name>")
    start_step: int
    end_step: int
    statistic: str
    value: float | None
    threshold: float
    window: int
    p_value: float | None
    message: str
    details: dict[str, Any]
    config: dict[str, Any] = Field(description="the settings it was computed with")
    trajectory_ids: list[int | str] = Field(description="the samples behind it")
    queue_id: int | None = Field(description="the annotation queue made from its samples")
    review: str = Field(description="'', confirmed or rejected")
    review_note: str
    reviewed_by: str | None
    reviewed_at: datetime | None


class FlagResultOut(Schema):
    kind: str
    fired: bool
    start: int
    end: int
    statistic: str
    value: float | None
    threshold: float
    window: int
    p_value: float | None
    metric: str
    message: str
    sample_ids: list[int | str]


class ComputeIn(Schema):
    model_config = ConfigDict(extra="forbid")

    settings: dict[str, float] = Field(
        default_factory=dict,
        description="flag settings by name (window, alpha, process_high, ...; "
        "`steplab flags --settings` lists them); the others keep their defaults",
    )


class ReviewIn(Schema):
    model_config = ConfigDict(extra="forbid")

    answer: Literal["confirmed", "rejected", ""] = Field(description="'' clears the answer")
    note: str = Field("", max_length=500)


class QueueOut(Schema):
    queue_id: int
    name: str
    items: int


def flag_out(flag) -> dict[str, Any]:
    return {
        "id": flag.pk,
        "source": flag.source,
        "training_run_id": flag.training_run_id,
        "pipeline_id": flag.pipeline_ref,
        "kind": flag.kind,
        "metric": flag.metric,
        "start_step": flag.start_step,
        "end_step": flag.end_step,
        "statistic": flag.statistic,
        "value": flag.value,
        "threshold": flag.threshold,
        "window": flag.window,
        "p_value": flag.p_value,
        "message": flag.message,
        "details": flag.details,
        "config": flag.config,
        "trajectory_ids": flag.trajectory_ids,
        "queue_id": flag.queue_id,
        "review": flag.review,
        "review_note": flag.review_note,
        "reviewed_by": flag.reviewed_by.username if flag.reviewed_by else None,
        "reviewed_at": flag.reviewed_at,
    }


@router.get(
    "/training-runs/{int:run_id}/flags",
    response=list[FlagOut],
    auth=access(Need.READ),
    summary="A training run's reward-hacking flags (the ones that fired, stored; at most 200)",
)
def run_flags(request, run_id: int):
    run = flag_selectors.training_run_get(id=run_id)
    return [flag_out(f) for f in flag_selectors.run_flags(run=run)[:200]]


@router.post(
    "/training-runs/{int:run_id}/flags/compute",
    response=list[FlagResultOut],
    auth=access(Need.OPERATE),
    summary="Compute a training run's flags again (every evaluation, fired or not; the fired "
    "ones are stored)",
)
def run_flags_compute(request, run_id: int, payload: ComputeIn):
    run = flag_selectors.training_run_get(id=run_id)
    try:
        config = flag_services.flag_config(values=payload.settings)
    except ApplicationError as exc:
        raise refused(exc, field="settings") from None
    return [r.to_dict() for r in flag_services.run_flags_compute(run=run, config=config)]


@router.get(
    "/pipelines/{int:pipeline_id}/flags",
    response=list[FlagOut],
    auth=access(Need.READ),
    summary="A pipeline's reward-hacking flags: its evaluation rounds' and its GRPO runs' (at "
    "most 500)",
)
def pipeline_flags(request, pipeline_id: int):
    if pipeline_find(id=pipeline_id) is None:
        raise ApiError(404, "not_found", f"No pipeline {pipeline_id}.")
    return [flag_out(f) for f in pipeline_flag_rows(pipeline_id=pipeline_id)]


@router.get(
    "/flags/{int:flag_id}",
    response=FlagOut,
    auth=access(Need.READ),
    summary="One reward-hacking flag: its statistic, window, threshold and samples",
)
def flag_get(request, flag_id: int):
    return flag_out(flag_selectors.flag_get(id=flag_id))


@router.post(
    "/flags/{int:flag_id}/queue",
    response=QueueOut,
    auth=access(Need.OPERATE),
    summary="An annotation queue of the flag's samples (once: again gives the same queue)",
)
def flag_queue(request, flag_id: int):
    flag = flag_selectors.flag_get(id=flag_id)
    try:
        queue = flag_services.flag_queue_create(flag=flag, user=request.auth)
    except ApplicationError as exc:
        raise refused(exc) from None
    return {"queue_id": queue.pk, "name": queue.name, "items": queue.items.count()}


@router.post(
    "/flags/{int:flag_id}/review",
    response=FlagOut,
    auth=access(Need.LABEL),
    summary="Confirm (reward hacking) or reject (a false alarm) a flag; kept with who and when",
)
def flag_review(request, flag_id: int, payload: ReviewIn):
    flag = flag_selectors.flag_get(id=flag_id)
    try:
        flag = flag_services.flag_review(
            flag=flag, user=request.auth, answer=payload.answer, note=payload.note
        )
    except ApplicationError as exc:
        raise refused(exc, field="answer") from None
    return flag_out(flag)

"""What the API returns: pydantic models (ninja's ``Schema``), read from the rows' attributes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field


class ErrorBody(Schema):
    status: int
    code: str = Field(description="machine-readable: not_found, invalid, forbidden, ...")
    message: str = Field(description="what is wrong and what to do")
    fields: list[dict[str, Any]] | None = None


class ErrorOut(Schema):
    error: ErrorBody


class Page(Schema):
    next_cursor: str | None = Field(
        None, description="pass as ?cursor= for the next page; null on the last page"
    )


class MeOut(Schema):
    id: int
    username: str
    role: str
    token: str | None = Field(None, description="the calling token's name (null: a session)")
    scope: str | None = None


class TokenOut(Schema):
    id: int
    name: str
    prefix: str
    scope: str
    state: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


class TokenCreated(TokenOut):
    token: str = Field(description="the token itself: shown this once, store it now")


class TokenIn(Schema):
    name: str = Field(max_length=100)
    scope: str = Field("full", description="full, read or ingest")
    expires_in_days: int | None = Field(None, ge=1, le=3660)


class TaskSetOut(Schema):
    id: int
    name: str
    description: str
    domain: str
    environment: str
    source: str
    task_count: int | None = None


class TaskOut(Schema):
    id: int
    task_set: str
    external_id: str
    domain: str
    environment: str
    prompt: str
    checker: str
    data: dict[str, Any]


class TaskPage(Page):
    items: list[TaskOut]


class TrajectoryOut(Schema):
    id: int
    task_ref: str
    task_set: str
    prompt: str
    domain: str
    agent: str
    model: str
    policy: str
    environment: str
    source: str
    format: str
    status: str
    success: bool | None
    reward: float | None
    step_count: int = Field(description="tool-call steps")
    message_count: int = Field(description="message steps (dialogue turns)")
    tokens_in: int
    tokens_out: int
    cost_usd: float
    tags: list[str]
    created_at: datetime
    finished_at: datetime | None


class TrajectoryDetail(TrajectoryOut):
    outcome: dict[str, Any]
    metadata: dict[str, Any]
    has_raw_source: bool
    gdi: dict[str, Any] | None = Field(
        None,
        description="its GDI (docs/gdi.md): total, components, weights, what they came from; "
        "null before it was computed",
    )


class TrajectoryPage(Page):
    items: list[TrajectoryOut]


class StepOut(Schema):
    index: int
    kind: str = Field(description="tool or message")
    role: str
    text: str
    thought: str
    tool: str
    params: Any
    observation: str
    exit_code: int | None
    error: str | None
    started_at: datetime | None
    duration: float | None
    tokens_in: int | None
    tokens_out: int | None
    reward: float | None
    metadata: dict[str, Any]


class StepPage(Schema):
    items: list[StepOut]
    next_after: int | None = Field(
        None, description="pass as ?after= for the next page; null when no more steps"
    )


class TagIn(Schema):
    ids: list[int] = Field(max_length=10_000)
    tag: str = Field(min_length=1, max_length=64)


class CountOut(Schema):
    changed: int


class DeletedOut(Schema):
    deleted: dict[str, int]


class JobOut(Schema):
    id: int
    kind: str
    status: str
    queue: str
    progress: float
    message: str
    error: str
    result: dict[str, Any]
    params: dict[str, Any]
    stage: str
    parent_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested_at: datetime | None


class JobPage(Page):
    items: list[JobOut]


class MetricsOut(Schema):
    series: dict[str, Any]

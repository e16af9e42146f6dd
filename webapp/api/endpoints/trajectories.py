"""Trajectories: the list with every filter of the list page and full-text search, one
trajectory, its steps in pages, its raw source, tags, and deletion by admins."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Literal

from django.http import Http404, HttpResponse
from ninja import Query, Router, Schema
from pydantic import Field

from webapp.accounts.permissions import Need
from webapp.api.access import access
from webapp.api.pages import LIMIT_DEFAULT, LIMIT_MAX
from webapp.api.schemas import (
    CountOut,
    DeletedOut,
    StepPage,
    TagIn,
    TrajectoryDetail,
    TrajectoryPage,
)
from webapp.trajectories import selectors, services
from webapp.trajectories.gdi import gdi_show
from webapp.trajectories.rows import STEP_COLUMNS

router = Router(tags=["trajectories"])

SUMMARY_FIELDS = (
    "task_ref",
    "prompt",
    "domain",
    "agent",
    "model",
    "policy",
    "environment",
    "source",
    "status",
    "success",
    "reward",
    "step_count",
    "message_count",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "tags",
    "created_at",
    "finished_at",
)
STEP_FIELDS = tuple(STEP_COLUMNS[1:])  # a step row's columns but its trajectory


class TrajectoryFilters(Schema):
    """The list page's filters, by the same names."""

    q: str = Field("", max_length=500, description="full-text search (quoted phrases, -word, or)")
    task: str = Field("", max_length=300, description="a substring of the task id or task set")
    task_exact: str = Field("", max_length=300, description="one task id exactly")
    domain: str = Field("", max_length=64)
    agent: str = Field("", max_length=120)
    model: str = Field("", max_length=200)
    policy: str = Field("", max_length=200)
    source: Literal["", "import", "rollout", "live"] = ""
    format: str = Field("", max_length=64, description="the importer's name")
    status: Literal["", "running", "finished", "failed"] = ""
    outcome: Literal["", "success", "failure", "unknown"] = ""
    min_reward: float | None = Field(None, allow_inf_nan=False)
    max_reward: float | None = Field(None, allow_inf_nan=False)
    min_steps: int | None = Field(None, ge=0, le=2**31 - 1)
    max_steps: int | None = Field(None, ge=0, le=2**31 - 1)
    tag: str = Field("", max_length=64)
    since: date | None = Field(None, description="created on or after (UTC date)")
    until: date | None = Field(None, description="created on or before (UTC date)")
    min_id: int | None = Field(None, ge=0, le=2**63 - 1)
    max_id: int | None = Field(None, ge=0, le=2**63 - 1)
    collect_run: int | None = Field(None, ge=0, le=2**63 - 1)
    sort: Literal[
        "newest", "oldest", "reward_high", "reward_low", "steps_most", "steps_fewest", "gdi"
    ] = Field("newest", description="gdi: highest GDI first (docs/gdi.md)")
    cursor: str = Field("", max_length=100, description="next_cursor of the previous page")


def trajectory_out(row) -> dict:
    out = {name: getattr(row, name) for name in SUMMARY_FIELDS}
    out.update(id=row.pk, task_set=row.task_set_name, format=row.source_format)
    return out


def step_out(step) -> dict:
    return {name: getattr(step, name) for name in STEP_FIELDS}


@router.get(
    "/trajectories",
    response=TrajectoryPage,
    auth=access(Need.READ),
    summary="Trajectories, filtered and searched (cursor pages of 50)",
)
def trajectory_list(request, filters: Query[TrajectoryFilters]):
    query = {k: "" if v is None else str(v) for k, v in filters.dict().items()}
    parsed = selectors.Filters.from_query(query)
    rows, next_cursor = selectors.keyset_page(
        qs=selectors.trajectory_list(filters=parsed),
        cursor=filters.cursor or None,
        sort=parsed.sort,
    )
    return {"items": [trajectory_out(row) for row in rows], "next_cursor": next_cursor}


@router.get(
    "/trajectories/{int:trajectory_id}",
    response=TrajectoryDetail,
    auth=access(Need.READ),
    summary="One trajectory (its steps: /steps)",
)
def trajectory_get(request, trajectory_id: int):
    row = selectors.trajectory_get(id=trajectory_id)
    return {
        **trajectory_out(row),
        "outcome": row.outcome,
        "metadata": row.metadata,
        "has_raw_source": row.source_file_id is not None,
        "gdi": gdi_show(trajectory_id=row.pk),
    }


@router.get(
    "/trajectories/{int:trajectory_id}/steps",
    response=StepPage,
    auth=access(Need.READ),
    summary="A trajectory's steps in index order, after ?after=",
)
def trajectory_steps(
    request,
    trajectory_id: int,
    after: int = Query(-1, ge=-1, le=2**31 - 1, description="the last index already read"),
    limit: int = Query(LIMIT_DEFAULT, ge=1, le=LIMIT_MAX),
):
    row = selectors.trajectory_get(id=trajectory_id)
    steps, more = selectors.steps_after(trajectory=row, after=after, limit=limit)
    return {
        "items": [step_out(step) for step in steps],
        "next_after": steps[-1].index if more and steps else None,
    }


@router.get(
    "/trajectories/{int:trajectory_id}/raw",
    auth=access(Need.READ),
    summary="The stored raw source file, as it was imported",
    response={200: bytes},
)
def trajectory_raw(request, trajectory_id: int):
    row = selectors.trajectory_get(id=trajectory_id)
    if row.source_file is None:
        raise Http404("This trajectory has no stored source file (a rollout, or imported before).")
    response = HttpResponse(row.source_file.raw_bytes(), content_type="application/octet-stream")
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(row.source_file.name).name)
    response["Content-Disposition"] = f'attachment; filename="{safe or "source"}"'
    return response


@router.post(
    "/trajectories/tag",
    response=CountOut,
    auth=access(Need.OPERATE),
    summary="Add a tag to trajectories",
)
def trajectory_tag(request, body: TagIn):
    return {"changed": services.trajectories_tag(ids=body.ids, tag=body.tag.strip())}


@router.delete(
    "/trajectories/{int:trajectory_id}",
    response=DeletedOut,
    auth=access(Need.ADMINISTER),
    summary="Delete a trajectory with its scores and labels (admins)",
)
def trajectory_delete(request, trajectory_id: int):
    row = selectors.trajectory_get(id=trajectory_id)
    return {"deleted": services.trajectory_delete(trajectory=row)}

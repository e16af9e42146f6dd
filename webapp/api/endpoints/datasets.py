"""Dataset snapshots: list, get (counts, files, card), build one with the dataset form's
validation (SFT, DPO, GRPO, PRM, benchmark records; an export job writes the files), and download
its files as the dataset page does (streamed)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import FileResponse
from django.urls import reverse
from ninja import Query, Router, Schema
from pydantic import ConfigDict, Field

from webapp.accounts.permissions import Need
from webapp.api.access import access
from webapp.api.formdata import form_data, form_invalid, refused
from webapp.api.pages import LIMIT_DEFAULT, LIMIT_MAX, id_cursor, next_id_cursor
from webapp.api.schemas import Page
from webapp.common.errors import ApplicationError
from webapp.datasets import selectors, services
from webapp.datasets.forms import DatasetForm

router = Router(tags=["datasets"])


class DatasetIn(Schema):
    """The dataset form's fields, by the same names."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="unique, at most 120 characters")
    kind: str = Field(description="sft, sft_knowlyr, dpo, grpo, prm or bench")
    reward_model: int | None = Field(
        None, description="the version whose scores give thresholds, rewards, labels and pairs"
    )
    label_source: str = Field("model", description="model (reward-model scores) or human")
    build_pairs: bool = Field(
        False, description="DPO from scores: build preference pairs first, in the same job"
    )
    pair_method: str | None = Field(None, description="outside_in or adjacent")
    min_margin: float | None = Field(
        None, allow_inf_nan=False, description="a pair's totals differ by at least this"
    )
    min_score: float | None = Field(
        None, allow_inf_nan=False, description="keep trajectories whose total is at least"
    )
    min_gdi: float | None = Field(
        None, ge=0, le=1, allow_inf_nan=False, description="keep trajectories whose GDI is at least"
    )
    top_gdi: int | None = Field(
        None, ge=1, le=200_000, description="keep the N trajectories with the highest GDI"
    )
    outcome: str = Field("", description="success, failure or empty (any)")
    task: str = Field("", description="a substring of the task id or task set")
    domain: str = ""
    policy: str = ""
    tag: str = ""
    task_set: str = Field("", description="benchmark records: the task set's name")
    seed: int = Field(
        0, ge=-(2**63), le=2**63 - 1, description="seeds the train/validation/test split"
    )
    token_policy: int | None = Field(
        None,
        description="export for this policy's tokenizer: the drift check runs on the files and a "
        "mismatch fails the export (docs/drift-check.md)",
    )


class DatasetFileOut(Schema):
    name: str
    bytes: int | None
    sha256: str
    url: str = Field(description="where to download it (GET, streamed)")


class DatasetOut(Schema):
    id: int
    name: str
    kind: str
    job_id: int | None = Field(description="the export job: follow it at /jobs/{id}")
    status: str | None = Field(description="the export job's status")
    query: dict[str, Any] = Field(description="the filters and thresholds that selected it")
    reward_model_id: int | None
    label_source: str
    seed: int
    counts: dict[str, Any] = Field(description="rows per split, duplicates, what was selected")
    total: int
    files: list[DatasetFileOut]
    label_snapshot: dict[str, Any]
    token_check: dict[str, Any] = Field(
        description="the drift check of an export for a policy (status, counts, the first "
        "difference); empty when none ran"
    )
    created_at: datetime


class DatasetDetail(DatasetOut):
    card: str = Field(description="the dataset card (README.md); empty before the export")


class DatasetPage(Page):
    items: list[DatasetOut]


def dataset_out(snapshot) -> dict[str, Any]:
    files = [
        {
            "name": name,
            "bytes": entry.get("bytes"),
            "sha256": entry.get("sha256", ""),
            "url": reverse("api:dataset_file", kwargs={"dataset_id": snapshot.pk, "name": name}),
        }
        for name, entry in sorted((snapshot.files or {}).items())
    ]
    return {
        "id": snapshot.pk,
        "name": snapshot.name,
        "kind": snapshot.kind,
        "job_id": snapshot.job_id,
        "status": snapshot.job.status if snapshot.job is not None else None,
        "query": snapshot.query or {},
        "reward_model_id": snapshot.reward_model_id,
        "label_source": snapshot.label_source,
        "seed": snapshot.seed,
        "counts": snapshot.counts or {},
        "total": snapshot.total,
        "files": files,
        "label_snapshot": snapshot.label_snapshot or {},
        "token_check": snapshot.token_check or {},
        "created_at": snapshot.created_at,
    }


@router.post(
    "/datasets",
    response={202: DatasetDetail},
    auth=access(Need.OPERATE),
    summary="Build a dataset snapshot (the dataset form's validation); its export job writes the "
    "files",
)
def dataset_build(request, payload: DatasetIn):
    form = DatasetForm(data=form_data(payload))
    if not form.is_valid():
        raise form_invalid(form, what="The dataset")
    data = form.cleaned_data
    try:
        snapshot = services.snapshot_create(
            name=data["name"],
            kind=data["kind"],
            query=form.query(),
            reward_model=data["reward_model"],
            label_source=data["label_source"],
            seed=data["seed"] or 0,
            build_pairs=form.pair_options(),
            token_policy=data.get("token_policy"),
            user=request.auth,
        )
    except ApplicationError as exc:
        raise refused(exc) from None
    snapshot = selectors.snapshot_get(id=snapshot.pk)
    return 202, {**dataset_out(snapshot), "card": ""}


@router.get(
    "/datasets",
    response=DatasetPage,
    auth=access(Need.READ),
    summary="Dataset snapshots, newest first (cursor pages)",
)
def dataset_list(
    request,
    kind: str = Query("", max_length=16, description="only this kind"),
    cursor: str = Query("", max_length=40, description="next_cursor of the previous page"),
    limit: int = Query(LIMIT_DEFAULT, ge=1, le=LIMIT_MAX),
):
    rows = selectors.snapshot_keyset(before_id=id_cursor(cursor), limit=limit + 1, kind=kind)
    items, next_cursor = next_id_cursor(rows, limit)
    return {"items": [dataset_out(row) for row in items], "next_cursor": next_cursor}


@router.get(
    "/datasets/{int:dataset_id}",
    response=DatasetDetail,
    auth=access(Need.READ),
    summary="One dataset snapshot: its counts, files and card",
)
def dataset_get(request, dataset_id: int):
    snapshot = selectors.snapshot_get(id=dataset_id)
    return {**dataset_out(snapshot), "card": selectors.snapshot_card(snapshot=snapshot)}


@router.get(
    "/datasets/{int:dataset_id}/files/{path:name}",
    auth=access(Need.READ),
    summary="Download one of a dataset's files (streamed, as the dataset page serves it)",
    response={200: None},
    openapi_extra={
        "responses": {
            "200": {
                "description": "the file's bytes",
                "content": {
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
                },
            }
        }
    },
)
def dataset_file(request, dataset_id: int, name: str):
    path = selectors.snapshot_file_path(snapshot=selectors.snapshot_get(id=dataset_id), name=name)
    return FileResponse(open(path, "rb"), as_attachment=True, filename=path.name)  # noqa: SIM115

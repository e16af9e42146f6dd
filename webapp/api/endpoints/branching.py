"""Branch-and-resample (docs/branching.md): branch a stored trajectory at a step (the page's
"Branch from here" form, by the same names and limits), read a branch set with its value
estimate, continuations and pairs, and its pairs as step-level DPO rows or PRM labels."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Router, Schema
from pydantic import ConfigDict, Field

from webapp.accounts.permissions import Need
from webapp.api.access import access
from webapp.api.formdata import form_data, form_invalid, refused
from webapp.common.errors import ApplicationError
from webapp.rollouts import branch_selectors, branch_services
from webapp.rollouts.forms import BranchForm

router = Router(tags=["branching"])


class BranchIn(Schema):
    model_config = ConfigDict(extra="forbid")

    step: int = Field(description="the step to branch at (its index on the trajectory's page)")
    policy: int = Field(description="the policy's id")
    samples: int = Field(4, description="continuations to sample (M), 1 to 32")
    seed: int = Field(0, ge=-(2**63), le=2**63 - 1)
    max_steps: int = Field(20, description="actions each continuation may take, 1 to 200")


class ContinuationOut(Schema):
    number: int
    seed: int
    status: str
    trajectory_id: int | None
    success: bool | None
    restored_by: str = Field(description="replay or snapshot")
    error: str


class PairOut(Schema):
    chosen: int = Field(description="the successful continuation's trajectory id")
    rejected: int = Field(description="the failed continuation's trajectory id")
    divergent_step: int


class BranchSetOut(Schema):
    id: int
    job_id: int | None = Field(description="follow it at /jobs/{id}")
    status: str | None
    parent_trajectory_id: int
    step: int
    policy_id: int
    policy: str
    samples: int
    seed: int
    max_steps: int
    restore: dict[str, Any] = Field(description="method and actions replayed, or the mismatch")
    value: float | None = Field(description="success rate of the continuations")
    value_low: float | None
    value_high: float | None
    confidence: float
    successes: int
    known: int = Field(description="continuations with a known outcome")
    continuations: list[ContinuationOut]
    pairs: list[PairOut]
    created_at: datetime


class ExportOut(Schema):
    kind: str
    rows: list[dict[str, Any]]
    stats: dict[str, Any]


def _out(branch_set) -> dict[str, Any]:
    detail = branch_selectors.branch_set_detail(branch_set=branch_set)
    job = branch_set.job
    return {
        "id": branch_set.pk,
        "job_id": branch_set.job_id,
        "status": job.status if job is not None else None,
        "parent_trajectory_id": branch_set.parent_id,
        "step": branch_set.step_index,
        "policy_id": branch_set.policy_id,
        "policy": branch_set.policy.name,
        **{
            name: getattr(branch_set, name)
            for name in (
                "samples",
                "seed",
                "max_steps",
                "restore",
                "value",
                "value_low",
                "value_high",
                "confidence",
                "successes",
                "known",
                "created_at",
            )
        },  # fmt: skip
        "continuations": [
            {
                "number": c.number,
                "seed": c.seed,
                "status": c.status,
                "trajectory_id": c.trajectory_id,
                "success": c.success,
                "restored_by": c.restored_by,
                "error": c.error,
            }
            for c in detail["continuations"]
        ],
        "pairs": branch_set.pairs,
    }


@router.post(
    "/trajectories/{int:trajectory_id}/branches",
    response={202: BranchSetOut},
    auth=access(Need.OPERATE),
    summary="Branch a trajectory at a step: restore its environment there, sample M "
    "continuations (imported logs are refused with the reason)",
)
def branch_launch(request, trajectory_id: int, payload: BranchIn):
    context = branch_selectors.branch_form_context(trajectory_id=trajectory_id, step=payload.step)
    data = form_data(payload)
    form = BranchForm(data={k: v for k, v in data.items() if k != "step"})
    if not form.is_valid():
        raise form_invalid(form, what="The branch")
    cleaned = form.cleaned_data
    try:
        branch_set = branch_services.branch_launch(
            trajectory=context["row"],
            step=payload.step,
            policy=cleaned["policy"],
            samples=cleaned["samples"],
            seed=cleaned["seed"] or 0,
            max_steps=cleaned["max_steps"],
            user=request.auth,
        )
    except ApplicationError as exc:
        raise refused(exc, field="step") from None
    return 202, _out(branch_selectors.branch_set_get(id=branch_set.pk))


@router.get(
    "/branch-sets/{int:branch_set_id}",
    response=BranchSetOut,
    auth=access(Need.READ),
    summary="A branch set: the step's value estimate, its continuations and pairs",
)
def branch_set_get(request, branch_set_id: int):
    return _out(branch_selectors.branch_set_get(id=branch_set_id))


@router.get(
    "/branch-sets/{int:branch_set_id}/export/{kind}",
    response=ExportOut,
    auth=access(Need.READ),
    summary="A branch set's pairs as step-level DPO rows (dpo) or PRM labels (prm), with "
    "their lineage",
)
def branch_set_export(request, branch_set_id: int, kind: Literal["dpo", "prm"]):
    rows, stats = branch_selectors.branch_export_rows(
        branch_set=branch_selectors.branch_set_get(id=branch_set_id), kind=kind
    )
    return {"kind": kind, "rows": rows, "stats": stats.as_dict()}

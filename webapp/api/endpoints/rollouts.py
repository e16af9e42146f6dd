"""Collect runs (launch with the collect form's validation, the estimate, list, get) and policies
(list, get with secrets masked as the policy page masks them, create and edit as admins do on the
policy form, "Try it" as a job)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Query, Router, Schema
from pydantic import ConfigDict, Field

from webapp.accounts.permissions import Need
from webapp.api.access import access
from webapp.api.formdata import form_data, form_invalid, invalid, refused
from webapp.api.pages import LIMIT_DEFAULT, LIMIT_MAX, id_cursor, next_id_cursor
from webapp.api.schemas import Page
from webapp.common.errors import ApplicationError
from webapp.rollouts import selectors, services
from webapp.rollouts.forms import CollectForm, PolicyForm

router = Router(tags=["rollouts"])


class CollectIn(Schema):
    """The collect form's fields, by the same names and limits."""

    model_config = ConfigDict(extra="forbid")

    task_set: int = Field(description="the task set's id")
    policy: int = Field(description="the policy's id")
    user_policy: int | None = Field(
        None, description="the policy that plays a conversation environment's simulated user"
    )
    environment: str = Field("", description="empty: the task set's own environment")
    episodes_per_task: int = Field(1, description="1 to 1000")
    max_steps: int = Field(20, description="1 to 500")
    step_timeout: float | None = Field(
        None, allow_inf_nan=False, description="seconds one step may take (≥ 0.1)"
    )
    concurrency: int = Field(2, description="episodes at once, 1 to 256")
    seed: int = Field(0, ge=-(2**63), le=2**63 - 1)
    spend_cap_usd: float | None = Field(
        None, allow_inf_nan=False, description="stop when the LLM cost reaches this"
    )


class CollectRunOut(Schema):
    id: int
    job_id: int | None = Field(description="follow it at /jobs/{id}")
    status: str | None = Field(description="the job's status")
    task_set_id: int
    task_set: str
    policy_id: int
    policy: str
    user_policy_id: int | None = Field(description="who plays the simulated user; null: scripted")
    environment: str
    episodes_per_task: int
    max_steps: int
    step_timeout: float | None
    concurrency: int
    seed: int
    spend_cap_usd: float | None
    episodes_total: int
    episodes_done: int
    episodes_failed: int
    successes: int
    success_rate: float | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    stop_reason: str
    created_at: datetime


class CollectRunDetail(CollectRunOut):
    episodes: dict[str, int] = Field(description="episodes per status")


class CollectRunPage(Page):
    items: list[CollectRunOut]


class EstimateOut(Schema):
    episodes: int
    expected_steps: float = Field(description="per episode, from the reference solutions")
    calls_expected: int
    calls_max: int
    cost_expected: float | None = Field(description="USD; null: no known price for the model")
    cost_max: float | None
    priced: bool
    llm: bool


RUN_FIELDS = (
    "environment",
    "episodes_per_task",
    "max_steps",
    "step_timeout",
    "concurrency",
    "seed",
    "spend_cap_usd",
    "episodes_total",
    "episodes_done",
    "episodes_failed",
    "successes",
    "success_rate",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "stop_reason",
    "created_at",
)


def collect_run_out(run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "job_id": run.job_id,
        "status": run.job.status if run.job is not None else None,
        "task_set_id": run.task_set_id,
        "task_set": run.task_set.name,
        "policy_id": run.policy_id,
        "policy": run.policy.name,
        "user_policy_id": run.user_policy_id,
        **{name: getattr(run, name) for name in RUN_FIELDS},
    }


def _collect_form(payload: CollectIn) -> CollectForm:
    form = CollectForm(data=form_data(payload))
    if not form.is_valid():
        raise form_invalid(form, what="The collect run")
    return form


@router.post(
    "/collect-runs",
    response={202: CollectRunDetail},
    auth=access(Need.OPERATE),
    summary="Launch a collect run (the collect form's validation); follow its job",
)
def collect_run_launch(request, payload: CollectIn):
    data = _collect_form(payload).cleaned_data
    try:
        run = services.collect_launch(
            task_set=data["task_set"],
            policy=data["policy"],
            environment=data["environment"] or "",
            episodes_per_task=data["episodes_per_task"],
            max_steps=data["max_steps"],
            step_timeout=data["step_timeout"],
            concurrency=data["concurrency"],
            seed=data["seed"] or 0,
            spend_cap_usd=data["spend_cap_usd"],
            user=request.auth,
            user_policy=data["user_policy"],
        )
    except ApplicationError as exc:
        raise refused(exc) from None
    run = selectors.run_get(id=run.pk)
    return 202, {**collect_run_out(run), "episodes": selectors.episode_status_counts(run=run)}


@router.post(
    "/collect-runs/estimate",
    response=EstimateOut,
    auth=access(Need.OPERATE),
    summary="What a collect run would cost before launching it (episodes, calls, USD)",
)
def collect_run_estimate(request, payload: CollectIn):
    data = _collect_form(payload).cleaned_data
    estimate = services.collect_estimate(
        policy=data["policy"],
        task_set=data["task_set"],
        episodes_per_task=data["episodes_per_task"],
        max_steps=data["max_steps"],
    )
    return estimate.as_dict()


@router.get(
    "/collect-runs",
    response=CollectRunPage,
    auth=access(Need.READ),
    summary="Collect runs, newest first (cursor pages)",
)
def collect_run_list(
    request,
    cursor: str = Query("", max_length=40, description="next_cursor of the previous page"),
    limit: int = Query(LIMIT_DEFAULT, ge=1, le=LIMIT_MAX),
):
    rows = selectors.run_keyset(before_id=id_cursor(cursor), limit=limit + 1)
    items, next_cursor = next_id_cursor(rows, limit)
    return {"items": [collect_run_out(run) for run in items], "next_cursor": next_cursor}


@router.get(
    "/collect-runs/{int:run_id}",
    response=CollectRunDetail,
    auth=access(Need.READ),
    summary="One collect run: its totals and episodes per status (its trajectories: "
    "/trajectories?collect_run=)",
)
def collect_run_get(request, run_id: int):
    run = selectors.run_get(id=run_id)
    return {**collect_run_out(run), "episodes": selectors.episode_status_counts(run=run)}


# --- policies ------------------------------------------------------------------------------------


class PolicyOut(Schema):
    id: int
    name: str
    kind: str
    model: str
    prompt_format: str
    parameters: dict[str, Any] = Field(
        description="keys are never stored (api_key_env names the variable); a value that "
        "looks like a credential is shown as ***"
    )
    description: str
    created_at: datetime
    updated_at: datetime


class PolicyIn(Schema):
    """The policy form's fields."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: str = Field(description="scripted, anthropic, openai or local")
    model: str = ""
    prompt_format: str = Field("native", description="native or react")
    parameters: dict[str, Any] = Field(
        default_factory=dict, description="never a key: name its variable as api_key_env"
    )
    description: str = ""


class PolicyPatch(Schema):
    """Only the fields to change; the others keep their values."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    kind: str | None = None
    model: str | None = None
    prompt_format: str | None = None
    parameters: dict[str, Any] | None = None
    description: str | None = None


class TryIn(Schema):
    model_config = ConfigDict(extra="forbid")

    task: int = Field(description="the id of the task to try the policy on")


class TryOut(Schema):
    job_id: int = Field(description="follow it at /jobs/{id}; its result holds the action")


def policy_out(policy) -> dict[str, Any]:
    return {
        "id": policy.pk,
        "name": policy.name,
        "kind": policy.kind,
        "model": policy.model,
        "prompt_format": policy.prompt_format,
        "parameters": selectors.policy_parameters_shown(policy=policy),
        "description": policy.description,
        "created_at": policy.created_at,
        "updated_at": policy.updated_at,
    }


def _policy_save(request, data: dict[str, Any], instance=None):
    form = PolicyForm(data=data)
    if not form.is_valid():
        raise form_invalid(form, what="The policy")
    try:
        return services.policy_save(**form.cleaned_data, user=request.auth, instance=instance)
    except ApplicationError as exc:
        raise refused(exc) from None


@router.get("/policies", response=list[PolicyOut], auth=access(Need.READ), summary="Policies")
def policy_list(request):
    return [policy_out(policy) for policy in selectors.policy_list()]


@router.get(
    "/policies/{int:policy_id}", response=PolicyOut, auth=access(Need.READ), summary="One policy"
)
def policy_get(request, policy_id: int):
    return policy_out(selectors.policy_get(id=policy_id))


@router.post(
    "/policies",
    response={201: PolicyOut},
    auth=access(Need.ADMINISTER),
    summary="Create a policy (the policy form's validation: keys are refused)",
)
def policy_create(request, payload: PolicyIn):
    policy = _policy_save(request, form_data(payload, json_fields=("parameters",)))
    return 201, policy_out(policy)


@router.patch(
    "/policies/{int:policy_id}",
    response=PolicyOut,
    auth=access(Need.ADMINISTER),
    summary="Edit a policy (the fields given; the policy form's validation)",
)
def policy_edit(request, policy_id: int, payload: PolicyPatch):
    policy = selectors.policy_get(id=policy_id)
    data = {**PolicyForm.initial_from(policy), **form_data(payload, json_fields=("parameters",))}
    return policy_out(_policy_save(request, data, instance=policy))


@router.post(
    "/policies/{int:policy_id}/try",
    response={202: TryOut},
    auth=access(Need.OPERATE),
    summary="Try a policy: one step on a task, played by a worker (the policy page's Try it)",
)
def policy_try(request, policy_id: int, payload: TryIn):
    policy = selectors.policy_get(id=policy_id)
    task = selectors.sample_task_get(id=str(payload.task))
    if task is None:
        raise invalid("task", f"there is no task {payload.task}: give a task's id.")
    try:
        job = services.policy_try_launch(policy=policy, task=task, user=request.auth)
    except ApplicationError as exc:
        raise refused(exc) from None
    return 202, {"job_id": job.pk}

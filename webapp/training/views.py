from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from trainer_core.training.methods import METHODS
from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.training import selectors, services


def _ctx(**extra):
    return {"active_area": "training", **extra}


@requires(Need.READ)
def run_list(request):
    return render(request, "training/list.html", _ctx(runs=selectors.run_list()))


def _form_state(request):
    data = request.POST if request.method == "POST" else request.GET
    method = data.get("method") or "sft"
    if method not in METHODS:
        method = "sft"
    choices = selectors.form_choices(data=data)
    fields = services.form_fields(method=method)
    values = {f["name"]: data.get(f["name"]) for f in fields if f["name"] in data}
    return data, method, choices, fields, values


@requires(Need.OPERATE)
def run_new(request):
    """The form: dataset, base model (a directory or an earlier checkpoint), method, every config
    field with its help, and the exact configuration previewed as YAML before launch."""
    data, method, choices, fields, values = _form_state(request)
    error = None
    if request.method == "POST" and data.get("launch"):
        try:
            run = services.training_launch(
                method=method,
                dataset=choices["dataset"],
                base_model=data.get("base_model", "").strip(),
                checkpoint=choices["checkpoint"],
                values=values,
                name=data.get("name", "").strip()[:120],
                user=request.user,
            )
        except ApplicationError as exc:
            error = exc.message
        else:
            messages.success(request, f"Training run {run.pk} launched.")
            return redirect("jobs:detail", pk=run.job_id)
    for f in fields:
        f["value"] = values.get(f["name"], f["default"])
    return render(
        request,
        "training/new.html",
        _ctx(
            method=method,
            methods=list(METHODS),
            **choices,
            fields=fields,
            base_model=data.get("base_model", ""),
            name=data.get("name", ""),
            error=error,
            yaml=_preview(method, values, data.get("base_model", ""), choices),
        ),
    )


def _preview(method, values, base_model, choices) -> str:
    checkpoint = choices["checkpoint"]
    try:
        return services.preview(
            method=method,
            values=values,
            base_model=checkpoint.path if checkpoint else base_model,
            dataset=choices["dataset"],
        )
    except ApplicationError as exc:
        return f"# {exc.message}"


@requires(Need.OPERATE)
def run_preview(request):
    """The YAML preview, refreshed by htmx as the form changes."""
    data, method, choices, _, values = _form_state(request)
    return HttpResponse(
        _preview(method, values, data.get("base_model", ""), choices),
        content_type="text/plain; charset=utf-8",
    )


@requires(Need.READ)
def run_detail(request, pk: int):
    run = selectors.run_get(id=pk)
    return render(request, "training/detail.html", _ctx(run=run, **selectors.run_detail(run=run)))


@requires(Need.OPERATE)
@require_POST
def checkpoint_register(request, pk: int):
    checkpoint = selectors.checkpoint_get(id=pk)
    try:
        policy = services.checkpoint_register(
            checkpoint=checkpoint, name=request.POST.get("name", "").strip(), user=request.user
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect("training:detail", pk=checkpoint.run_id)
    messages.success(request, f"Registered as policy {policy.name}.")
    return redirect("rollouts:policy", pk=policy.pk)


@requires(Need.READ)
def lineage(request, policy: int):
    """policy → checkpoint → training run → dataset → reward-model version and labels →
    trajectories."""
    return render(request, "training/lineage.html", _ctx(**selectors.lineage(policy_id=policy)))

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.training import services
from webapp.training.models import Checkpoint, TrainingRun


def _ctx(**extra):
    return {"active_area": "training", **extra}


@requires(Need.READ)
def run_list(request):
    runs = TrainingRun.objects.select_related("dataset", "job")[:200]
    return render(request, "training/list.html", _ctx(runs=runs))


def _form_state(request):
    from webapp.datasets.models import DatasetSnapshot

    data = request.POST if request.method == "POST" else request.GET
    method = data.get("method") or "sft"
    if method not in services.METHODS:
        method = "sft"
    dataset = None
    if str(data.get("dataset", "")).isdigit():
        dataset = DatasetSnapshot.objects.filter(pk=int(data["dataset"])).first()
    checkpoint = None
    if str(data.get("checkpoint", "")).isdigit():
        checkpoint = Checkpoint.objects.filter(pk=int(data["checkpoint"])).first()
    fields = services.form_fields(method)
    values = {f["name"]: data.get(f["name"]) for f in fields if f["name"] in data}
    return data, method, dataset, checkpoint, fields, values


@requires(Need.OPERATE)
def run_new(request):
    """The form: dataset, base model (a directory or an earlier checkpoint), method, every config
    field with its help, and the exact configuration previewed as YAML before launch."""
    from webapp.datasets.models import DatasetSnapshot

    data, method, dataset, checkpoint, fields, values = _form_state(request)
    error = None
    if request.method == "POST" and data.get("launch"):
        try:
            run = services.training_launch(
                method=method,
                dataset=dataset,
                base_model=data.get("base_model", "").strip(),
                checkpoint=checkpoint,
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
            methods=list(services.METHODS),
            dataset=dataset,
            checkpoint=checkpoint,
            datasets=DatasetSnapshot.objects.exclude(directory="")[:200],
            checkpoints=Checkpoint.objects.select_related("run")[:200],
            fields=fields,
            base_model=data.get("base_model", ""),
            name=data.get("name", ""),
            error=error,
            yaml=_preview(method, values, data.get("base_model", ""), dataset, checkpoint),
        ),
    )


def _preview(method, values, base_model, dataset, checkpoint) -> str:
    try:
        return services.preview(
            method=method,
            values=values,
            base_model=checkpoint.path if checkpoint else base_model,
            dataset=dataset,
        )
    except ApplicationError as exc:
        return f"# {exc.message}"


@requires(Need.OPERATE)
def run_preview(request):
    """The YAML preview, refreshed by htmx as the form changes."""
    _, method, dataset, checkpoint, _, values = _form_state(request)
    data = request.POST if request.method == "POST" else request.GET
    return HttpResponse(
        _preview(method, values, data.get("base_model", ""), dataset, checkpoint),
        content_type="text/plain; charset=utf-8",
    )


@requires(Need.READ)
def run_detail(request, pk: int):
    from webapp.evaluation.forms import CheckpointsEvaluationForm
    from webapp.evaluation.selectors import checkpoint_curve

    run = get_object_or_404(TrainingRun.objects.select_related("dataset", "job"), pk=pk)
    return render(
        request,
        "training/detail.html",
        _ctx(
            run=run,
            checkpoints=run.checkpoints.select_related("policy"),
            curve=checkpoint_curve(run),
            evaluate_form=CheckpointsEvaluationForm(),
        ),
    )


@requires(Need.OPERATE)
@require_POST
def checkpoint_register(request, pk: int):
    checkpoint = get_object_or_404(Checkpoint.objects.select_related("run"), pk=pk)
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
    from webapp.rollouts.models import Policy

    policy_row = get_object_or_404(Policy, pk=policy)
    chain = []
    checkpoint = (
        Checkpoint.objects.select_related("run", "run__dataset").filter(policy=policy_row).first()
    )
    while checkpoint is not None:
        run = checkpoint.run
        chain.append({"checkpoint": checkpoint, "run": run, "dataset": run.dataset})
        checkpoint = run.base_checkpoint
    return render(request, "training/lineage.html", _ctx(policy=policy_row, chain=chain))

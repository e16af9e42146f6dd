from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse
from django.shortcuts import redirect, render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.common.htmx import follow_job
from webapp.datasets import selectors, services
from webapp.datasets.forms import DatasetForm


def _ctx(**extra):
    return {"active_area": "datasets", **extra}


@requires(Need.READ)
def dataset_list(request):
    return render(request, "datasets/list.html", _ctx(rows=selectors.snapshot_list()))


@requires(Need.OPERATE)
def dataset_new(request):
    initial = request.GET.dict() or None
    if request.GET.get("again", "").isdigit():  # a failed DPO export, again with pairs built first
        initial = selectors.snapshot_again(id=int(request.GET["again"]))
    form = DatasetForm(request.POST or None, initial=initial)
    hint = None
    if request.method == "POST" and form.is_valid():
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
                user=request.user,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
            hint = exc.extra.get("hint")
        else:
            messages.success(request, f"Exporting {snapshot.name}.")
            return redirect("datasets:detail", pk=snapshot.pk)
    return render(request, "datasets/new.html", _ctx(form=form, hint=hint))


@requires(Need.READ)
def dataset_detail(request, pk: int):
    """The dataset's page; its status, files and card follow the export job live (htmx)."""
    snapshot = selectors.snapshot_get(id=pk)
    context = _ctx(snapshot=snapshot, card=selectors.snapshot_card(snapshot=snapshot))
    if request.htmx and request.htmx.target == "dataset-live":
        response = render(request, "datasets/detail.html#live", context)
        return follow_job(response, job=snapshot.job)
    return render(request, "datasets/detail.html", context)


@requires(Need.READ)
def dataset_file(request, pk: int, name: str):
    path = selectors.snapshot_file_path(snapshot=selectors.snapshot_get(id=pk), name=name)
    return FileResponse(open(path, "rb"), as_attachment=True, filename=path.name)  # noqa: SIM115

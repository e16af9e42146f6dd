from __future__ import annotations

import json
import tempfile
from pathlib import Path

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.trajectories import selectors, services
from webapp.trajectories.forms import ImportForm
from webapp.trajectories.models import Step, Trajectory

OBSERVATION_PREVIEW = 2000
FIRST_SCREEN_STEPS = 200


@requires(Need.READ)
def trajectory_list(request):
    filters = selectors.Filters.from_query(request.GET)
    try:
        before = int(request.GET["before"]) if request.GET.get("before") else None
    except ValueError:
        before = None
    rows, next_before = selectors.keyset_page(selectors.trajectory_list(filters), before=before)
    query = request.GET.copy()
    query.pop("before", None)
    context = {
        "active_area": "trajectories",
        "rows": rows,
        "filters": filters,
        "next_before": next_before,
        "query": query.urlencode(),
        "choices": {
            name: selectors.distinct_values(name)
            for name in ("domain", "agent", "model", "source_format")
        },
    }
    return render(request, "trajectories/list.html", context)


@requires(Need.READ)
def trajectory_detail(request, pk: int):
    row = get_object_or_404(Trajectory.objects.select_related("source_file", "task"), pk=pk)
    steps = list(row.steps.order_by("index")[:FIRST_SCREEN_STEPS])
    for step in steps:
        step.preview = step.observation[:OBSERVATION_PREVIEW]
        step.cut = len(step.observation) > OBSERVATION_PREVIEW
    context = {
        "active_area": "trajectories",
        "row": row,
        "steps": steps,
        "more_steps": max(0, row.step_count - len(steps)),
        "live": row.status == Trajectory.Status.RUNNING,
    }
    return render(request, "trajectories/detail.html", context)


@requires(Need.READ)
def step_observation(request, pk: int, index: int):
    """The whole observation of one step, loaded on demand."""
    step = get_object_or_404(Step, trajectory_id=pk, index=index)
    return render(request, "trajectories/detail.html#observation", {"step": step})


@requires(Need.READ)
def trajectory_download(request, pk: int):
    row = get_object_or_404(Trajectory, pk=pk)
    response = HttpResponse(
        selectors.trajectory_spec(row).model_dump_json(indent=2), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="trajectory-{row.pk}.json"'
    return response


@requires(Need.READ)
def trajectory_raw(request, pk: int):
    row = get_object_or_404(Trajectory.objects.select_related("source_file"), pk=pk)
    if row.source_file is None:
        raise Http404("This trajectory has no stored source file.")
    response = HttpResponse(row.source_file.raw_bytes(), content_type="application/octet-stream")
    safe_name = (
        "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(row.source_file.name).name)
        or "source"
    )
    response["Content-Disposition"] = f'attachment; filename="{safe_name}"'
    return response


@requires(Need.OPERATE)
def trajectory_import(request):
    form = ImportForm(request.POST or None, request.FILES or None)
    summary = None
    if request.method == "POST" and form.is_valid():
        with tempfile.TemporaryDirectory(prefix="steplab-upload-") as folder:
            paths = []
            for number, upload in enumerate(form.cleaned_data["files"]):
                name = Path(upload.name).name or f"upload-{number}"
                target = Path(folder) / f"{number:03d}" / name
                target.parent.mkdir()
                with open(target, "wb") as handle:
                    for chunk in upload.chunks():
                        handle.write(chunk)
                paths.append(str(target))
            try:
                summary = services.trajectories_import_files(
                    paths=paths, format=form.cleaned_data["format"] or None, user=request.user
                )
            except ApplicationError as exc:
                form.add_error(None, exc.message)
        if summary is not None:
            messages.success(
                request,
                f"Imported {len(summary.created)} trajectories ({summary.steps} steps); {len(summary.duplicates)} duplicate(s) skipped.",
            )
            return redirect("trajectories:list")
    return render(
        request, "trajectories/import.html", {"active_area": "trajectories", "form": form}
    )


@requires(Need.OPERATE)
def trajectory_tag(request):
    """Bulk action: add a tag to the selected trajectories."""
    if request.method != "POST":
        return redirect("trajectories:list")
    tag = (request.POST.get("tag") or "").strip()[:64]
    ids = [int(i) for i in request.POST.getlist("selected") if i.isdigit()]
    if not tag or not ids:
        messages.error(request, "Select trajectories and give a tag.")
        return redirect("trajectories:list")
    count = services.trajectories_tag(ids=ids, tag=tag)
    messages.success(request, f"Tagged {count} trajectories with {tag!r}.")
    return redirect(request.POST.get("next") or "trajectories:list")


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@requires(Need.READ)
def trajectory_diff(request):
    """Two trajectories side by side, steps aligned on tool and parameters."""
    from trainer_core.recording.align import align_steps, param_diff, reward_delta, text_diff

    ids = request.GET.getlist("selected") or [request.GET.get("a", ""), request.GET.get("b", "")]
    ids = [i for i in ids if i and i.isdigit()]
    if len(ids) != 2:
        messages.error(request, "Select exactly two trajectories to compare.")
        return redirect("trajectories:list")
    left = get_object_or_404(Trajectory, pk=int(ids[0]))
    right = get_object_or_404(Trajectory, pk=int(ids[1]))
    left_steps = list(left.steps.order_by("index"))
    right_steps = list(right.steps.order_by("index"))
    alignment = align_steps(left_steps, right_steps)
    rows = []
    for position, aligned in enumerate(alignment.rows):
        a = left_steps[aligned.left_index] if aligned.left_index is not None else None
        b = right_steps[aligned.right_index] if aligned.right_index is not None else None
        rows.append(
            {
                "position": position,
                "kind": aligned.kind,
                "left": a,
                "right": b,
                "first": position == alignment.first_divergence,
                "params": param_diff(a.params, b.params)
                if a and b and aligned.kind == "changed_params"
                else [],
                "observation": text_diff(a.observation, b.observation)
                if a and b and aligned.kind == "changed_observation"
                else [],
                "reward_delta": reward_delta(a, b) if a and b else None,
            }
        )
    context = {
        "active_area": "trajectories",
        "left": left,
        "right": right,
        "rows": rows,
        "first_divergence": alignment.first_divergence,
    }
    return render(request, "trajectories/diff.html", context)

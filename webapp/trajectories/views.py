from __future__ import annotations

import json
import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.trajectories import bulk, importjob, selectors, services
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
    rows, next_cursor = selectors.keyset_page(
        selectors.trajectory_list(filters),
        before=before,
        cursor=request.GET.get("after") or None,
        sort=filters.sort,
    )
    query = request.GET.copy()
    query.pop("before", None)
    query.pop("after", None)
    context = {
        "active_area": "trajectories",
        "rows": rows,
        "filters": filters,
        "next_cursor": next_cursor,
        "sorts": [(name, label) for name, (label, _, _) in selectors.SORTS.items()],
        "bulk_actions": bulk.actions_for(request.user),
        "query": query.urlencode(),
        "choices": {
            name: selectors.distinct_values(name)
            for name in ("domain", "agent", "model", "source_format")
        },
    }
    return render(request, "trajectories/list.html", context)


def _steps_context(row: Trajectory, *, after: int | None) -> dict:
    """One chunk of steps after index ``after`` (None: from the start), and what follows it: a
    "show more" button when more steps are stored, a poller while the trajectory runs."""
    qs = row.steps.order_by("index")
    if after is not None:
        qs = qs.filter(index__gt=after)
    steps = list(qs[: FIRST_SCREEN_STEPS + 1])
    more = len(steps) > FIRST_SCREEN_STEPS
    steps = steps[:FIRST_SCREEN_STEPS]
    for step in steps:
        step.preview = step.observation[:OBSERVATION_PREVIEW]
        step.cut = len(step.observation) > OBSERVATION_PREVIEW
    last_index = steps[-1].index if steps else (after if after is not None else -1)
    remaining = 0
    if more:
        remaining = row.steps.filter(index__gt=last_index).count()
    return {
        "row": row,
        "steps": steps,
        "after": after,
        "last_index": last_index,
        "more_steps": remaining,
        "chunk": min(FIRST_SCREEN_STEPS, remaining),
        "live": row.status == Trajectory.Status.RUNNING,
    }


@requires(Need.READ)
def trajectory_detail(request, pk: int):
    row = get_object_or_404(Trajectory.objects.select_related("source_file", "task"), pk=pk)
    context = {"active_area": "trajectories", **_steps_context(row, after=None)}
    return render(request, "trajectories/detail.html", context)


@requires(Need.READ)
def trajectory_steps(request, pk: int):
    """The steps after ``?after=<index>``: "show more" on long trajectories, and the live poll of
    a running one (which also refreshes the facts card out of band, so the status changes)."""
    row = get_object_or_404(Trajectory.objects.select_related("source_file", "task"), pk=pk)
    try:
        after = int(request.GET.get("after", "-1"))
    except ValueError:
        after = -1
    context = _steps_context(row, after=after)
    body = render(request, "trajectories/detail.html#step_items", context).content.decode()
    if row.source == Trajectory.Source.ROLLOUT:
        body += render(
            request, "trajectories/detail.html#facts", {**context, "oob": True}
        ).content.decode()
    return HttpResponse(body)


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
        uploads = form.cleaned_data["files"]
        size = sum(upload.size or 0 for upload in uploads)
        if form.cleaned_data["background"] or size > settings.STEPLAB_IMPORT_INLINE_MAX_BYTES:
            job = importjob.import_enqueue(
                uploads=uploads, format=form.cleaned_data["format"] or None, user=request.user
            )
            messages.info(request, f"Importing {len(uploads)} file(s) in job {job.pk}.")
            return redirect("jobs:detail", pk=job.pk)
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


@requires(Need.READ)
def trajectory_export_selection(request):
    """Bulk action: the selected trajectories as canonical JSONL (steplab-jsonl)."""
    if request.method != "POST":
        return redirect("trajectories:list")
    ids = bulk.selected_ids(request)
    if not ids:
        messages.error(request, "Select the trajectories to export first.")
        return redirect(request.POST.get("next") or "trajectories:list")
    rows = Trajectory.objects.filter(pk__in=ids).order_by("pk")
    body = "".join(selectors.trajectory_spec(row).to_json() + "\n" for row in rows)
    response = HttpResponse(body, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="trajectories-{len(ids)}.jsonl"'
    return response


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@requires(Need.READ)
def trajectory_diff(request):
    """Two trajectories side by side, steps aligned on tool and parameters."""
    selected = [i for i in request.GET.getlist("selected") if i.isdigit()]
    if selected:  # from the list's selection form: go to the clean, shareable URL
        if len(selected) != 2:
            messages.error(request, "Select exactly two trajectories to compare.")
            return redirect("trajectories:list")
        ordered = sorted(selected, key=int)
        return redirect(f"{reverse('trajectories:diff')}?a={ordered[0]}&b={ordered[1]}")
    ids = [i for i in (request.GET.get("a", ""), request.GET.get("b", "")) if i and i.isdigit()]
    if len(ids) != 2:
        messages.error(request, "Select exactly two trajectories to compare.")
        return redirect("trajectories:list")
    left = get_object_or_404(Trajectory, pk=int(ids[0]))
    right = get_object_or_404(Trajectory, pk=int(ids[1]))
    context = {"active_area": "trajectories", **selectors.diff_context(left, right)}
    return render(request, "trajectories/diff.html", context)

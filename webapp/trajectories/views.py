from __future__ import annotations

from pathlib import Path

from django.contrib import messages
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.common.redirects import safe_next_url
from webapp.trajectories import bulk, gdi, selectors, services
from webapp.trajectories.forms import ImportForm


@requires(Need.READ)
def trajectory_list(request):
    filters = selectors.Filters.from_query(request.GET)
    try:
        before = int(request.GET["before"]) if request.GET.get("before") else None
    except ValueError:
        before = None
    rows, next_cursor = selectors.keyset_page(
        qs=selectors.trajectory_list(filters=filters),
        before=before,
        cursor=request.GET.get("after") or None,
        sort=filters.sort,
        list_rows=True,
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
        "choices": selectors.filter_choices(filters=filters),
    }
    return render(request, "trajectories/list.html", context)


@requires(Need.READ)
def trajectory_detail(request, pk: int):
    row = selectors.trajectory_get(id=pk)
    context = {
        "active_area": "trajectories",
        **selectors.trajectory_steps_chunk(trajectory=row, after=None),
        "gdi": gdi.gdi_show(trajectory_id=row.pk),
    }
    return render(request, "trajectories/detail.html", context)


@requires(Need.READ)
def trajectory_steps(request, pk: int):
    """The steps after ``?after=<index>``: "show more" on long trajectories, and the live poll of
    a running one (which also refreshes the facts card out of band, so the status changes)."""
    row = selectors.trajectory_get(id=pk)
    try:
        after = int(request.GET.get("after", "-1"))
    except ValueError:
        after = -1
    context = selectors.trajectory_steps_chunk(trajectory=row, after=after)
    body = render(request, "trajectories/detail.html#step_items", context).content.decode()
    if row.source in (row.Source.ROLLOUT, row.Source.LIVE):
        body += render(
            request, "trajectories/detail.html#facts", {**context, "oob": True}
        ).content.decode()
    return HttpResponse(body)


@requires(Need.READ)
def step_observation(request, pk: int, index: int):
    """The whole observation of one step, loaded on demand."""
    step = selectors.step_get(trajectory_id=pk, index=index)
    return render(request, "trajectories/detail.html#observation", {"step": step})


@requires(Need.READ)
def step_screenshot(request, pk: int, index: int):
    """A step's screenshot (a file an environment wrote under the data directory)."""
    path, content_type = selectors.step_screenshot(trajectory_id=pk, index=index)
    response = FileResponse(path.open("rb"), content_type=content_type)
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@requires(Need.READ)
def trajectory_download(request, pk: int):
    row = selectors.trajectory_get(id=pk)
    response = HttpResponse(
        selectors.trajectory_spec(row=row).model_dump_json(indent=2),
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="trajectory-{row.pk}.json"'
    return response


@requires(Need.READ)
def trajectory_raw(request, pk: int):
    row = selectors.trajectory_get(id=pk)
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
    """Upload agent logs: small uploads import now and the page shows the per-file result
    table; large ones (or on request) import as a job."""
    form = ImportForm(request.POST or None, request.FILES or None)
    context = {"active_area": "trajectories", "form": form}
    if request.method == "POST" and form.is_valid():
        uploads = form.cleaned_data["files"]
        options = {
            "format": form.cleaned_data["format"] or None,
            "all_or_nothing": form.cleaned_data["all_or_nothing"],
        }
        if services.uploads_need_job(uploads=uploads, background=form.cleaned_data["background"]):
            job = services.trajectories_import_enqueue(
                uploads=uploads, user=request.user, **options
            )
            messages.info(request, f"Importing {len(uploads)} file(s) in job {job.pk}.")
            return redirect("jobs:detail", pk=job.pk)
        try:
            summary = services.trajectories_import_uploads(
                uploads=uploads, user=request.user, **options
            )
        except ApplicationError as exc:
            files = exc.extra.get("files")
            form.add_error(None, exc.message.splitlines()[0] if files else exc.message)
            context["refused_files"] = files
        else:
            context["summary"] = summary
            if summary.created:
                context.update(first_id=min(summary.created), last_id=max(summary.created))
            context["form"] = ImportForm()
    return render(request, "trajectories/import.html", context)


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
    return redirect(safe_next_url(request, default="trajectories:list"))


@requires(Need.READ)
def trajectory_export_selection(request):
    """Bulk action: the selected trajectories as canonical JSONL (steplab-jsonl)."""
    if request.method != "POST":
        return redirect("trajectories:list")
    ids = bulk.selected_ids(request)
    if not ids:
        messages.error(request, "Select the trajectories to export first.")
        return redirect(safe_next_url(request, default="trajectories:list"))
    response = HttpResponse(
        selectors.trajectories_jsonl(ids=ids), content_type="application/x-ndjson"
    )
    response["Content-Disposition"] = f'attachment; filename="trajectories-{len(ids)}.jsonl"'
    return response


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
    left = selectors.trajectory_get(id=int(ids[0]), source_file=False)
    right = selectors.trajectory_get(id=int(ids[1]), source_file=False)
    start = int(request.GET["start"]) if request.GET.get("start", "").isdigit() else 0
    diff = selectors.diff_context(left=left, right=right, start=start)
    return render(request, "trajectories/diff.html", {"active_area": "trajectories", **diff})


@requires(Need.READ)
def trajectory_diff_rows(request):
    """The next aligned rows of a diff (from ``start``), loaded by the diff page after its first
    screen until every row is shown."""
    try:
        a, b, start = int(request.GET["a"]), int(request.GET["b"]), int(request.GET["start"])
    except (KeyError, ValueError):
        raise Http404("Give a, b (trajectory ids) and start (an aligned row).") from None
    diff = selectors.diff_context(
        left=selectors.trajectory_get(id=a, source_file=False),
        right=selectors.trajectory_get(id=b, source_file=False),
        start=start,
        count=selectors.DIFF_MORE_ROWS,
    )
    return render(request, "trajectories/diff.html#diff_rows", diff)


@requires(Need.READ)
def trajectory_diff_step(request):
    """The word-level differences of one pair of observations, loaded on demand by a diff row
    beyond the page's budget (bounded like every text diff)."""
    try:
        a, b = int(request.GET["a"]), int(request.GET["b"])
        left_index, right_index = int(request.GET["left"]), int(request.GET["right"])
    except (KeyError, ValueError):
        raise Http404("Give a, b, left and right (trajectory ids and step indexes).") from None
    context = selectors.step_text_diff(
        left=selectors.trajectory_get(id=a, source_file=False),
        right=selectors.trajectory_get(id=b, source_file=False),
        left_index=left_index,
        right_index=right_index,
    )
    return render(request, "trajectories/diff.html#textdiff", context)

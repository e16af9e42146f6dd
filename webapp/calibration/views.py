from __future__ import annotations

from django.contrib import messages
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.calibration import selectors, services
from webapp.calibration.forms import QueueForm
from webapp.calibration.models import StepLabel
from webapp.common.errors import ApplicationError
from webapp.common.htmx import follow_job
from webapp.trajectories.selectors import selection_ids


def _ctx(**extra):
    return {"active_area": "annotate", **extra}


@requires(Need.LABEL)
def queue_list(request):
    return render(request, "calibration/queues.html", _ctx(rows=selectors.queue_rows()))


@requires(Need.OPERATE)
def queue_new(request):
    """A queue from a selection (the list's bulk action, or ?all_matching=1 with its filters) or
    from where the reward model is least trustworthy."""
    data = request.POST if request.method == "POST" else request.GET
    # the queue form's own fields are not filters
    ids = selection_ids(data=data, not_filters=tuple(QueueForm.base_fields))
    # a filter ("all matching") travels as its query, not as thousands of hidden ids
    filter_fields = (
        [
            (k, v)
            for k in data
            if k not in ("csrfmiddlewaretoken", "selected", "create", *QueueForm.base_fields)
            for v in data.getlist(k)
        ]
        if data.get("all_matching") and not data.getlist("selected")
        else []
    )
    bound = request.method == "POST" and request.POST.get("create")
    form = QueueForm(request.POST if bound else None, initial={"source": "selection"})
    if bound and form.is_valid():
        try:
            queue = services.queue_create(
                trajectory_ids=ids, user=request.user, **form.cleaned_data
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Queue {queue.name} has {queue.items.count()} items.")
            return redirect("calibration:queue", pk=queue.pk)
    return render(
        request,
        "calibration/queue_form.html",
        _ctx(form=form, ids=ids, filter_fields=filter_fields),
    )


@requires(Need.LABEL)
def queue_detail(request, pk: int):
    queue = selectors.queue_get(id=pk)
    return render(
        request,
        "calibration/queue_detail.html",
        _ctx(
            queue=queue,
            progress=selectors.queue_progress(queue=queue),
            items=selectors.queue_items(queue=queue),
        ),
    )


@requires(Need.LABEL)
def queue_work(request, pk: int):
    """Reserve the next item for this annotator and open it."""
    item = services.next_item(queue=selectors.queue_get(id=pk), user=request.user)
    if item is None:
        messages.info(request, "Nothing left for you in this queue. Thank you!")
        return redirect("calibration:queue", pk=pk)
    return redirect("calibration:item", pk=pk, item=item.pk)


@requires(Need.LABEL)
def queue_peek(request, pk: int):
    """Reserve the item after ``exclude`` ahead of time (the page preloads it)."""
    queue = selectors.queue_get(id=pk)
    try:
        exclude = int(request.GET.get("exclude", ""))
    except ValueError:
        exclude = None
    item = services.next_item(queue=queue, user=request.user, exclude=exclude)
    url = reverse("calibration:item", args=[pk, item.pk]) if item else None
    return JsonResponse({"next": url})


@requires(Need.LABEL)
def item_page(request, pk: int, item: int):
    item = selectors.item_get(queue_id=pk, id=item)
    queue = item.queue
    not_held = services.item_hold(item=item, user=request.user)  # reserves it if a place is free
    submission = selectors.item_submission(item=item, user=request.user)
    context = _ctx(
        queue=queue,
        item=item,
        not_held=not_held,
        steps=selectors.item_steps(item=item, user=request.user),
        **selectors.item_pair(item=item),
        submission=submission,
        keys=list(range(1, queue.scale_points + 1)),
        levels=[(k, queue.level_value(k)) for k in range(1, queue.scale_points + 1)],
        config=(
            {
                "mode": queue.mode,
                "scale": queue.scale_points,
                "label": reverse("calibration:label", args=[queue.pk, item.pk]),
                "firstError": reverse("calibration:first_error", args=[queue.pk, item.pk]),
                "submit": reverse("calibration:submit", args=[queue.pk, item.pk]),
                "peek": reverse("calibration:peek", args=[queue.pk]) + f"?exclude={item.pk}",
                "submissionVersion": submission.version if submission else 0,
            }
        ),
    )
    return render(request, "calibration/item.html", context)


def _conflict(exc: ApplicationError, status: int = 409) -> JsonResponse:
    return JsonResponse({"error": exc.message}, status=status)


@requires(Need.LABEL)
@require_POST
def label(request, pk: int, item: int):
    item = selectors.item_get(queue_id=pk, id=item)
    try:
        index = int(request.POST["index"])
        key = int(request.POST["key"]) if request.POST.get("key") else None
        version = int(request.POST["version"]) if request.POST.get("version", "") != "" else None
    except (KeyError, ValueError):
        return JsonResponse({"error": "index, key and version must be numbers"}, status=400)
    try:
        row = services.label_set(
            item=item,
            user=request.user,
            index=index,
            key=key,
            neutral=request.POST.get("neutral") == "1",
            clear=request.POST.get("clear") == "1",
            expected_version=version,
            reason=request.POST.get("reason", ""),
        )
    except services.LabelConflict as exc:
        return _conflict(exc)
    except services.NotHeld as exc:
        return _conflict(exc, 403)
    except ApplicationError as exc:
        return _conflict(exc, 400)
    return JsonResponse(_label_json(index, row))


def _label_json(index: int, row: StepLabel | None) -> dict:
    return {
        "index": index,
        "value": row.value if row else None,
        "neutral": bool(row and row.neutral),
        "origin": row.origin if row else "",
        "version": row.version if row else 0,
    }


@requires(Need.LABEL)
@require_POST
def first_error(request, pk: int, item: int):
    item = selectors.item_get(queue_id=pk, id=item)
    try:
        index = int(request.POST["index"])
        services.first_error_set(item=item, user=request.user, index=index)
    except (KeyError, ValueError):
        return JsonResponse({"error": "index must be a number"}, status=400)
    except services.NotHeld as exc:
        return _conflict(exc, 403)
    except ApplicationError as exc:
        return _conflict(exc, 400)
    rows = selectors.labels_of(item=item, user=request.user)
    return JsonResponse({"labels": [_label_json(r.index, r) for r in rows]})


@requires(Need.LABEL)
@require_POST
def submit(request, pk: int, item: int):
    item = selectors.item_get(queue_id=pk, id=item)
    try:
        key = int(request.POST["trajectory_key"]) if request.POST.get("trajectory_key") else None
        version = int(request.POST["version"]) if request.POST.get("version") else None
    except ValueError:
        return JsonResponse({"error": "the trajectory score must be a number"}, status=400)
    try:
        services.submit(
            item=item,
            user=request.user,
            trajectory_key=key,
            comment=request.POST.get("comment", "")[:5000],
            choice=request.POST.get("choice", ""),
            expected_version=version,
        )
    except services.LabelConflict as exc:
        return _conflict(exc)
    except services.NotHeld as exc:
        return _conflict(exc, 403)
    except ApplicationError as exc:
        return _conflict(exc, 400)
    nxt = services.next_item(queue=item.queue, user=request.user)
    url = (
        reverse("calibration:item", args=[pk, nxt.pk])
        if nxt
        else reverse("calibration:queue", args=[pk])
    )
    return JsonResponse({"next": url, "done": nxt is None})


@requires(Need.LABEL)
def item_history(request, pk: int, item: int):
    item = selectors.item_get(queue_id=pk, id=item)
    edits = selectors.item_edits(item=item, user=request.user)
    context = _ctx(item=item, edits=edits, blind=not selectors.item_complete(item=item))
    return render(request, "calibration/history.html", context)


# --- agreement and calibration ----------------------------------------------------------------


def _version(request):
    return selectors.version_for_page(raw=request.GET.get("version") or request.POST.get("version"))


@requires(Need.READ)
def calibration_page(request):
    context = selectors.calibration_page(
        version=_version(request), queue_id=request.GET.get("queue", ""), user=request.user
    )
    return render(request, "calibration/calibration.html", _ctx(**context))


@requires(Need.OPERATE)
@require_POST
def calibration_fit(request):
    version = _version(request)
    if version is None:
        raise Http404("No reward-model version.")
    try:
        calibration = services.calibration_fit(reward_model=version, user=request.user)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect(f"{reverse('calibration:calibration')}?version={version.pk}")
    return redirect("calibration:fitted", pk=calibration.pk)


@requires(Need.READ)
def calibration_detail(request, pk: int):
    """A fitted calibration; once applied, its re-scoring follows the job live (htmx)."""
    calibration = selectors.calibration_get(id=pk)
    context = _ctx(**selectors.calibration_detail(calibration=calibration))
    if request.htmx and request.htmx.target == "apply-live":
        response = render(request, "calibration/fitted.html#apply", context)
        run = calibration.rescoring_run
        return follow_job(response, job=run.job if run else None)
    return render(request, "calibration/fitted.html", context)


@requires(Need.OPERATE)
@require_POST
def calibration_apply(request, pk: int):
    calibration = selectors.calibration_get(id=pk)
    try:
        services.calibration_apply(calibration=calibration, user=request.user)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"Created {calibration.applied_as} and started re-scoring with it; the old scores "
            "stay as they are.",
        )
    return redirect("calibration:fitted", pk=pk)


@requires(Need.READ)
def calibration_changes(request, pk: int):
    """Which step labels and which trajectory ranks changed between the version a calibration
    was fitted on and the version that applies it."""
    calibration = selectors.calibration_get(id=pk)
    if calibration.applied_as is None:
        messages.info(request, "Apply the calibration first.")
        return redirect("calibration:fitted", pk=pk)
    changes = selectors.compare_versions(old=calibration.reward_model, new=calibration.applied_as)
    return render(
        request, "calibration/changes.html", _ctx(calibration=calibration, changes=changes)
    )

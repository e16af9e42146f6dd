from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.calibration import selectors, services
from webapp.calibration.models import (
    AnnotationQueue,
    Calibration,
    LabelEdit,
    QueueItem,
    StepLabel,
    Submission,
)
from webapp.common.errors import ApplicationError

OBSERVATION_PREVIEW = 1500


def _ctx(**extra):
    return {"active_area": "annotate", **extra}


@requires(Need.LABEL)
def queue_list(request):
    queues = AnnotationQueue.objects.select_related("reward_model")
    rows = [(q, services.progress(q)) for q in queues[:100]]
    return render(request, "calibration/queues.html", _ctx(rows=rows))


class QueueForm(forms.Form):
    name = forms.CharField(max_length=120)
    mode = forms.ChoiceField(choices=AnnotationQueue.Mode.choices)
    source = forms.ChoiceField(choices=AnnotationQueue.Source.choices)
    reward_model = forms.ModelChoiceField(
        queryset=None,
        required=False,
        help_text="The version whose scores are shown beside each step (and that picks items "
        "for the automatic sources).",
    )
    other_reward_model = forms.ModelChoiceField(
        queryset=None, required=False, help_text="For “two versions disagree”."
    )
    guidelines = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
    scale_points = forms.IntegerField(min_value=2, max_value=10, initial=5)
    annotators_per_item = forms.IntegerField(min_value=1, max_value=10, initial=1)
    reservation_minutes = forms.IntegerField(min_value=1, max_value=24 * 60, initial=30)
    budget = forms.IntegerField(min_value=1, max_value=100_000, initial=100)
    seed = forms.IntegerField(initial=0)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from webapp.rewards.models import RewardModel

        versions = RewardModel.objects.order_by("domain", "-version")
        self.fields["reward_model"].queryset = versions
        self.fields["other_reward_model"].queryset = versions
        self.fields["reward_model"].label_from_instance = lambda v: v.label
        self.fields["other_reward_model"].label_from_instance = lambda v: v.label


def _selected_ids(data) -> list[int]:
    from webapp.trajectories import selectors as trajectory_selectors

    selected = [int(i) for i in data.getlist("selected") if str(i).isdigit()]
    if selected:
        return selected
    if data.get("all_matching"):
        query = data.copy()
        for name in QueueForm.base_fields:  # the queue form's own fields are not filters
            query.pop(name, None)
        filters = trajectory_selectors.Filters.from_query(query)
        return list(
            trajectory_selectors.trajectory_list(filters).values_list("pk", flat=True)[:100_000]
        )
    return []


@requires(Need.OPERATE)
def queue_new(request):
    """A queue from a selection (the list's bulk action, or ?all_matching=1 with its filters) or
    from where the reward model is least trustworthy."""
    data = request.POST if request.method == "POST" else request.GET
    ids = _selected_ids(data)
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
        data = form.cleaned_data
        try:
            queue = services.queue_create(trajectory_ids=ids, user=request.user, **data)
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
    queue = get_object_or_404(AnnotationQueue.objects.select_related("reward_model"), pk=pk)
    items = queue.items.select_related("trajectory", "other")[:500]
    return render(
        request,
        "calibration/queue_detail.html",
        _ctx(queue=queue, progress=services.progress(queue), items=items),
    )


@requires(Need.LABEL)
def queue_work(request, pk: int):
    """Reserve the next item for this annotator and open it."""
    queue = get_object_or_404(AnnotationQueue, pk=pk)
    item = services.next_item(queue=queue, user=request.user)
    if item is None:
        messages.info(request, "Nothing left for you in this queue. Thank you!")
        return redirect("calibration:queue", pk=pk)
    return redirect("calibration:item", pk=pk, item=item.pk)


@requires(Need.LABEL)
def queue_peek(request, pk: int):
    """Reserve the item after ``exclude`` ahead of time (the page preloads it)."""
    queue = get_object_or_404(AnnotationQueue, pk=pk)
    try:
        exclude = int(request.GET.get("exclude", ""))
    except ValueError:
        exclude = None
    item = services.next_item(queue=queue, user=request.user, exclude=exclude)
    url = reverse("calibration:item", args=[pk, item.pk]) if item else None
    return JsonResponse({"next": url})


def _item(request, pk: int, item_pk: int) -> QueueItem:
    item = get_object_or_404(
        QueueItem.objects.select_related("queue", "trajectory", "other", "queue__reward_model"),
        pk=item_pk,
        queue_id=pk,
    )
    return item


def _steps(trajectory, reward_model):
    from webapp.rewards.selectors import step_scores

    scores = step_scores(reward_model.pk, trajectory.pk) if reward_model else {}
    steps = list(trajectory.steps.order_by("index"))
    for step in steps:
        step.preview = step.observation[:OBSERVATION_PREVIEW]
        step.cut = len(step.observation) > OBSERVATION_PREVIEW
        step.score = scores.get(step.index)
    return steps


@requires(Need.LABEL)
def item_page(request, pk: int, item: int):
    item = _item(request, pk, item)
    queue = item.queue
    mine = {
        label.index: label for label in StepLabel.objects.filter(item=item, annotator=request.user)
    }
    submission = Submission.objects.filter(item=item, annotator=request.user).first()
    steps = _steps(item.trajectory, queue.reward_model)
    for step in steps:
        step.label = mine.get(step.index)
    context = _ctx(
        queue=queue,
        item=item,
        steps=steps,
        **(_pair_context(item) if item.other_id else {}),
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


def _pair_context(item: QueueItem) -> dict:
    from webapp.trajectories.selectors import diff_context

    diff = diff_context(item.trajectory, item.other)
    return {k: diff[k] for k in ("rows", "first_divergence", "scored_by")}


def _conflict(exc: ApplicationError, status: int = 409) -> JsonResponse:
    return JsonResponse({"error": exc.message}, status=status)


@requires(Need.LABEL)
@require_POST
def label(request, pk: int, item: int):
    item = _item(request, pk, item)
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
    item = _item(request, pk, item)
    try:
        index = int(request.POST["index"])
        services.first_error_set(item=item, user=request.user, index=index)
    except (KeyError, ValueError):
        return JsonResponse({"error": "index must be a number"}, status=400)
    except ApplicationError as exc:
        return _conflict(exc, 400)
    rows = StepLabel.objects.filter(item=item, annotator=request.user)
    return JsonResponse({"labels": [_label_json(r.index, r) for r in rows]})


@requires(Need.LABEL)
@require_POST
def submit(request, pk: int, item: int):
    item = _item(request, pk, item)
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
    item = _item(request, pk, item)
    edits = LabelEdit.objects.filter(item=item).select_related("annotator")
    return render(request, "calibration/history.html", _ctx(item=item, edits=edits))


# --- agreement and calibration ----------------------------------------------------------------


def _version(request):
    from webapp.rewards.models import RewardModel

    raw = request.GET.get("version") or request.POST.get("version")
    if raw and raw.isdigit():
        return get_object_or_404(RewardModel, pk=int(raw))
    return RewardModel.objects.order_by("-created_at").first()


@requires(Need.READ)
def calibration_page(request):
    from webapp.rewards.models import RewardModel

    version = _version(request)
    queue = None
    if request.GET.get("queue", "").isdigit():
        queue = get_object_or_404(AnnotationQueue, pk=int(request.GET["queue"]))
    figures = selectors.agreement(version, queue) if version else None
    return render(
        request,
        "calibration/calibration.html",
        _ctx(
            version=version,
            queue=queue,
            versions=RewardModel.objects.order_by("domain", "-version"),
            queues=AnnotationQueue.objects.all()[:100],
            figures=figures,
            reliability_svg=_reliability_svg(figures["reliability"]) if figures else "",
            calibrations=Calibration.objects.filter(reward_model=version)[:10] if version else [],
        ),
    )


def _reliability_svg(curve: list[dict]) -> str:
    """A small reliability plot (mean human label per model-score bin) as SVG; numbers only."""
    from django.utils.html import format_html, format_html_join

    size, pad = 240, 24
    span = size - 2 * pad

    def xy(x: float, y: float) -> tuple[float, float]:
        return round(pad + x * span, 1), round(size - pad - y * span, 1)

    points = [
        xy(b["mean_model"], b["mean_human"])
        for b in curve
        if b.get("n") and b.get("mean_model") is not None and b.get("mean_human") is not None
    ]
    dots = format_html_join("", '<circle cx="{}" cy="{}" r="3" class="rel-dot"></circle>', points)
    line = " ".join(f"{x},{y}" for x, y in points)
    x0, y0 = xy(0, 0)
    x1, y1 = xy(1, 1)
    return format_html(
        '<svg viewBox="0 0 {s} {s}" width="{s}" height="{s}" role="img" aria-label="reliability '
        'plot" data-testid="reliability"><rect x="{p}" y="{p}" width="{w}" height="{w}" '
        'class="rel-frame"></rect><line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" '
        'class="rel-diagonal"></line><polyline points="{line}" class="rel-line"></polyline>{dots}'
        '<text x="{p}" y="{b}" class="rel-axis">model score →</text></svg>',
        s=size,
        p=pad,
        w=span,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=y1,
        line=line,
        dots=dots,
        b=size - 6,
    )


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
    calibration = get_object_or_404(
        Calibration.objects.select_related("reward_model", "applied_as", "rescoring_run__job"),
        pk=pk,
    )
    return render(
        request,
        "calibration/fitted.html",
        _ctx(
            calibration=calibration,
            result=calibration.result,
            weights=sorted(
                (calibration.result.get("rubric_weights") or {}).items(), key=lambda kv: -kv[1]
            ),
            old_weights={
                r["id"]: r["weight"] for r in calibration.reward_model.config.get("rubrics", [])
            },
        ),
    )


@requires(Need.OPERATE)
@require_POST
def calibration_apply(request, pk: int):
    calibration = get_object_or_404(Calibration, pk=pk)
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
    from webapp.calibration.changes import compare_versions

    calibration = get_object_or_404(
        Calibration.objects.select_related("reward_model", "applied_as"), pk=pk
    )
    if calibration.applied_as is None:
        messages.info(request, "Apply the calibration first.")
        return redirect("calibration:fitted", pk=pk)
    changes = compare_versions(calibration.reward_model, calibration.applied_as)
    return render(
        request, "calibration/changes.html", _ctx(calibration=calibration, changes=changes)
    )

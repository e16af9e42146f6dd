from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.common.htmx import stop_polling
from webapp.jobs import kinds, selectors, services
from webapp.jobs.forms import DiagnosticForm, JobFilterForm
from webapp.jobs.models import Job


def _detail_context(job: Job) -> dict:
    queue_rows, _ = selectors.queue_overview() if job.status == "queued" else ([], [])
    return {
        "job": job,
        "kind": kinds.find_kind(job.kind),
        "eta": selectors.job_eta_seconds(job),
        "series": selectors.job_metric_series(job),
        "children": job.children.select_related("user").order_by("pk")[:200],
        "children_summary": selectors.job_children_summary(job),
        "queue_warning": selectors.queue_warning_for(job, queue_rows)
        if job.status == "queued"
        else "",
        "stale_warning": selectors.job_stale_warning(job),
    }


@requires(Need.READ)
def dashboard(request):
    queue_rows, workers = selectors.queue_overview()
    context = {
        "active_area": "dashboard",
        "summary": selectors.dashboard_summary(),
        "queue_rows": queue_rows,
        "workers": workers,
    }
    return render(request, "jobs/dashboard.html", context)


@requires(Need.READ)
def queues_fragment(request):
    queue_rows, workers = selectors.queue_overview()
    return render(
        request, "jobs/dashboard.html#queues", {"queue_rows": queue_rows, "workers": workers}
    )


@requires(Need.READ)
def job_list(request):
    users = get_user_model().objects.order_by("username")
    form = JobFilterForm(request.GET or None, users=users)
    filters = form.cleaned_data if form.is_valid() else {}
    qs = selectors.job_list(
        kind=filters.get("kind") or "",
        status=filters.get("status") or "",
        user_id=filters.get("user") or None,
    )
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "active_area": "jobs",
        "form": form,
        "page": page,
        "any_live": any(not j.is_terminal for j in page.object_list),
        "query": query.urlencode(),
    }
    if request.htmx and request.htmx.target == "job-table":
        return render(request, "jobs/list.html#job-table", context)
    return render(request, "jobs/list.html", context)


@requires(Need.READ)
def job_detail(request, pk: int):
    job = get_object_or_404(Job.objects.select_related("user", "parent"), pk=pk)
    return render(request, "jobs/detail.html", {"active_area": "jobs", **_detail_context(job)})


@requires(Need.READ)
def job_progress(request, pk: int):
    """The live part of the job page, polled by htmx; 286 stops the polling once the job ended."""
    job = get_object_or_404(Job.objects.select_related("user", "parent"), pk=pk)
    response = render(request, "jobs/detail.html#progress", _detail_context(job))
    return stop_polling(response) if job.is_terminal else response


@requires(Need.OPERATE)
@require_POST
def job_cancel(request, pk: int):
    job = get_object_or_404(Job, pk=pk)
    try:
        job = services.job_cancel(job=job, user=request.user)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Job {job.pk}: {job.message}")
    return redirect("jobs:detail", pk=pk)


@requires(Need.OPERATE)
def diagnostic_new(request):
    form = DiagnosticForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            job = services.job_enqueue(
                kind=kinds.DIAGNOSTIC, params=form.params(), user=request.user
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            return redirect("jobs:detail", pk=job.pk)
    return render(request, "jobs/diagnostic_form.html", {"active_area": "jobs", "form": form})

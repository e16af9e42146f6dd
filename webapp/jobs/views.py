from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.accounts.selectors import user_list
from webapp.common.errors import ApplicationError
from webapp.common.htmx import stop_polling
from webapp.jobs import selectors, services
from webapp.jobs.forms import DiagnosticForm, JobFilterForm
from webapp.jobs.names import Kinds


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
    form = JobFilterForm(request.GET or None, users=user_list())
    filters = form.cleaned_data if form.is_valid() else {}
    page = selectors.job_page(
        kind=filters.get("kind") or "",
        status=filters.get("status") or "",
        user_id=filters.get("user") or None,
        page=request.GET.get("page"),
    )
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
    context = selectors.job_detail_context(job=selectors.job_get(id=pk))
    return render(request, "jobs/detail.html", {"active_area": "jobs", **context})


@requires(Need.READ)
def job_progress(request, pk: int):
    """The live part of the job page, polled by htmx; 286 stops the polling once the job ended."""
    job = selectors.job_get(id=pk)
    response = render(request, "jobs/detail.html#progress", selectors.job_detail_context(job=job))
    return stop_polling(response) if job.is_terminal else response


@requires(Need.OPERATE)
@require_POST
def job_cancel(request, pk: int):
    try:
        job = services.job_cancel(job=selectors.job_get(id=pk), user=request.user)
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
                kind=Kinds.DIAGNOSTIC, params=form.params(), user=request.user
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            return redirect("jobs:detail", pk=job.pk)
    return render(request, "jobs/diagnostic_form.html", {"active_area": "jobs", "form": form})

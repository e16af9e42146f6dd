from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import redirect, render

from trainer_core.safeparse import load_json
from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.tasks import selectors, services
from webapp.tasks.forms import QuarantineForm, ReleaseForm, TaskEditForm, TaskImportForm


@requires(Need.READ)
def task_sets(request):
    domain = request.GET.get("domain", "")
    context = {
        "active_area": "tasks",
        "sets": selectors.task_set_list(domain=domain),
        "domains": selectors.domains_in_use(),
        "domain": domain,
    }
    return render(request, "tasks/sets.html", context)


@requires(Need.READ)
def task_set_detail(request, pk: int):
    task_set = selectors.task_set_get(id=pk)
    query = request.GET.get("q", "").strip()
    page = selectors.task_page(task_set=task_set, query=query, page=request.GET.get("page"))
    quarantined = selectors.task_set_quarantined(task_set=task_set)
    context = {
        "active_area": "tasks",
        "task_set": task_set,
        "page": page,
        "q": query,
        "quarantined": quarantined,
        "quarantined_ids": {q.task_id for q in quarantined},
    }
    return render(request, "tasks/set_detail.html", context)


@requires(Need.READ)
def task_detail(request, pk: int):
    task = selectors.task_get(id=pk)
    data = task.data
    context = {
        "active_area": "tasks",
        "task": task,
        "data": data,
        "reference": data.get("reference_solution") or [],
        "files": sorted((data.get("files") or {}).items()),
        "hidden": sorted(((data.get("metadata") or {}).get("hidden_files") or {}).keys()),
        "quarantine": selectors.task_quarantine_current(task=task),
        "quarantine_history": selectors.task_quarantine_history(task=task),
        "quarantine_form": QuarantineForm(),
        "release_form": ReleaseForm(),
    }
    return render(request, "tasks/task_detail.html", context)


@requires(Need.OPERATE)
def task_quarantine(request, pk: int):
    """POST: quarantine the task (a reason is required); GET: back to the task page."""
    task = selectors.task_get(id=pk)
    form = QuarantineForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            try:
                services.task_quarantine(
                    task=task, user=request.user, reason=form.cleaned_data["reason"]
                )
            except ApplicationError as exc:
                messages.error(request, exc.message)
            else:
                messages.success(request, f"Quarantined {task.external_id}.")
        else:
            messages.error(request, "Say why the task is quarantined (the reason is required).")
    return redirect("tasks:detail", pk=task.pk)


@requires(Need.OPERATE)
def task_release(request, pk: int):
    """POST: release the task from its quarantine; GET: back to the task page."""
    task = selectors.task_get(id=pk)
    form = ReleaseForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.task_release(task=task, user=request.user, note=form.cleaned_data["note"])
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Released {task.external_id} from quarantine.")
    return redirect("tasks:detail", pk=task.pk)


@requires(Need.OPERATE)
def task_edit(request, pk: int):
    task = selectors.task_get(id=pk)
    form = TaskEditForm(
        request.POST or None, initial={"data": json.dumps(task.data, indent=2, ensure_ascii=False)}
    )
    if request.method == "POST" and form.is_valid():
        try:
            data = load_json(form.cleaned_data["data"])
            if not isinstance(data, dict):
                raise ApplicationError("The task must be a JSON object.")
            services.task_update(task=task, data=data)
        except json.JSONDecodeError as exc:
            form.add_error("data", f"Not valid JSON: {exc}")
        except ApplicationError as exc:
            form.add_error("data", exc.message)
        else:
            messages.success(request, f"Saved {task.external_id}.")
            return redirect("tasks:detail", pk=task.pk)
    return render(
        request, "tasks/task_edit.html", {"active_area": "tasks", "task": task, "form": form}
    )


@requires(Need.OPERATE)
def task_import(request):
    form = TaskImportForm(request.POST or None, request.FILES or None)
    problems = []
    if request.method == "POST" and form.is_valid():
        refused = []
        try:
            if form.cleaned_data.get("harbor_archive"):
                task_set, count, refused = services.task_set_import_harbor_archive(
                    upload=form.cleaned_data["harbor_archive"],
                    name=form.cleaned_data["name"],
                    user=request.user,
                )
            else:
                task_set, count = services.task_set_import(
                    text=form.cleaned_data["content"],
                    name=form.cleaned_data["name"],
                    user=request.user,
                    fmt=form.cleaned_data["fmt"],
                    archives=form.cleaned_data.get("archives") or [],
                )
        except ApplicationError as exc:
            problems = exc.extra.get("problems", [])
            form.add_error(
                None,
                exc.message
                if not problems
                else f"{len(problems)} problem(s); nothing was imported.",
            )
        else:
            messages.success(request, f"Imported {count} task(s) into {task_set.name}.")
            for refusal in refused:
                messages.warning(request, f"Refused {refusal.path}: {refusal.reason}")
            return redirect("tasks:set", pk=task_set.pk)
    return render(
        request, "tasks/import.html", {"active_area": "tasks", "form": form, "problems": problems}
    )

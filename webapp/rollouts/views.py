from __future__ import annotations

import json

from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.common.htmx import stop_polling
from webapp.rollouts import services
from webapp.rollouts.forms import CollectForm, PolicyForm
from webapp.rollouts.models import CollectRun, Episode, Policy
from webapp.tasks.models import Task


def _ctx(**extra):
    return {"active_area": "rollouts", **extra}


@requires(Need.READ)
def run_list(request):
    runs = CollectRun.objects.select_related("policy", "task_set", "job").order_by("-id")
    page = Paginator(runs, 50).get_page(request.GET.get("page"))
    return render(request, "rollouts/runs.html", _ctx(page=page))


@requires(Need.READ)
def policy_list(request):
    return render(request, "rollouts/policies.html", _ctx(policies=Policy.objects.all()))


def _policy_form_view(request, instance: Policy | None):
    initial = None
    if instance is not None:
        initial = {
            "name": instance.name,
            "kind": instance.kind,
            "model": instance.model,
            "prompt_format": instance.prompt_format,
            "parameters": json.dumps(instance.parameters, indent=2),
            "description": instance.description,
        }
    form = PolicyForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            policy = services.policy_save(**form.cleaned_data, user=request.user, instance=instance)
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Saved policy {policy.name}.")
            return redirect("rollouts:policy", pk=policy.pk)
    return render(request, "rollouts/policy_form.html", _ctx(form=form, policy=instance))


@requires(Need.ADMINISTER)
def policy_new(request):
    return _policy_form_view(request, None)


@requires(Need.ADMINISTER)
def policy_edit(request, pk: int):
    return _policy_form_view(request, get_object_or_404(Policy, pk=pk))


@requires(Need.READ)
def policy_detail(request, pk: int):
    policy = get_object_or_404(Policy, pk=pk)
    tasks = Task.objects.select_related("task_set").order_by("task_set__name", "external_id")
    return render(
        request,
        "rollouts/policy_detail.html",
        _ctx(
            policy=policy,
            parameters=json.dumps(policy.parameters, indent=2),
            sample_tasks=tasks[:300],
            runs=policy.runs.select_related("task_set", "job").order_by("-id")[:20],
        ),
    )


@requires(Need.OPERATE)
def policy_try(request, pk: int):
    """Run one step of the policy on a sample task and show the action and usage."""
    policy = get_object_or_404(Policy, pk=pk)
    if request.method != "POST":
        return redirect("rollouts:policy", pk=pk)
    task = Task.objects.select_related("task_set").filter(pk=request.POST.get("task")).first()
    result = error = None
    if task is None:
        error = "Choose a sample task."
    else:
        try:
            result = services.policy_try(policy=policy, task=task)
        except ApplicationError as exc:
            error = exc.message
    return render(
        request,
        "rollouts/policy_detail.html#try_result",
        {"policy": policy, "result": result, "error": error},
    )


@requires(Need.OPERATE)
def collect_new(request):
    form = CollectForm(request.POST or None, initial=request.GET.dict() or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = services.collect_launch(
                task_set=data["task_set"],
                policy=data["policy"],
                environment=data["environment"] or "",
                episodes_per_task=data["episodes_per_task"],
                max_steps=data["max_steps"],
                step_timeout=data["step_timeout"],
                concurrency=data["concurrency"],
                seed=data["seed"] or 0,
                spend_cap_usd=data["spend_cap_usd"],
                user=request.user,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Collect run {run.pk} launched.")
            return redirect("rollouts:run", pk=run.pk)
    return render(request, "rollouts/collect_form.html", _ctx(form=form, estimate=_estimate(form)))


def _estimate(form: CollectForm):
    """The pre-launch estimate for the values in the form (None until they make sense)."""
    data = form.data if form.is_bound else form.initial
    try:
        policy = Policy.objects.get(pk=data.get("policy"))
        task_set = form.fields["task_set"].queryset.get(pk=data.get("task_set"))
        episodes = int(data.get("episodes_per_task") or 1)
        max_steps = int(data.get("max_steps") or 20)
    except (ObjectDoesNotExist, ValueError, TypeError):
        return None
    if episodes < 1 or max_steps < 1:
        return None
    return services.collect_estimate(
        policy=policy, task_set=task_set, episodes_per_task=episodes, max_steps=max_steps
    )


@requires(Need.OPERATE)
def collect_estimate(request):
    """The estimate partial, refreshed by htmx as the form changes."""
    form = CollectForm(request.GET or None)
    return render(request, "rollouts/collect_form.html#estimate", {"estimate": _estimate(form)})


def _run_context(run: CollectRun) -> dict:
    episodes = list(
        run.episodes.select_related("task", "trajectory").order_by("task__external_id", "index")
    )
    counts = {s: 0 for s in Episode.Status.values}
    for e in episodes:
        counts[e.status] += 1
    return {
        "run": run,
        "job": run.job,
        "episodes": episodes,
        "counts": counts,
        "percent": int(100 * run.finished_episodes / max(run.episodes_total, 1)),
        "live": run.job is not None and not run.job.is_terminal,
    }


@requires(Need.READ)
def run_detail(request, pk: int):
    run = get_object_or_404(CollectRun.objects.select_related("policy", "task_set", "job"), pk=pk)
    return render(request, "rollouts/run_detail.html", _ctx(**_run_context(run)))


@requires(Need.READ)
def run_live(request, pk: int):
    """The live part of the run page (totals and the episodes table), polled by htmx."""
    run = get_object_or_404(CollectRun.objects.select_related("policy", "task_set", "job"), pk=pk)
    context = _run_context(run)
    response = render(request, "rollouts/run_detail.html#live", context)
    return response if context["live"] else stop_polling(response)

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import redirect, render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.common.htmx import stop_polling
from webapp.rollouts import selectors, services
from webapp.rollouts.forms import CollectForm, PolicyForm
from webapp.rollouts.models import Policy


def _ctx(**extra):
    return {"active_area": "rollouts", **extra}


@requires(Need.READ)
def run_list(request):
    page = selectors.run_page(page=request.GET.get("page"))
    return render(request, "rollouts/runs.html", _ctx(page=page))


@requires(Need.READ)
def policy_list(request):
    return render(request, "rollouts/policies.html", _ctx(policies=selectors.policy_list()))


def _policy_form_view(request, instance: Policy | None):
    form = PolicyForm(request.POST or None, initial=PolicyForm.initial_from(instance))
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
    return _policy_form_view(request, selectors.policy_get(id=pk))


@requires(Need.READ)
def policy_detail(request, pk: int):
    policy = selectors.policy_get(id=pk)
    return render(
        request,
        "rollouts/policy_detail.html",
        _ctx(
            policy=policy,
            parameters=json.dumps(selectors.policy_parameters_shown(policy=policy), indent=2),
            **selectors.policy_detail(policy=policy),
        ),
    )


@requires(Need.OPERATE)
def policy_try(request, pk: int):
    """Launch one step of the policy on a sample task (a job on a worker); the partial polls
    for its result."""
    policy = selectors.policy_get(id=pk)
    if request.method != "POST":
        return redirect("rollouts:policy", pk=pk)
    task = selectors.sample_task_get(id=request.POST.get("task"))
    job = error = None
    if task is None:
        error = "Choose a sample task."
    else:
        try:
            job = services.policy_try_launch(policy=policy, task=task, user=request.user)
        except ApplicationError as exc:
            error = exc.message
    return render(
        request,
        "rollouts/policy_detail.html#try_result",
        {"policy": policy, "job": job, "error": error},
    )


@requires(Need.OPERATE)
def policy_try_result(request, pk: int, job: int):
    """The result of a "Try it" job: still waiting (the partial polls again), the action and
    usage, or the error."""
    policy = selectors.policy_get(id=pk)
    context = {"policy": policy, **selectors.try_result(job_id=job)}
    return render(request, "rollouts/policy_detail.html#try_result", context)


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
                user_policy=data["user_policy"],
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Collect run {run.pk} launched.")
            return redirect("rollouts:run", pk=run.pk)
    return render(request, "rollouts/collect_form.html", _ctx(form=form, estimate=_estimate(form)))


def _estimate(form: CollectForm):
    """The pre-launch estimate for the values in the form (None until they make sense)."""
    inputs = selectors.estimate_inputs(
        data=form.data if form.is_bound else form.initial,
        task_sets=form.fields["task_set"].queryset,
    )
    return services.collect_estimate(**inputs) if inputs is not None else None


@requires(Need.OPERATE)
def collect_estimate(request):
    """The estimate partial, refreshed by htmx as the form changes."""
    form = CollectForm(request.GET or None)
    return render(request, "rollouts/collect_form.html#estimate", {"estimate": _estimate(form)})


@requires(Need.READ)
def run_detail(request, pk: int):
    run = selectors.run_get(id=pk)
    return render(request, "rollouts/run_detail.html", _ctx(**selectors.run_live(run=run)))


@requires(Need.READ)
def run_live(request, pk: int):
    """The live part of the run page (totals and the episodes table), polled by htmx."""
    context = selectors.run_live(run=selectors.run_get(id=pk))
    response = render(request, "rollouts/run_detail.html#live", context)
    return response if context["live"] else stop_polling(response)

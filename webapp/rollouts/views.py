from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.common.htmx import follow_job, stop_polling
from webapp.rollouts import branch_selectors, branch_services, health, selectors, services
from webapp.rollouts.forms import BranchForm, CollectForm, PolicyForm
from webapp.rollouts.models import Policy
from webapp.tasks import selectors as task_selectors


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


# --- task health (docs/task-health.md; routed under /tasks/ by webapp/rollouts/health_urls.py) ---


def _thresholds(request):
    """The thresholds the query string sets (defaults where absent), and the error if any."""
    try:
        return health.thresholds_from(values=request.GET), ""
    except ApplicationError as exc:
        return health.thresholds_from(values={}), exc.message


@requires(Need.READ)
def task_set_health(request, pk: int):
    task_set = task_selectors.task_set_get(id=pk)
    thresholds, error = _thresholds(request)
    flag = request.GET.get("flag", "")
    report, page = health.task_set_health_page(
        task_set=task_set, thresholds=thresholds, flag=flag, page=request.GET.get("page")
    )
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "active_area": "tasks",
        "task_set": task_set,
        "report": report,
        "page": page,
        "flag": flag,
        "flags": health.FLAGS,
        "counts": report.health.counts(),
        "thresholds": thresholds.as_dict(),
        "threshold_error": error,
        "query": query.urlencode(),
        "threshold_query": _threshold_query(request),
    }
    return render(request, "rollouts/health_set.html", context)


def _threshold_query(request) -> str:
    query = request.GET.copy()
    for name in ("page", "flag", "kind"):
        query.pop(name, None)
    return query.urlencode()


@requires(Need.READ)
def task_health(request, pk: int):
    task = task_selectors.task_get(id=pk)
    thresholds, error = _thresholds(request)
    context = {
        "active_area": "tasks",
        **health.task_health(task=task, thresholds=thresholds),
        "threshold_error": error,
        "threshold_query": _threshold_query(request),
    }
    template = "rollouts/health_task.html#panel" if request.htmx else "rollouts/health_task.html"
    return render(request, template, context)


@requires(Need.READ)
def task_health_episodes(request, pk: int):
    task = task_selectors.task_get(id=pk)
    thresholds, error = _thresholds(request)
    kind = request.GET.get("kind", "all")
    try:
        what, page = health.health_episodes(
            task=task, kind=kind, thresholds=thresholds, page=request.GET.get("page")
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect("health:task", pk=task.pk)
    context = {
        "active_area": "tasks",
        "task": task,
        "kind": kind,
        "what": what,
        "page": page,
        "threshold_error": error,
        "threshold_query": _threshold_query(request),
    }
    return render(request, "rollouts/health_episodes.html", context)


# --- branch-and-resample (docs/branching.md) ------------------------------------------------------


@requires(Need.OPERATE)
def branch_new(request, trajectory: int, step: int):
    """The "Branch from here" form (policy, M, seed), or the reason this step cannot be
    branched (an imported log, a message step...)."""
    context = branch_selectors.branch_form_context(trajectory_id=trajectory, step=step)
    form = BranchForm(request.POST or None)
    if request.method == "POST" and form.is_valid() and not context["refusal"]:
        data = form.cleaned_data
        try:
            branch_set = branch_services.branch_launch(
                trajectory=context["row"],
                step=step,
                policy=data["policy"],
                samples=data["samples"],
                seed=data["seed"] or 0,
                max_steps=data["max_steps"],
                user=request.user,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Branch set {branch_set.pk} launched.")
            return redirect("rollouts:branch_set", pk=branch_set.pk)
    status = 400 if context["refusal"] and request.method == "POST" else 200
    return render(request, "rollouts/branch_form.html", _ctx(form=form, **context), status=status)


@requires(Need.READ)
def branch_set_detail(request, pk: int):
    """A branch set: the step's value estimate, the continuations with their outcomes, the
    pairs and their exports; its live part follows the job (htmx) until it ends."""
    context = _ctx(
        **branch_selectors.branch_set_detail(branch_set=branch_selectors.branch_set_get(id=pk))
    )
    if request.htmx and request.htmx.target == "branch-live":
        response = render(request, "rollouts/branch_set.html#live", context)
        return follow_job(response, job=context["branch_set"].job)
    return render(request, "rollouts/branch_set.html", context)


@requires(Need.READ)
def branch_set_export(request, pk: int, kind: str):
    """The set's pairs as JSONL: step-level DPO rows (``dpo``) or PRM labels (``prm``)."""
    rows, _ = branch_selectors.branch_export_rows(
        branch_set=branch_selectors.branch_set_get(id=pk), kind=kind
    )
    body = "".join(json.dumps(row, sort_keys=True, default=str) + "\n" for row in rows)
    response = HttpResponse(body, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="branch-set-{pk}-{kind}.jsonl"'
    return response


@requires(Need.READ)
def trajectory_branches(request, trajectory: int):
    """The branch sets of a trajectory's steps (a card on the trajectory's page, by htmx)."""
    context = branch_selectors.trajectory_branches(trajectory_id=trajectory)
    return render(request, "rollouts/branch_set.html#of_trajectory", context)

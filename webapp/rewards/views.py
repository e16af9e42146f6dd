from __future__ import annotations

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires, user_can
from webapp.common.errors import ApplicationError
from webapp.common.htmx import follow_job
from webapp.rewards import selectors, services
from webapp.rewards.forms import RubricForm, VersionForm
from webapp.trajectories.selectors import selection_ids

MAX_SCORE_SELECTION = 100_000


def _ctx(**extra):
    return {"active_area": "rewards", **extra}


@requires(Need.READ)
def overview(request):
    return render(
        request,
        "rewards/overview.html",
        _ctx(
            versions=selectors.versions_overview(),
            domains=selectors.rubric_domains(),
            runs=selectors.scoring_runs_recent(),
        ),
    )


@requires(Need.READ)
def rubrics(request, domain: str):
    rows = selectors.rubric_list(domain=domain)
    if not rows:
        messages.error(request, f"Domain {domain!r} has no rubrics.")
        return redirect("rewards:overview")
    posted = request.POST.get("rubric") if request.method == "POST" else None
    forms_by_id = {
        r.pk: RubricForm(
            request.POST if posted == str(r.pk) else None,
            prefix=f"r{r.pk}",
            initial={"weight": r.weight, "evaluator": r.evaluator, "description": r.description},
        )
        for r in rows
    }
    if request.method == "POST":
        if not user_can(request.user, Need.ADMINISTER):
            raise PermissionDenied("Editing rubrics needs the admin role.")
        rubric = next((r for r in rows if str(r.pk) == posted), None)
        if rubric is None:
            raise Http404("No such rubric in this domain.")
        form = forms_by_id[rubric.pk]
        if form.is_valid():
            try:
                services.rubric_update(rubric=rubric, user=request.user, **form.cleaned_data)
            except ApplicationError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(
                    request,
                    f"Saved {rubric.rubric_id}. Existing reward-model versions keep their "
                    "snapshot; create a new version to score with the change.",
                )
                return redirect("rewards:rubrics", domain=domain)
    total = sum(r.weight for r in rows) or 1.0
    return render(
        request,
        "rewards/rubrics.html",
        _ctx(
            domain=domain,
            rows=[(r, forms_by_id[r.pk], r.weight / total) for r in rows],
            versions=selectors.version_list(domain=domain),
        ),
    )


@requires(Need.ADMINISTER)
def version_new(request, domain: str):
    parent = selectors.latest_version(domain=domain)
    form = VersionForm(request.POST or None, initial=VersionForm.initial_from(parent))
    if request.method == "POST" and form.is_valid():
        try:
            version = services.reward_model_create(
                domain=domain,
                layers=form.layers(),
                totals=form.totals(),
                judge=form.cleaned_data["judge"],
                note=form.cleaned_data["note"],
                user=request.user,
                parent=parent,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Created {version}.")
            return redirect("rewards:version", pk=version.pk)
    return render(
        request,
        "rewards/version_form.html",
        _ctx(form=form, domain=domain, profile=selectors.profile_for_new_version(domain=domain)),
    )


@requires(Need.READ)
def version_detail(request, pk: int):
    version = selectors.version_get(id=pk)
    if request.htmx and request.htmx.target == "runs-live":  # the live poll of a scoring run
        context = selectors.version_runs(version=version)
        response = render(request, "rewards/version_detail.html#runs", context)
        if context["live_job"] is None:  # it ended: reload the page for the new distributions
            response["HX-Refresh"] = "true"
        return follow_job(response, job=context["live_job"])
    by = "task" if request.GET.get("by") == "task" else "policy"
    return render(
        request,
        "rewards/version_detail.html",
        _ctx(
            version=version,
            config=json.dumps(version.config, indent=2),
            judge=json.dumps(version.judge, indent=2) if version.judge else "",
            by=by,
            **selectors.version_detail(version=version, by=by),
        ),
    )


@requires(Need.OPERATE)
def score(request):
    """Choose a version for the selected (or filtered) trajectories, see the estimate, launch."""
    data = request.POST if request.method == "POST" else request.GET
    ids = selection_ids(data=data, limit=MAX_SCORE_SELECTION)
    versions = list(selectors.version_list())
    raw = request.POST.get("reward_model") or request.GET.get("reward_model")
    chosen = selectors.version_for_selection(versions=versions, ids=ids, raw=raw)
    error = None
    if request.method == "POST" and request.POST.get("launch") and chosen is not None:
        cap_raw = (request.POST.get("spend_cap_usd") or "").strip()
        try:
            cap = float(cap_raw) if cap_raw else None
            run = services.scoring_launch(
                reward_model=chosen, trajectory_ids=ids, spend_cap_usd=cap, user=request.user
            )
        except ValueError:
            error = "The spend cap must be a number of US dollars."
        except ApplicationError as exc:
            error = exc.message
        else:
            messages.success(request, f"Scoring {run.total} trajectories with {chosen}.")
            return redirect("jobs:detail", pk=run.job_id)
    estimate = (
        services.scoring_estimate(reward_model=chosen, trajectory_ids=ids)
        if chosen and ids
        else None
    )
    # a filter ("all matching") travels as its query, not as thousands of hidden ids
    skip = ("csrfmiddlewaretoken", "selected", "launch", "reward_model", "spend_cap_usd")
    filter_fields = (
        [(k, v) for k in data if k not in skip for v in data.getlist(k)]
        if data.get("all_matching") and not data.getlist("selected")
        else []
    )
    return render(
        request,
        "rewards/score.html",
        _ctx(
            ids=ids,
            versions=versions,
            chosen=chosen,
            estimate=estimate,
            error=error,
            filter_fields=filter_fields,
        ),
    )


@requires(Need.READ)
def trajectory_scores(request, pk: int):
    """Score panels for a trajectory page: the totals of every version that scored it, and the
    chosen version's per-step scores, each swapped into its step out of band."""
    context = selectors.trajectory_score_panel(trajectory_id=pk, version_id=request.GET.get("rm"))
    return render(request, "rewards/partials/trajectory_scores.html", context)


@requires(Need.READ)
def pairs(request):
    return render(
        request,
        "rewards/pairs.html",
        _ctx(pairs=selectors.pair_list(), versions=selectors.version_list()),
    )


@requires(Need.OPERATE)
@require_POST
def pairs_build(request):
    version = selectors.version_get(id=request.POST.get("reward_model"))
    method = request.POST.get("method") or "outside_in"
    try:
        margin = float(request.POST.get("min_margin") or 0.1)
        result = services.preferences_build(
            reward_model=version, method=method, min_margin=margin, user=request.user
        )
    except ValueError:
        messages.error(request, "The minimum margin must be a number.")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"{result['pairs']} pairs from {result['candidates']} scored trajectories "
            f"({result['created']} new).",
        )
    return redirect("rewards:pairs")

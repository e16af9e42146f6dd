from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.rewards import selectors, services
from webapp.rewards.models import PreferencePair, RewardModel, Rubric, ScoringRun

MAX_SCORE_SELECTION = 100_000


def _ctx(**extra):
    return {"active_area": "rewards", **extra}


@requires(Need.READ)
def overview(request):
    versions = selectors.versions_overview()
    domains = sorted(set(Rubric.objects.values_list("domain", flat=True)))
    runs = ScoringRun.objects.select_related("reward_model", "job")[:20]
    return render(
        request, "rewards/overview.html", _ctx(versions=versions, domains=domains, runs=runs)
    )


class RubricForm(forms.Form):
    weight = forms.FloatField(min_value=0)
    evaluator = forms.ChoiceField(choices=Rubric.Evaluator.choices)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))


@requires(Need.READ)
def rubrics(request, domain: str):
    rows = list(Rubric.objects.filter(domain=domain))
    if not rows:
        messages.error(request, f"Domain {domain!r} has no rubrics.")
        return redirect("rewards:overview")
    forms_by_id = {
        r.pk: RubricForm(
            request.POST
            if request.method == "POST" and request.POST.get("rubric") == str(r.pk)
            else None,
            prefix=f"r{r.pk}",
            initial={"weight": r.weight, "evaluator": r.evaluator, "description": r.description},
        )
        for r in rows
    }
    if request.method == "POST":
        from webapp.accounts.permissions import user_can

        if not user_can(request.user, Need.ADMINISTER):
            raise PermissionDenied("Editing rubrics needs the admin role.")
        rubric = get_object_or_404(Rubric, pk=request.POST.get("rubric"), domain=domain)
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
            versions=RewardModel.objects.filter(domain=domain),
        ),
    )


class VersionForm(forms.Form):
    rule_weight = forms.FloatField(min_value=0, initial=0.6, label="Rule layer weight")
    model_weight = forms.FloatField(min_value=0, initial=0.4, label="Model (judge) layer weight")
    human_weight = forms.FloatField(min_value=0, initial=1.0, label="Human layer weight")
    outcome_weight = forms.FloatField(min_value=0, initial=0.4)
    process_weight = forms.FloatField(min_value=0, initial=0.5)
    efficiency_weight = forms.FloatField(min_value=0, initial=0.1)
    judge = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "class": "code"}),
        help_text='Empty: rules only. Else JSON, e.g. {"kind": "anthropic", "model": '
        '"claude-haiku-4-5", "api_key_env": "ANTHROPIC_API_KEY", "window": 3, '
        '"max_judged_steps": 40}. Keys are never stored: name the variable.',
    )
    note = forms.CharField(required=False, max_length=300)

    def clean_judge(self):
        raw = (self.cleaned_data.get("judge") or "").strip()
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The judge configuration must be a JSON object.")
        return value


@requires(Need.ADMINISTER)
def version_new(request, domain: str):
    parent = RewardModel.objects.filter(domain=domain).order_by("-version").first()
    initial = {}
    if parent is not None:
        layers = parent.config.get("layers", {})
        totals = parent.config.get("totals", {})
        initial = {
            "rule_weight": layers.get("rule", 0.6),
            "model_weight": layers.get("model", 0.4),
            "human_weight": layers.get("human", 1.0),
            "outcome_weight": totals.get("outcome", 0.4),
            "process_weight": totals.get("process", 0.5),
            "efficiency_weight": totals.get("efficiency", 0.1),
            "judge": json.dumps(parent.judge, indent=2) if parent.judge else "",
        }
    form = VersionForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version = services.reward_model_create(
                domain=domain,
                layers={
                    "rule": data["rule_weight"],
                    "model": data["model_weight"],
                    "human": data["human_weight"],
                },
                totals={
                    "outcome": data["outcome_weight"],
                    "process": data["process_weight"],
                    "efficiency": data["efficiency_weight"],
                },
                judge=data["judge"],
                note=data["note"],
                user=request.user,
                parent=parent,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Created {version}.")
            return redirect("rewards:version", pk=version.pk)
    return render(request, "rewards/version_form.html", _ctx(form=form, domain=domain))


@requires(Need.READ)
def version_detail(request, pk: int):
    version = get_object_or_404(RewardModel, pk=pk)
    by = "task" if request.GET.get("by") == "task" else "policy"
    return render(
        request,
        "rewards/version_detail.html",
        _ctx(
            version=version,
            config=json.dumps(version.config, indent=2),
            judge=json.dumps(version.judge, indent=2) if version.judge else "",
            by=by,
            groups=selectors.distributions(version, by=by),
            scored=version.scores.count(),
            runs=version.runs.select_related("job")[:20],
        ),
    )


def _selection(request) -> list[int]:
    """Trajectory ids from a list selection (``selected``) or from the list's filters."""
    from webapp.trajectories import selectors as trajectory_selectors

    data = request.POST if request.method == "POST" else request.GET
    selected = [int(i) for i in data.getlist("selected") if str(i).isdigit()]
    if selected:
        return selected[:MAX_SCORE_SELECTION]
    if data.get("all_matching"):
        filters = trajectory_selectors.Filters.from_query(data)
        qs = trajectory_selectors.trajectory_list(filters)
        return list(qs.values_list("pk", flat=True)[:MAX_SCORE_SELECTION])
    return []


@requires(Need.OPERATE)
def score(request):
    """Choose a version for the selected (or filtered) trajectories, see the estimate, launch."""
    ids = _selection(request)
    versions = list(RewardModel.objects.order_by("domain", "-version"))
    chosen = None
    raw = request.POST.get("reward_model") or request.GET.get("reward_model")
    if raw and raw.isdigit():
        chosen = next((v for v in versions if v.pk == int(raw)), None)
    if chosen is None and ids:
        from webapp.trajectories.models import Trajectory

        domains = set(Trajectory.objects.filter(pk__in=ids[:1000]).values_list("domain", flat=True))
        chosen = next((v for v in versions if v.domain in domains), None) or (
            versions[0] if versions else None
        )
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
    data = request.POST if request.method == "POST" else request.GET
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
    versions = selectors.versions_for(pk)
    chosen = None
    raw = request.GET.get("rm")
    if raw and raw.isdigit():
        chosen = next((v for v in versions if v.pk == int(raw)), None)
    chosen = chosen or (versions[0] if versions else None)
    total = chosen.scores.filter(trajectory_id=pk).first() if chosen else None
    steps = selectors.step_scores(chosen.pk, pk) if chosen else {}
    return render(
        request,
        "rewards/partials/trajectory_scores.html",
        {
            "trajectory_id": pk,
            "versions": versions,
            "chosen": chosen,
            "total": total,
            "steps": sorted(steps.values(), key=lambda s: s.index),
        },
    )


@requires(Need.READ)
def pairs(request):
    rows = PreferencePair.objects.select_related("reward_model")[:500]
    versions = RewardModel.objects.order_by("domain", "-version")
    return render(request, "rewards/pairs.html", _ctx(pairs=rows, versions=versions))


@requires(Need.OPERATE)
@require_POST
def pairs_build(request):
    version = get_object_or_404(RewardModel, pk=request.POST.get("reward_model"))
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

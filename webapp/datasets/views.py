from __future__ import annotations

from pathlib import Path

from django import forms
from django.contrib import messages
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.datasets import services
from webapp.datasets.models import DatasetSnapshot

QUERY_FIELDS = ("q", "task", "domain", "agent", "model", "policy", "source", "outcome", "tag")


def _ctx(**extra):
    return {"active_area": "datasets", **extra}


@requires(Need.READ)
def dataset_list(request):
    rows = DatasetSnapshot.objects.select_related("reward_model", "job")[:200]
    return render(request, "datasets/list.html", _ctx(rows=rows))


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=120)
    kind = forms.ChoiceField(choices=DatasetSnapshot.Kind.choices)
    reward_model = forms.ModelChoiceField(
        queryset=None,
        required=False,
        help_text="Scores for thresholds, GRPO rewards, PRM labels and rule-built DPO pairs.",
    )
    label_source = forms.ChoiceField(
        choices=DatasetSnapshot.LabelSource.choices,
        help_text="PRM labels and DPO pairs from the reward model, or from people.",
    )
    min_score = forms.FloatField(
        required=False, help_text="Keep trajectories whose reward-model total is at least this."
    )
    outcome = forms.ChoiceField(
        required=False,
        choices=[("", "any outcome"), ("success", "successful only"), ("failure", "failed only")],
    )
    task = forms.CharField(required=False, help_text="Task id or task set (substring).")
    domain = forms.CharField(required=False)
    policy = forms.CharField(required=False)
    tag = forms.CharField(required=False)
    task_set = forms.CharField(required=False, help_text="For benchmark records: the task set.")
    seed = forms.IntegerField(initial=0, help_text="Seeds the train/validation/test split.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from webapp.rewards.models import RewardModel

        self.fields["reward_model"].queryset = RewardModel.objects.order_by("domain", "-version")
        self.fields["reward_model"].label_from_instance = lambda v: v.label


@requires(Need.OPERATE)
def dataset_new(request):
    form = DatasetForm(request.POST or None, initial=request.GET.dict() or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        query = {
            k: data[k]
            for k in (*QUERY_FIELDS, "task_set", "min_score")
            if data.get(k) not in (None, "")
        }
        try:
            snapshot = services.snapshot_create(
                name=data["name"],
                kind=data["kind"],
                query=query,
                reward_model=data["reward_model"],
                label_source=data["label_source"],
                seed=data["seed"] or 0,
                user=request.user,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Exporting {snapshot.name}.")
            return redirect("datasets:detail", pk=snapshot.pk)
    return render(request, "datasets/new.html", _ctx(form=form))


@requires(Need.READ)
def dataset_detail(request, pk: int):
    snapshot = get_object_or_404(
        DatasetSnapshot.objects.select_related("reward_model", "job"), pk=pk
    )
    card = ""
    if snapshot.directory and (Path(snapshot.directory) / "README.md").exists():
        card = (Path(snapshot.directory) / "README.md").read_text(encoding="utf-8")[:20000]
    return render(request, "datasets/detail.html", _ctx(snapshot=snapshot, card=card))


@requires(Need.READ)
def dataset_file(request, pk: int, name: str):
    snapshot = get_object_or_404(DatasetSnapshot, pk=pk)
    entry = (snapshot.files or {}).get(name)
    if not entry or not snapshot.directory:
        raise Http404("No such file in this dataset.")
    path = (Path(snapshot.directory) / entry["path"]).resolve()
    if Path(snapshot.directory).resolve() not in path.parents or not path.is_file():
        raise Http404("No such file in this dataset.")
    return FileResponse(open(path, "rb"), as_attachment=True, filename=path.name)  # noqa: SIM115

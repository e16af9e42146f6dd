from __future__ import annotations

from django import forms

from webapp.jobs.jobs import DiagnosticParams
from webapp.jobs.kinds import all_kinds
from webapp.jobs.models import JobStatus


def _help(name: str) -> str:
    return DiagnosticParams.model_fields[name].description or ""


class DiagnosticForm(forms.Form):
    steps = forms.IntegerField(min_value=1, max_value=100_000, initial=20, help_text=_help("steps"))
    step_seconds = forms.FloatField(
        min_value=0.0, max_value=60.0, initial=0.2, help_text=_help("step_seconds")
    )
    children = forms.IntegerField(
        min_value=0, max_value=100, initial=0, help_text=_help("children")
    )
    fail_at_step = forms.IntegerField(
        min_value=0, initial=0, required=False, help_text=_help("fail_at_step")
    )
    report = forms.BooleanField(initial=True, required=False, help_text=_help("report"))

    def params(self) -> dict:
        data = dict(self.cleaned_data)
        data["fail_at_step"] = data.get("fail_at_step") or 0
        return data


class JobFilterForm(forms.Form):
    kind = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *JobStatus.choices])
    user = forms.IntegerField(required=False, widget=forms.Select)

    def __init__(self, *args, users=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = [("", "any kind")] + [(k.name, k.label) for k in all_kinds()]
        self.fields["user"].widget.choices = [("", "anyone")] + [(u.pk, u.username) for u in users]

from __future__ import annotations

import json

from django import forms

from webapp.common.forms import JSONObjectField
from webapp.rewards.models import Rubric


class RubricForm(forms.Form):
    weight = forms.FloatField(min_value=0)
    evaluator = forms.ChoiceField(choices=Rubric.Evaluator.choices)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))


class VersionForm(forms.Form):
    rule_weight = forms.FloatField(min_value=0, initial=0.6, label="Rule layer weight")
    model_weight = forms.FloatField(min_value=0, initial=0.4, label="Model (judge) layer weight")
    human_weight = forms.FloatField(min_value=0, initial=1.0, label="Human layer weight")
    outcome_weight = forms.FloatField(min_value=0, initial=0.4)
    process_weight = forms.FloatField(min_value=0, initial=0.5)
    efficiency_weight = forms.FloatField(min_value=0, initial=0.1)
    judge = JSONObjectField(
        what="The judge configuration",
        help_text='Empty: rules only. Else JSON, e.g. {"kind": "anthropic", "model": '
        '"claude-haiku-4-5", "api_key_env": "ANTHROPIC_API_KEY", "window": 3, '
        '"max_judged_steps": 40}. Keys are never stored: name the variable.',
    )
    note = forms.CharField(required=False, max_length=300)

    @classmethod
    def initial_from(cls, parent) -> dict:
        """The form's values for a new version that starts from ``parent`` (None: defaults)."""
        if parent is None:
            return {}
        layers = parent.config.get("layers", {})
        totals = parent.config.get("totals", {})
        return {
            "rule_weight": layers.get("rule", 0.6),
            "model_weight": layers.get("model", 0.4),
            "human_weight": layers.get("human", 1.0),
            "outcome_weight": totals.get("outcome", 0.4),
            "process_weight": totals.get("process", 0.5),
            "efficiency_weight": totals.get("efficiency", 0.1),
            "judge": json.dumps(parent.judge, indent=2) if parent.judge else "",
        }

    def layers(self) -> dict[str, float]:
        data = self.cleaned_data
        return {
            "rule": data["rule_weight"],
            "model": data["model_weight"],
            "human": data["human_weight"],
        }

    def totals(self) -> dict[str, float]:
        data = self.cleaned_data
        return {
            "outcome": data["outcome_weight"],
            "process": data["process_weight"],
            "efficiency": data["efficiency_weight"],
        }

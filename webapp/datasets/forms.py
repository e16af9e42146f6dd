from __future__ import annotations

from typing import Any

from django import forms

from webapp.common.forms import SEED_MAX, SEED_MIN
from webapp.datasets.models import DatasetSnapshot
from webapp.datasets.token_check import tokenizer_choices
from webapp.rewards.selectors import version_list

# The trajectory-list filters a snapshot's query may carry.
QUERY_FIELDS = ("q", "task", "domain", "agent", "model", "policy", "source", "outcome", "tag")


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
    build_pairs = forms.BooleanField(
        required=False,
        label="Build preference pairs first",
        help_text="DPO from reward-model scores: in the same job, pair the selected trajectories "
        "of each task by the chosen version's totals, then export. Pairs that exist are kept.",
    )
    pair_method = forms.ChoiceField(
        required=False,
        choices=[
            ("outside_in", "outside-in (best with worst, then inwards)"),
            ("adjacent", "adjacent ranks (skip ties)"),
        ],
        help_text="How the pairs are built (with “Build preference pairs first”).",
    )
    min_margin = forms.FloatField(
        required=False,
        initial=0.1,
        min_value=0,
        help_text="A pair's totals differ by at least this (with “Build preference pairs first”).",
    )
    min_score = forms.FloatField(
        required=False, help_text="Keep trajectories whose reward-model total is at least this."
    )
    min_gdi = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Minimum GDI",
        help_text="Keep trajectories whose GDI (reward, reuse, human feedback, recency; 0..1) is "
        "at least this.",
    )
    top_gdi = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=200_000,
        label="Top N by GDI",
        help_text="Keep only the N trajectories with the highest GDI among those selected.",
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
    seed = forms.IntegerField(
        initial=0,
        min_value=SEED_MIN,
        max_value=SEED_MAX,
        help_text="Seeds the train/validation/test split.",
    )
    token_policy = forms.ModelChoiceField(
        queryset=None,
        required=False,
        label="Check tokens for policy",
        help_text="Export for this policy's tokenizer: the token ids recorded at sampling must "
        "equal what training will see (the drift check); a mismatch blocks the export.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["token_policy"].queryset = tokenizer_choices()
        self.fields["reward_model"].queryset = version_list()
        self.fields["reward_model"].label_from_instance = lambda v: v.label

    def pair_options(self) -> dict[str, Any] | None:
        """What building pairs first should do; None when it is not asked for."""
        data = self.cleaned_data
        if not data.get("build_pairs"):
            return None
        margin = data.get("min_margin")
        return {
            "method": data.get("pair_method") or "outside_in",
            "min_margin": 0.1 if margin is None else margin,
        }

    def query(self) -> dict[str, Any]:
        """The snapshot's query: the filters and thresholds that were filled in."""
        data = self.cleaned_data
        return {
            k: data[k]
            for k in (*QUERY_FIELDS, "task_set", "min_score", "min_gdi", "top_gdi")
            if data.get(k) not in (None, "")
        }

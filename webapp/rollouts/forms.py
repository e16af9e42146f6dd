from __future__ import annotations

import json

from django import forms

from trainer_core.envs import list_envs
from webapp.common.forms import SEED_MAX, SEED_MIN, JSONObjectField
from webapp.rollouts.models import Policy
from webapp.tasks.models import TaskSet


class PolicyForm(forms.Form):
    @staticmethod
    def initial_from(policy: Policy | None) -> dict | None:
        """The form's values for editing ``policy`` (None: a new policy)."""
        if policy is None:
            return None
        return {
            "name": policy.name,
            "kind": policy.kind,
            "model": policy.model,
            "prompt_format": policy.prompt_format,
            "parameters": json.dumps(policy.parameters, indent=2),
            "description": policy.description,
        }

    name = forms.CharField(max_length=120)
    kind = forms.ChoiceField(choices=Policy.Kind.choices)
    model = forms.CharField(
        max_length=300,
        required=False,
        help_text="Model name (claude-sonnet-4-5, Qwen/Qwen2.5-7B-Instruct...); for a local "
        "policy, the model directory (or give model_dir below); for an inference server, the "
        "served base model's name (empty: the first one it serves).",
    )
    prompt_format = forms.ChoiceField(choices=Policy.PromptFormat.choices)
    parameters = JSONObjectField(
        what="Parameters",
        empty={},
        widget=forms.Textarea(attrs={"rows": 6, "class": "code"}),
        help_text='JSON. API policies: {"api_key_env": "ANTHROPIC_API_KEY", "base_url": ..., '
        '"temperature": 0, "max_tokens": 1024, "system": ..., "price_in": ..., "price_out": ...}. '
        'Scripted: {"mistakes": {"wrong_answer": 0.3}, "delay": 0}. Local: {"model_dir": ..., '
        '"device": "auto", "temperature": 0, "max_new_tokens": 256, "system": ..., "list_tools": '
        "true (false: prompt with the system text only, for a model trained on its tools)}. "
        'Inference server (RL samplers Steplab updates): {"base_url": "http://gpu1:8000", '
        '"engine": "vllm" (LoRA runs) or "sglang" (full weights), "tokenizer_dir": ... (the '
        'served model\'s tokenizer; needed to act), "temperature": 0.7, "max_new_tokens": 256, '
        '"api_key_env": ...}; top_p/top_k must stay off. See docs/inference-servers.md. '
        "Never put a key here: name the environment variable that holds it.",
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class CollectForm(forms.Form):
    task_set = forms.ModelChoiceField(queryset=TaskSet.objects.all())
    environment = forms.ChoiceField(
        required=False, help_text="Empty: the task set's own environment."
    )
    policy = forms.ModelChoiceField(queryset=Policy.objects.all())
    user_policy = forms.ModelChoiceField(
        queryset=Policy.objects.all(),
        required=False,
        label="Simulated user",
        help_text="Conversation environments (steplab/customer-service): the policy that plays "
        "the customer. Empty: the scripted customer.",
    )
    episodes_per_task = forms.IntegerField(min_value=1, max_value=1000, initial=1)
    max_steps = forms.IntegerField(min_value=1, max_value=500, initial=20)
    step_timeout = forms.FloatField(
        required=False, min_value=0.1, help_text="Seconds one environment step may take."
    )
    concurrency = forms.IntegerField(
        min_value=1,
        max_value=256,
        initial=2,
        help_text="Episodes played at once, as child jobs on the rollouts queue.",
    )
    seed = forms.IntegerField(initial=0, min_value=SEED_MIN, max_value=SEED_MAX)
    spend_cap_usd = forms.FloatField(
        required=False,
        min_value=0.0001,
        label="Spend cap (USD)",
        help_text="The run stops when its LLM cost reaches this. Empty: no cap.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["environment"].choices = [("", "the task set's environment")] + [
            (e, e) for e in list_envs()
        ]


class BranchForm(forms.Form):
    """Branch from a step: the policy that samples the continuations, how many, the seed."""

    policy = forms.ModelChoiceField(queryset=Policy.objects.all())
    samples = forms.IntegerField(
        min_value=1,
        max_value=32,
        initial=4,
        label="Continuations (M)",
        help_text="How many continuations to sample from the restored state (at most 32).",
    )
    seed = forms.IntegerField(min_value=SEED_MIN, max_value=SEED_MAX, initial=0, required=False)
    max_steps = forms.IntegerField(
        min_value=1,
        max_value=200,
        initial=20,
        help_text="Actions each continuation may take after the branch step.",
    )

from django import forms


class ProfileEditForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(
            attrs={"rows": 30, "cols": 100, "spellcheck": "false", "class": "code"}
        ),
        help_text="The whole profile as YAML (or JSON): name, description, tools (name, category, target_param, aliases, parameters), outcome, task_fields, rubric_weights.",
    )
    change_note = forms.CharField(
        max_length=300, required=False, help_text="What changed, for the version history."
    )

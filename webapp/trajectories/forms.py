from __future__ import annotations

from django import forms


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(d, initial) for d in data]
        return [single(data, initial)] if data else []


class ImportForm(forms.Form):
    files = MultipleFileField(
        help_text="Agent logs (several files, or a zip). The format is detected from the content."
    )
    format = forms.CharField(
        required=False, help_text="Optional: read every file as this format (e.g. swe-agent)."
    )
    background = forms.BooleanField(
        required=False,
        label="Run as a background job",
        help_text="Large uploads always do: the job page shows progress and the result.",
    )

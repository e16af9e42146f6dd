from __future__ import annotations

from django import forms

from webapp.common.forms import MultipleFileField


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

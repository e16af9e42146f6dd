from __future__ import annotations

from django import forms

from trainer_core.recording.importers import importers
from webapp.common.forms import MultipleFileField


def format_choices() -> list[tuple[str, str]]:
    """ "Detect from the content", then every known format (its name and what it reads)."""
    return [("", "Detect from the content")] + [
        (imp.name, f"{imp.name} — {imp.description}") for imp in importers()
    ]


class ImportForm(forms.Form):
    files = MultipleFileField(
        help_text="Agent logs (several files, or a zip). The format is detected from the content."
    )
    format = forms.ChoiceField(
        required=False,
        choices=format_choices,
        help_text="Read every file as this format instead of detecting it.",
    )
    all_or_nothing = forms.BooleanField(
        required=False,
        label="All or nothing",
        help_text="Import nothing if any file is refused (by default every file that reads is "
        "imported and the others are reported).",
    )
    background = forms.BooleanField(
        required=False,
        label="Run as a background job",
        help_text="Large uploads always do: the job page shows progress and the result.",
    )

from __future__ import annotations

from django import forms

from webapp.common.forms import MultipleFileField

MAX_ARCHIVE_BYTES = 200 * 1024 * 1024


class TaskImportForm(forms.Form):
    name = forms.CharField(
        max_length=120,
        required=False,
        help_text="Task set to import into (new or existing). Empty: the file's task_set.name.",
    )
    file = forms.FileField(
        required=False,
        help_text="A .jsonl, .yaml or .yml task file, or a tar archive of Harbor task "
        "directories (see docs/task-format.md).",
    )
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "class": "code"}),
        required=False,
        help_text="…or paste the file's content here.",
    )
    archives = MultipleFileField(
        required=False,
        help_text="Repositories the tasks name in 'repo' (tar archives; a task's repo is the "
        "archive's file name). A path on the server is refused.",
    )

    def clean(self):
        data = super().clean()
        upload = data.get("file")
        if not upload and not data.get("text", "").strip():
            raise forms.ValidationError("Choose a file or paste its content.")
        for archive in data.get("archives") or []:
            if archive.size > MAX_ARCHIVE_BYTES:
                raise forms.ValidationError(
                    f"{archive.name} is larger than {MAX_ARCHIVE_BYTES // 2**20} MB."
                )
        if upload is not None:
            if upload.size > 20 * 1024 * 1024:
                raise forms.ValidationError("The file is larger than 20 MB; split it.")
            if upload.name.lower().endswith((".tar", ".tar.gz", ".tgz")):
                data["harbor_archive"], data["content"], data["fmt"] = upload, "", None
                return data  # Harbor task directories (Terminal-Bench 2.0), packed with tar
            try:
                data["content"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
            name = upload.name.lower()
            data["fmt"] = (
                "yaml"
                if name.endswith((".yaml", ".yml"))
                else "jsonl"
                if name.endswith((".jsonl", ".json"))
                else None
            )
        else:
            data["content"] = data["text"]
            data["fmt"] = None
        return data


class TaskEditForm(forms.Form):
    data = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 30, "class": "code"}),
        help_text="The task as JSON (every field of the task format).",
    )


class QuarantineForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why (required): e.g. “the checker rejects the correct answer 42.0”. The task "
        "leaves dataset builds, evaluations, pipelines and RL runs until it is released.",
    )


class ReleaseForm(forms.Form):
    note = forms.CharField(
        max_length=2000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Optional: what was fixed.",
    )

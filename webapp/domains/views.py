from __future__ import annotations

import yaml
from django.contrib import messages
from django.shortcuts import redirect, render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.domains import selectors, services
from webapp.domains.forms import ProfileEditForm


@requires(Need.READ)
def profile_list(request):
    return render(
        request, "domains/list.html", {"active_area": "tasks", "profiles": selectors.profile_list()}
    )


@requires(Need.READ)
def profile_detail(request, name: str, version: int | None = None):
    row = selectors.profile_get(name=name, version=version)
    spec = selectors.profile_spec(row=row)
    context = {
        "active_area": "tasks",
        "row": row,
        "spec": spec,
        "versions": selectors.profile_versions(name=name),
        "weights_total": sum(spec.rubric_weights.values()) or 1.0,
    }
    return render(request, "domains/detail.html", context)


@requires(Need.ADMINISTER)
def profile_edit(request, name: str):
    row = selectors.profile_get(name=name)
    initial_text = yaml.safe_dump(row.data, sort_keys=False, allow_unicode=True)
    form = ProfileEditForm(request.POST or None, initial={"text": initial_text})
    if request.method == "POST" and form.is_valid():
        try:
            saved = services.profile_save_text(
                name=name,
                text=form.cleaned_data["text"],
                user=request.user,
                change_note=form.cleaned_data["change_note"],
            )
        except ApplicationError as exc:
            form.add_error("text", exc.message)
        else:
            if saved.pk == row.pk:
                messages.info(request, "Nothing changed; no new version was made.")
            else:
                messages.success(
                    request,
                    f"Saved {saved.name} version {saved.version}. Existing reward-model versions "
                    "keep scoring with the profile version they froze; a version created now "
                    "scores with this one.",
                )
            return redirect("domains:detail", name=name)
    return render(request, "domains/edit.html", {"active_area": "tasks", "row": row, "form": form})

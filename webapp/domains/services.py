"""Domain profile services: validate with trainer_core, save as a new version."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django.db import transaction

from trainer_core import safeparse
from trainer_core.envs.profiles import BUILTIN_PROFILE_DATA, profile_from_data
from trainer_core.errors import InputError
from webapp.common.errors import ApplicationError
from webapp.domains import hooks
from webapp.domains.models import DomainProfile


def _normalised(data: dict[str, Any]) -> dict[str, Any]:
    try:
        return profile_from_data(data).to_dict()
    except InputError as exc:
        raise ApplicationError(str(exc)) from None


def profile_save(
    *, data: dict[str, Any], user=None, change_note: str = "", builtin: bool = False
) -> DomainProfile:
    """Save ``data`` as the next version of its profile (or do nothing if it is unchanged).
    Existing versions are never changed: a reward-model version keeps scoring with the profile
    version it was created with. Listeners registered in :mod:`webapp.domains.hooks` hear of the
    new version in the same transaction."""
    clean = _normalised(data)
    name = clean["name"]
    with transaction.atomic():
        current = (
            DomainProfile.objects.select_for_update().filter(name=name, is_current=True).first()
        )
        if current is not None:
            comparable = dict(current.data, version=clean["version"])
            if comparable == clean:
                return current
        version = (current.version + 1) if current else 1
        clean["version"] = version
        DomainProfile.objects.filter(name=name, is_current=True).update(is_current=False)
        saved = DomainProfile.objects.create(
            name=name,
            version=version,
            description=clean.get("description", ""),
            data=clean,
            is_current=True,
            builtin=builtin,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            change_note=change_note[:300],
        )
        hooks.profile_saved(profile=saved, previous=current)
        return saved


def profile_save_text(*, name: str, text: str, user=None, change_note: str = "") -> DomainProfile:
    """An admin's edit: JSON or YAML text for the profile ``name``."""
    try:
        data = (
            safeparse.load_json(text)
            if text.lstrip().startswith("{")
            else safeparse.load_yaml(text)
        )
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ApplicationError(f"Cannot parse the profile: {exc}") from None
    if not isinstance(data, dict):
        raise ApplicationError(
            "A profile is a mapping with name, tools, outcome, task_fields and rubric_weights."
        )
    if data.get("name") != name:
        raise ApplicationError(
            f"The profile's name must stay {name!r} (found {data.get('name')!r}); create a new profile instead."
        )
    return profile_save(data=data, user=user, change_note=change_note)


def profiles_seed_builtin() -> str:
    created = 0
    for name, data in BUILTIN_PROFILE_DATA.items():
        if not DomainProfile.objects.filter(name=name).exists():
            profile_save(data=data, builtin=True, change_note="built in")
            created += 1
    total = DomainProfile.objects.filter(is_current=True).count()
    return f"{created} created, {total} current"

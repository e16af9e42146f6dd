from __future__ import annotations

from django.shortcuts import get_object_or_404

from trainer_core.envs.profiles import DomainProfile as ProfileSpec
from webapp.domains.models import DomainProfile


def profile_list():
    return DomainProfile.objects.filter(is_current=True).order_by("name")


def profile_get(name: str, version: int | None = None) -> DomainProfile:
    if version is None:
        return get_object_or_404(DomainProfile, name=name, is_current=True)
    return get_object_or_404(DomainProfile, name=name, version=version)


def profile_versions(name: str):
    return DomainProfile.objects.filter(name=name).select_related("created_by").order_by("-version")


def profile_spec(row: DomainProfile) -> ProfileSpec:
    return ProfileSpec.model_validate(row.data)

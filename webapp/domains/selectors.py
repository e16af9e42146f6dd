"""Reads of domain profiles (the database holds every version; one is current)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from trainer_core.envs.profiles import DomainProfile as ProfileSpec
from trainer_core.envs.profiles import get_profile
from trainer_core.errors import ConfigError
from webapp.domains.models import DomainProfile


def profile_list() -> QuerySet[DomainProfile]:
    return DomainProfile.objects.filter(is_current=True).order_by("name")


def profile_get(*, name: str, version: int | None = None) -> DomainProfile:
    """The current version of the profile (or ``version``); Http404 when there is none."""
    if version is None:
        return get_object_or_404(DomainProfile, name=name, is_current=True)
    return get_object_or_404(DomainProfile, name=name, version=version)


def profile_current(*, name: str) -> DomainProfile | None:
    """The current version of the profile ``name`` in the database, or None (none saved)."""
    return DomainProfile.objects.filter(name=name, is_current=True).first()


def profile_versions(*, name: str) -> QuerySet[DomainProfile]:
    return DomainProfile.objects.filter(name=name).select_related("created_by").order_by("-version")


def profile_spec(*, row: DomainProfile) -> ProfileSpec:
    return ProfileSpec.model_validate(row.data)


def current_profile_spec(*, name: str) -> ProfileSpec | None:
    """The current profile of domain ``name``: the database's version (admins edit it), else the
    built-in one, else None (an unknown domain)."""
    row = DomainProfile.objects.filter(name=name, is_current=True).first()
    if row is not None:
        return ProfileSpec.model_validate(row.data)
    try:
        return get_profile(name)
    except (ConfigError, KeyError):
        return None

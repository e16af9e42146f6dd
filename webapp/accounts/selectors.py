"""Reads of users."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from webapp.accounts.models import User


def user_list() -> QuerySet[User]:
    """Every user, by username."""
    return User.objects.order_by("username")


def user_get(*, id: int) -> User:
    """The user; Http404 when there is none."""
    return get_object_or_404(User, pk=id)


def user_get_or_none(*, id: int | None) -> User | None:
    """The user, or None (no id, or the user was deleted): e.g. who launched a job."""
    return User.objects.filter(pk=id).first() if id else None

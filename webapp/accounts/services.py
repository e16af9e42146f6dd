"""Account services: create users, change roles, make the first local admin."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from webapp.accounts.models import Role
from webapp.common.errors import ApplicationError


def user_create(
    *, username: str, password: str, role: str = Role.VIEWER, email: str = ""
) -> object:
    User = get_user_model()
    username = username.strip()
    if not username:
        raise ApplicationError("A username is required.")
    if role not in Role.values:
        raise ApplicationError(f"Unknown role {role!r}; use one of {', '.join(Role.values)}.")
    if User.objects.filter(username__iexact=username).exists():
        raise ApplicationError(f"A user named {username!r} already exists; pick another name.")
    candidate = User(username=username, email=email, role=role)
    try:
        validate_password(password, user=candidate)
    except ValidationError as exc:
        raise ApplicationError("Password rejected: " + " ".join(exc.messages)) from None
    candidate.set_password(password)
    candidate.save()
    return candidate


def user_set_role(*, user, role: str, acting_user=None) -> object:
    if role not in Role.values:
        raise ApplicationError(f"Unknown role {role!r}; use one of {', '.join(Role.values)}.")
    if acting_user is not None and acting_user.pk == user.pk and role != Role.ADMIN:
        raise ApplicationError("You cannot take the admin role from yourself; ask another admin.")
    user.role = role
    user.save(update_fields=["role"])
    return user


def user_set_active(*, user, active: bool, acting_user=None) -> object:
    if acting_user is not None and acting_user.pk == user.pk and not active:
        raise ApplicationError("You cannot deactivate your own account.")
    user.is_active = active
    user.save(update_fields=["is_active"])
    return user


@dataclass
class AdminResult:
    created: bool
    username: str
    password_file: Path | None


def ensure_local_admin(*, var_dir: Path) -> AdminResult:
    """On first run, create a local admin.

    The name and password come from STEPLAB_ADMIN_USERNAME / STEPLAB_ADMIN_PASSWORD when set;
    otherwise the password is random and written to ``var/admin-password.txt`` (mode 600).
    Does nothing when any admin exists already.
    """
    User = get_user_model()
    username = os.environ.get("STEPLAB_ADMIN_USERNAME", "admin").strip() or "admin"
    if (
        User.objects.filter(role=Role.ADMIN).exists()
        or User.objects.filter(is_superuser=True).exists()
    ):
        return AdminResult(False, username, None)
    if User.objects.filter(username__iexact=username).exists():
        raise ApplicationError(
            f"A non-admin user named {username!r} exists, so the first admin cannot take that name. "
            "Set STEPLAB_ADMIN_USERNAME to another name, or give that user the admin role "
            "('steplab manage shell')."
        )
    password = os.environ.get("STEPLAB_ADMIN_PASSWORD", "")
    password_file = None
    user = User(username=username, role=Role.ADMIN, is_staff=True, is_superuser=True)
    if password:
        try:
            validate_password(password, user=user)
        except ValidationError as exc:
            raise ApplicationError(
                "STEPLAB_ADMIN_PASSWORD is rejected: " + " ".join(exc.messages)
            ) from None
    else:
        password = secrets.token_urlsafe(16)
        var_dir.mkdir(parents=True, exist_ok=True)
        password_file = var_dir / "admin-password.txt"
        # Created with mode 600 from the start: never readable by others, not even briefly.
        password_file.unlink(missing_ok=True)
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"username: {username}\npassword: {password}\n")
    with transaction.atomic():
        user.set_password(password)
        user.save()
    return AdminResult(True, username, password_file)

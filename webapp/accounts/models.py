"""Accounts: a user has one role; roles are ordered, each includes what the ones below may do."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    ANNOTATOR = "annotator", "Annotator"
    OPERATOR = "operator", "Operator"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.VIEWER: 0, Role.ANNOTATOR: 1, Role.OPERATOR: 2, Role.ADMIN: 3}


class User(AbstractUser):
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    @property
    def effective_role(self) -> str:
        """A superuser is an admin whatever its role column says."""
        return Role.ADMIN if self.is_superuser else self.role

"""Domain profiles, versioned: every edit makes a new version, so anything scored later names
the version it used."""

from __future__ import annotations

from django.db import models

from webapp.common.models import CreatedModel


class DomainProfile(CreatedModel):
    name = models.CharField(max_length=64, db_index=True)
    version = models.PositiveIntegerField()
    description = models.TextField(blank=True)
    # The whole profile as trainer_core.envs.profiles.DomainProfile validates it.
    data = models.JSONField()
    is_current = models.BooleanField(default=True, db_index=True)
    builtin = models.BooleanField(default=False)
    change_note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="domainprofile_name_version")
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

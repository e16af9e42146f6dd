"""Where apps above domains follow profile edits without domains importing them.

- A new profile version: the rewards app registers a listener in its ``AppConfig.ready()``::

      hooks.register_profile_saved(listener)

  ``listener(profile=..., previous=...)`` runs inside the transaction that saved ``profile`` (a
  new :class:`~webapp.domains.models.DomainProfile` version); ``previous`` is the version it
  replaced, or None for a profile's first version. The rewards app uses it to carry a profile's
  rubric-weight edits into the domain's rubric rows, so the next reward-model version created
  scores with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ProfileSaved = Callable[..., None]  # (*, profile, previous)

_PROFILE_SAVED: list[ProfileSaved] = []


def register_profile_saved(listener: ProfileSaved) -> None:
    if listener not in _PROFILE_SAVED:
        _PROFILE_SAVED.append(listener)


def profile_saved(*, profile: Any, previous: Any) -> None:
    """Tell every registered listener that ``profile`` replaced ``previous``."""
    for listener in _PROFILE_SAVED:
        listener(profile=profile, previous=previous)

"""Paths a user names (a base model, a policy's model directory) are used only inside the
directories an administrator allows: resolved first (symlinks, ``..``), then checked."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from webapp.common.errors import ApplicationError


def path_inside_roots(*, path: str, roots: Iterable[str], what: str, setting: str) -> Path:
    """The real path of ``path`` when it lies inside one of ``roots``; ApplicationError naming
    ``what`` it is and the ``setting`` that lists the roots otherwise."""
    text = str(path or "").strip()
    if not text or "\x00" in text:
        raise ApplicationError(f"Give the {what} (a directory on this machine).")
    real = Path(os.path.realpath(os.path.expanduser(text)))
    allowed = [Path(os.path.realpath(root)) for root in roots]
    if any(real == root or root in real.parents for root in allowed):
        return real
    raise ApplicationError(
        f"The {what} {text!r} (resolved: {real}) is outside the directories it may be read from "
        f"({', '.join(str(r) for r in allowed) or 'none'}). Put it under one of them, or ask an "
        f"administrator to add its directory to {setting}."
    )

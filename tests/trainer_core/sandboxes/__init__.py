"""Tests of trainer_core.sandboxes. ``require_isolation()`` skips a test when bubblewrap cannot
run here, except under ``CI=true``, where a missing sandbox is a failure, never a skip."""

from __future__ import annotations

import os

import pytest


def require_isolation() -> None:
    from trainer_core.sandboxes.local import host_support

    support = host_support()
    if support.bwrap is not None:
        return
    reason = f"bubblewrap cannot run a sandbox on this machine: {support.bwrap_detail}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: isolation tests must run, not skip)", pytrace=False)
    pytest.skip(reason)

"""Tests of trainer_core.sandboxes. ``require_isolation()`` skips a test when bubblewrap cannot
run here and ``require_containment()`` when no cgroup (v1 or v2) bounds memory and processes,
except under ``CI=true``, where either missing is a failure, never a skip."""

from __future__ import annotations

import pytest

from tests.ci_skips import in_ci


def require_isolation() -> None:
    from trainer_core.sandboxes.local import host_support

    support = host_support()
    if support.bwrap is not None:
        return
    _missing(f"bubblewrap cannot run a sandbox on this machine: {support.bwrap_detail}")


def require_containment() -> None:
    from trainer_core.sandboxes.local import host_support

    support = host_support()
    if support.contained:
        return
    _missing(f"no cgroup bounds memory and processes on this machine: {support.cgroup_detail}")


def _missing(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason} (CI=true: these tests must run, not skip)", pytrace=False)
    pytest.skip(reason)

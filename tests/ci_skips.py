"""A pytest plugin (``-p tests.ci_skips`` in pyproject): under ``CI=true`` a skipped test fails,
unless tests/skip_allowlist.txt lists it with why. A test that skips in CI proves nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ALLOWLIST = Path(__file__).resolve().parent / "skip_allowlist.txt"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def allowlist(path: Path = ALLOWLIST) -> dict[str, str]:
    """``node id prefix  # why``, one per line (blank lines and comment lines left out)."""
    allowed = {}
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        entry, _, why = line.partition("#")
        if entry.strip():
            allowed[entry.strip()] = why.strip()
    return allowed


def skip_fails(nodeid: str, allowed: dict[str, str]) -> bool:
    return not any(nodeid.startswith(prefix) for prefix in allowed)


def _fail_the_skip(report) -> None:
    if not (in_ci() and report.skipped) or hasattr(report, "wasxfail"):
        return
    if skip_fails(report.nodeid, allowlist()):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true ({reason}). CI must run what it claims: install what the "
            "test needs in .ci/run, or list the test in tests/skip_allowlist.txt with why."
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that skips (pytest.skip, a skip or skipif mark, importorskip in the test)."""
    outcome = yield
    _fail_the_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A whole module that skips while collected (importorskip or pytest.skip at its top)."""
    outcome = yield
    _fail_the_skip(outcome.get_result())

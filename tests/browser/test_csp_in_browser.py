"""The Content-Security-Policy in a real browser: the behaviour that used to be inline (progress
bar widths, the select that submits its form, the trajectory page's j/k keys) still works from
static files, and nothing is blocked (the browser_page fixture fails on any CSP report)."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from tests.browser.test_trajectories_in_browser import _traj
from trainer_core.recording.importers import ImportResult
from webapp.accounts.models import Role
from webapp.jobs.models import Job
from webapp.trajectories import services

pytestmark = [pytest.mark.browser]


@pytest.mark.django_db(transaction=True)
def test_pages_work_under_the_content_security_policy(live_server, make_user, browser_page):
    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    operator = make_user(Role.OPERATOR)
    _log_in(page, live_server, operator)

    # A progress bar's width comes from its pct-N class (no style attribute).
    job = Job.objects.create(kind="diagnostic", status="running", progress=0.4, user=operator)
    response = page.goto(f"{live_server.url}/jobs/{job.pk}/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    ratio = page.eval_on_selector(
        "[data-testid=progress-bar] span",
        "e => e.getBoundingClientRect().width / e.parentElement.getBoundingClientRect().width",
    )
    assert abs(ratio - 0.4) < 0.02, f"the bar should be 40% wide, it is {ratio:.0%}"

    # The trajectory page's j / k keys come from static/js/trajectory_keys.js.
    (pk,) = services.trajectories_import(
        results=[ImportResult("keys.jsonl", "test", "1", [_traj("KEYS", ["a", "b"], success=True)])]
    ).created
    page.goto(f"{live_server.url}/trajectories/{pk}/")
    page.keyboard.press("j")
    page.keyboard.press("j")
    focused = page.evaluate("document.activeElement.className + ' ' + document.activeElement.id")
    assert "step" in focused, f"j should focus a step, focused: {focused!r}"

    # <select data-autosubmit> submits its form (static/js/steplab.js), as onchange did.
    page.goto(f"{live_server.url}/training/new/")
    select = page.locator("select[name=method]")
    other = [
        v
        for v in select.evaluate("s => [...s.options].map(o => o.value)")
        if v != select.input_value()
    ][0]
    select.select_option(other)
    page.wait_for_url(re.compile(rf"method={other}"))
    assert page.locator("select[name=method]").input_value() == other
    assert not errors, errors

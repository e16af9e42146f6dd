"""Reward-hacking flags in headless Chromium (issue 21): a GRPO run's page loads its flags, marks
each flag's window on a strip under the curve, and from a flag one click makes the annotation
queue of its samples and opens it; nothing is blocked by the Content-Security-Policy."""

from __future__ import annotations

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from tests.webapp.training.flag_runs import build_run
from webapp.accounts.models import Role
from webapp.training import flag_services
from webapp.training.models import RunFlag

pytestmark = [pytest.mark.browser]


@pytest.mark.django_db(transaction=True)
def test_from_a_flag_on_the_run_page_to_its_queue(live_server, make_user, browser_page):
    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    run = build_run(hacked=True)
    flag_services.run_flags_compute(run=run)
    flag = RunFlag.objects.get(training_run=run)
    _log_in(page, live_server, make_user(Role.OPERATOR))
    page.goto(f"{live_server.url}/training/{run.pk}/")

    marker = page.locator(f"#run-flags-strip [data-testid=flag-marker][data-flag='{flag.pk}']")
    marker.wait_for()
    assert marker.get_attribute("title") == "failed_high_process (steps 1–8)"
    assert page.locator(f"#flag-{flag.pk}").is_visible()  # the list, loaded into the page
    marker.click()
    page.wait_for_url(f"**/training/flags/{flag.pk}/")
    assert page.get_by_test_id("flag-samples").locator("tbody tr").count() == len(
        flag.trajectory_ids
    )

    page.get_by_test_id("flag-queue").click()
    flag.refresh_from_db()
    page.wait_for_url(f"**/annotate/{flag.queue_id}/")
    assert f"flag {flag.pk}" in page.content()
    assert flag.queue.items.count() == len(flag.trajectory_ids)
    assert not errors, errors

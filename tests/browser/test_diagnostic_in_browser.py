"""A diagnostic job launched and watched in a real browser: login, form, live progress, chart."""

from __future__ import annotations

import re
import time

import pytest

from webapp.accounts.models import Role
from webapp.jobs.models import Job

pytestmark = [pytest.mark.browser]

STEPS = 15
# The job page polls its progress fragment once a second (hx-trigger="every 1s"), so the bar can
# only show about one new value per second of running: 15 steps of 0.2 s (3 s) showed just 2
# values strictly between 0 and 100. 0.4 s per step (6 s) shows 4 to 6, enough to prove it rises.
STEP_SECONDS = 0.4


def _log_in(page, live_server, user) -> None:
    page.goto(live_server.url + "/")
    assert "/login" in page.url, f"an anonymous visit should land on the login page, not {page.url}"
    page.fill("#id_username", user.username)
    page.fill("#id_password", user.raw_password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(live_server.url + "/")
    assert page.get_by_role("heading", name="Dashboard").is_visible()


def _main_nav_link(page, label: str):
    return page.get_by_role("navigation", name="Main").get_by_role("link", name=label, exact=True)


@pytest.mark.worker
@pytest.mark.slow
def test_operator_launches_a_diagnostic_and_watches_it_live(
    live_server, celery_worker, make_user, browser_page
):
    page = browser_page
    problems: list[str] = []

    def on_console(msg) -> None:
        # Chromium asks for /favicon.ico on its own; the app serves none (a harmless 404).
        if msg.type == "error" and not msg.location.get("url", "").endswith("/favicon.ico"):
            problems.append(f"console.{msg.type}: {msg.text} at {msg.location}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))

    user = make_user(Role.OPERATOR)
    _log_in(page, live_server, user)

    # Dashboard → Jobs → Run a diagnostic.
    _main_nav_link(page, "Jobs").click()
    page.wait_for_url(re.compile(r"/jobs/$"))
    page.get_by_role("link", name="Run a diagnostic").click()
    page.wait_for_url(re.compile(r"/jobs/diagnostic/new/$"))
    page.fill("#id_steps", str(STEPS))
    page.fill("#id_step_seconds", str(STEP_SECONDS))
    page.click("[data-testid=launch]")

    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    job_id = int(re.search(r"/jobs/(\d+)/$", page.url).group(1))
    job = Job.objects.get(pk=job_id)
    assert job.user_id == user.pk
    assert job.params["steps"] == STEPS
    navigations = page.evaluate("performance.getEntriesByType('navigation').length")
    page.evaluate("window.__noReload = 1")

    # The progress bar rises in place (htmx polls the fragment every second).
    bar = page.locator("[data-testid=progress-bar]")
    seen: list[str] = []
    started = time.monotonic()
    deadline = started + 60
    while time.monotonic() < deadline:
        value = bar.get_attribute("aria-valuenow")
        if value is not None and (not seen or seen[-1] != value):
            seen.append(value)
        if value == "100":
            break
        time.sleep(0.1)
    took = time.monotonic() - started
    print(f"\nprogress values seen in {took:.1f}s: {seen}")
    assert seen and seen[-1] == "100", f"the progress bar never reached 100 in 60s: {seen}"
    intermediate = {v for v in seen if 0 < float(v) < 100}
    assert len(intermediate) >= 3, f"too few intermediate values ({took:.1f}s): {seen}"
    assert [float(v) for v in seen] == sorted(float(v) for v in seen), f"went backwards: {seen}"

    badge = page.locator("#job-progress [data-status]").first
    page.wait_for_function(
        "() => document.querySelector('#job-progress').dataset.status === 'succeeded'"
    )
    assert badge.inner_text().strip() == "succeeded"

    # The chart filled from the polled fragment, without a reload.
    chart = page.locator("#metrics-chart")
    page.wait_for_function(
        "n => document.getElementById('metrics-chart').getAttribute('data-points') === n",
        arg=str(STEPS),
    )
    assert chart.get_attribute("data-points") == str(STEPS)
    assert chart.locator("canvas").count() >= 1
    assert page.get_by_text("No metrics recorded yet.").is_hidden()

    # Polling stopped once the job ended (a 286 answer): the fragment no longer carries hx-get.
    assert page.locator("#job-progress").get_attribute("hx-get") is None

    assert page.evaluate("window.__noReload") == 1, "the job page reloaded"
    assert page.evaluate("performance.getEntriesByType('navigation').length") == navigations

    # Back through the list to the job's page: the system report is rendered.
    _main_nav_link(page, "Jobs").click()
    page.wait_for_url(re.compile(r"/jobs/$"))
    page.locator(f'tr[data-job-id="{job_id}"] a').first.click()
    page.wait_for_url(re.compile(rf"/jobs/{job_id}/$"))
    report = page.locator("[data-testid=system-report]")
    assert report.is_visible()
    assert (
        report.locator("tr", has=page.locator("td", has_text=re.compile(r"^database$"))).count()
        == 1
    )

    assert not problems, "errors in the browser console:\n" + "\n".join(problems)


def test_viewer_cannot_launch_a_diagnostic(live_server, make_user, browser_page):
    page = browser_page
    viewer = make_user(Role.VIEWER)
    _log_in(page, live_server, viewer)

    assert page.get_by_role("link", name="Run a diagnostic").count() == 0

    response = page.goto(live_server.url + "/jobs/diagnostic/new/")
    assert response is not None
    assert response.status == 403
    assert page.locator("#id_steps").count() == 0

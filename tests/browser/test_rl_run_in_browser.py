"""A decoupled RL run's page in headless Chromium (no worker: the run's rows are made as its jobs
make them): the curve is drawn with each series kind on its own axis, a click on a point opens
the groups that step trained on and dropped (with their trajectories) under the chart, the steps
table does the same from the keyboard, and the live part stops following once the run ends,
without a reload; nothing is blocked by the Content-Security-Policy."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from tests.browser.test_diagnostic_in_browser import _log_in
from tests.webapp.training.test_rl_pages import _launch, _trained
from webapp.accounts.models import Role
from webapp.jobs.models import Job, JobStatus

pytestmark = [pytest.mark.browser]


@pytest.fixture
def base_model():
    path = Path(settings.STEPLAB_DATA_DIR) / "models" / f"rl-browser-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return str(path.resolve())


@pytest.mark.django_db(transaction=True)
def test_the_curve_opens_each_steps_groups_and_the_page_follows_the_run(
    live_server, make_user, browser_page, base_model
):
    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    run = _launch(base_model)
    _, _, rows = _trained(run)
    _log_in(page, live_server, make_user(Role.VIEWER))
    page.goto(f"{live_server.url}/training/rl/{run.pk}/")

    page.wait_for_function("() => document.querySelector('#rl-curve-chart').dataset.points === '2'")
    chart = page.get_by_test_id("rl-curve-chart")
    assert chart.get_attribute("data-series") == "reward success_rate staleness_mean dropped"
    # the x axis and one y axis per kind: reward, success rate, staleness, groups dropped
    assert page.locator("#rl-curve-chart .u-axis").count() == 5
    assert not page.locator("#rl-curve-empty").is_visible()

    # a click at the right end of the plot opens the last step's groups under the chart
    box = page.locator("#rl-curve-chart .u-over").bounding_box()
    x, y = box["x"] + box["width"] - 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_selector("#rl-step-groups [data-testid=rl-step][data-step='2']")
    groups = page.locator("#rl-step-groups tr[data-group]")
    assert sorted(groups.evaluate_all("rows => rows.map(r => r.dataset.status)")) == [
        "consumed",
        "dropped",
    ]
    links = page.locator("#rl-step-groups [data-testid=trajectory-link]")
    assert links.count() == 4
    assert chart.get_attribute("data-picked-step") == "2"

    # the steps table opens a step in the same place
    page.locator("tr[data-step='1'] [data-testid=step-link]").click()
    page.wait_for_selector("#rl-step-groups [data-testid=rl-step][data-step='1']")
    shown = page.locator("#rl-step-groups tr[data-group]").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.group))"
    )
    assert sorted(shown) == [rows[0].pk, rows[1].pk]

    # the live part follows the run until it ends, in place
    assert page.locator("#rl-live").get_attribute("data-follow") == "live"
    page.evaluate("window.__opened = true")
    Job.objects.filter(pk=run.job_id).update(
        status=JobStatus.SUCCEEDED, awaiting_children=False, finished_at=timezone.now()
    )
    page.wait_for_selector("#rl-live[data-follow=ended]", timeout=15_000)
    assert page.evaluate("window.__opened === true")  # updated in place, not reloaded
    assert page.get_by_test_id("job-state").get_attribute("data-status") == "succeeded"
    assert page.locator("#rl-step-groups [data-testid=rl-step][data-step='1']").is_visible()
    assert errors == []

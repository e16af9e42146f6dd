"""A collect job on the real worker plays a steplab/browser episode (the web shop, scripted
reference): its steps carry screenshots written under the data directory, and the trajectory
page in headless Chromium shows each step's action, the page's text and a thumbnail that loads,
the full-size image a click away."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.browser.test_diagnostic_in_browser import _log_in
from tests.conftest import wait_for
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.web_shop import shop_task
from webapp.accounts.models import Role
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts import services
from webapp.rollouts.models import Policy
from webapp.tasks.services import task_set_import
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow]


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


def test_a_browser_episode_from_the_worker_shows_its_screenshots(
    live_server, celery_worker, make_user, browser_page
):
    task = shop_task(1_000_000, "validation")
    task_set, _ = task_set_import(text=dump_tasks_jsonl([task]), name="shop-one")
    task_set.environment = "steplab/browser"
    task_set.save()
    policy = Policy.objects.create(name="scripted", kind="scripted")
    run = services.collect_launch(
        task_set=task_set, policy=policy, episodes_per_task=1, max_steps=30
    )
    job = wait_for(lambda: _finished(run.job_id), timeout=180, what="the collect job to end")
    assert job.status == JobStatus.SUCCEEDED, job.error
    trajectory = Trajectory.objects.get(metadata__collect_run=run.pk)
    assert trajectory.success is True
    steps = list(trajectory.steps.order_by("index"))
    # every action's step has the page after it (submit, the answer, changes no page)
    assert [s.tool for s in steps if "screenshot" not in s.metadata] == ["submit"]
    shots = [Path(s.metadata["screenshot"]) for s in steps if s.tool != "submit"]
    root = (Path(settings.STEPLAB_DATA_DIR) / "screenshots").resolve()
    assert all(p.resolve().is_relative_to(root) and p.stat().st_size > 500 for p in shots)

    page = browser_page
    _log_in(page, live_server, make_user(Role.VIEWER))
    page.goto(f"{live_server.url}/trajectories/{trajectory.pk}/")
    thumbs = page.get_by_test_id("screenshot")
    expect(thumbs).to_have_count(len(shots))
    first = page.locator("#step-0")
    expect(first.locator("code").first).to_have_text(steps[0].tool)
    expect(first.locator(".observation")).to_contain_text("URL: http://127.0.0.1")
    img = first.locator("img")
    img.scroll_into_view_if_needed()
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 100", arg=img.element_handle()
    )
    href = first.get_by_test_id("screenshot").get_attribute("href")
    response = page.request.get(live_server.url + href)
    assert response.ok and response.headers["content-type"] == "image/jpeg"
    assert response.body() == shots[0].read_bytes()
    for path in shots:
        path.unlink()

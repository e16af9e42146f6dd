"""A pipeline's page in headless Chromium while a real worker runs it: the stages fill in live
without a reload, and the success curve across iterations is drawn."""

from __future__ import annotations

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from tests.workers.test_evaluation_pipeline import _finished, _small_pipeline
from webapp.accounts.models import Role
from webapp.jobs.models import JobStatus

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow]


def test_the_pipeline_page_follows_the_stages_and_draws_the_curve(
    live_server, celery_worker, make_user, browser_page, tmp_path
):
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    pipeline = _small_pipeline(tmp_path, "browser")
    _log_in(page, live_server, make_user(Role.VIEWER))
    page.goto(live_server.url + f"/leaderboards/pipelines/{pipeline.pk}/")
    # the page polls: the last evaluation's row turns succeeded without a reload
    page.wait_for_selector(
        "[data-testid=iteration-2] tr[data-stage=evaluate][data-status=succeeded]",
        timeout=240_000,
    )
    job = _finished(pipeline.job_id)
    assert job is not None and job.status == JobStatus.SUCCEEDED, job and job.error
    page.wait_for_function(
        "() => document.querySelector('#curve-chart').getAttribute('data-points') === '3'"
    )
    assert page.locator("[data-testid=curve] tbody tr").count() == 3
    statuses = page.locator("[data-testid=iteration-1] tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.status)"
    )
    assert statuses == ["succeeded", "succeeded", "succeeded", "succeeded", "done", "succeeded"]
    assert page.locator("[data-testid=pipeline-tests] li").count() == 3
    assert not problems, problems

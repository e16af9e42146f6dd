"""Leaderboards in headless Chromium on real evaluations (a real worker): open the held-out
leaderboard, open a cell's trajectories, open the comparison of two policies and their diff on
one task."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from tests.conftest import wait_for
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.accounts.models import Role
from webapp.evaluation.models import EvaluationRun
from webapp.evaluation.services import evaluation_launch
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts.models import Policy
from webapp.tasks.services import task_set_import

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow]


def _done(job_id: int):
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


def test_leaderboard_cells_open_trajectories_and_a_pair_opens_its_diff(
    live_server, celery_worker, make_user, browser_page
):
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    task_set, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("heldout", n=12)), name="held-out-12"
    )
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    good = Policy.objects.create(name="reference <b>x</b>", kind="scripted")
    bad = Policy.objects.create(
        name="always-wrong", kind="scripted", parameters={"mistakes": {"wrong_answer": 1.0}}
    )
    runs = [evaluation_launch(policy=good, task_set=task_set, samples_per_task=1, max_steps=6)]

    # the second evaluation is launched from the form, as an operator would
    _log_in(page, live_server, make_user(Role.OPERATOR))
    page.goto(live_server.url + "/leaderboards/evaluations/new/")
    page.select_option("select[name=policy]", str(bad.pk))
    page.select_option("select[name=task_set]", str(task_set.pk))
    page.fill("input[name=max_steps]", "6")
    page.get_by_test_id("launch").click()
    page.wait_for_url(re.compile(r"/leaderboards/evaluations/\d+/$"))
    runs.append(EvaluationRun.objects.get(policy=bad))
    for run in runs:
        job = wait_for(lambda run=run: _done(run.job_id), timeout=120, what="evaluation")
        assert job.status == JobStatus.SUCCEEDED, job.error
    good_run, bad_run = (EvaluationRun.objects.get(pk=r.pk) for r in runs)
    assert good_run.metrics["success_rate"] == 1.0 and bad_run.metrics["success_rate"] == 0.0
    page.goto(live_server.url + f"/leaderboards/evaluations/{bad_run.pk}/")
    assert "0 of 12 episodes" in page.get_by_test_id("success").inner_text()

    page.goto(live_server.url + "/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Leaderboards").click()
    page.get_by_role("link", name="held-out-12").click()
    rows = page.locator("[data-testid=leaderboard] tbody tr")
    assert rows.count() == 2
    first = rows.nth(0)
    assert first.get_attribute("data-rank") == "1"
    assert "reference <b>x</b>" in first.inner_text()  # shown literally, not as markup
    assert rows.nth(1).get_attribute("data-rank") == "2"
    assert rows.nth(0).get_attribute("data-tie-group") != rows.nth(1).get_attribute(
        "data-tie-group"
    )  # 12 of 12 against 0 of 12 on paired tasks: no statistical tie

    # a cell opens exactly the trajectories behind it
    first.locator("[data-testid=cell-trajectories]").click()
    page.wait_for_url(re.compile(r"/trajectories/\?collect_run=\d+"))
    listed = page.locator("a[href^='/trajectories/'][href$='/']").evaluate_all(
        "els => els.map(e => e.getAttribute('href')).filter(h => /^\\/trajectories\\/\\d+\\/$/.test(h))"
    )
    ids = {int(h.strip("/").split("/")[-1]) for h in listed}
    expected = set(good_run.collect_run.episodes.values_list("trajectory_id", flat=True))
    assert ids == expected and len(ids) == 12
    page.go_back()

    # the significance matrix opens the comparison; a task row opens the diff of the two policies
    page.locator("[data-testid=matrix-cell]").first.click()
    page.wait_for_url(re.compile(r"/leaderboards/compare/"))
    assert page.locator("[data-testid=tests] tbody tr").count() == 6
    assert "12 shared tasks" in page.content()
    page.locator("[data-testid=task-diff]").first.click()
    page.wait_for_url(re.compile(r"/trajectories/diff/\?a=\d+&b=\d+"))
    assert page.get_by_text("submit").first.is_visible()
    assert not problems, problems

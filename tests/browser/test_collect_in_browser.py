"""A collect job launched from its form in headless Chromium; the episodes table fills in live."""

from __future__ import annotations

import time

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.accounts.models import Role
from webapp.rollouts.models import CollectRun, Policy
from webapp.tasks.services import task_set_import

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow]


def test_launch_a_collect_run_and_watch_the_episodes_table_grow(
    live_server, celery_worker, make_user, browser_page
):
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    tasks = arithmetic_tasks("train", n=3)
    task_set, _ = task_set_import(text=dump_tasks_jsonl(tasks), name="arith-browser")
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    # ~0.25 s of "think time" per step: each episode takes about a second, one at a time
    policy = Policy.objects.create(
        name="slow-scripted", kind="scripted", parameters={"delay": 0.25}
    )

    _log_in(page, live_server, make_user(Role.OPERATOR))
    page.goto(live_server.url + "/rollouts/collect/")
    page.select_option("select[name=task_set]", str(task_set.pk))
    page.select_option("select[name=policy]", str(policy.pk))
    page.fill("input[name=episodes_per_task]", "2")
    page.fill("input[name=max_steps]", "6")
    page.fill("input[name=concurrency]", "1")
    page.locator("input[name=max_steps]").dispatch_event("change")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=estimate]').innerText.includes('6 episodes')"
    )
    assert "No API cost" in page.inner_text("[data-testid=estimate]")
    page.get_by_test_id("launch").click()
    run = CollectRun.objects.get()
    page.wait_for_url(f"**/rollouts/runs/{run.pk}/")
    page.evaluate("window.__same_page = true")

    finished_counts: list[int] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        finished = page.locator("[data-testid=episodes] tr[data-status=finished]").count()
        if not finished_counts or finished != finished_counts[-1]:
            finished_counts.append(finished)
        if finished == 6:
            break
        time.sleep(0.2)
    assert finished_counts[-1] == 6, finished_counts
    assert len([c for c in finished_counts if 0 < c < 6]) >= 2, (
        f"the table should fill in step by step, saw {finished_counts}"
    )
    assert page.evaluate("window.__same_page") is True, "the page reloaded"
    page.wait_for_function(
        "() => document.querySelector('#run-live').dataset.status === 'succeeded'", timeout=30_000
    )
    assert page.inner_text("[data-testid=episodes-done]").startswith("6 of 6")
    assert "100%" in page.inner_text("[data-testid=success-rate]")
    # each row links to its trajectory
    page.locator("[data-testid=trajectory-link]").first.click()
    page.wait_for_url("**/trajectories/*/")
    assert page.locator("li.step").count() >= 2
    assert problems == []

"""Result pages finish by themselves, in headless Chromium on a real worker: a dataset page and
an evaluation page opened while their jobs wait for a worker show the result when the jobs end,
without a reload (a marker set on the window survives)."""

from __future__ import annotations

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from trainer_core.recording.importers import ImportResult
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from trainer_core.training.tiny import reference_trajectories
from webapp.accounts.models import Role
from webapp.datasets import services as datasets
from webapp.evaluation.services import evaluation_launch
from webapp.rollouts.models import Policy
from webapp.tasks.services import task_set_import
from webapp.trajectories import services as store

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow]


def test_dataset_and_evaluation_pages_update_when_their_jobs_end(
    live_server, worker_factory, make_user, browser_page
):
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    tasks = arithmetic_tasks("train", n=6)
    store.trajectories_import(
        results=[ImportResult("ref.jsonl", "steplab", "1", reference_trajectories("train", 6))]
    )
    snapshot = datasets.snapshot_create(name="live-sft", kind="sft")
    task_set, _ = task_set_import(text=dump_tasks_jsonl(tasks), name="live-6")
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    policy = Policy.objects.create(name="reference", kind="scripted")
    run = evaluation_launch(policy=policy, task_set=task_set, samples_per_task=1, max_steps=6)

    _log_in(page, live_server, make_user(Role.VIEWER))
    dataset_page = page
    dataset_page.goto(live_server.url + f"/datasets/{snapshot.pk}/")
    assert "Not written yet" in dataset_page.get_by_test_id("files").inner_text()
    assert dataset_page.locator("#dataset-live").get_attribute("data-follow") == "live"
    dataset_page.evaluate("window.__opened = true")
    evaluation_page = page.context.new_page()
    evaluation_page.goto(live_server.url + f"/leaderboards/evaluations/{run.pk}/")
    assert evaluation_page.get_by_test_id("job-state").get_attribute("data-status") == "queued"
    evaluation_page.evaluate("window.__opened = true")

    worker_factory("main")  # the jobs were waiting for a worker; now one starts

    dataset_page.wait_for_selector(
        "#dataset-live[data-follow=ended] [data-testid=files] a", timeout=90_000
    )
    assert "train.jsonl" in dataset_page.get_by_test_id("files").inner_text()
    assert dataset_page.get_by_test_id("job-state").get_attribute("data-status") == "succeeded"
    assert dataset_page.evaluate("window.__opened === true")  # updated in place, not reloaded

    evaluation_page.wait_for_selector(
        "#evaluation-live[data-follow=ended] [data-testid=success]", timeout=120_000
    )
    assert "6 of 6 episodes" in evaluation_page.get_by_test_id("success").inner_text()
    assert evaluation_page.get_by_test_id("job-state").get_attribute("data-status") == "succeeded"
    assert evaluation_page.evaluate("window.__opened === true")
    assert not problems, problems


def test_training_metrics_of_different_scales_get_their_own_axes(
    live_server, transactional_db, make_user, browser_page
):
    """A loss near 1, a learning rate near 1e-4 and thousands of tokens per second: each on its
    own scale, so the loss curve spans the chart's height instead of lying flat at zero."""
    from webapp.jobs.models import Job, JobMetricPoint, JobStatus
    from webapp.jobs.names import Kinds

    page = browser_page
    job = Job.objects.create(kind=Kinds.TRAIN, status=JobStatus.SUCCEEDED, progress=1.0)
    JobMetricPoint.objects.bulk_create(
        [
            JobMetricPoint(
                job=job,
                step=step,
                values={
                    "loss": 2.0 / (1 + step),
                    "learning_rate": 1e-4 * (1 - step / 20),
                    "grad_norm": 5.0 - step / 10,
                    "tokens_per_second": 25_000.0 + 100 * step,
                },
            )
            for step in range(1, 20)
        ]
    )
    _log_in(page, live_server, make_user(Role.VIEWER))
    page.goto(live_server.url + f"/jobs/{job.pk}/")
    page.wait_for_selector("#metrics-chart[data-scales] .u-over")
    scales = page.evaluate("JSON.parse(document.getElementById('metrics-chart').dataset.scales)")
    assert scales == {
        "loss": "value",
        "learning_rate": "learning rate",
        "grad_norm": "grad norm",
        "tokens_per_second": "per second",
    }
    assert page.locator("#metrics-chart .u-axis").count() == 5  # step + one per scale

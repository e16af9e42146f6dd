"""A training job launched from its form in headless Chromium on a real worker: the YAML
preview, the live loss curve, and the checkpoint registered as a policy."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from tests.browser.test_diagnostic_in_browser import _log_in
from tests.conftest import wait_for
from trainer_core.recording.importers import ImportResult
from webapp.accounts.models import Role
from webapp.datasets import services as datasets
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts.models import Policy
from webapp.training.models import Checkpoint, TrainingRun
from webapp.trajectories import services as store

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow]


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


def test_train_from_the_form_watch_the_curve_register_the_checkpoint(
    live_server, celery_worker, make_user, browser_page, tmp_path
):
    from trainer_core.training.tiny import build_tiny_model, reference_trajectories

    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    # models are read only from the model roots: Steplab's data directory here
    model_dir = build_tiny_model(
        settings.STEPLAB_DATA_DIR / "models" / f"tiny-{tmp_path.name}", hidden_size=64, num_layers=2
    )
    trajectories = reference_trajectories("train", 12)
    store.trajectories_import(results=[ImportResult("ref.jsonl", "steplab", "1", trajectories)])
    snapshot = datasets.snapshot_create(name="arith-sft", kind="sft")
    job = wait_for(lambda: _finished(snapshot.job_id), timeout=90, what="dataset export")
    assert job.status == JobStatus.SUCCEEDED, job.error

    _log_in(page, live_server, make_user(Role.OPERATOR))
    page.goto(live_server.url + f"/training/new/?dataset={snapshot.pk}")
    page.fill("input[name=base_model]", str(model_dir))
    page.fill("input[name=max_steps]", "6")
    page.fill("input[name=batch_size]", "2")
    page.fill("input[name=save_every]", "3")
    page.locator("input[name=save_every]").dispatch_event("change")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=yaml]').innerText.includes('max_steps: 6')"
    )
    assert str(model_dir) in page.inner_text("[data-testid=yaml]")
    page.get_by_test_id("launch").click()
    page.wait_for_url("**/jobs/*/")
    run = TrainingRun.objects.get()
    assert "max_steps: 6" in run.config_yaml and run.job.queue == "gpu"

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if page.locator("#job-progress").get_attribute("data-status") in ("succeeded", "failed"):
            break
        time.sleep(0.5)
    job = Job.objects.get(pk=run.job_id)
    assert job.status == JobStatus.SUCCEEDED, job.error
    page.reload()
    points = int(page.get_by_test_id("metrics-chart").get_attribute("data-points") or 0)
    assert points >= 6, "the loss curve shows every step"
    assert Checkpoint.objects.filter(run=run).count() == 2  # steps 3 and 6
    page.get_by_test_id("register-6").click()
    page.wait_for_url("**/rollouts/policies/*/")
    policy = Policy.objects.get(kind="local")
    assert policy.parameters["model_dir"].endswith("checkpoint-6")
    assert problems == []

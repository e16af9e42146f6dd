"""Every page that shows a job's result follows the job live: while it is queued or running the
page carries the htmx poll (the live-follow hook), the poll answers with the page's live part,
and once the job has ended the poll answers 286 with the result, which stops the polling, and a
fresh page has no hook. The job moves through the worker's own services (job_start, job_finish)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import reverse

from webapp.accounts.models import Role
from webapp.calibration.models import Calibration
from webapp.datasets.models import DatasetSnapshot
from webapp.evaluation.models import EvaluationRun
from webapp.jobs import services as jobs
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.names import Kinds
from webapp.rewards.models import RewardModel, ScoringRun
from webapp.rollouts.models import CollectRun, Policy
from webapp.tasks.models import TaskSet
from webapp.training.models import TrainingRun

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKER = "test-worker:1"


@dataclass
class Case:
    url: str
    live_id: str  # the element that polls (its id is the htmx target)
    job: Job
    finish: Any  # writes the result the job's work writes, before the job ends
    result: str  # text the live part shows once the job has ended
    poll_url: str = ""  # where the poll goes (default: the page itself)


def _job(kind: str) -> Job:
    return Job.objects.create(kind=kind, queue="default", message="Waiting for a worker.")


def _version() -> RewardModel:
    return RewardModel.objects.create(domain="coding", version=1, config={})


def _evaluation() -> Case:
    job = _job(Kinds.EVALUATE)
    task_set = TaskSet.objects.create(name="held-out")
    policy = Policy.objects.create(name="scripted-good", kind="scripted")
    collect = CollectRun.objects.create(
        task_set=task_set, policy=policy, environment="steplab/arithmetic", episodes_total=4
    )
    run = EvaluationRun.objects.create(
        policy=policy, task_set=task_set, collect_run=collect, job=job, samples_per_task=1
    )

    def finish():
        CollectRun.objects.filter(pk=collect.pk).update(episodes_done=4)
        EvaluationRun.objects.filter(pk=run.pk).update(
            metrics={"n": 4, "successes": 3, "success_rate": 0.75, "tasks": 4}
        )

    return Case(reverse("evaluation:run", args=[run.pk]), "evaluation-live", job, finish, "4 of 4")


def _dataset() -> Case:
    job = _job(Kinds.EXPORT_DATASET)
    snapshot = DatasetSnapshot.objects.create(name="sft-live", kind="sft", job=job)

    def finish():
        files = {"train.jsonl": {"path": "/nowhere/train.jsonl", "sha256": "ab" * 32, "bytes": 10}}
        DatasetSnapshot.objects.filter(pk=snapshot.pk).update(files=files, counts={"train": 1})

    return Case(
        reverse("datasets:detail", args=[snapshot.pk]), "dataset-live", job, finish, "train.jsonl"
    )


def _scoring_version_page() -> Case:
    job = _job(Kinds.SCORE)
    version = _version()
    run = ScoringRun.objects.create(job=job, reward_model=version, total=5)

    def finish():
        ScoringRun.objects.filter(pk=run.pk).update(scored=5)

    return Case(reverse("rewards:version", args=[version.pk]), "runs-live", job, finish, "5/5")


def _calibration_apply() -> Case:
    job = _job(Kinds.SCORE)
    old, new = _version(), RewardModel.objects.create(domain="coding", version=2, config={})
    run = ScoringRun.objects.create(job=job, reward_model=new, total=3)
    calibration = Calibration.objects.create(
        reward_model=old, result={}, labels=10, applied_as=new, rescoring_run=run
    )

    def finish():
        ScoringRun.objects.filter(pk=run.pk).update(scored=3)

    return Case(
        reverse("calibration:fitted", args=[calibration.pk]),
        "apply-live",
        job,
        finish,
        "What changed",
    )


def _training() -> Case:
    job = _job(Kinds.TRAIN)
    run = TrainingRun.objects.create(method="sft", base_model="/models/tiny", job=job)

    def finish():
        TrainingRun.objects.filter(pk=run.pk).update(result={"final_loss": 0.125})

    return Case(reverse("training:detail", args=[run.pk]), "training-live", job, finish, "0.125")


def _job_page(kind: str, result: dict, text: str):
    def build() -> Case:
        job = _job(kind)

        def finish():
            Job.objects.filter(pk=job.pk).update(result=result)

        return Case(
            reverse("jobs:detail", args=[job.pk]),
            "job-progress",
            job,
            finish,
            text,
            poll_url=reverse("jobs:progress", args=[job.pk]),
        )

    return build


PAGES = {
    "evaluation": _evaluation,
    "dataset": _dataset,
    "scoring (version page)": _scoring_version_page,
    "scoring (job page)": _job_page(Kinds.SCORE, {}, "succeeded"),
    "calibration apply": _calibration_apply,
    "training": _training,
    "import (job page)": _job_page(
        Kinds.IMPORT_TRAJECTORIES,
        {
            "files": [{"file": "run.traj", "format": "swe-agent", "trajectories": 1, "steps": 3}],
            "created": 1,
            "steps": 3,
        },
        "run.traj",
    ),
}


def _element(body: str, element_id: str) -> str:
    """The opening tag of the element with this id."""
    found = re.search(rf'<[a-z]+ [^>]*id="{element_id}"[^>]*>', body)
    assert found, f"no #{element_id} in the page"
    return found.group(0)


def _follows(tag: str) -> bool:
    return 'hx-trigger="every' in tag and "hx-get=" in tag


@pytest.mark.parametrize("page", list(PAGES))
def test_a_result_page_follows_its_job_while_it_runs_and_stops_when_it_ends(
    client, make_user, page
):
    client.force_login(make_user(Role.OPERATOR))
    case = PAGES[page]()
    poll_url = case.poll_url or case.url
    poll = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": case.live_id}

    tag = _element(client.get(case.url).content.decode(), case.live_id)
    assert _follows(tag), tag  # queued
    assert f'hx-get="{poll_url}"' in tag

    jobs.job_start(job_id=case.job.pk, task_id=None, worker=WORKER)
    response = client.get(poll_url, **poll)
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body  # only the live part
    assert _follows(_element(body, case.live_id))  # running: the poll goes on

    case.finish()
    jobs.job_finish(job_id=case.job.pk, worker=WORKER, status=JobStatus.SUCCEEDED)
    response = client.get(poll_url, **poll)
    body = response.content.decode()
    assert response.status_code == 286  # htmx swaps this last answer in and stops polling
    assert not _follows(_element(body, case.live_id))
    assert case.result in body

    tag = _element(client.get(case.url).content.decode(), case.live_id)
    assert not _follows(tag)


def test_a_failed_export_says_why_on_the_dataset_page(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    case = _dataset()
    jobs.job_start(job_id=case.job.pk, task_id=None, worker=WORKER)
    body = client.get(case.url).content.decode()
    assert "Not written yet" in body and 'data-status="running"' in body
    jobs.job_finish(
        job_id=case.job.pk,
        worker=WORKER,
        status=JobStatus.FAILED,
        error="The selection matched no <trajectory>.",
    )
    response = client.get(case.url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="dataset-live")
    body = response.content.decode()
    assert response.status_code == 286
    assert "The selection matched no &lt;trajectory&gt;." in body
    assert "No files were written." in body and "Not written yet" not in body

"""A job has one metrics point per step: a step recorded again (a resumed run re-doing the steps
after its last checkpoint, two reports of one step) updates its point, on the real database;
points reported without a step continue after the last recorded one, also in a later attempt."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.utils import timezone

from webapp.jobs import services
from webapp.jobs.context import JobContext
from webapp.jobs.models import Job, JobMetricPoint, JobStatus
from webapp.jobs.names import Kinds

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _running(worker: str = "w:1", attempts: int = 1) -> Job:
    return Job.objects.create(
        kind=Kinds.DIAGNOSTIC,
        status=JobStatus.RUNNING,
        worker=worker,
        attempts=attempts,
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )


def _points(job: Job) -> list[tuple[int, dict]]:
    return list(
        JobMetricPoint.objects.filter(job=job).order_by("step", "id").values_list("step", "values")
    )


def test_a_step_recorded_again_updates_its_point():
    job = _running()
    services.job_record_progress(
        job_id=job.pk,
        worker="w:1",
        metric_points=[(1, {"loss": 3.0}), (2, {"loss": 2.0}), (3, {"loss": 1.5})],
    )
    # a resumed attempt re-does steps 2 and 3 from the checkpoint at step 1, then goes on
    services.job_record_progress(
        job_id=job.pk,
        worker="w:1",
        metric_points=[
            (2, {"loss": 2.1}),
            (3, {"loss": 1.4}),
            (3, {"eval": 0.5}),
            (4, {"loss": 1}),
        ],
    )
    assert _points(job) == [
        (1, {"loss": 3.0}),
        (2, {"loss": 2.1}),
        (3, {"loss": 1.4, "eval": 0.5}),
        (4, {"loss": 1}),
    ]


def test_a_worker_that_lost_the_job_writes_no_point():
    job = _running(worker="new:2")
    services.job_record_progress(job_id=job.pk, worker="old:1", metric_points=[(1, {"loss": 9})])
    assert _points(job) == []


@override_settings(STEPLAB_PROGRESS_MIN_INTERVAL=0.0)
def test_points_without_a_step_follow_the_last_recorded_step_across_attempts():
    job = _running()
    first = JobContext(job, worker="w:1")
    for done in range(3):  # each report is written at once (no throttle)
        first.progress(metrics={"episodes_done": done})
    first.progress(step=10, metrics={"loss": 0.5})
    assert [s for s, _ in _points(job)] == [0, 1, 2, 10]
    # the worker died; the next attempt's points without a step come after step 10
    Job.objects.filter(pk=job.pk).update(worker="w:2", attempts=2)
    job.refresh_from_db()
    second = JobContext(job, worker="w:2")
    second.progress(metrics={"episodes_done": 3})
    second.progress(metrics={"episodes_done": 4})
    assert [s for s, _ in _points(job)] == [0, 1, 2, 10, 11, 12]

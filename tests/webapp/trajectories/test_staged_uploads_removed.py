"""An import job's staged upload goes however the job ends: failed (any error on its worker, or
its worker dead for good), cancelled while queued, or never enqueued because staging failed.
A job the reaper re-queues keeps it (the next attempt reads it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from webapp.jobs import services as jobs
from webapp.jobs.models import Job, JobStatus
from webapp.trajectories import services

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


def _enqueue(user=None) -> tuple[Job, object]:
    upload = SimpleUploadedFile("run.jsonl", b'{"not": "a trajectory"}\n')
    job = services.trajectories_import_enqueue(uploads=[upload], format=None, user=user)
    folder = services.uploads_root() / job.params["folder"]
    assert services.staged_paths(folder=folder), "the upload is staged"
    return job, folder


def test_a_job_that_fails_on_its_worker_removes_its_upload():
    job, folder = _enqueue()
    started = jobs.job_start(job_id=job.pk, task_id=job.celery_task_id, worker="w:1")
    assert started is not None and folder.is_dir()
    jobs.job_finish(
        job_id=job.pk, worker="w:1", status=JobStatus.FAILED, error="OverflowError: date value"
    )
    assert not folder.exists()


def test_a_job_cancelled_before_any_worker_removes_its_upload(operator):
    job, folder = _enqueue(operator)
    jobs.job_cancel(job=job, user=operator)
    assert not folder.exists()


def test_the_reaper_keeps_the_upload_of_a_job_it_requeues_and_removes_it_when_it_gives_up():
    job, folder = _enqueue()
    jobs.job_start(job_id=job.pk, task_id=job.celery_task_id, worker="gone:1")
    stale = timezone.now() - timedelta(seconds=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS + 5)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=stale)
    assert jobs.jobs_reap_dead() == [job.pk]
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED and folder.is_dir()
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        worker="gone:2",
        heartbeat_at=stale,
        attempts=settings.STEPLAB_JOB_MAX_ATTEMPTS,
    )
    assert jobs.jobs_reap_dead() == [job.pk]
    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED
    assert not folder.exists()


class _DiskFull(SimpleUploadedFile):
    """An upload whose copy fails half-way, as on a full disk."""

    def chunks(self, chunk_size=None):
        yield b'{"first": "chunk"}\n'
        raise OSError(28, "No space left on device")


def test_staging_that_fails_half_way_leaves_nothing_and_enqueues_nothing():
    before = set(services.uploads_root().iterdir()) if services.uploads_root().is_dir() else set()
    with pytest.raises(OSError, match="No space left"):
        services.trajectories_import_enqueue(
            uploads=[SimpleUploadedFile("a.jsonl", b"{}\n"), _DiskFull("b.jsonl", b"")],
            format=None,
            user=None,
        )
    assert set(services.uploads_root().iterdir()) == before
    assert not Job.objects.exists()

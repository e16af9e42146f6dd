"""Large uploads import as a job on a real worker, with progress: every file that reads, the
others reported (all or nothing on request)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.conftest import wait_for
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.jobs.models import Job, JobStatus
from webapp.trajectories.models import Trajectory as TrajectoryRow
from webapp.trajectories.services import uploads_root

pytestmark = [pytest.mark.worker]


def _jsonl(n: int, marker: str) -> bytes:
    return "".join(
        Trajectory(
            task=TaskRef(id=f"{marker}-{i}", prompt=f"task {marker} {i}"),
            steps=[Step(index=s, tool="bash", observation=f"{marker} {i} {s}") for s in range(3)],
            outcome=Outcome(success=i % 2 == 0),
        ).to_json()
        + "\n"
        for i in range(n)
    ).encode()


def _finished(pk: int) -> Job | None:
    job = Job.objects.get(pk=pk)
    return job if job.is_terminal else None


@pytest.mark.sqlite
def test_background_import_runs_on_a_worker_and_reports_the_result(
    celery_worker, operator_client, settings
):
    files = [SimpleUploadedFile(f"part{i}.jsonl", _jsonl(4, f"p{i}")) for i in range(3)]
    response = operator_client.post(
        reverse("trajectories:import"), {"files": files, "background": "on"}
    )
    assert response.status_code == 302 and "/jobs/" in response["Location"]
    job = Job.objects.get(kind="trajectories.import")
    done = wait_for(lambda: _finished(job.pk), timeout=60, what="import job to end")
    assert done.status == JobStatus.SUCCEEDED, done.error
    assert done.result["created"] == 12 and done.result["steps"] == 36
    assert [f["trajectories"] for f in done.result["files"]] == [4, 4, 4]
    assert TrajectoryRow.objects.count() == 12
    assert any("files_parsed" in p.values for p in done.metric_points.all())
    assert not (uploads_root() / done.params["folder"]).exists()  # staging cleaned up
    page = operator_client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert "12 trajectories (36 steps) imported" in page
    listed = operator_client.get(response["Location"]).status_code
    assert listed == 200

    # the same files again: every trajectory is a duplicate, nothing is written
    again = operator_client.post(
        reverse("trajectories:import"),
        {
            "files": [SimpleUploadedFile(f"part{i}.jsonl", _jsonl(4, f"p{i}")) for i in range(3)],
            "background": "on",
        },
    )
    job2 = Job.objects.exclude(pk=job.pk).get(kind="trajectories.import")
    done2 = wait_for(lambda: _finished(job2.pk), timeout=60, what="second import job")
    assert again.status_code == 302
    assert done2.result["created"] == 0 and done2.result["duplicate_count"] == 12
    assert TrajectoryRow.objects.count() == 12


def _broken_upload() -> list[SimpleUploadedFile]:
    return [
        SimpleUploadedFile("good.jsonl", _jsonl(2, "g")),
        SimpleUploadedFile("broken.json", b'{"messages": [ {"role": "user", "content": '),
    ]


def test_a_broken_file_is_reported_and_the_good_ones_imported(celery_worker, operator_client):
    operator_client.post(
        reverse("trajectories:import"), {"files": _broken_upload(), "background": "on"}
    )
    job = Job.objects.get(kind="trajectories.import")
    done = wait_for(lambda: _finished(job.pk), timeout=60, what="import job to end")
    assert done.status == JobStatus.SUCCEEDED, done.error
    assert done.result["created"] == 2 and done.result["refused_count"] == 1
    assert [bool(f["error"]) for f in done.result["files"]] == [False, True]
    assert "broken.json: invalid JSON" in done.result["files"][1]["error"]
    assert TrajectoryRow.objects.count() == 2
    page = operator_client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert "1 file(s) refused" in page and 'data-file-status="refused"' in page


def test_all_or_nothing_a_broken_file_fails_the_job_and_writes_nothing(
    celery_worker, operator_client
):
    operator_client.post(
        reverse("trajectories:import"),
        {"files": _broken_upload(), "background": "on", "all_or_nothing": "on"},
    )
    job = Job.objects.get(kind="trajectories.import")
    done = wait_for(lambda: _finished(job.pk), timeout=60, what="import job to end")
    assert done.status == JobStatus.FAILED
    assert "broken.json" in done.error and "Nothing was imported" in done.error
    assert [bool(f["error"]) for f in done.result["files"]] == [False, True]
    assert TrajectoryRow.objects.count() == 0
    assert not (uploads_root() / done.params["folder"]).exists()


def test_uploads_over_the_inline_limit_go_to_a_job(celery_worker, operator_client, settings):
    settings.STEPLAB_IMPORT_INLINE_MAX_BYTES = 100
    response = operator_client.post(
        reverse("trajectories:import"), {"files": [SimpleUploadedFile("a.jsonl", _jsonl(2, "a"))]}
    )
    assert response.status_code == 302 and "/jobs/" in response["Location"]
    job = Job.objects.get(kind="trajectories.import")
    done = wait_for(lambda: _finished(job.pk), timeout=60, what="import job to end")
    assert done.status == JobStatus.SUCCEEDED and done.result["created"] == 2

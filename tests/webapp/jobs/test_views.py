"""Job pages over HTTP (Django test client)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from webapp.jobs.models import Job, JobMetricPoint, JobStatus
from webapp.jobs.names import Kinds

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_the_diagnostic_form_launches_a_job_and_opens_its_page(
    operator_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = operator_client.post(
            reverse("jobs:diagnostic-new"),
            {"steps": 7, "step_seconds": 0.1, "children": 0, "fail_at_step": 0, "report": "on"},
        )
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "jobs:detail", args=[job.pk]
    )
    assert job.kind == Kinds.DIAGNOSTIC
    assert job.params == {
        "steps": 7,
        "step_seconds": 0.1,
        "children": 0,
        "fail_at_step": 0,
        "report": True,
    }
    page = operator_client.get(response["Location"])
    assert page.status_code == 200
    assert b'hx-get="/jobs/%d/progress/"' % job.pk in page.content
    assert b'hx-trigger="every 1s"' in page.content


def test_invalid_form_input_is_explained_and_launches_nothing(operator_client):
    response = operator_client.post(
        reverse("jobs:diagnostic-new"), {"steps": 0, "step_seconds": -1, "children": 0}
    )
    assert response.status_code == 200
    assert b"Ensure this value is greater than or equal to 1" in response.content
    assert not Job.objects.exists()


def test_progress_fragment_polls_while_running_and_stops_with_286_when_done(operator_client):
    job = Job.objects.create(
        kind=Kinds.DIAGNOSTIC,
        status=JobStatus.RUNNING,
        progress=0.4,
        started_at=timezone.now(),
        message="Step 4 of 10",
    )
    JobMetricPoint.objects.create(job=job, step=4, values={"loss": 0.5})
    running = operator_client.get(reverse("jobs:progress", args=[job.pk]), HTTP_HX_REQUEST="true")
    assert running.status_code == 200
    assert b'aria-valuenow="40"' in running.content
    assert b"hx-trigger" in running.content
    assert b'"steps": [4]' in running.content
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.SUCCEEDED, progress=1.0, finished_at=timezone.now()
    )
    done = operator_client.get(reverse("jobs:progress", args=[job.pk]), HTTP_HX_REQUEST="true")
    assert done.status_code == 286, "htmx stops polling on 286"
    assert b'aria-valuenow="100"' in done.content
    assert b"hx-trigger" not in done.content, "the swapped-in fragment must not poll again"


def test_agent_text_is_escaped_on_every_job_page(operator_client):
    evil = '<script>alert("x")</script>'
    job = Job.objects.create(
        kind=Kinds.DIAGNOSTIC,
        status=JobStatus.FAILED,
        message=evil,
        error=evil,
        traceback=evil,
        log_tail=evil,
        params={"note": evil},
    )
    JobMetricPoint.objects.create(
        job=job, step=1, values={"</script><script>alert(1)</script>": 1.0}
    )
    for url in (reverse("jobs:detail", args=[job.pk]), reverse("jobs:list"), reverse("dashboard")):
        body = operator_client.get(url).content.decode()
        assert '<script>alert("x")</script>' not in body, url
        assert "</script><script>alert(1)" not in body, url


def test_job_list_filters_by_kind_status_and_user(operator_client, operator, make_user):
    other = make_user("operator")
    mine = Job.objects.create(kind=Kinds.DIAGNOSTIC, status=JobStatus.FAILED, user=operator)
    theirs = Job.objects.create(kind=Kinds.DIAGNOSTIC, status=JobStatus.SUCCEEDED, user=other)
    body = operator_client.get(reverse("jobs:list"), {"status": "failed"}).content.decode()
    assert f'data-job-id="{mine.pk}"' in body and f'data-job-id="{theirs.pk}"' not in body
    body = operator_client.get(reverse("jobs:list"), {"user": other.pk}).content.decode()
    assert f'data-job-id="{theirs.pk}"' in body and f'data-job-id="{mine.pk}"' not in body


def test_cancel_from_the_page(operator_client):
    job = Job.objects.create(kind=Kinds.DIAGNOSTIC, celery_task_id="t")
    response = operator_client.post(reverse("jobs:cancel", args=[job.pk]), follow=True)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert b"Cancelled by" in response.content
    again = operator_client.post(reverse("jobs:cancel", args=[job.pk]), follow=True)
    assert b"already ended" in again.content


def test_dashboard_shows_queues_workers_and_orphan_warning(operator_client):
    Job.objects.create(kind=Kinds.DIAGNOSTIC, queue="gpu")
    body = operator_client.get(reverse("dashboard")).content.decode()
    for queue in ("default", "rollouts", "judge", "gpu"):
        assert f"<code>{queue}</code>" in body
    assert 'data-testid="orphan-warning"' in body
    assert "No worker has reported yet" in body


def test_a_running_job_with_a_stale_heartbeat_is_flagged_on_its_page(operator_client, settings):
    from datetime import timedelta

    old = timezone.now() - timedelta(seconds=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS + 30)
    job = Job.objects.create(
        kind=Kinds.DIAGNOSTIC,
        status=JobStatus.RUNNING,
        worker="gone@host:12",
        started_at=old,
        heartbeat_at=old,
    )
    body = operator_client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert 'data-testid="stale-warning"' in body
    assert "No heartbeat from gone@host:12" in body
    Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now())
    body = operator_client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert 'data-testid="stale-warning"' not in body

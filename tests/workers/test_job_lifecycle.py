"""Jobs on a real Celery worker (Redis database 15, the test database)."""

from __future__ import annotations

import time

import pytest

from tests.conftest import wait_for
from webapp.jobs import services
from webapp.jobs.models import Job, JobMetricPoint, JobStatus
from webapp.jobs.names import Kinds

pytestmark = [pytest.mark.worker]


def _job(pk: int) -> Job:
    return Job.objects.get(pk=pk)


def _terminal(pk: int) -> Job | None:
    job = _job(pk)
    return job if job.is_terminal else None


@pytest.mark.sqlite
def test_diagnostic_goes_queued_running_succeeded_with_rising_progress(celery_worker, operator):
    job = services.job_enqueue(
        kind=Kinds.DIAGNOSTIC,
        params={"steps": 12, "step_seconds": 0.15, "report": True},
        user=operator,
    )
    assert job.status == JobStatus.QUEUED

    seen: list[tuple[str, float]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        current = _job(job.pk)
        if not seen or seen[-1] != (current.status, current.progress):
            seen.append((current.status, current.progress))
        if current.is_terminal:
            break
        time.sleep(0.05)
    statuses = [s for s, _ in seen]
    assert statuses[0] == JobStatus.QUEUED
    assert JobStatus.RUNNING in statuses, seen
    assert statuses[-1] == JobStatus.SUCCEEDED, seen
    # statuses move forward only: queued* running* succeeded
    order = {JobStatus.QUEUED: 0, JobStatus.RUNNING: 1, JobStatus.SUCCEEDED: 2}
    assert [order[s] for s in statuses] == sorted(order[s] for s in statuses), seen

    progress = [p for s, p in seen if s == JobStatus.RUNNING]
    assert progress == sorted(progress), f"progress went backwards: {seen}"
    assert len({p for p in progress if 0 < p < 1}) >= 3, (
        f"expected progress to rise in steps, saw {seen}"
    )

    done = _job(job.pk)
    assert done.progress == 1.0
    assert done.started_at and done.finished_at and done.finished_at >= done.started_at
    assert done.attempts == 1
    steps = list(JobMetricPoint.objects.filter(job=done).values_list("step", flat=True))
    assert steps == list(range(1, 13))
    names = {check["name"]: check for check in done.result["report"]}
    assert names["database"]["status"] == "ok"
    assert names["broker"]["status"] == "ok" and "redis" in names["broker"]["detail"]
    assert {"bubblewrap", "podman", "chromium", "torch"} <= set(names)


def test_cancelling_a_running_job_ends_it_cancelled_within_5_seconds(celery_worker, operator):
    job = services.job_enqueue(
        kind=Kinds.DIAGNOSTIC,
        params={"steps": 400, "step_seconds": 0.1, "report": False},
        user=operator,
    )
    wait_for(
        lambda: JobMetricPoint.objects.filter(job_id=job.pk).count() >= 3,
        timeout=30,
        what="the job to record steps",
    )
    assert _job(job.pk).status == JobStatus.RUNNING

    asked = time.monotonic()
    services.job_cancel(job=_job(job.pk), user=operator)
    ended = wait_for(lambda: _terminal(job.pk), timeout=10, interval=0.05, what="the job to end")
    took = time.monotonic() - asked

    assert ended.status == JobStatus.CANCELLED
    assert took < 5.0, f"cancelling took {took:.1f}s"
    assert ended.progress < 1.0
    recorded = JobMetricPoint.objects.filter(job=ended).count()
    time.sleep(1.0)
    assert JobMetricPoint.objects.filter(job=ended).count() == recorded, (
        "the job kept running after it was cancelled"
    )


def test_a_queued_job_cancelled_before_any_worker_never_runs(
    transactional_db, operator, worker_factory
):
    job = services.job_enqueue(
        kind=Kinds.DIAGNOSTIC,
        params={"steps": 3, "step_seconds": 0.0, "report": False},
        user=operator,
    )
    services.job_cancel(job=job, user=operator)
    assert _job(job.pk).status == JobStatus.CANCELLED
    worker_factory()  # the message is still in the broker; the worker must skip it
    time.sleep(2.0)
    job = _job(job.pk)
    assert job.status == JobStatus.CANCELLED
    assert job.started_at is None
    assert not JobMetricPoint.objects.filter(job=job).exists()


@pytest.mark.sqlite
def test_a_job_whose_work_raises_ends_failed_with_message_and_traceback(celery_worker, operator):
    job = services.job_enqueue(
        kind=Kinds.DIAGNOSTIC,
        params={"steps": 10, "step_seconds": 0.05, "fail_at_step": 4, "report": False},
        user=operator,
    )
    ended = wait_for(lambda: _terminal(job.pk), timeout=60, what="the job to end")
    assert ended.status == JobStatus.FAILED
    assert "fail_at_step=4" in ended.error
    assert "DiagnosticFailure" in ended.error
    assert "Traceback (most recent call last)" in ended.traceback
    assert "diagnostic_run" in ended.traceback
    assert list(JobMetricPoint.objects.filter(job=ended).values_list("step", flat=True)) == [
        1,
        2,
        3,
    ]


def test_a_parent_with_5_children_finishes_when_the_last_child_does(celery_worker, operator):
    parent = services.job_enqueue(
        kind=Kinds.DIAGNOSTIC,
        params={"steps": 4, "step_seconds": 0.1, "children": 5, "report": False},
        user=operator,
    )
    ended = wait_for(lambda: _terminal(parent.pk), timeout=90, what="the parent to end")
    children = list(Job.objects.filter(parent=parent).order_by("pk"))

    assert ended.status == JobStatus.SUCCEEDED, ended.error
    assert len(children) == 5
    assert all(c.status == JobStatus.SUCCEEDED for c in children)
    assert all(c.user_id == operator.pk for c in children)
    last_child = max(c.finished_at for c in children)
    assert ended.finished_at >= last_child
    assert ended.result["children"] == {"total": 5, "succeeded": 5}
    assert ended.stage == "summarize"
    for child in children:
        assert list(JobMetricPoint.objects.filter(job=child).values_list("step", flat=True)) == [
            1,
            2,
            3,
            4,
        ]


def test_a_parent_fails_when_a_child_fails(celery_worker, operator):
    parent = services.job_enqueue(
        kind=Kinds.DIAGNOSTIC,
        params={"steps": 3, "step_seconds": 0.0, "children": 2, "fail_at_step": 2, "report": False},
        user=operator,
    )
    ended = wait_for(lambda: _terminal(parent.pk), timeout=60, what="the parent to end")
    assert ended.status == JobStatus.FAILED
    assert "2 of 2 child jobs did not succeed" in ended.error


def test_a_worker_killed_mid_job_is_detected_and_the_job_resumes_without_redoing_steps(
    worker_factory, operator
):
    steps = 40
    doomed = worker_factory("doomed")
    job = services.job_enqueue(
        kind=Kinds.DIAGNOSTIC,
        params={"steps": steps, "step_seconds": 0.15, "report": False},
        user=operator,
    )
    wait_for(
        lambda: _job(job.pk).state.get("completed_steps", 0) >= 6,
        timeout=60,
        what="six recorded steps",
    )
    pids = doomed.pids()
    assert len(pids) >= 2, f"expected the main process and pool children, got {pids}"

    doomed.kill()  # SIGKILL to the main process and its children at once
    dead = _job(job.pk)
    recorded = dead.state["completed_steps"]
    assert dead.status == JobStatus.RUNNING, "nothing may mark the job while its worker is dead"
    assert list(JobMetricPoint.objects.filter(job=dead).values_list("step", flat=True)) == list(
        range(1, recorded + 1)
    )

    worker_factory("rescuer")
    ended = wait_for(lambda: _terminal(job.pk), timeout=90, what="the job to be resumed and finish")

    assert ended.status == JobStatus.SUCCEEDED, f"{ended.status}: {ended.error}\n{ended.log_tail}"
    assert ended.attempts == 2
    points = list(
        JobMetricPoint.objects.filter(job=ended)
        .order_by("step", "id")
        .values_list("step", "values")
    )
    assert [s for s, _ in points] == list(range(1, steps + 1)), "every step recorded exactly once"
    assert all(v["attempt"] == 1 for s, v in points if s <= recorded)
    assert all(v["attempt"] == 2 for s, v in points if s > recorded), (
        "recorded steps must not run again"
    )
    assert "stopped responding" in ended.log_tail
    assert "re-queued" in ended.log_tail

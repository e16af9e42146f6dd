"""Job services without a worker: the guard, the reaper, cancel, fan-out bookkeeping, throttling.

Sending to the broker happens on commit; these tests use ``transactional_db`` only where they
need commits, and otherwise create rows directly so nothing reaches a worker.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from webapp.common.errors import ApplicationError
from webapp.jobs import kinds, selectors, services
from webapp.jobs.context import JobCancelled, JobContext, JobLost
from webapp.jobs.models import Job, JobMetricPoint, JobStatus, WorkerPresence
from webapp.jobs.names import Kinds

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _running(worker="host:1", *, age=0.0, kind=Kinds.DIAGNOSTIC, attempts=1, **fields) -> Job:
    now = timezone.now()
    fields.setdefault("celery_task_id", "task-1")
    return Job.objects.create(
        kind=kind,
        status=JobStatus.RUNNING,
        worker=worker,
        started_at=now - timedelta(seconds=age),
        heartbeat_at=now - timedelta(seconds=age),
        attempts=attempts,
        **fields,
    )


def test_enqueue_creates_a_queued_row_with_a_task_id(django_capture_on_commit_callbacks, operator):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = services.job_enqueue(kind=Kinds.DIAGNOSTIC, params={"steps": 2}, user=operator)
    assert job.status == JobStatus.QUEUED
    assert job.queue == "default"
    assert job.celery_task_id
    assert job.user == operator
    assert len(callbacks) == 1, "the task is sent once, on commit"


def test_enqueue_rejects_unknown_kinds_and_queues():
    with pytest.raises(KeyError, match="unknown job kind 'nope'"):
        services.job_enqueue(kind="nope")
    with pytest.raises(ApplicationError, match="Unknown queue 'fast'"):
        services.job_enqueue(kind=Kinds.DIAGNOSTIC, queue="fast")


def test_guard_runs_a_queued_job_once_and_skips_stale_or_duplicate_deliveries():
    job = Job.objects.create(kind=Kinds.DIAGNOSTIC, celery_task_id="t-current")
    assert services.job_start(job_id=job.pk, task_id="t-old", worker="a:1") is None, "stale task id"
    started = services.job_start(job_id=job.pk, task_id="t-current", worker="a:1")
    assert started is not None and started.status == JobStatus.RUNNING and started.attempts == 1
    # a duplicate delivery while the first is alive is dropped
    assert services.job_start(job_id=job.pk, task_id="t-current", worker="b:2") is None
    # a missing row is dropped too
    assert services.job_start(job_id=job.pk + 999, task_id="x", worker="a:1") is None


def test_guard_takes_over_a_running_job_whose_heartbeat_is_stale(settings):
    job = _running("dead:1", age=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS + 5)
    taken = services.job_start(job_id=job.pk, task_id="task-1", worker="alive:2")
    assert taken is not None
    assert taken.worker == "alive:2" and taken.attempts == 2
    assert "dead:1 stopped responding" in taken.log_tail


def test_guard_skips_terminal_jobs():
    job = Job.objects.create(kind=Kinds.DIAGNOSTIC, status=JobStatus.SUCCEEDED, celery_task_id="t")
    assert services.job_start(job_id=job.pk, task_id="t", worker="a:1") is None


def test_reaper_requeues_a_dead_resumable_job_and_leaves_live_ones(
    settings, django_capture_on_commit_callbacks
):
    dead = _running(
        "gone:1", age=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS + 10, state={"completed_steps": 7}
    )
    alive = _running("here:2", age=0.5)
    waiting_parent = _running("", age=3600, awaiting_children=True)
    # children done, its next stage waits in the queue while every worker is busy
    advanced_parent = _running("", age=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS + 120)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        reaped = services.jobs_reap_dead()
    assert reaped == [dead.pk]
    dead.refresh_from_db()
    assert dead.status == JobStatus.QUEUED
    assert dead.worker == ""
    assert dead.celery_task_id != "task-1", "a new task id, so the dead worker's delivery is stale"
    assert dead.state == {"completed_steps": 7}, "finished work is kept"
    assert "gone:1 stopped responding" in dead.message and "attempt 2 of" in dead.message
    assert len(callbacks) == 1
    alive.refresh_from_db()
    waiting_parent.refresh_from_db()
    assert alive.status == JobStatus.RUNNING
    assert waiting_parent.status == JobStatus.RUNNING, (
        "a parent waiting on children has no worker to die"
    )
    advanced_parent.refresh_from_db()
    assert advanced_parent.status == JobStatus.RUNNING and advanced_parent.attempts == 1, (
        "a parent waiting for a worker to run its next stage has no worker to die"
    )


def test_reaper_fails_a_dead_job_after_max_attempts_with_a_clear_message(settings):
    settings.STEPLAB_JOB_MAX_ATTEMPTS = 2
    job = _running("gone:1", age=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS + 10, attempts=2)
    services.jobs_reap_dead()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "stopped responding" in job.error
    assert "tried 2 times" in job.error
    assert job.finished_at is not None


def test_reaper_fails_dead_jobs_of_kinds_that_cannot_resume(settings):
    kinds.register_kind(
        kinds.JobKind(name="oneshot-test", label="One shot", task_name="jobs.oneshot_test")
    )
    job = _running("gone:1", age=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS + 10, kind="oneshot-test")
    services.jobs_reap_dead()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "cannot resume part-way; launch it again" in job.error


def test_reaper_finishes_a_dead_job_that_was_being_cancelled_as_cancelled(settings):
    job = _running(
        "gone:1",
        age=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS + 10,
        cancel_requested_at=timezone.now(),
    )
    services.jobs_reap_dead()
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED


def test_cancel_a_queued_job_ends_it_and_cascades_to_children(operator):
    parent = Job.objects.create(
        kind=Kinds.DIAGNOSTIC, status=JobStatus.RUNNING, awaiting_children=True, celery_task_id="p"
    )
    queued_child = Job.objects.create(kind=Kinds.DIAGNOSTIC, parent=parent, celery_task_id="c1")
    running_child = _running("w:1", parent=parent)
    done_child = Job.objects.create(
        kind=Kinds.DIAGNOSTIC, parent=parent, status=JobStatus.SUCCEEDED
    )
    services.job_cancel(job=parent, user=operator)
    for job in (parent, queued_child, running_child, done_child):
        job.refresh_from_db()
    assert parent.status == JobStatus.CANCELLED
    assert queued_child.status == JobStatus.CANCELLED
    assert (
        running_child.status == JobStatus.RUNNING and running_child.cancel_requested_at is not None
    )
    assert done_child.status == JobStatus.SUCCEEDED
    assert operator.username in parent.message


def test_cancel_a_finished_job_says_there_is_nothing_to_cancel():
    job = Job.objects.create(kind=Kinds.DIAGNOSTIC, status=JobStatus.FAILED)
    with pytest.raises(ApplicationError, match="already ended"):
        services.job_cancel(job=job)


def test_the_last_child_to_finish_advances_the_parent(django_capture_on_commit_callbacks):
    parent = Job.objects.create(
        kind=Kinds.DIAGNOSTIC, status=JobStatus.RUNNING, worker="p:1", celery_task_id="p0"
    )
    children = [_running(f"c:{i}", parent=parent, celery_task_id=f"c{i}") for i in range(3)]
    services.job_await_children(job_id=parent.pk, worker="p:1", next_stage="summarize")
    parent.refresh_from_db()
    assert parent.awaiting_children and parent.stage == "summarize" and parent.worker == ""
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.job_finish(job_id=children[0].pk, worker="c:0", status=JobStatus.SUCCEEDED)
        services.job_finish(
            job_id=children[1].pk, worker="c:1", status=JobStatus.FAILED, error="boom"
        )
    parent.refresh_from_db()
    assert parent.awaiting_children and callbacks == [], "not advanced while a child runs"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.job_finish(job_id=children[2].pk, worker="c:2", status=JobStatus.SUCCEEDED)
    parent.refresh_from_db()
    assert not parent.awaiting_children
    assert parent.celery_task_id != "p0"
    assert len(callbacks) == 1, "the parent's task is sent again, once"


def test_children_that_end_before_the_parent_waits_still_advance_it(
    django_capture_on_commit_callbacks,
):
    parent = Job.objects.create(
        kind=Kinds.DIAGNOSTIC, status=JobStatus.RUNNING, worker="p:1", celery_task_id="p0"
    )
    Job.objects.create(kind=Kinds.DIAGNOSTIC, parent=parent, status=JobStatus.SUCCEEDED)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.job_await_children(job_id=parent.pk, worker="p:1", next_stage="next")
    parent.refresh_from_db()
    assert not parent.awaiting_children
    assert len(callbacks) == 1


def test_finish_by_a_worker_that_lost_the_job_writes_nothing():
    job = _running("new:2")
    services.job_finish(job_id=job.pk, worker="old:1", status=JobStatus.FAILED, error="late")
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and job.error == ""


@override_settings(STEPLAB_PROGRESS_MIN_INTERVAL=60.0)
def test_progress_writes_are_throttled_but_checkpoints_are_not():
    job = _running("w:1")
    ctx = JobContext(job, worker="w:1")
    ctx.progress(0.1, "first", step=1, metrics={"loss": 1.0})  # the first report writes
    for i in range(2, 50):
        ctx.progress(i / 100, f"step {i}", step=i, metrics={"loss": 1.0 / i})
    job.refresh_from_db()
    assert job.message == "first", "later reports wait for the interval"
    assert JobMetricPoint.objects.filter(job=job).count() == 1
    ctx.checkpoint(completed_steps=49)
    job.refresh_from_db()
    assert job.message == "step 49"
    assert job.state == {"completed_steps": 49}
    assert list(JobMetricPoint.objects.filter(job=job).values_list("step", flat=True)) == list(
        range(1, 50)
    )


def test_progress_raises_when_cancel_was_requested_or_the_job_was_taken_over():
    job = _running("w:1")
    ctx = JobContext(job, worker="w:1")
    Job.objects.filter(pk=job.pk).update(cancel_requested_at=timezone.now())
    with pytest.raises(JobCancelled):
        ctx.progress(0.5, force=True)
    other = _running("w:1")
    ctx2 = JobContext(other, worker="w:1")
    Job.objects.filter(pk=other.pk).update(worker="someone-else:9")
    with pytest.raises(JobLost):
        ctx2.progress(0.5, force=True)


def test_metric_values_must_be_numbers():
    ctx = JobContext(_running("w:1"), worker="w:1")
    with pytest.raises(TypeError, match="metric values must be numbers"):
        ctx.progress(0.1, metrics={"loss": "low"})


def test_eta_and_series_for_the_job_page():
    job = _running("w:1", age=10.0, progress=0.25)
    eta = selectors.job_eta_seconds(job=job)
    assert eta == pytest.approx(30.0, rel=0.05)
    JobMetricPoint.objects.bulk_create(
        [
            JobMetricPoint(job=job, step=s, values={"loss": 1 / s, "acc": s / 10})
            for s in range(1, 6)
        ]
    )
    series = selectors.job_metric_series(job=job)
    assert series["steps"] == [1, 2, 3, 4, 5]
    assert series["series"]["acc"] == [0.1, 0.2, 0.3, 0.4, 0.5]


def test_a_queued_job_on_a_queue_no_worker_consumes_is_warned_about():
    now = timezone.now()
    WorkerPresence.objects.create(
        hostname="cpu@h", queues=["default", "rollouts"], started_at=now, last_seen_at=now
    )
    WorkerPresence.objects.create(
        hostname="old@h", queues=["gpu"], started_at=now, last_seen_at=now - timedelta(hours=1)
    )
    stuck = Job.objects.create(kind=Kinds.DIAGNOSTIC, queue="gpu")
    fine = Job.objects.create(kind=Kinds.DIAGNOSTIC, queue="default")
    rows, workers = selectors.queue_overview()
    by_name = {r.name: r for r in rows}
    assert by_name["gpu"].orphaned and not by_name["default"].orphaned
    assert by_name["default"].consumers == ["cpu@h"]
    assert [w.online for w in workers] == [True, False]
    assert "No online worker consumes the 'gpu' queue" in selectors.queue_warning_for(
        job=stuck, queue_rows=rows
    )
    assert selectors.queue_warning_for(job=fine, queue_rows=rows) == ""

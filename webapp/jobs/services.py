"""Job services: every change of a Job row goes through here.

Lifecycle::

    job_enqueue ─► QUEUED ─(worker: job_start)─► RUNNING ─(job_finish)─► SUCCEEDED | FAILED | CANCELLED
                                                   │  ▲
                      job_await_children ──────────┘  └── the last child's end (job_child_finished)
                                                          re-sends the parent's task at its next stage

A running job's worker refreshes ``heartbeat_at``; ``jobs_reap_dead`` finds running jobs whose
heartbeat is too old and re-queues them (resumable kinds, which skip finished work using their
``state``) or fails them with a message that says what happened.

Webapp never imports ``workers``: tasks are sent by their registered names.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from celery import current_app as celery_app
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from trainer_core.sandboxes import reclaim
from webapp.common.errors import ApplicationError
from webapp.common.masking import mask_url
from webapp.jobs.kinds import find_kind, get_kind
from webapp.jobs.models import (
    TERMINAL_STATUSES,
    Job,
    JobMetricPoint,
    JobStatus,
    WorkerPresence,
)
from webapp.jobs.names import ALL_QUEUES

logger = logging.getLogger(__name__)


def _new_task_id() -> str:
    return str(uuid.uuid4())


def _locked(job_id: int) -> Job | None:
    """The job row, locked for the rest of the transaction (SQLite: the IMMEDIATE transaction
    already holds the database's write lock)."""
    return Job.objects.select_for_update().filter(pk=job_id).first()


def _append_log(job: Job, line: str) -> None:
    stamp = timezone.now().strftime("%H:%M:%S")
    lines = (job.log_tail.splitlines() if job.log_tail else []) + [f"{stamp} {line}"]
    job.log_tail = "\n".join(lines[-settings.STEPLAB_LOG_TAIL_LINES :])


def _send_task(job_id: int, task_name: str, task_id: str, queue: str) -> None:
    """Hand the job to the broker. Called on commit, so the worker always finds the row."""
    try:
        celery_app.send_task(task_name, args=[job_id], task_id=task_id, queue=queue)
    except Exception as exc:  # the broker is down or misconfigured
        broker = celery_app.conf.broker_url or ""
        message = (
            f"Could not hand the job to the broker ({mask_url(broker)}): {exc}. "
            "Check that the broker is running and CELERY_BROKER_URL is right, then launch the job again."
        )
        logger.exception("sending task %s for job %s failed", task_name, job_id)
        Job.objects.filter(pk=job_id, celery_task_id=task_id).exclude(
            status__in=TERMINAL_STATUSES
        ).update(status=JobStatus.FAILED, error=message, finished_at=timezone.now(), worker="")


def _dispatch_on_commit(job: Job) -> None:
    kind = get_kind(job.kind)
    transaction.on_commit(
        partial(_send_task, job.pk, kind.task_name, job.celery_task_id, job.queue)
    )


# --- launching and cancelling -------------------------------------------------------------


def job_enqueue(
    *,
    kind: str,
    params: dict[str, Any] | None = None,
    user: Any = None,
    parent: Job | None = None,
    queue: str | None = None,
    message: str = "Waiting for a worker.",
) -> Job:
    """Create the Job row and send its task by name once the transaction commits."""
    job_kind = get_kind(kind)
    queue = queue or job_kind.queue
    if queue not in ALL_QUEUES:
        raise ApplicationError(f"Unknown queue {queue!r}; use one of {', '.join(ALL_QUEUES)}.")
    if user is not None and not getattr(user, "is_authenticated", False):
        user = None
    with transaction.atomic():
        job = Job.objects.create(
            kind=kind,
            params=params or {},
            user=user if user is not None else (parent.user if parent is not None else None),
            parent=parent,
            stage="",  # every job starts at its own first stage, children that fan out too
            queue=queue,
            celery_task_id=_new_task_id(),
            message=message,
        )
        _dispatch_on_commit(job)
    return job


def _finish_locked(
    job: Job, *, status: str, message: str = "", error: str = "", tb: str = ""
) -> None:
    job.status = status
    job.finished_at = timezone.now()
    job.worker = ""
    job.awaiting_children = False
    if status == JobStatus.SUCCEEDED:
        job.progress = 1.0
    if message:
        job.message = message[:500]
    if error:
        job.error = error
    if tb:
        job.traceback = tb
    _append_log(job, f"{status}: {message or error}".rstrip(": "))
    job.save()
    kind = find_kind(job.kind)
    if kind is not None and kind.on_end is not None:
        transaction.on_commit(partial(_job_ended, kind.on_end, job.pk, dict(job.params or {})))


def _job_ended(on_end, job_id: int, params: dict[str, Any]) -> None:
    try:
        on_end(params)
    except Exception:
        logger.exception("the end hook of job %s failed", job_id)


def _revoke(task_id: str) -> None:
    if not getattr(settings, "CELERY_WORKER_ENABLE_REMOTE_CONTROL", True):
        return  # the embedded broker has no broadcast; the worker's guard skips the job anyway
    try:
        celery_app.control.revoke(task_id)
    except Exception:
        logger.warning(
            "could not broadcast revoke for %s; the worker will skip it on start", task_id
        )


def job_cancel(*, job: Job, user: Any = None) -> Job:
    """Cancel a job and its unfinished children.

    A queued job (or a parent waiting on children) ends cancelled at once. A running job is
    asked to stop: its worker stops at its next progress report and records ``cancelled``.
    """
    who = getattr(user, "username", "") or "system"
    finished_now = False
    with transaction.atomic():
        locked = _locked(job.pk)
        if locked is None:
            raise ApplicationError(f"Job {job.pk} no longer exists.")
        if locked.is_terminal:
            raise ApplicationError(
                f"Job {locked.pk} has already ended ({locked.status}); there is nothing to cancel."
            )
        if locked.status == JobStatus.QUEUED or locked.awaiting_children or not locked.worker:
            _finish_locked(locked, status=JobStatus.CANCELLED, message=f"Cancelled by {who}.")
            transaction.on_commit(partial(_revoke, locked.celery_task_id))
            finished_now = True
        elif locked.cancel_requested_at is None:
            locked.cancel_requested_at = timezone.now()
            locked.message = f"Cancelling (asked by {who}); stops at its next progress report."
            _append_log(locked, f"cancel requested by {who}")
            locked.save(update_fields=["cancel_requested_at", "message", "log_tail"])
        child_ids = list(
            locked.children.exclude(status__in=TERMINAL_STATUSES).values_list("pk", flat=True)
        )
    for child_id in child_ids:
        child = Job.objects.filter(pk=child_id).first()
        if child is not None and not child.is_terminal:
            try:
                job_cancel(job=child, user=user)
            except ApplicationError:
                pass  # it ended meanwhile
    locked.refresh_from_db()
    if finished_now and locked.parent_id:
        job_child_finished(child=locked)
    return locked


# --- the worker side ------------------------------------------------------------------------


def _heartbeat_stale(job: Job, now) -> bool:
    last = job.heartbeat_at or job.started_at
    if last is None:
        return True
    return (now - last).total_seconds() > settings.STEPLAB_JOB_DEAD_AFTER_SECONDS


def job_start(*, job_id: int, task_id: str | None, worker: str) -> Job | None:
    """The guard every job task passes first. Returns the job, now RUNNING and claimed by
    ``worker``, or None when this delivery must not run it (and says why in the worker log)."""
    finished_now = None
    with transaction.atomic():
        job = _locked(job_id)
        if job is None:
            logger.info("job %s does not exist (deleted?); dropping the task", job_id)
            return None
        if job.is_terminal:
            logger.info("job %s already %s; skipping", job_id, job.status)
            return None
        if task_id and job.celery_task_id and task_id != job.celery_task_id:
            logger.info(
                "job %s: task %s is a stale delivery (current task %s); skipping",
                job_id,
                task_id,
                job.celery_task_id,
            )
            return None
        now = timezone.now()
        if job.cancel_requested_at is not None:
            _finish_locked(
                job, status=JobStatus.CANCELLED, message="Cancelled before it could resume."
            )
            finished_now = job
        elif job.status == JobStatus.RUNNING and job.worker and not _heartbeat_stale(job, now):
            logger.info(
                "job %s is running on %s (heartbeat fresh); dropping duplicate delivery",
                job_id,
                job.worker,
            )
            return None
        else:
            if job.status == JobStatus.RUNNING and job.worker:
                _append_log(job, f"worker {job.worker} stopped responding; {worker} takes over")
                job.attempts += 1
            elif job.status == JobStatus.QUEUED:
                job.attempts += 1
            if job.attempts > 1 and job.status == JobStatus.QUEUED:
                _append_log(job, f"attempt {job.attempts} starts on {worker}")
            elif job.started_at is None:
                _append_log(job, f"started on {worker}")
            job.status = JobStatus.RUNNING
            job.worker = worker
            job.heartbeat_at = now
            job.started_at = job.started_at or now
            job.message = "Running." if job.attempts <= 1 else f"Resumed (attempt {job.attempts})."
            job.save()
    if finished_now is not None:
        if finished_now.parent_id:
            job_child_finished(child=finished_now)
        return None
    return job


@dataclass(frozen=True)
class ProgressAck:
    owned: bool  # False: the job was taken over, ended or deleted; stop working on it
    cancel_requested: bool


def job_record_progress(
    *,
    job_id: int,
    worker: str,
    progress: float | None = None,
    message: str | None = None,
    log_tail: str | None = None,
    metric_points: list[tuple[int, dict[str, Any]]] | None = None,
    state: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
) -> ProgressAck:
    """One write of a running job's progress (the caller throttles; see JobContext), with the
    heartbeat. Metric points and state are written in the same transaction, so a resumed job's
    state always matches the series it has recorded; a job has one point per step (see
    ``_metric_points_write``)."""
    updates: dict[str, Any] = {"heartbeat_at": timezone.now()}
    if progress is not None:
        updates["progress"] = max(0.0, min(1.0, float(progress)))
    if message is not None:
        updates["message"] = message[:500]
    if log_tail is not None:
        updates["log_tail"] = log_tail
    if state is not None:
        updates["state"] = state
    if result is not None:
        updates["result"] = result
    with transaction.atomic():
        owned = (
            Job.objects.filter(pk=job_id, worker=worker, status=JobStatus.RUNNING).update(**updates)
            == 1
        )
        if owned and metric_points:
            _metric_points_write(job_id, metric_points)
    row = Job.objects.filter(pk=job_id).values("cancel_requested_at").first()
    return ProgressAck(owned=owned, cancel_requested=bool(row and row["cancel_requested_at"]))


def _metric_points_write(job_id: int, points: list[tuple[int, dict[str, Any]]]) -> None:
    """Store metric points with one point per step: a step recorded again (a run resumed from
    its last checkpoint re-does the steps after it; two reports of one step) updates that
    step's point, its values merged with the newer winning. Called in the transaction whose
    update of the job row serializes the writers of one job."""
    merged: dict[int, dict[str, Any]] = {}
    for step, values in points:
        merged[int(step)] = {**merged.get(int(step), {}), **values}
    existing = {
        point.step: point
        for point in JobMetricPoint.objects.filter(job_id=job_id, step__in=list(merged))
    }
    now = timezone.now()
    changed = []
    for step, point in existing.items():
        point.values = {**point.values, **merged.pop(step)}
        point.recorded_at = now
        changed.append(point)
    if changed:
        JobMetricPoint.objects.bulk_update(changed, ["values", "recorded_at"])
    JobMetricPoint.objects.bulk_create(
        [JobMetricPoint(job_id=job_id, step=step, values=values) for step, values in merged.items()]
    )


def job_heartbeat(*, job_id: int, worker: str) -> ProgressAck:
    return job_record_progress(job_id=job_id, worker=worker)


def job_finish(
    *,
    job_id: int,
    worker: str,
    status: str,
    message: str = "",
    error: str = "",
    tb: str = "",
) -> Job | None:
    """Record a job's final status (the worker wrapper calls this in ``finally``)."""
    if status not in TERMINAL_STATUSES:
        raise ValueError(f"{status!r} is not a final status")
    with transaction.atomic():
        job = _locked(job_id)
        if job is None:
            return None
        if job.is_terminal or job.worker != worker:
            return job  # cancelled, or taken over by another worker meanwhile
        if status == JobStatus.SUCCEEDED and not message:
            # keep the work's own last word ("Ran 20 steps."), unless it was a progress line
            message = job.message if job.message and job.progress >= 1.0 else "Done."
        _finish_locked(job, status=status, message=message, error=error, tb=tb)
    if job.parent_id:
        job_child_finished(child=job)
    return job


def job_requeue_for_retry(*, job_id: int, worker: str, reason: str) -> bool:
    """A transient error: put the job back in the queue under the same task id (Celery's retry)."""
    with transaction.atomic():
        job = _locked(job_id)
        if job is None or job.is_terminal or job.worker != worker:
            return False
        job.status = JobStatus.QUEUED
        job.worker = ""
        job.message = f"Retrying after a transient error: {reason}"[:500]
        _append_log(job, job.message)
        job.save()
    return True


def job_await_children(*, job_id: int, worker: str, next_stage: str) -> Job | None:
    """A parent has scheduled its children and returns; it resumes at ``next_stage`` when the
    last child ends. If they have all ended already, it is advanced at once."""
    with transaction.atomic():
        job = _locked(job_id)
        if job is None or job.is_terminal or job.worker != worker:
            return job
        job.stage = next_stage
        job.awaiting_children = True
        job.worker = ""
        pending = job.children.exclude(status__in=TERMINAL_STATUSES).count()
        job.message = f"Waiting for {pending} child job{'s' if pending != 1 else ''}."
        _append_log(job, f"waiting for children; next stage: {next_stage}")
        job.save()
        if pending == 0:
            _advance_locked(job)
    return job


def _advance_locked(parent: Job) -> None:
    parent.awaiting_children = False
    parent.worker = ""
    parent.heartbeat_at = timezone.now()  # the reaper gives the new delivery its full grace
    parent.celery_task_id = _new_task_id()
    parent.message = f"Children done; advancing to stage {parent.stage!r}."
    _append_log(parent, parent.message)
    parent.save()
    _dispatch_on_commit(parent)


def job_report_for_children(*, job_id: int, progress: float, message: str) -> None:
    """Progress of a parent that waits for its children (its children report it, since the
    parent runs no code meanwhile). Only while it waits; never moves progress backwards."""
    Job.objects.filter(
        pk=job_id, status=JobStatus.RUNNING, awaiting_children=True, progress__lte=progress
    ).update(progress=max(0.0, min(1.0, progress)), message=message[:500])


def job_child_finished(*, child: Job) -> None:
    """A child ended: if it was the parent's last unfinished child, advance the parent."""
    if not child.parent_id:
        return
    with transaction.atomic():
        parent = _locked(child.parent_id)
        if parent is None or parent.is_terminal or not parent.awaiting_children:
            return
        if parent.children.exclude(status__in=TERMINAL_STATUSES).exists():
            return
        _advance_locked(parent)


# --- dead workers ---------------------------------------------------------------------------


def jobs_reap_dead(*, now=None) -> list[int]:
    """Find running jobs whose worker stopped (heartbeat older than the limit) and re-queue them
    (resumable kinds, up to STEPLAB_JOB_MAX_ATTEMPTS) or fail them with a clear message.

    A job no worker holds is not dead: a parent waiting on its children, or one whose children
    have ended and which waits in the broker's queue for a free worker to run its next stage
    (when every worker is busy with long jobs, that wait can last longer than the limit)."""
    now = now or timezone.now()
    limit = now - timedelta(seconds=settings.STEPLAB_JOB_DEAD_AFTER_SECONDS)
    candidates = list(
        Job.objects.filter(status=JobStatus.RUNNING, awaiting_children=False)
        .exclude(worker="")
        .filter(Q(heartbeat_at__lt=limit) | Q(heartbeat_at__isnull=True, started_at__lt=limit))
        .values_list("pk", flat=True)
    )
    reaped: list[int] = []
    for job_id in candidates:
        ended = None
        with transaction.atomic():
            qs = Job.objects.select_for_update(
                skip_locked=connection.features.has_select_for_update_skip_locked
            )
            job = qs.filter(pk=job_id).first()
            if (
                job is None
                or job.status != JobStatus.RUNNING
                or job.awaiting_children
                or not job.worker
                or not _heartbeat_stale(job, now)
            ):
                continue
            last = job.heartbeat_at or job.started_at
            silent = int((now - last).total_seconds()) if last else 0
            who = job.worker
            seen = timezone.localtime(last).strftime("%Y-%m-%d %H:%M:%S %Z") if last else "never"
            kind = find_kind(job.kind)
            if job.cancel_requested_at is not None:
                _finish_locked(
                    job,
                    status=JobStatus.CANCELLED,
                    message=f"Cancelled ({who} had stopped responding).",
                )
                ended = job
            elif (
                kind is not None
                and kind.resumable
                and job.attempts < settings.STEPLAB_JOB_MAX_ATTEMPTS
            ):
                job.status = JobStatus.QUEUED
                job.worker = ""
                job.celery_task_id = _new_task_id()
                job.message = (
                    f"Worker {who} stopped responding (last heartbeat {seen}, {silent}s ago); "
                    f"re-queued as attempt {job.attempts + 1} of {settings.STEPLAB_JOB_MAX_ATTEMPTS}. "
                    "Finished work is kept."
                )[:500]
                _append_log(job, job.message)
                job.save()
                _dispatch_on_commit(job)
            else:
                if kind is not None and kind.resumable:
                    why = (
                        f"it has been tried {job.attempts} times (STEPLAB_JOB_MAX_ATTEMPTS); "
                        "look at the log for what kills the worker (memory? a crash?) before launching it again"
                    )
                else:
                    why = "this kind of job cannot resume part-way; launch it again"
                error = (
                    f"The worker running this job ({who}) stopped responding: no heartbeat since {seen} "
                    f"({silent}s; the limit is {int(settings.STEPLAB_JOB_DEAD_AFTER_SECONDS)}s). Not re-queued: {why}."
                )
                _finish_locked(
                    job, status=JobStatus.FAILED, message="Its worker died.", error=error
                )
                ended = job
            reaped.append(job_id)
            logger.warning("reaped dead job %s (%s): %s", job_id, job.kind, job.message)
        if ended is not None and ended.parent_id:
            job_child_finished(child=ended)
    sandboxes_reclaim()
    return reaped


def sandboxes_reclaim() -> list[dict[str, Any]]:
    """Remove what the sandboxes of dead processes on this host left behind (workspaces in
    /tmp, cgroups, containers: ``trainer_core.sandboxes.reclaim``); every reaper pass runs it,
    so a killed worker's sandboxes go as soon as any worker (or ``steplab jobs reap``) runs."""
    try:
        return reclaim.reclaim_dead()
    except Exception:
        logger.exception("reclaiming the sandboxes of dead processes failed")
        return []


# --- worker presence ----------------------------------------------------------------------


def worker_presence_record(
    *, hostname: str, queues: list[str], pid: int, concurrency: int, pool: str, started_at=None
) -> None:
    """A worker says it is alive and which queues it consumes (every few seconds)."""
    now = timezone.now()
    WorkerPresence.objects.update_or_create(
        hostname=hostname,
        defaults={
            "queues": sorted(queues),
            "pid": pid,
            "concurrency": concurrency,
            "pool": pool,
            "last_seen_at": now,
            "stopped_at": None,
        },
        create_defaults={
            "queues": sorted(queues),
            "pid": pid,
            "concurrency": concurrency,
            "pool": pool,
            "started_at": started_at or now,
            "last_seen_at": now,
        },
    )


def worker_presence_stop(*, hostname: str) -> None:
    WorkerPresence.objects.filter(hostname=hostname).update(stopped_at=timezone.now())

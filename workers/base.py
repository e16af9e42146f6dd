"""The wrapper every job task uses.

    @job_task(Tasks.DIAGNOSTIC)
    def run_diagnostic(ctx):
        return diagnostic_run(ctx=ctx)

It guards (a terminal, stale or duplicate delivery is skipped), marks the job running, hands
the service a JobContext (progress callback, heartbeat, cancel), records the final status in
``finally``, and retries only the transient errors it is told about. Tasks are ``acks_late`` with
reject-on-worker-lost: the services are idempotent, and a re-delivered task skips finished work.
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Callable

from webapp.common.errors import ApplicationError
from webapp.config.celery import app
from webapp.jobs import services
from webapp.jobs.context import JobCancelled, JobContext, JobLost, WaitForChildren
from webapp.jobs.models import JobStatus

logger = logging.getLogger(__name__)

# Errors worth retrying everywhere: the database or broker blinked.
DEFAULT_TRANSIENT: tuple[type[BaseException], ...] = ()


def _default_transient() -> tuple[type[BaseException], ...]:
    from django.db import InterfaceError, OperationalError

    return (OperationalError, InterfaceError)


def worker_id(task) -> str:
    hostname = getattr(task.request, "hostname", None) or os.uname().nodename
    return f"{hostname}:{os.getpid()}"


def run_job(
    task,
    job_id: int,
    work: Callable[[JobContext], WaitForChildren | None],
    *,
    transient: tuple[type[BaseException], ...] = (),
    max_retries: int = 3,
) -> None:
    worker = worker_id(task)
    job = services.job_start(job_id=job_id, task_id=task.request.id, worker=worker)
    if job is None:
        return
    transient = transient + _default_transient()
    ctx = JobContext(job, worker=worker)
    ctx.start_heartbeat()
    status: str | None = JobStatus.FAILED
    message = error = tb = ""
    waiting: WaitForChildren | None = None
    retry_exc: BaseException | None = None
    try:
        outcome = work(ctx)
        if isinstance(outcome, WaitForChildren):
            waiting = outcome
            status = None
        else:
            status = JobStatus.SUCCEEDED
    except JobCancelled:
        status, message = JobStatus.CANCELLED, "Cancelled."
    except JobLost:
        status = None  # someone else owns the job now; write nothing
        logger.warning("job %s: ownership lost; stopping without a final write", job_id)
    except ApplicationError as exc:
        status, message, error = JobStatus.FAILED, "Failed.", exc.message
    except transient as exc:
        if task.request.retries < max_retries:
            status, retry_exc = None, exc
        else:
            status, message = JobStatus.FAILED, "Failed after retries."
            error, tb = f"{type(exc).__name__}: {exc}", traceback.format_exc()
    except Exception as exc:
        status, message = JobStatus.FAILED, "Failed."
        error, tb = f"{type(exc).__name__}: {exc}", traceback.format_exc()
    finally:
        ctx.stop_heartbeat()
        try:
            if status is not None or waiting is not None or retry_exc is not None:
                ctx.flush()
        except (JobLost, JobCancelled):
            pass
        except Exception:
            logger.exception("job %s: could not write its last progress", job_id)
        if waiting is not None:
            services.job_await_children(job_id=job_id, worker=worker, next_stage=waiting.next_stage)
        elif retry_exc is not None:
            services.job_requeue_for_retry(
                job_id=job_id, worker=worker, reason=f"{type(retry_exc).__name__}: {retry_exc}"
            )
        elif status is not None:
            services.job_finish(
                job_id=job_id, worker=worker, status=status, message=message, error=error, tb=tb
            )
    if retry_exc is not None:
        countdown = min(60, 2 ** (task.request.retries + 1))
        raise task.retry(exc=retry_exc, countdown=countdown, max_retries=max_retries)


def job_task(name: str, *, transient: tuple[type[BaseException], ...] = (), max_retries: int = 3):
    """Register a job task under ``name`` (a constant of ``webapp.jobs.names.Tasks``)."""

    def decorate(work: Callable[[JobContext], WaitForChildren | None]):
        @app.task(
            name=name, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True
        )
        def task(self, job_id: int) -> None:
            run_job(self, job_id, work, transient=transient, max_retries=max_retries)

        task.work = work
        return task

    return decorate

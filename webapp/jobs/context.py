"""JobContext: what a service running inside a job uses to report, checkpoint and fan out.

The worker wrapper (``workers/base.py``) builds one per run and hands it to the service. The
service reports with ``ctx.progress(...)`` (throttled writes), or passes ``ctx.on_progress`` to
trainer_core functions, which call it with ``ProgressEvent``s. A background thread keeps the
heartbeat fresh while the service works, and notices a cancel request; the next progress report
then raises ``JobCancelled``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Max

from trainer_core.progress import ProgressEvent
from trainer_core.sandboxes import registry
from webapp.jobs import services
from webapp.jobs.models import Job, JobMetricPoint

logger = logging.getLogger(__name__)


class JobCancelled(Exception):
    """Raised from a progress report when the job has been cancelled."""


class JobLost(Exception):
    """Raised when this worker no longer owns the job (it was taken over, ended or deleted)."""


@dataclass(frozen=True)
class WaitForChildren:
    """Returned by a parent's service: 'I scheduled my children; resume me at next_stage'."""

    next_stage: str


class JobContext:
    def __init__(self, job: Job, *, worker: str):
        self.job_id: int = job.pk
        self.kind: str = job.kind
        self.params: dict[str, Any] = dict(job.params or {})
        self.stage: str = job.stage
        self.attempt: int = max(1, job.attempts)
        self.state: dict[str, Any] = dict(job.state or {})
        self.result: dict[str, Any] = dict(job.result or {})
        self.user_id = job.user_id
        self.worker = worker
        self._job = job
        self._tail: deque[str] = deque(
            job.log_tail.splitlines() if job.log_tail else [],
            maxlen=settings.STEPLAB_LOG_TAIL_LINES,
        )
        self._lock = threading.RLock()
        self._pending_progress: float | None = None
        self._pending_message: str | None = None
        self._pending_points: list[tuple[int, dict[str, Any]]] = []
        self._last_step: int | None = None  # the highest step reported so far
        self._steps_loaded = False  # whether _last_step counts the earlier attempts' points
        self._log_dirty = False
        self._state_dirty = False
        self._result_dirty = False
        self._last_flush = 0.0
        self._cancelled = threading.Event()
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._on_cancel: list[Any] = []

    # --- reporting -------------------------------------------------------------------------

    @property
    def resumed(self) -> bool:
        """True when an earlier attempt of this job ran (its state says how far it got)."""
        return self.attempt > 1

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise JobCancelled / JobLost if the job should stop now."""
        if self._lost.is_set():
            raise JobLost(f"job {self.job_id} is no longer owned by {self.worker}")
        if self._cancelled.is_set():
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def progress(
        self,
        fraction: float | None = None,
        message: str | None = None,
        *,
        step: int | None = None,
        metrics: dict[str, float] | None = None,
        state: dict[str, Any] | None = None,
        force: bool = False,
    ) -> None:
        """Report progress (0..1), a message, a metrics point at ``step`` and checkpoint state.
        Writes are throttled; metrics and state are written together, in order."""
        self.check()
        with self._lock:
            if fraction is not None:
                self._pending_progress = fraction
            if message is not None:
                self._pending_message = message
            if metrics:
                step = self._next_step() if step is None else int(step)
                self._last_step = step if self._last_step is None else max(self._last_step, step)
                self._pending_points.append((step, {k: _number(v) for k, v in metrics.items()}))
            if state:
                self.state.update(state)
                self._state_dirty = True
            due = time.monotonic() - self._last_flush >= settings.STEPLAB_PROGRESS_MIN_INTERVAL
        if force or due:
            self.flush()
            self.check()

    def _next_step(self) -> int:
        """The step of a metrics point reported without one: after every step recorded so far
        (by this attempt or an earlier one), so such points form a series too."""
        if not self._steps_loaded:
            self._steps_loaded = True
            recorded = JobMetricPoint.objects.filter(job_id=self.job_id).aggregate(m=Max("step"))
            steps = [s for s in (recorded["m"], self._last_step) if s is not None]
            self._last_step = max(steps) if steps else None
        return (self._last_step if self._last_step is not None else -1) + 1

    def on_progress(self, event: ProgressEvent) -> None:
        """The callback trainer_core functions take (``on_progress=ctx.on_progress``)."""
        for line in event.log:
            self.log(line)
        self.progress(event.fraction, event.message, step=event.step, metrics=event.metrics or None)

    def log(self, line: str) -> None:
        stamp = time.strftime("%H:%M:%S", time.gmtime())
        with self._lock:
            for part in str(line).splitlines() or [""]:
                self._tail.append(f"{stamp} {part}")
            self._log_dirty = True

    def checkpoint(self, **state: Any) -> None:
        """Save resumable state now (not throttled), with everything pending."""
        self.progress(state=state, force=True)

    def set_result(self, **data: Any) -> None:
        with self._lock:
            self.result.update(data)
            self._result_dirty = True

    def flush(self) -> None:
        with self._lock:
            kwargs: dict[str, Any] = {"job_id": self.job_id, "worker": self.worker}
            if self._pending_progress is not None:
                kwargs["progress"] = self._pending_progress
            if self._pending_message is not None:
                kwargs["message"] = self._pending_message
            if self._pending_points:
                kwargs["metric_points"] = list(self._pending_points)
            if self._log_dirty:
                kwargs["log_tail"] = "\n".join(self._tail)
            if self._state_dirty:
                kwargs["state"] = dict(self.state)
            if self._result_dirty:
                kwargs["result"] = dict(self.result)
            ack = services.job_record_progress(**kwargs)
            self._pending_progress = None
            self._pending_message = None
            self._pending_points = []
            self._log_dirty = self._state_dirty = self._result_dirty = False
            self._last_flush = time.monotonic()
        self._apply_ack(ack)

    def on_cancel(self, callback) -> None:
        """Call ``callback()`` (from the heartbeat thread) as soon as a cancel is seen, e.g. to
        kill a sandbox in the middle of a long step. Called at most once."""
        with self._lock:
            self._on_cancel.append(callback)

    def _apply_ack(self, ack: services.ProgressAck) -> None:
        if not ack.owned:
            self._lost.set()
        if ack.cancel_requested and not self._cancelled.is_set():
            self._cancelled.set()
            with self._lock:
                callbacks, self._on_cancel = list(self._on_cancel), []
            for callback in callbacks:
                try:
                    callback()
                except Exception:
                    logger.exception("on_cancel callback of job %s failed", self.job_id)

    # --- fan-out ----------------------------------------------------------------------------

    def spawn(
        self, kind: str, params: dict[str, Any] | None = None, *, queue: str | None = None
    ) -> Job:
        """Schedule a child job. It starts right away on any worker."""
        self.check()
        parent = Job.objects.get(pk=self.job_id)
        return services.job_enqueue(kind=kind, params=params, parent=parent, queue=queue)

    def wait_for_children(self, next_stage: str) -> WaitForChildren:
        """Return this from the service: the parent resumes at ``next_stage`` when its last
        child ends. The worker is free meanwhile."""
        return WaitForChildren(next_stage=next_stage)

    def children(self):
        return Job.objects.filter(parent_id=self.job_id).order_by("pk")

    # --- heartbeat ----------------------------------------------------------------------------

    def start_heartbeat(self) -> None:
        # the sandboxes this process starts from now on are this job's (the reaper names the job
        # when it reclaims them after the worker was killed)
        registry.set_owner(f"job {self.job_id} ({self.kind}) on {self.worker}")
        self._heartbeat_thread = threading.Thread(
            target=self._heartbeat_loop, name=f"job-{self.job_id}-heartbeat", daemon=True
        )
        self._heartbeat_thread.start()

    def stop_heartbeat(self) -> None:
        registry.set_owner("")
        self._stop.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join(timeout=10)

    def _heartbeat_loop(self) -> None:
        interval = settings.STEPLAB_JOB_HEARTBEAT_SECONDS
        try:
            while not self._stop.wait(interval):
                try:
                    self._apply_ack(services.job_heartbeat(job_id=self.job_id, worker=self.worker))
                except Exception:
                    logger.exception("heartbeat for job %s failed", self.job_id)
        finally:
            connection.close()


def _number(value: Any) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"metric values must be numbers, got {value!r}") from None
    return f if f == f and f not in (float("inf"), float("-inf")) else None

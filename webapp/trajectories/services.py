"""Trajectory services: two ways in.

* upload: files from the import form are staged on disk (``uploads_stage``) and imported at once
  (``trajectories_import_uploads``) or by a worker (``trajectories_import_enqueue``; the runner is
  in ``jobs.py``).
* import files (``trajectories_import_files``): every file that reads is stored and every file
  that does not is reported, each file all or nothing (a zip: each member); the result has one
  row per file (format, trajectories, steps, duplicates, error). ``all_or_nothing=True`` stores
  nothing when any file is refused. Reading is bounded by the ``STEPLAB_IMPORT_MAX_*`` settings.
  On PostgreSQL a thread reads the files, and builds the rows of their trajectories (with
  their search documents: ``rows.prepare``), while the ones read before are stored.
* import: canonical trajectories from ``trainer_core.recording.importers`` (tool steps and message
  steps, schema 1.1); a content hash over the ordered steps is unique among imports, so
  re-importing writes nothing and reports the duplicates. All or nothing. The rows go in in bulk
  (``rows.py``: COPY on PostgreSQL). A trajectory whose run errored (``metadata["error"]``) is
  stored as failed.
* streaming (rollouts): ``trajectory_begin`` under an idempotency key (run, task, episode, seed),
  ``trajectory_append_step`` as steps happen (an index that exists is a no-op),
  ``trajectory_finish`` with the outcome.
"""

from __future__ import annotations

import contextlib
import datetime
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any, TypeVar

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db import connections as db_connections
from django.db.models import Count, F, Q
from django.utils import timezone

from trainer_core.recording.importers import ImportFailure, ImportLimits, ImportResult, read_path
from trainer_core.recording.schema import Outcome as OutcomeSpec
from trainer_core.recording.schema import Step as StepSpec
from trainer_core.recording.schema import Trajectory as TrajectorySpec
from webapp.common.errors import ApplicationError
from webapp.jobs.models import Job
from webapp.jobs.names import Kinds
from webapp.jobs.services import job_enqueue
from webapp.trajectories import gdi, rows, selectors
from webapp.trajectories.content import content_hash, without_nul
from webapp.trajectories.models import Step, Trajectory
from webapp.trajectories.rows import insert_steps as _insert_steps
from webapp.trajectories.search import SEARCH_DOCUMENT

T = TypeVar("T")


def _summary(spec: TrajectorySpec) -> dict[str, Any]:
    outcome = spec.outcome
    reward = outcome.partial_credit if outcome.partial_credit is not None else outcome.score
    if reward is None and outcome.success is not None:
        reward = 1.0 if outcome.success else 0.0
    tokens_in = spec.usage.tokens_in or sum(s.tokens_in or 0 for s in spec.steps)
    tokens_out = spec.usage.tokens_out or sum(s.tokens_out or 0 for s in spec.steps)
    return {
        "task_ref": spec.task.id[:300],
        "task_set_name": spec.task.task_set[:200],
        "prompt": spec.task.prompt,
        "domain": spec.task.domain[:64],
        "agent": spec.agent[:120],
        "model": spec.model[:200],
        "policy": spec.policy[:200],
        "environment": spec.environment[:120],
        "source_format": spec.source_format[:64],
        "success": outcome.success,
        "reward": reward,
        "step_count": sum(1 for s in spec.steps if s.kind != "message"),
        "message_count": sum(1 for s in spec.steps if s.kind == "message"),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost_usd": spec.usage.cost_usd,
        "outcome": outcome.model_dump(mode="json"),
        "metadata": spec.metadata,
        "schema_version": spec.schema_version,
    }


def _aware(moment):
    """Sources often write timestamps without a zone; they are taken as UTC."""
    if moment is not None and timezone.is_naive(moment):
        return timezone.make_aware(moment, datetime.UTC)
    return moment


SEARCH_UPDATE = (
    f"UPDATE trajectories_trajectory t SET search_vector = {SEARCH_DOCUMENT} WHERE t.id = ANY(%s)"
)


def trajectories_index_for_search(*, ids: list[int]) -> None:
    """Refresh the full-text search document of these trajectories (PostgreSQL; SQLite searches
    by substring and needs nothing)."""
    if connection.vendor != "postgresql" or not ids:
        return
    with connection.cursor() as cursor:
        for start in range(0, len(ids), 1000):
            cursor.execute(SEARCH_UPDATE, [list(ids[start : start + 1000])])


def _step_row(trajectory_id: int, step: StepSpec) -> Step:
    return Step(
        trajectory_id=trajectory_id,
        index=step.index,
        kind=step.kind,
        role=step.role or "",
        text=without_nul(step.text),
        thought=without_nul(step.thought),
        tool=without_nul(step.tool[:200]),
        params=without_nul(step.params),
        observation=without_nul(step.observation),
        exit_code=step.exit_code,
        error=without_nul(step.error),
        started_at=_aware(step.started_at),
        duration=step.duration,
        tokens_in=step.tokens_in,
        tokens_out=step.tokens_out,
        reward=step.reward,
        metadata=without_nul(step.metadata),
    )


@dataclass
class ImportSummary:
    created: list[int] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)  # {file, index, existing_id}
    # one row per file: file, format, version, trajectories, steps, duplicates, created, error
    files: list[dict[str, Any]] = field(default_factory=list)
    stored_steps: int = 0
    stored_messages: int = 0

    @property
    def steps(self) -> int:
        """How many tool-call steps the stored trajectories hold together."""
        return self.stored_steps

    @property
    def messages(self) -> int:
        """How many message steps (dialogue turns) the stored trajectories hold together."""
        return self.stored_messages

    @property
    def refused(self) -> list[dict[str, Any]]:
        """The rows of the files that were refused (each with its error)."""
        return [f for f in self.files if f.get("error")]

    def add(self, other: ImportSummary) -> None:
        self.created += other.created
        self.duplicates += other.duplicates
        self.files += other.files
        self.stored_steps += other.stored_steps
        self.stored_messages += other.stored_messages


def _file_row(result: ImportResult) -> dict[str, Any]:
    return {
        "file": result.file,
        "format": result.format,
        "version": result.format_version,
        "trajectories": len(result.trajectories),
        "steps": result.steps,
        "messages": result.messages,
        "duplicates": 0,
        "created": 0,
        "error": "",
    }


def _refused_row(failure: ImportFailure) -> dict[str, Any]:
    return {
        "file": failure.file,
        "format": "",
        "version": "",
        "trajectories": 0,
        "steps": 0,
        "messages": 0,
        "duplicates": 0,
        "created": 0,
        "error": str(failure),
    }


def trajectories_import(
    *, results: list[ImportResult], raw: dict[str, bytes] | None = None, user=None
) -> ImportSummary:
    """Store imported trajectories, all or nothing. Duplicates (same content hash as an imported
    trajectory, or twice in this batch) are reported and skipped. A file's raw bytes are kept
    (compressed, one row per distinct content) from ``raw[file]`` or the result's own ``data``
    when any of its trajectories is stored. The rows go in in bulk (``rows``: COPY on
    PostgreSQL)."""
    batch = _ImportBatch(raw=raw, user=user)
    with transaction.atomic():
        rows.compress_fast()
        batch.store(results)
    return batch.finish(results)


class _ImportBatch:
    """One import, stored in parts inside the caller's transaction: what is stored so far (the
    summary), the row of each file and the content hashes seen (a trajectory met again in a
    later part is a duplicate of the first)."""

    def __init__(
        self,
        *,
        raw: dict[str, bytes] | None,
        user,
        packed: dict | None = None,
        prepared: dict | None = None,
    ):
        self.summary = ImportSummary()
        self.raw = raw or {}
        self.user = user
        self.packed: dict[int, rows.Packed] = packed if packed is not None else {}
        # the rows of each result's trajectories, built by the reading thread (PostgreSQL)
        self.prepared: dict[int, list[rows.Prepared]] = prepared if prepared is not None else {}
        self.table: dict[int, dict[str, Any]] = {}
        self.hashes: dict[str, tuple[str, int]] = {}

    def finish(self, results: list[ImportResult]) -> ImportSummary:
        """The summary, its files in the order of ``results`` (every result stored)."""
        self.summary.files = [self.table[id(result)] for result in results]
        return self.summary

    def store(self, results: list[ImportResult]) -> None:
        """Store the trajectories of ``results`` that are new (in the caller's transaction)."""
        summary = self.summary
        planned = self._unique(results)
        existing = rows.ids_by(
            Trajectory, "content_hash", [p[3] for p in planned], source=Trajectory.Source.IMPORT
        )
        kept = []
        for result, index, spec, digest in planned:
            if digest in existing:
                summary.duplicates.append(
                    {"file": result.file, "index": index, "existing_id": existing[digest]}
                )
                self.table[id(result)]["duplicates"] += 1
                continue
            self.table[id(result)]["created"] += 1
            kept.append((result, spec, digest))
        for result in results:
            self.prepared.pop(id(result), None)  # ``planned`` holds what is needed
        if not kept:
            return
        sources = self._source_file_ids([r for r, _, _ in kept])
        now = timezone.now()
        if connection.vendor == "postgresql":  # each row written with its search vector
            prepared = [p if isinstance(p, rows.Prepared) else _prepared(p, d) for _, p, d in kept]
            ids = [sources[id(r)] for r, _, _ in kept]
            created, steps = rows.insert_prepared(prepared, sources=ids, now=now)
        else:
            values = [_trajectory_values(s, d, sources[id(r)], now) for r, s, d in kept]
            created = rows.insert_trajectories(values)
            steps = [
                rows.step_values(pk, step)
                for pk, (_, spec, _) in zip(created, kept, strict=True)
                for step in spec.steps
            ]
        _insert_steps(steps)
        gdi.gdi_recompute(ids=created, now=now, fresh=True)  # reward, recency (docs/gdi.md)
        summary.created += created
        messages = sum(1 for step in steps if step[2] == Step.Kind.MESSAGE)
        summary.stored_messages += messages
        summary.stored_steps += len(steps) - messages

    def _source_file_ids(self, results: list[ImportResult]) -> dict[int, int | None]:
        """The SourceFile id of each result's file by ``id(result)`` (one row per distinct
        content), created as needed; None for a result without its bytes."""
        unique = list({id(result): result for result in results}.values())
        files = []
        for result in unique:
            packed = self.packed.get(id(result))
            data = self.raw.get(result.file) or result.data
            if packed is None and data:
                packed = rows.pack(data)
            files.append((result.file, result.format, result.format_version, packed))
        ids = rows.source_files(files=files, user=self.user)
        return {id(result): pk for result, pk in zip(unique, ids, strict=True)}

    def _unique(self, results: list[ImportResult]) -> list[tuple[ImportResult, int, Any, str]]:
        """(result, index, spec or its prepared rows, content hash) of every trajectory whose
        content this import has not met yet; the others are reported as duplicates."""
        planned = []
        for result in results:
            row = self.table[id(result)] = _file_row(result)
            prepared = self.prepared.get(id(result))
            for index, spec in enumerate(result.trajectories):
                if prepared is not None:
                    spec = prepared[index]
                digest = spec.digest if prepared is not None else content_hash(spec)
                first = self.hashes.get(digest)
                if first is not None:
                    self.summary.duplicates.append(
                        {
                            "file": result.file,
                            "index": index,
                            "existing_id": None,
                            "same_as": f"{first[0]} #{first[1]}",
                        }
                    )
                    row["duplicates"] += 1
                    continue
                self.hashes[digest] = (result.file, index)
                planned.append((result, index, spec, digest))
        return planned


def _prepared(spec: TrajectorySpec, digest: str | None = None) -> rows.Prepared:
    """The rows of a trajectory to import (PostgreSQL), built before it is stored."""
    digest = digest or content_hash(spec)
    return rows.prepare(spec, digest, _trajectory_values(spec, digest, None, None))


def _prepare(result: ImportResult) -> list[rows.Prepared] | None:
    """The rows of every trajectory of ``result``; None when one cannot be built (it is built
    again when stored, where what refuses it is reported)."""
    try:
        return [_prepared(spec) for spec in result.trajectories]
    except Exception:  # noqa: BLE001 - built again when stored, and reported there
        return None


def _trajectory_values(
    spec: TrajectorySpec,
    digest: str,
    source_file_id: int | None,
    now: datetime.datetime | None,
) -> dict[str, Any]:
    """Every column of a new imported trajectory's row but its id."""
    failed = bool(spec.metadata.get("error"))  # the run errored (the importer says so)
    return {
        **without_nul(_summary(spec)),
        "source": Trajectory.Source.IMPORT,
        "status": Trajectory.Status.FAILED if failed else Trajectory.Status.FINISHED,
        "content_hash": digest,
        "source_file_id": source_file_id,
        "finished_at": now,
        "created_at": now,
        "task_id": None,
        "tags": [],
        "idempotency_key": None,
    }


# --- streaming (rollouts) -------------------------------------------------------------------


def idempotency_key(*, run: str | int, task: str | int, episode: int, seed: int | None) -> str:
    return f"{run}:{task}:{episode}:{seed if seed is not None else '-'}"[:300]


def trajectory_begin(
    *,
    key: str,
    prompt: str = "",
    task=None,
    task_ref: str = "",
    domain: str = "",
    agent: str = "",
    model: str = "",
    policy: str = "",
    environment: str = "",
    metadata: dict[str, Any] | None = None,
    source: str = Trajectory.Source.ROLLOUT,
) -> Trajectory:
    """Begin (or find again) the trajectory of one episode (or of a live push: ``source``
    live). Same key → same trajectory."""
    defaults = {
        "source": source,
        "status": Trajectory.Status.RUNNING,
        "task": task,
        "task_ref": task_ref or (getattr(task, "external_id", "") or ""),
        "prompt": prompt,
        "domain": domain,
        "agent": agent,
        "model": model,
        "policy": policy,
        "environment": environment,
        "metadata": metadata or {},
    }
    defaults = {k: without_nul(v) if k != "task" else v for k, v in defaults.items()}
    try:
        with transaction.atomic():
            trajectory, _ = Trajectory.objects.get_or_create(idempotency_key=key, defaults=defaults)
    except IntegrityError:  # a concurrent begin won the race
        trajectory = Trajectory.objects.get(idempotency_key=key)
    return trajectory


def trajectory_append_step(*, trajectory: Trajectory, step: StepSpec) -> bool:
    """Store one step; an index that is already stored is a no-op (returns False)."""
    return trajectory_append_steps(trajectory=trajectory, steps=[step]) == 1


def trajectory_append_steps(*, trajectory: Trajectory, steps: Sequence[StepSpec]) -> int:
    """Store steps in one transaction; indexes already stored are left as they are. Returns how
    many were new."""
    if not steps:
        return 0
    with transaction.atomic():
        stored = set(
            Step.objects.filter(
                trajectory_id=trajectory.pk, index__in=[step.index for step in steps]
            ).values_list("index", flat=True)
        )
        new = [step for step in steps if step.index not in stored]
        if not new:
            return 0
        Step.objects.bulk_create([_step_row(trajectory.pk, step) for step in new])
        Trajectory.objects.filter(pk=trajectory.pk).update(
            step_count=Step.objects.filter(trajectory_id=trajectory.pk, kind="tool").count(),
            message_count=Step.objects.filter(trajectory_id=trajectory.pk, kind="message").count(),
            tokens_in=F("tokens_in") + sum(step.tokens_in or 0 for step in new),
            tokens_out=F("tokens_out") + sum(step.tokens_out or 0 for step in new),
        )
    return len(new)


def trajectory_restart(*, trajectory: Trajectory) -> Trajectory:
    """Start a rollout trajectory over (its episode is run again after a crash): its steps are
    deleted and it is running again, so the re-run stores each step once."""
    with transaction.atomic():
        Step.objects.filter(trajectory_id=trajectory.pk).delete()
        Trajectory.objects.filter(pk=trajectory.pk).update(
            status=Trajectory.Status.RUNNING,
            step_count=0,
            message_count=0,
            tokens_in=0,
            tokens_out=0,
            success=None,
            reward=None,
            finished_at=None,
        )
    trajectory.refresh_from_db()
    return trajectory


def trajectory_finish(
    *,
    trajectory: Trajectory,
    outcome: OutcomeSpec | dict[str, Any],
    failed: bool = False,
    error: str = "",
    cost_usd: float | None = None,
) -> Trajectory:
    spec = outcome if isinstance(outcome, OutcomeSpec) else OutcomeSpec.model_validate(outcome)
    reward = spec.partial_credit if spec.partial_credit is not None else spec.score
    if reward is None and spec.success is not None:
        reward = 1.0 if spec.success else 0.0
    trajectory.refresh_from_db()
    trajectory.status = Trajectory.Status.FAILED if failed else Trajectory.Status.FINISHED
    trajectory.success = spec.success
    trajectory.reward = reward
    trajectory.outcome = without_nul(spec.model_dump(mode="json"))
    if error:
        trajectory.metadata = dict(trajectory.metadata, error=without_nul(error))
    trajectory.finished_at = timezone.now()
    if cost_usd is not None:
        trajectory.cost_usd = cost_usd
    counts = trajectory.steps.aggregate(
        tool=Count("pk", filter=Q(kind=Step.Kind.TOOL)),
        message=Count("pk", filter=Q(kind=Step.Kind.MESSAGE)),
    )
    trajectory.step_count, trajectory.message_count = counts["tool"], counts["message"]
    trajectory.save()
    trajectories_index_for_search(ids=[trajectory.pk])
    gdi.gdi_recompute(ids=[trajectory.pk])
    return trajectory


def import_limits() -> ImportLimits:
    """The import limits the settings give (``STEPLAB_IMPORT_MAX_*``)."""
    return ImportLimits(
        max_file_bytes=settings.STEPLAB_IMPORT_MAX_FILE_BYTES,
        max_member_bytes=settings.STEPLAB_IMPORT_MAX_MEMBER_BYTES,
        max_archive_bytes=settings.STEPLAB_IMPORT_MAX_ARCHIVE_BYTES,
        max_members=settings.STEPLAB_IMPORT_MAX_MEMBERS,
        max_depth=settings.STEPLAB_IMPORT_MAX_DEPTH,
    )


class ImportRefused(ApplicationError):
    """An all-or-nothing import with a refused file: nothing was stored. ``extra["files"]`` is
    the per-file table (each refused file with its error)."""


#: How many read files are stored together (one COPY of their rows) while the next ones are read.
STORE_EVERY = 256
#: ... but the first part is smaller: the database starts while the next files are read.
STORE_FIRST = 32
#: How many read files the reading thread hands over at once (each hand-over wakes the other
#: thread, which then waits for its turn to run Python).
HAND_OVER = 16


def trajectories_import_files(
    *,
    paths: list[str],
    format: str | None = None,
    user=None,
    on_parsed=None,
    all_or_nothing: bool = False,
) -> ImportSummary:
    """Store every file (a zip: every member) that reads; each file is all or nothing, and a
    refused file is a row of the result with its error. With ``all_or_nothing`` one refused
    file stores nothing (ImportRefused, with the table). ``on_parsed(done, total,
    results_so_far)`` is called after each path (the import job reports progress with it).

    One transaction: on PostgreSQL the files are read, and their rows built, by a thread while
    the ones read before are stored (``STORE_EVERY`` at a time, the first part ``STORE_FIRST``),
    so reading and the database's work overlap; when the database refuses the transaction (a
    value no check foresaw), every file that reads is stored on its own so that only the file
    it refuses is left out (reported)."""
    batch = _ImportBatch(raw=None, user=user, packed={}, prepared={})
    reading = _read_paths(paths=paths, format=format, on_parsed=on_parsed, batch=batch)
    outcomes: list[ImportResult | ImportFailure] = []
    try:
        summary = _store_as_read(reading, outcomes, batch=batch, all_or_nothing=all_or_nothing)
    except _DatabaseRefused as refused:
        outcomes.extend(outcome for found in reading for outcome in found)  # the rest
        results = [o for o in outcomes if isinstance(o, ImportResult)]
        if all_or_nothing or len(results) <= 1:
            where = f"{results[0].file}: " if results else ""
            raise ApplicationError(
                f"{where}the database refused the import ({_first_line(refused.error)}); "
                "nothing was stored. Check the file's values, or report the file."
            ) from None
        summary = _store_file_by_file(results=results, user=user)
    finally:
        reading.close()
    stored = iter(summary.files)  # one row per result, in order
    summary.files = [
        _refused_row(o) if isinstance(o, ImportFailure) else next(stored) for o in outcomes
    ]
    return summary


def _read_paths(
    *, paths: list[str], format: str | None, on_parsed, batch: _ImportBatch
) -> Iterator[list]:
    """The outcomes of each path in turn (a thread reads ahead on PostgreSQL); the bytes of
    each file that reads are packed (``batch.packed[id(result)]``) as it is read, and on
    PostgreSQL the rows of its trajectories are built (``batch.prepared``)."""
    limits = import_limits()
    prepare = connection.vendor == "postgresql"

    def read() -> Iterator[list]:
        results: list[ImportResult] = []
        for number, path in enumerate(paths, start=1):
            found = read_path(path, format=format, limits=limits)
            for outcome in found:
                if isinstance(outcome, ImportResult):
                    results.append(outcome)
                    if outcome.data:
                        batch.packed[id(outcome)] = rows.pack(outcome.data)
                    prepared = _prepare(outcome) if prepare else None
                    if prepared is not None:
                        batch.prepared[id(outcome)] = prepared
            if on_parsed is not None:
                on_parsed(number, len(paths), results)
            yield found

    if connection.vendor != "postgresql":
        # SQLite: one writer at a time (a progress callback writes too): read, then store
        outcomes = list(read())
        return (found for found in outcomes)
    return _unchunked(_read_ahead(_chunks(read(), HAND_OVER), ahead=STORE_EVERY // HAND_OVER))


def _chunks(items: Iterator[T], size: int) -> Iterator[list[T]]:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _unchunked(chunks: Iterator[list[T]]) -> Iterator[T]:
    """The items of ``chunks`` in turn; closing it closes ``chunks``."""
    try:
        for chunk in chunks:
            yield from chunk
    finally:
        chunks.close()  # type: ignore[attr-defined]


class _DatabaseRefused(Exception):
    """The database refused to store a part (``error``); the transaction is rolled back."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def _store_as_read(
    reading: Iterator[list], outcomes: list, *, batch: _ImportBatch, all_or_nothing: bool
) -> ImportSummary:
    """Store what ``reading`` gives as it comes, in one transaction; ``outcomes`` collects
    every outcome (a result or a refusal) in order."""
    waiting: list[ImportResult] = []
    with transaction.atomic():
        rows.compress_fast()
        for found in reading:
            outcomes.extend(found)
            waiting += [o for o in found if isinstance(o, ImportResult)]
            if len(waiting) >= (STORE_EVERY if batch.table else STORE_FIRST):  # table: stored
                _store_part(batch, waiting)
                waiting = []
        refused = [o for o in outcomes if isinstance(o, ImportFailure)]
        if refused and all_or_nothing:
            _refuse_all(outcomes, refused)  # raises: nothing is kept
        _store_part(batch, waiting)
    return batch.finish([o for o in outcomes if isinstance(o, ImportResult)])


def _store_part(batch: _ImportBatch, results: list[ImportResult]) -> None:
    try:
        batch.store(results)
    except (DatabaseError, ValueError) as exc:  # a value no check foresaw
        raise _DatabaseRefused(exc) from exc


def _refuse_all(outcomes: list[ImportResult | ImportFailure], refused: list[ImportFailure]) -> None:
    files = [_refused_row(o) if isinstance(o, ImportFailure) else _file_row(o) for o in outcomes]
    lines = "\n".join(str(failure) for failure in refused)
    raise ImportRefused(
        f"Nothing was imported (all or nothing): {len(refused)} of {len(outcomes)} file(s) "
        f"refused.\n{lines}\nFix or leave out the refused files, or import without "
        "all-or-nothing to store the files that read.",
        extra={"files": files},
    )


def _store_file_by_file(*, results: list[ImportResult], user) -> ImportSummary:
    """Store each file in its own transaction; a file the database refuses is a row with its
    error."""
    summary = ImportSummary()
    for result in results:
        try:
            summary.add(trajectories_import(results=[result], user=user))
        except (DatabaseError, ValueError) as exc:
            row = _file_row(result)
            row["error"] = (
                f"{result.file}: the database refused it ({_first_line(exc)}); nothing from "
                "this file was stored"
            )
            summary.files.append(row)
    return summary


def _read_ahead(items: Iterator[T], *, ahead: int = STORE_EVERY) -> Iterator[T]:
    """``items``, produced by a thread up to ``ahead`` in advance (what it raises is raised
    here). Closing the iterator stops the thread. The thread's own database connections (a
    progress callback's) are closed when it ends."""
    queue: Queue = Queue(maxsize=ahead)
    stop = threading.Event()
    end = object()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                queue.put((None, item))
            queue.put((None, end))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            queue.put((exc, end))
        finally:
            db_connections.close_all()

    thread = threading.Thread(target=produce, name="import-reader", daemon=True)
    thread.start()
    try:
        while True:
            error, item = queue.get()
            if error is not None:
                raise error
            if item is end:
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # let a producer blocked on a full queue see the stop
            with contextlib.suppress(Empty):
                queue.get(timeout=0.05)
        thread.join()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def trajectories_tag(*, ids: list[int], tag: str) -> int:
    changed = 0
    with transaction.atomic():
        for row in Trajectory.objects.select_for_update().filter(pk__in=ids):
            if tag not in row.tags:
                row.tags = [*row.tags, tag]
                row.save(update_fields=["tags"])
                changed += 1
    return changed


def trajectory_delete(*, trajectory: Trajectory) -> dict[str, int]:
    """Delete ``trajectory`` with its steps and everything about it (scores, labels, pairs,
    queue items); a running one is refused. Returns the rows deleted by kind."""
    if trajectory.status == Trajectory.Status.RUNNING:
        raise ApplicationError(
            f"Trajectory {trajectory.pk} is still running: cancel its job (or wait) first."
        )
    with transaction.atomic():
        shots = selectors.screenshot_files(trajectory_id=trajectory.pk)
        _, counts = Trajectory.objects.filter(pk=trajectory.pk).delete()
        transaction.on_commit(lambda: _remove_screenshots(shots))
    return {label.rsplit(".", 1)[-1].lower(): n for label, n in counts.items()}


def _remove_screenshots(paths: list[Path]) -> None:
    """Remove a deleted trajectory's screenshot files, and their episode folders once empty."""
    root = (Path(settings.STEPLAB_DATA_DIR) / "screenshots").resolve()
    for path in paths:
        path.unlink(missing_ok=True)
    for folder in {path.parent for path in paths}:
        if folder != root and folder.is_relative_to(root):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty


# --- uploads -------------------------------------------------------------------------------------


def uploads_root() -> Path:
    """Where uploads wait for their import: ``STEPLAB_DATA_DIR/uploads``."""
    return Path(settings.STEPLAB_DATA_DIR) / "uploads"


def uploads_stage(*, uploads, folder: Path | None = None) -> Path:
    """Write uploaded files under ``folder`` (default: a new folder of ``uploads_root()``), one
    numbered subfolder each so that two uploads with the same name do not collide; returns the
    folder."""
    if folder is None:
        folder = uploads_root() / secrets.token_hex(8)
    folder.mkdir(parents=True, exist_ok=True)
    for number, upload in enumerate(uploads):
        name = Path(upload.name).name or f"upload-{number}"
        target = folder / f"{number:03d}" / name
        target.parent.mkdir()
        with open(target, "wb") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
    return folder


def uploads_discard(*, folder: str) -> None:
    """Remove a staged upload folder of ``uploads_root()`` (a name ``uploads_stage`` made;
    anything else is left alone)."""
    if re.fullmatch(r"[0-9a-f]{16}", folder or ""):
        shutil.rmtree(uploads_root() / folder, ignore_errors=True)


def staged_paths(*, folder: Path) -> list[str]:
    """The staged files of ``folder``, in upload order."""
    return [str(p) for p in sorted(folder.glob("*/*")) if p.is_file()]


def uploads_need_job(*, uploads, background: bool) -> bool:
    """Large uploads (over STEPLAB_IMPORT_INLINE_MAX_BYTES), or any the user asked for, import as
    a job on a worker."""
    size = sum(upload.size or 0 for upload in uploads)
    return background or size > settings.STEPLAB_IMPORT_INLINE_MAX_BYTES


def trajectories_import_enqueue(
    *, uploads, format: str | None, user, all_or_nothing: bool = False
) -> Job:
    """Stage the uploads and enqueue the import job that stores them (the staged folder goes
    again when either fails, and when the job ends: ``jobs.import_ended``)."""
    folder = uploads_root() / secrets.token_hex(8)
    try:
        uploads_stage(uploads=uploads, folder=folder)
        names = [Path(p).name for p in staged_paths(folder=folder)]
        return job_enqueue(
            kind=Kinds.IMPORT_TRAJECTORIES,
            params={
                "folder": folder.name,
                "files": names,
                "format": format or "",
                "all_or_nothing": all_or_nothing,
            },
            user=user,
            message=f"Waiting for a worker to import {len(names)} file(s).",
        )
    except BaseException:
        uploads_discard(folder=folder.name)
        raise


def trajectories_import_uploads(
    *, uploads, format: str | None, user, all_or_nothing: bool = False
) -> ImportSummary:
    """Import uploaded files now (small uploads): staged in a temporary folder that is removed
    afterwards; each file all or nothing (the whole upload with ``all_or_nothing``)."""
    with tempfile.TemporaryDirectory(prefix="steplab-upload-") as folder:
        staged = uploads_stage(uploads=uploads, folder=Path(folder))
        return trajectories_import_files(
            paths=staged_paths(folder=staged),
            format=format,
            user=user,
            all_or_nothing=all_or_nothing,
        )

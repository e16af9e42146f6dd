"""Task services: import task files (all or nothing), edit tasks, seed the built-in suites,
quarantine a task and release it."""

from __future__ import annotations

import secrets
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from trainer_core.errors import ConfigError, InputError, describe_validation_error
from trainer_core.tasks.files import TaskFile, TaskFileError, load_tasks
from trainer_core.tasks.harbor import Refusal, load_harbor
from trainer_core.tasks.model import Task as TaskSpec
from trainer_core.tasks.repos import resolve_repo
from trainer_core.tasks.suites import builtin_suites
from webapp.common.errors import ApplicationError
from webapp.tasks.models import Task, TaskQuarantine, TaskSet


def _row_fields(spec: TaskSpec, fallback_environment: str) -> dict[str, Any]:
    data = spec.model_dump(mode="json", exclude_defaults=False)
    return {
        "domain": spec.domain,
        "environment": spec.environment or fallback_environment,
        "prompt": spec.prompt,
        "checker": spec.checker,
        "data": data,
    }


def task_set_import(
    *,
    text: str,
    name: str = "",
    user=None,
    fmt: str | None = None,
    description: str = "",
    source_name: str = "",
    archives=(),
) -> tuple[TaskSet, int]:
    """Import a task file (JSONL or YAML text) into the task set ``name`` (new, or existing:
    tasks are added, and an id that is already there is an error). Nothing is written unless
    every task is valid.

    ``archives`` (uploaded files: tarballs of repositories) are stored with the task set; a
    task's relative ``repo`` names one of them. Any other ``repo`` must lie under an allowed
    root (``STEPLAB_TASK_REPO_ROOTS``): a host path is refused with the reason."""
    folder = _archives_store(archives) if archives else None
    try:
        loaded = load_tasks(text, fmt=fmt, repo_base=folder)
        task_set, count = _task_set_store(loaded, name=name, user=user, description=description)
    except TaskFileError as exc:
        _archives_discard(folder)
        raise ApplicationError(
            str(exc), extra={"problems": [tuple(p) for p in exc.problems]}
        ) from None
    except ApplicationError:
        _archives_discard(folder)
        raise
    if folder is not None and not any(t.repo for t in loaded.tasks):
        _archives_discard(folder)  # nothing uses them
    return task_set, count


def task_set_import_harbor(
    *, path: str | Path, name: str = "", user=None, description: str = ""
) -> tuple[TaskSet, int, list[Refusal]]:
    """Import a Harbor task directory, or a folder of them (Terminal-Bench 2.0's format, see
    trainer_core/tasks/harbor.py), into the task set ``name`` (default: the folder's name).
    The tasks that can run here are stored (all or none of them); the others come back as
    refusals with their reasons. None importable is an error listing every refusal."""
    try:
        loaded = load_harbor(path)
    except InputError as exc:
        raise ApplicationError(str(exc)) from None
    problems = [("", r.path, f"{r.kind}: {r.reason}") for r in loaded.refused]
    if not loaded.tasks:
        raise ApplicationError(
            f"No task of {Path(path).name} can run here; nothing was imported.",
            extra={"problems": problems},
        )
    task_file = TaskFile(
        name=name or Path(path).resolve().name,
        description=description or f"Harbor tasks imported from {Path(path).name}",
        domain="coding",
        tasks=loaded.tasks,
    )
    task_set, count = _task_set_store(task_file, name=name, user=user, description=description)
    return task_set, count, loaded.refused


def task_set_import_harbor_archive(
    *, upload, name: str = "", user=None
) -> tuple[TaskSet, int, list[Refusal]]:
    """:func:`task_set_import_harbor` of an uploaded tar archive holding a Harbor task
    directory or a folder of them (links and paths outside the archive are refused)."""
    with tempfile.TemporaryDirectory(prefix="steplab-harbor-") as folder:
        try:
            with tarfile.open(fileobj=upload, mode="r:*") as archive:
                _extract_bounded(archive, folder, name=upload.name)
        except (tarfile.TarError, OSError) as exc:
            raise ApplicationError(f"{upload.name} cannot be unpacked: {exc}") from None
        root = Path(folder)
        entries = [p for p in root.iterdir() if not p.name.startswith(".")]
        if len(entries) == 1 and entries[0].is_dir():
            root = entries[0]
        stem = Path(upload.name).name.split(".")[0]
        return task_set_import_harbor(path=root, name=name or stem, user=user)


#: what an uploaded archive of Harbor task directories may unpack to (a decompression bomb is
#: stopped at the member that crosses a limit, never unpacked whole)
HARBOR_ARCHIVE_MAX_BYTES = 256 * 1024 * 1024
HARBOR_ARCHIVE_MAX_MEMBERS = 50_000


def _extract_bounded(archive: tarfile.TarFile, folder: str, *, name: str) -> None:
    """Unpack member by member (streamed), refusing the archive once its members' sizes add up
    to more than :data:`HARBOR_ARCHIVE_MAX_BYTES` or their number passes
    :data:`HARBOR_ARCHIVE_MAX_MEMBERS`; links and paths outside the folder are refused by
    tarfile's ``data`` filter."""
    total = count = 0
    for member in archive:
        count += 1
        total += max(0, member.size)
        if total > HARBOR_ARCHIVE_MAX_BYTES or count > HARBOR_ARCHIVE_MAX_MEMBERS:
            raise ApplicationError(
                f"{name} unpacks to more than {HARBOR_ARCHIVE_MAX_BYTES // 2**20} MB or "
                f"{HARBOR_ARCHIVE_MAX_MEMBERS} files; import fewer task directories at a time."
            )
        archive.extract(member, folder, filter="data")


def _archives_store(archives) -> Path:
    """Store uploaded repository archives in a new folder of STEPLAB_TASK_ARCHIVES_DIR; each
    must be a tar archive (plain or compressed)."""
    folder = Path(settings.STEPLAB_TASK_ARCHIVES_DIR) / secrets.token_hex(8)
    folder.mkdir(parents=True)
    for upload in archives:
        name = Path(upload.name).name
        if not name or name.startswith("."):
            _archives_discard(folder)
            raise ApplicationError(f"The archive name {upload.name!r} cannot be used; rename it.")
        target = folder / name
        with open(target, "wb") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
        if not tarfile.is_tarfile(target):
            _archives_discard(folder)
            raise ApplicationError(
                f"{name} is not a tar archive (.tar, .tar.gz, .tgz): pack the repository with "
                "tar, or give its files inline in 'files'."
            )
    return folder


def _archives_discard(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _task_set_store(loaded, *, name: str, user, description: str) -> tuple[TaskSet, int]:
    """Store the loaded tasks in the task set ``name`` (all of them, or none)."""
    set_name = (name or loaded.name or "").strip()
    if not set_name:
        raise ApplicationError("Name the task set (the file has no task_set.name).")
    missing_ids = [i for i, t in enumerate(loaded.tasks, 1) if not t.id]
    if missing_ids:
        raise ApplicationError(
            f"Every task needs an id to be stored; tasks {missing_ids[:10]} have none."
        )
    with transaction.atomic():
        task_set, created = TaskSet.objects.get_or_create(
            name=set_name,
            defaults={
                "description": description or loaded.description,
                "domain": loaded.domain or (loaded.tasks[0].domain if loaded.tasks else ""),
                "environment": loaded.tasks[0].environment if loaded.tasks else "",
                "source": TaskSet.Source.IMPORT,
                "created_by": user if getattr(user, "is_authenticated", False) else None,
            },
        )
        if not created and task_set.source == TaskSet.Source.BUILTIN:
            raise ApplicationError(
                f"{set_name!r} is a built-in task set; import into a new set name."
            )
        existing = set(
            task_set.tasks.filter(external_id__in=[t.id for t in loaded.tasks]).values_list(
                "external_id", flat=True
            )
        )
        if existing:
            shown = ", ".join(sorted(existing)[:10])
            raise ApplicationError(
                f"Task set {set_name!r} already has tasks with these ids: {shown}. Nothing was imported."
            )
        Task.objects.bulk_create(
            [
                Task(task_set=task_set, external_id=t.id, **_row_fields(t, task_set.environment))
                for t in loaded.tasks
            ]
        )
    return task_set, len(loaded.tasks)


def task_update(*, task: Task, data: dict[str, Any]) -> Task:
    """An operator's edit of one task: validated like an imported one."""
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        problems = describe_validation_error(exc, whole="task")
        raise ApplicationError(f"Invalid task: {problems}.") from None
    if spec.repo:
        try:
            spec = spec.model_copy(update={"repo": str(resolve_repo(spec.repo))})
        except ConfigError as exc:
            raise ApplicationError(f"Invalid task: {exc}.") from None
    if spec.id != task.external_id:
        if (
            Task.objects.filter(task_set=task.task_set, external_id=spec.id)
            .exclude(pk=task.pk)
            .exists()
        ):
            raise ApplicationError(
                f"Another task in {task.task_set.name!r} already has the id {spec.id!r}."
            )
        task.external_id = spec.id
    for key, value in _row_fields(spec, task.task_set.environment).items():
        setattr(task, key, value)
    task.save()
    return task


def task_sets_seed_builtin() -> str:
    """Load the built-in suites as task sets; re-running updates them in place."""
    counts = []
    for suite in builtin_suites().values():
        with transaction.atomic():
            task_set, _ = TaskSet.objects.update_or_create(
                name=suite.name,
                defaults={
                    "description": suite.description,
                    "domain": suite.domain,
                    "environment": suite.environment,
                    "source": TaskSet.Source.BUILTIN,
                },
            )
            present = {row.external_id: row for row in task_set.tasks.all()}
            new_rows, changed = [], []
            for spec in suite.tasks:
                fields = _row_fields(spec, suite.environment)
                row = present.pop(spec.id, None)
                if row is None:
                    new_rows.append(Task(task_set=task_set, external_id=spec.id, **fields))
                elif row.data != fields["data"]:
                    for key, value in fields.items():
                        setattr(row, key, value)
                    changed.append(row)
            Task.objects.bulk_create(new_rows, batch_size=500)
            if changed:
                Task.objects.bulk_update(
                    changed, ["domain", "environment", "prompt", "checker", "data"], batch_size=500
                )
            if present:
                Task.objects.filter(pk__in=[r.pk for r in present.values()]).delete()
        counts.append(f"{suite.name} {len(suite.tasks)}")
    return ", ".join(counts)


# --- quarantine (docs/task-health.md) -------------------------------------------------------------

#: the longest reason or release note kept
QUARANTINE_TEXT_MAX = 2000


def task_quarantine(*, task: Task, user, reason: str) -> TaskQuarantine:
    """Quarantine ``task``: it leaves dataset builds, evaluation runs, pipelines and RL runs
    launched from now on until :func:`task_release`. ``reason`` is required; a task already in
    quarantine is an error (release it first, or leave it)."""
    reason = (reason or "").strip()
    if not reason:
        raise ApplicationError("Say why the task is quarantined (the reason is required).")
    if len(reason) > QUARANTINE_TEXT_MAX:
        raise ApplicationError(f"The reason is longer than {QUARANTINE_TEXT_MAX} characters.")
    with transaction.atomic():
        Task.objects.select_for_update().filter(pk=task.pk).first()
        if TaskQuarantine.objects.filter(task=task, released_at__isnull=True).exists():
            raise ApplicationError(f"Task {task.external_id!r} is already quarantined.")
        return TaskQuarantine.objects.create(
            task=task,
            reason=reason,
            quarantined_by=user if getattr(user, "is_authenticated", False) else None,
        )


def task_release(*, task: Task, user, note: str = "") -> TaskQuarantine:
    """Release ``task`` from its quarantine (who and when are kept, with an optional note): it
    comes back into dataset builds, evaluations, pipelines and RL runs launched from now on."""
    note = (note or "").strip()[:QUARANTINE_TEXT_MAX]
    with transaction.atomic():
        row = (
            TaskQuarantine.objects.select_for_update()
            .filter(task=task, released_at__isnull=True)
            .first()
        )
        if row is None:
            raise ApplicationError(f"Task {task.external_id!r} is not quarantined.")
        row.released_at = timezone.now()
        row.released_by = user if getattr(user, "is_authenticated", False) else None
        row.release_note = note
        row.save(update_fields=["released_at", "released_by", "release_note"])
    return row

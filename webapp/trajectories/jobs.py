"""The import job: large uploads are staged on disk and imported by a worker with progress.

The upload form stages the files under ``STEPLAB_DATA_DIR/uploads/<token>/`` and enqueues a
``trajectories.import`` job. The worker parses every file first (progress per file; any
failure fails the job and writes nothing), then stores them in one transaction. The job is
resumable: a re-run after a crash parses again, and the content hashes make a second store of
what the first one committed a no-op (its trajectories are reported as duplicates).
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings

from webapp.common.errors import ApplicationError
from webapp.jobs import kinds, task_names
from webapp.jobs.context import JobContext

KIND = "trajectories.import"


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=KIND,
            label="Trajectory import",
            task_name=task_names.IMPORT_TRAJECTORIES,
            queue="default",
            resumable=True,
            detail_template="trajectories/partials/import_job_detail.html",
            description="Parse uploaded agent logs and store their trajectories, all or nothing.",
        )
    )


def uploads_root() -> Path:
    return Path(settings.STEPLAB_DATA_DIR) / "uploads"


def stage_uploads(uploads) -> Path:
    """Write uploaded files under a new folder of ``uploads_root()``; returns the folder."""
    folder = uploads_root() / secrets.token_hex(8)
    folder.mkdir(parents=True)
    for number, upload in enumerate(uploads):
        name = Path(upload.name).name or f"upload-{number}"
        target = folder / f"{number:03d}" / name
        target.parent.mkdir()
        with open(target, "wb") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
    return folder


def staged_paths(folder: Path) -> list[str]:
    return [str(p) for p in sorted(folder.glob("*/*")) if p.is_file()]


def import_enqueue(*, uploads, format: str | None, user) -> Any:
    from webapp.jobs.services import job_enqueue

    folder = stage_uploads(uploads)
    names = [Path(p).name for p in staged_paths(folder)]
    return job_enqueue(
        kind=KIND,
        params={"folder": folder.name, "files": names, "format": format or ""},
        user=user,
        message=f"Waiting for a worker to import {len(names)} file(s).",
    )


def import_run(*, ctx: JobContext) -> None:
    from webapp.trajectories.services import trajectories_import_files

    folder = uploads_root() / str(ctx.params.get("folder", ""))
    if not ctx.params.get("folder") or not folder.is_dir():
        raise ApplicationError(
            f"The staged upload folder {folder} is gone; upload the files again."
        )
    paths = staged_paths(folder)
    ctx.progress(0.0, f"Parsing {len(paths)} file(s)…", force=True)

    def on_parsed(done: int, total: int, results) -> None:
        found = sum(len(r.trajectories) for r in results)
        ctx.progress(
            0.8 * done / max(total, 1),
            f"Parsed {done} of {total} file(s): {found} trajectories so far.",
            metrics={"files_parsed": done, "trajectories_found": found},
        )

    from webapp.accounts.models import User

    user = User.objects.filter(pk=ctx.user_id).first() if ctx.user_id else None
    try:
        summary = trajectories_import_files(
            paths=paths, format=ctx.params.get("format") or None, user=user, on_parsed=on_parsed
        )
    except ApplicationError:
        shutil.rmtree(folder, ignore_errors=True)  # a broken upload: nothing to resume
        raise
    ctx.set_result(
        created=len(summary.created),
        first_id=min(summary.created) if summary.created else None,
        last_id=max(summary.created) if summary.created else None,
        steps=summary.steps,
        duplicates=summary.duplicates[:200],
        duplicate_count=len(summary.duplicates),
        files=summary.files,
    )
    ctx.progress(
        1.0,
        f"Imported {len(summary.created)} trajectories ({summary.steps} steps); "
        f"{len(summary.duplicates)} duplicate(s) skipped.",
        force=True,
    )
    shutil.rmtree(folder, ignore_errors=True)

"""The trajectories app's job kind: importing large uploads on a worker, with progress.

The upload form stages the files (``services.uploads_stage``) and enqueues a
``trajectories.import`` job (``services.trajectories_import_enqueue``). The worker reads every
file (progress per file) and stores every file that reads, as it reads them, in one transaction;
each refused file is a row of the result's table with its error (the job fails only when no file was
stored because of refusals, or, all-or-nothing, when any file was refused). The job is resumable:
a re-run after a crash reads again, and the content hashes make a second store of what the first
one committed a no-op (its trajectories are reported as duplicates).
"""

from __future__ import annotations

from webapp.accounts.selectors import user_get_or_none
from webapp.common.errors import ApplicationError
from webapp.jobs import kinds
from webapp.jobs.context import JobContext
from webapp.jobs.names import Kinds, Queue, Tasks
from webapp.trajectories import services


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.IMPORT_TRAJECTORIES,
            label="Trajectory import",
            task_name=Tasks.IMPORT_TRAJECTORIES,
            queue=Queue.DEFAULT,
            resumable=True,
            detail_template="trajectories/partials/import_job_detail.html",
            description="Read uploaded agent logs and store every file that reads; report the others.",
            on_end=import_ended,
        )
    )


def import_ended(params) -> None:
    """However an import job ended (succeeded, failed, cancelled, its worker dead for good),
    its staged upload goes: nothing will read it again."""
    services.uploads_discard(folder=str(params.get("folder") or ""))


def import_run(*, ctx: JobContext) -> None:
    folder = services.uploads_root() / str(ctx.params.get("folder", ""))
    if not ctx.params.get("folder") or not folder.is_dir():
        raise ApplicationError(
            f"The staged upload folder {folder} is gone; upload the files again."
        )
    paths = services.staged_paths(folder=folder)
    ctx.progress(0.0, f"Parsing {len(paths)} file(s)…", force=True)

    def on_parsed(done: int, total: int, results) -> None:
        found = sum(len(r.trajectories) for r in results)
        ctx.progress(
            0.8 * done / max(total, 1),
            f"Parsed {done} of {total} file(s): {found} trajectories so far.",
            metrics={"files_parsed": done, "trajectories_found": found},
        )

    try:
        summary = services.trajectories_import_files(
            paths=paths,
            format=ctx.params.get("format") or None,
            user=user_get_or_none(id=ctx.user_id),
            on_parsed=on_parsed,
            all_or_nothing=bool(ctx.params.get("all_or_nothing")),
        )
    except services.ImportRefused as exc:
        ctx.set_result(created=0, steps=0, duplicate_count=0, files=exc.extra.get("files", []))
        services.uploads_discard(folder=folder.name)  # a refused upload: nothing to resume
        raise
    except ApplicationError:
        services.uploads_discard(folder=folder.name)
        raise
    ctx.set_result(
        created=len(summary.created),
        first_id=min(summary.created) if summary.created else None,
        last_id=max(summary.created) if summary.created else None,
        steps=summary.steps,
        messages=summary.messages,
        duplicates=summary.duplicates[:200],
        duplicate_count=len(summary.duplicates),
        refused_count=len(summary.refused),
        files=summary.files,
    )
    services.uploads_discard(folder=folder.name)
    if summary.refused and len(summary.refused) == len(summary.files):
        raise ApplicationError(
            f"No file could be imported: all {len(summary.files)} file(s) were refused (the "
            "table says why). Fix the files and upload them again."
        )
    refused = f"; {len(summary.refused)} file(s) refused" if summary.refused else ""
    ctx.progress(
        1.0,
        f"Imported {len(summary.created)} trajectories ({summary.steps} steps); "
        f"{len(summary.duplicates)} duplicate(s) skipped{refused}.",
        force=True,
    )

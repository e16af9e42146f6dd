"""The calibration app's job kind: a simulated annotator's pass through the real calibration path
(``calibration.simulate``).

Stage "": create the queue (once), label every item as the ``simulated-annotator`` user (items
submitted by an earlier attempt are skipped), fit a calibration on that queue's labels and apply
it (each once: the annotation row remembers them), which launches the re-scoring job as this
job's child; then wait. Stage "finish": refuse a failed re-scoring, and record the AUROC of the
old and new versions' step totals against the annotator's truth.
"""

from __future__ import annotations

from webapp.calibration import selectors, services
from webapp.jobs import kinds
from webapp.jobs.context import JobContext
from webapp.jobs.models import Job
from webapp.jobs.names import Kinds, Queue, Tasks


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.CALIBRATE_SIMULATED,
            label="Calibrate with a simulated annotator",
            task_name=Tasks.CALIBRATE_SIMULATED,
            queue=Queue.DEFAULT,
            resumable=True,
            detail_template="calibration/partials/simulated_job_detail.html",
            description="A queue of training trajectories labelled by a scripted annotator "
            "(reference path good, the rest bad, seeded errors), a calibration fitted on it and "
            "applied as a new reward-model version, and the re-scoring with that version.",
        )
    )


def _auroc(value) -> str:
    return f"{value:.3f}" if value is not None else "—"


def simulated_calibration_run(*, ctx: JobContext):
    annotation = selectors.simulated_for_job(annotation_id=ctx.params.get("annotation_id"))
    if ctx.stage == "":
        ctx.progress(0.02, "Choosing the training trajectories to label…", force=True)
        queue = services.simulated_queue(annotation=annotation)
        summary = annotation.summary
        ctx.log(
            f"queue {queue.pk} ({queue.name}): {summary.get('trajectories')} trajectories, "
            f"{summary.get('steps')} steps ({summary.get('good')} on the reference path), "
            f"{summary.get('flipped')} labels flipped at error rate {annotation.error_rate:g}"
        )

        def report(done: int, total: int) -> None:
            ctx.progress(
                0.05 + 0.75 * done / max(total, 1),
                f"Simulated annotator: labelled {done} of {total} trajectories…",
            )

        services.simulated_label(annotation=annotation, report=report)
        ctx.progress(0.82, "Fitting a calibration on the simulated labels…", force=True)
        calibration = services.simulated_fit_apply(
            annotation=annotation, parent_job=Job.objects.get(pk=ctx.job_id)
        )
        run = calibration.rescoring_run
        ctx.log(
            f"calibration {calibration.pk} fitted on {calibration.labels} labels, applied as "
            f"{calibration.applied_as.label}"
            + (f"; re-scoring run {run.pk}: {run.total} trajectories" if run else "")
        )
        ctx.progress(
            0.85,
            f"Re-scoring {run.total if run else 0} trajectories with "
            f"{calibration.applied_as.label}…",
            force=True,
        )
        return ctx.wait_for_children(next_stage="finish")

    summary = services.simulated_finish(annotation=annotation)
    ctx.set_result(**{k: v for k, v in summary.items() if isinstance(v, int | float) or v is None})
    ctx.progress(
        1.0,
        f"Calibrated from {summary['labels']} simulated labels (error rate "
        f"{annotation.error_rate:g}): {annotation.calibration.applied_as.label}; AUROC against "
        f"the reference path {_auroc(summary['auroc_before'])} → "
        f"{_auroc(summary['auroc_after'])}.",
        force=True,
    )

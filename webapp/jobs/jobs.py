"""The jobs app's own job kind: the diagnostic, which proves the path form → worker → page and
reports what this installation has (``steplab check`` prints the same report without a worker;
the probes are in ``selectors.system_report``)."""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainer_core.errors import describe_validation_error
from webapp.common.errors import ApplicationError
from webapp.jobs import kinds
from webapp.jobs.context import JobContext, WaitForChildren
from webapp.jobs.models import JobStatus
from webapp.jobs.names import Kinds, Queue, Tasks
from webapp.jobs.selectors import system_report


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.DIAGNOSTIC,
            label="Diagnostic",
            task_name=Tasks.DIAGNOSTIC,
            queue=Queue.DEFAULT,
            resumable=True,
            detail_template="jobs/partials/diagnostic_detail.html",
            description=(
                "Runs N steps on a worker, records a metric per step and reports what this "
                "installation has: database, broker, sandboxes, browser, torch."
            ),
        )
    )


class DiagnosticParams(BaseModel):
    """Parameters of a diagnostic job (shown as help in its form)."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(
        20, ge=1, le=100_000, description="How many steps to run; each records one metrics point."
    )
    step_seconds: float = Field(
        0.2, ge=0.0, le=60.0, description="How long each step takes, in seconds."
    )
    children: int = Field(
        0,
        ge=0,
        le=100,
        description="Fan out: run this many child diagnostic jobs (each with the same steps) and finish when the last one does.",
    )
    fail_at_step: int = Field(
        0, ge=0, description="Raise an error at this step, to see how a failure looks (0: never)."
    )
    report: bool = Field(
        True, description="Include the system report (database, broker, sandboxes, browser, torch)."
    )


def diagnostic_params(raw: dict[str, Any]) -> DiagnosticParams:
    try:
        return DiagnosticParams.model_validate(raw)
    except ValidationError as exc:
        problems = describe_validation_error(exc, whole="params")
        raise ApplicationError(f"Invalid diagnostic parameters: {problems}.") from None


class DiagnosticFailure(RuntimeError):
    """The failure a diagnostic was asked to raise (fail_at_step)."""


def _metric(step: int, steps: int) -> dict[str, float]:
    """A smooth, deterministic curve, so the chart shows something worth seeing."""
    x = step / steps
    return {
        "loss": round(2.0 * math.exp(-3.0 * x) + 0.05 * math.sin(step), 5),
        "accuracy": round(1.0 - math.exp(-4.0 * x), 5),
    }


def diagnostic_run(*, ctx: JobContext) -> WaitForChildren | None:
    """Run the diagnostic. Resumable: a resumed attempt starts after the last recorded step."""
    params = diagnostic_params(ctx.params)

    if params.children and ctx.stage == "":
        for index in range(params.children):
            ctx.spawn(
                Kinds.DIAGNOSTIC,
                {
                    "steps": params.steps,
                    "step_seconds": params.step_seconds,
                    "report": False,
                    "fail_at_step": params.fail_at_step,
                },
            )
            ctx.log(f"scheduled child {index + 1} of {params.children}")
        ctx.progress(0.0, f"Scheduled {params.children} child jobs.", force=True)
        return ctx.wait_for_children(next_stage="summarize")

    if ctx.stage == "summarize":
        statuses = list(ctx.children().values_list("status", flat=True))
        failed = sum(1 for s in statuses if s != JobStatus.SUCCEEDED)
        ctx.set_result(children={"total": len(statuses), "succeeded": len(statuses) - failed})
        if failed:
            raise ApplicationError(
                f"{failed} of {len(statuses)} child jobs did not succeed; open them below for their errors."
            )
        if params.report:
            ctx.set_result(report=system_report())
        ctx.progress(1.0, f"All {len(statuses)} child jobs succeeded.", force=True)
        return None

    if params.report and "report" not in ctx.result:
        ctx.progress(0.0, "Probing the system…")
        ctx.set_result(report=system_report())
    done = int(ctx.state.get("completed_steps", 0))
    if done:
        ctx.log(f"resuming after step {done} of {params.steps} (attempt {ctx.attempt})")
    for step in range(done + 1, params.steps + 1):
        if step == params.fail_at_step:
            raise DiagnosticFailure(
                f"the diagnostic was asked to fail at step {step} (fail_at_step={step})"
            )
        if params.step_seconds:
            time.sleep(params.step_seconds)
        values = _metric(step, params.steps) | {"attempt": ctx.attempt}
        ctx.progress(
            step / params.steps,
            f"Step {step} of {params.steps}",
            step=step,
            metrics=values,
            state={"completed_steps": step},
        )
    ctx.progress(1.0, f"Ran {params.steps} steps.", force=True)
    return None

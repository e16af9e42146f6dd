"""The diagnostic job: proves the path form → worker → page, and reports what this installation
has. ``steplab check`` prints the same report without a worker."""

from __future__ import annotations

import math
import os
import shutil
import time
from typing import Any

from django.conf import settings
from django.db import connection
from pydantic import BaseModel, ConfigDict, Field, ValidationError

import trainer_core
from trainer_core.errors import describe_validation_error
from trainer_core.system import Check, probe_machine
from webapp.common.errors import ApplicationError
from webapp.jobs import kinds
from webapp.jobs.context import JobContext, WaitForChildren
from webapp.jobs.models import JobStatus


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


def _mask(url: str) -> str:
    from webapp.jobs.services import _mask_url

    return _mask_url(url)


def probe_database() -> Check:
    try:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT version()")
                version = cursor.fetchone()[0].split(",")[0]
            elif connection.vendor == "sqlite":
                cursor.execute("SELECT sqlite_version()")
                version = f"SQLite {cursor.fetchone()[0]}"
                cursor.execute("PRAGMA journal_mode")
                version += f", journal_mode={cursor.fetchone()[0]}"
            else:
                cursor.execute("SELECT 1")
                version = connection.vendor
    except Exception as exc:
        return Check(
            "database",
            "error",
            f"{connection.vendor}: {exc}",
            "check DATABASE_URL and that the server runs",
        )
    name = connection.settings_dict.get("NAME")
    return Check("database", "ok", f"{connection.vendor}: {version} (database {name})")


def probe_broker() -> Check:
    from webapp.config.celery import app

    url = app.conf.broker_url or ""
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
            transport = (
                conn.transport_cls
                if isinstance(conn.transport_cls, str)
                else conn.transport.driver_name
            )
    except Exception as exc:
        return Check(
            "broker",
            "error",
            f"{_mask(url)}: {exc}",
            "check CELERY_BROKER_URL and that the broker runs",
        )
    return Check("broker", "ok", f"{_mask(url)} ({transport})")


def probe_data_dir() -> Check:
    data_dir = settings.STEPLAB_DATA_DIR
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe = data_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        return Check(
            "data dir",
            "error",
            f"{data_dir}: {exc}",
            "set STEPLAB_DATA_DIR to a writable directory",
        )
    free_gb = shutil.disk_usage(data_dir).free / 1e9
    return Check("data dir", "ok", f"{data_dir} (writable, {free_gb:.1f} GB free)")


def system_report() -> list[dict[str, str]]:
    checks = [
        Check("steplab", "ok", f"trainer_core {trainer_core.__version__}, pid {os.getpid()}"),
        probe_database(),
        probe_broker(),
        probe_data_dir(),
        *probe_machine(),
    ]
    return [c.as_dict() for c in checks]


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
                kinds.DIAGNOSTIC,
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

"""Diagnostic job task."""

from __future__ import annotations

from webapp.jobs import task_names
from webapp.jobs.diagnostic import diagnostic_run
from workers.base import job_task


@job_task(task_names.DIAGNOSTIC)
def run_diagnostic(ctx):
    return diagnostic_run(ctx=ctx)

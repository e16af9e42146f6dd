"""Diagnostic job task."""

from __future__ import annotations

from webapp.jobs.jobs import diagnostic_run
from webapp.jobs.names import Tasks
from workers.base import job_task


@job_task(Tasks.DIAGNOSTIC)
def run_diagnostic(ctx):
    return diagnostic_run(ctx=ctx)

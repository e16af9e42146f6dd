"""Trajectory import job task."""

from __future__ import annotations

from webapp.jobs.names import Tasks
from webapp.trajectories.jobs import import_run
from workers.base import job_task


@job_task(Tasks.IMPORT_TRAJECTORIES)
def import_trajectories(ctx):
    return import_run(ctx=ctx)

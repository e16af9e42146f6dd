"""Trajectory import job task."""

from __future__ import annotations

from webapp.jobs import task_names
from webapp.trajectories.importjob import import_run
from workers.base import job_task


@job_task(task_names.IMPORT_TRAJECTORIES)
def import_trajectories(ctx):
    return import_run(ctx=ctx)

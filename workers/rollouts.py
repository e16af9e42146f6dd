"""Collect job tasks: the parent that fans out, and the children that play episodes."""

from __future__ import annotations

from webapp.jobs import task_names
from webapp.rollouts.collectjob import collect_episodes_run, collect_run
from workers.base import job_task


@job_task(task_names.COLLECT)
def collect(ctx):
    return collect_run(ctx=ctx)


@job_task(task_names.COLLECT_EPISODES)
def collect_episodes(ctx):
    return collect_episodes_run(ctx=ctx)

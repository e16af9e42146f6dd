"""Collect job tasks: the parent that fans out, and the children that play episodes."""

from __future__ import annotations

from webapp.jobs.names import Tasks
from webapp.rollouts.branch_jobs import branch_run
from webapp.rollouts.jobs import collect_episodes_run, collect_run, try_run
from workers.base import job_task


@job_task(Tasks.COLLECT)
def collect(ctx):
    return collect_run(ctx=ctx)


@job_task(Tasks.COLLECT_EPISODES)
def collect_episodes(ctx):
    return collect_episodes_run(ctx=ctx)


@job_task(Tasks.TRY_POLICY)
def try_policy(ctx):
    return try_run(ctx=ctx)


@job_task(Tasks.BRANCH)
def branch(ctx):
    return branch_run(ctx=ctx)

"""Scoring job task (judge queue)."""

from __future__ import annotations

from webapp.jobs.names import Tasks
from webapp.rewards.jobs import score_run
from workers.base import job_task


@job_task(Tasks.SCORE)
def score(ctx):
    return score_run(ctx=ctx)

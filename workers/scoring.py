"""Scoring job task (judge queue)."""

from __future__ import annotations

from webapp.jobs import task_names
from webapp.rewards.scorejob import score_run
from workers.base import job_task


@job_task(task_names.SCORE)
def score(ctx):
    return score_run(ctx=ctx)

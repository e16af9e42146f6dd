"""Evaluation and pipeline job tasks: both are parents that schedule children and return."""

from __future__ import annotations

from webapp.evaluation.jobs import evaluation_run, pipeline_run
from webapp.jobs.names import Tasks
from workers.base import job_task


@job_task(Tasks.EVALUATE)
def evaluate(ctx):
    return evaluation_run(ctx=ctx)


@job_task(Tasks.PIPELINE)
def pipeline(ctx):
    return pipeline_run(ctx=ctx)

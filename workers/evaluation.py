"""Evaluation and pipeline job tasks: both are parents that schedule children and return."""

from __future__ import annotations

from webapp.evaluation.pipeline import pipeline_job
from webapp.evaluation.services import evaluation_job
from webapp.jobs import task_names
from workers.base import job_task


@job_task(task_names.EVALUATE)
def evaluate(ctx):
    return evaluation_job(ctx=ctx)


@job_task(task_names.PIPELINE)
def pipeline(ctx):
    return pipeline_job(ctx=ctx)

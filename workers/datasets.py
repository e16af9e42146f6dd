"""Dataset export, training and tiny-model job tasks."""

from __future__ import annotations

from webapp.datasets.jobs import export_run
from webapp.jobs.names import Tasks
from webapp.training.jobs import tiny_model_run, train_run
from workers.base import job_task


@job_task(Tasks.EXPORT_DATASET)
def export_dataset(ctx):
    return export_run(ctx=ctx)


@job_task(Tasks.TRAIN)
def train(ctx):
    return train_run(ctx=ctx)


@job_task(Tasks.CREATE_TINY_MODEL)
def create_tiny_model(ctx):
    return tiny_model_run(ctx=ctx)

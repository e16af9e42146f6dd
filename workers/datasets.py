"""Dataset export and training job tasks."""

from __future__ import annotations

from webapp.datasets.services import export_run
from webapp.jobs import task_names
from webapp.training.services import train_run
from workers.base import job_task


@job_task(task_names.EXPORT_DATASET)
def export_dataset(ctx):
    return export_run(ctx=ctx)


@job_task(task_names.TRAIN)
def train(ctx):
    return train_run(ctx=ctx)

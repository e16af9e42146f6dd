"""Calibration job tasks: a simulated annotator's labels, fit and apply (a parent that waits for
the re-scoring it launches)."""

from __future__ import annotations

from webapp.calibration.jobs import simulated_calibration_run
from webapp.jobs.names import Tasks
from workers.base import job_task


@job_task(Tasks.CALIBRATE_SIMULATED)
def calibrate_simulated(ctx):
    return simulated_calibration_run(ctx=ctx)

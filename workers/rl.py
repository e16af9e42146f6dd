"""Decoupled RL job tasks: the run's parent, its samplers (rollouts queue) and its trainer (gpu)."""

from __future__ import annotations

from webapp.jobs.names import Tasks
from webapp.training.rl_jobs import rl_run, rl_sampler_run, rl_trainer_run
from workers.base import job_task


@job_task(Tasks.RL)
def rl(ctx):
    return rl_run(ctx=ctx)


@job_task(Tasks.RL_SAMPLER)
def rl_sampler(ctx):
    return rl_sampler_run(ctx=ctx)


@job_task(Tasks.RL_TRAINER)
def rl_trainer(ctx):
    return rl_trainer_run(ctx=ctx)

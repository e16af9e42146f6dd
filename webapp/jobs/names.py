"""Every name the job system shares between webapp, workers and settings, in one place.

- ``Queue``: the queues workers consume. Settings route tasks to them (``TASK_ROUTES``), the
  dashboard lists them, ``steplab worker`` consumes all of them by default.
- ``Tasks``: the registered names of the Celery tasks. Webapp services send tasks by these names
  (``celery_app.send_task(name, ...)``) and never import ``workers``; the worker modules register
  their tasks under the same constants. A name starts with its queue's area so that
  ``TASK_ROUTES`` routes it ("rollouts.*", "judge.*", "gpu.*").
- ``Kinds``: the job kinds (``Job.kind``). Each app registers its kinds in its ``jobs.py``; its
  services create jobs of those kinds.

This module imports nothing of Django, so ``settings.py`` reads it too.
"""

from __future__ import annotations

import enum


class Queue(enum.StrEnum):
    DEFAULT = "default"  # diagnostics, imports, exports, scoring bookkeeping
    ROLLOUTS = "rollouts"  # episodes in sandboxes
    JUDGE = "judge"  # LLM-judge calls (rate limited)
    GPU = "gpu"  # training and local-model inference; one task at a time per GPU worker


ALL_QUEUES: list[str] = [q.value for q in Queue]

# Celery routes a task by the area its name starts with.
TASK_ROUTES: dict[str, dict[str, str]] = {
    "rollouts.*": {"queue": Queue.ROLLOUTS.value},
    "judge.*": {"queue": Queue.JUDGE.value},
    "gpu.*": {"queue": Queue.GPU.value},
    "*": {"queue": Queue.DEFAULT.value},
}


class Tasks:
    """Registered Celery task names."""

    DIAGNOSTIC = "jobs.diagnostic"
    REAP_DEAD_JOBS = "jobs.reap_dead"
    IMPORT_TRAJECTORIES = "jobs.import_trajectories"
    COLLECT = "rollouts.collect"
    COLLECT_EPISODES = "rollouts.collect_episodes"
    TRY_POLICY = "rollouts.try_policy"
    BRANCH = "rollouts.branch"
    SCORE = "judge.score"
    EXPORT_DATASET = "jobs.export_dataset"
    TRAIN = "gpu.train"
    CREATE_TINY_MODEL = "jobs.create_tiny_model"
    EVALUATE = "jobs.evaluate"
    PIPELINE = "jobs.pipeline"
    CALIBRATE_SIMULATED = "jobs.calibrate_simulated"
    RL = "jobs.rl"
    RL_SAMPLER = "rollouts.rl_sampler"
    RL_TRAINER = "gpu.rl_trainer"


class Kinds:
    """Job kinds, as stored in ``Job.kind``."""

    DIAGNOSTIC = "diagnostic"
    IMPORT_TRAJECTORIES = "trajectories.import"
    COLLECT = "rollouts.collect"
    COLLECT_EPISODES = "rollouts.collect_episodes"
    TRY_POLICY = "rollouts.try"
    BRANCH = "rollouts.branch"
    SCORE = "rewards.score"
    EXPORT_DATASET = "datasets.export"
    TRAIN = "training.train"
    CREATE_TINY_MODEL = "training.create_tiny_model"
    EVALUATE = "evaluation.run"
    PIPELINE = "evaluation.pipeline"
    CALIBRATE_SIMULATED = "calibration.simulate"
    RL = "training.rl"
    RL_SAMPLER = "training.rl_sampler"
    RL_TRAINER = "training.rl_trainer"

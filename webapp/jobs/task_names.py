"""The registered names of every Celery task, in one place.

Webapp services send tasks by these names (``celery_app.send_task(name, ...)``) and never import
``workers``; the worker modules register their tasks under the same constants. A name starts with
its queue's area so that CELERY_TASK_ROUTES can route it ("rollouts.*", "judge.*", "gpu.*").
"""

from __future__ import annotations

# jobs
DIAGNOSTIC = "jobs.diagnostic"
REAP_DEAD_JOBS = "jobs.reap_dead"

# trajectories
IMPORT_TRAJECTORIES = "jobs.import_trajectories"

# rollouts
COLLECT = "rollouts.collect"
COLLECT_EPISODES = "rollouts.collect_episodes"

# rewards
SCORE = "judge.score"

# datasets and training
EXPORT_DATASET = "jobs.export_dataset"
TRAIN = "gpu.train"

# evaluation
EVALUATE = "jobs.evaluate"
PIPELINE = "jobs.pipeline"

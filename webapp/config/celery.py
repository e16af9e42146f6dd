"""The Celery app. Workers start with ``celery -A webapp.config worker -Q <queues>``.

The task modules live in ``workers/`` (the layer above webapp); they are named here as strings
so that webapp never imports them. Webapp services send tasks by their registered names
(``webapp/jobs/names.py``).
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
os.environ.setdefault("OMP_NUM_THREADS", "1")

WORKER_MODULES = [
    "workers.presence",
    "workers.diagnostics",
    "workers.trajectories",
    "workers.rollouts",
    "workers.scoring",
    "workers.datasets",
    "workers.evaluation",
    "workers.calibration",
    "workers.rl",
]

app = Celery("steplab", include=WORKER_MODULES)
app.config_from_object("django.conf:settings", namespace="CELERY")

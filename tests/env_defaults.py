"""Loaded as a pytest plugin (``-p tests.env_defaults``) before Django's settings are read.

Tests run on PostgreSQL by default (``STEPLAB_TEST_DATABASE_URL`` or DATABASE_URL, else the local
server with trust auth) and on SQLite when ``STEPLAB_TEST_DB=sqlite`` (``python3 run.py test`` runs
the ``sqlite``-marked subset that way). The broker is always Redis database 15, so a development
worker never steals test tasks. Job timings are shortened so dead-worker detection takes seconds.
"""

from __future__ import annotations

import os
import tempfile

_db = os.environ.get("STEPLAB_TEST_DB", "postgres").lower()
if _db == "sqlite":
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("STEPLAB_VAR_DIR", tempfile.mkdtemp(prefix="steplab-test-var-"))
elif _db in ("postgres", "postgresql"):
    os.environ["DATABASE_URL"] = os.environ.get(
        "STEPLAB_TEST_DATABASE_URL",
        os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/steplab",
    )
    os.environ.setdefault("STEPLAB_VAR_DIR", tempfile.mkdtemp(prefix="steplab-test-var-"))
else:
    raise SystemExit(f"STEPLAB_TEST_DB={_db!r}: use postgres or sqlite")

os.environ["CELERY_BROKER_URL"] = os.environ.get(
    "STEPLAB_TEST_BROKER_URL", "redis://127.0.0.1:6379/15"
)
for _name, _value in {
    "DEBUG": "1",
    "STEPLAB_JOB_HEARTBEAT_SECONDS": "0.5",
    "STEPLAB_JOB_DEAD_AFTER_SECONDS": "4",
    "STEPLAB_PROGRESS_MIN_INTERVAL": "0.2",
    "STEPLAB_WORKER_ONLINE_SECONDS": "6",
    "STEPLAB_BROKER_VISIBILITY_TIMEOUT": "60",
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
}.items():
    os.environ[_name] = _value
os.environ.pop("SECRET_KEY", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")

"""How fast can a job report? Progress writes per second, throttled and not, on SQLite and
PostgreSQL.

    .venv/bin/python bench/bench_job_progress.py            # SQLite in a temp dir
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/steplab_bench .venv/bin/python bench/bench_job_progress.py

Prints: raw ``job_record_progress`` writes/s (each one UPDATE + metrics INSERT), and
``JobContext.progress`` calls/s with the default 0.5 s throttle (what a training loop pays per
report), and how many writes the throttle let through.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
if not os.environ.get("DATABASE_URL"):
    os.environ["STEPLAB_VAR_DIR"] = tempfile.mkdtemp(prefix="steplab-bench-")
os.environ.setdefault("CELERY_BROKER_URL", "filesystem://")


def main() -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    if connection.vendor == "postgresql":
        from psycopg import connect

        dsn = connection.settings_dict
        with connect(
            host=dsn["HOST"] or "127.0.0.1",
            port=dsn["PORT"] or 5432,
            user=dsn["USER"] or "postgres",
            dbname="postgres",
            autocommit=True,
        ) as admin:
            exists = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname=%s", [dsn["NAME"]]
            ).fetchone()
            if not exists:
                admin.execute(f'CREATE DATABASE "{dsn["NAME"]}"')
    call_command("migrate", verbosity=0)

    from webapp.jobs import services
    from webapp.jobs.context import JobContext
    from webapp.jobs.models import Job, JobStatus

    def running_job() -> Job:
        now = timezone.now()
        return Job.objects.create(
            kind="diagnostic",
            status=JobStatus.RUNNING,
            worker="bench:1",
            started_at=now,
            heartbeat_at=now,
        )

    n = 2000
    job = running_job()
    t0 = time.perf_counter()
    for i in range(n):
        services.job_record_progress(
            job_id=job.pk,
            worker="bench:1",
            progress=i / n,
            message=f"step {i}",
            metric_points=[(i, {"loss": 1.0 / (i + 1)})],
        )
    raw = n / (time.perf_counter() - t0)

    job = running_job()
    ctx = JobContext(job, worker="bench:1")
    calls = 200_000
    t0 = time.perf_counter()
    for i in range(calls):
        ctx.progress(i / calls, None, step=i, metrics={"loss": 1.0 / (i + 1)})
    ctx.flush()
    elapsed = time.perf_counter() - t0
    throttled = calls / elapsed
    points = job.metric_points.count()

    print(f"database: {connection.vendor}")
    print(f"job_record_progress (unthrottled, 1 UPDATE + 1 metrics INSERT): {raw:,.0f} writes/s")
    print(
        f"JobContext.progress (throttled to one write per {ctx_interval()} s): {throttled:,.0f} calls/s over {elapsed:.1f} s"
    )
    print(
        f"  metrics points kept: {points:,} of {calls:,} (all of them, batched into the throttled writes)"
    )
    print(f"  ratio throttled/unthrottled reports per second: {throttled / raw:,.0f}x")


def ctx_interval() -> float:
    from django.conf import settings

    return settings.STEPLAB_PROGRESS_MIN_INTERVAL


if __name__ == "__main__":
    main()

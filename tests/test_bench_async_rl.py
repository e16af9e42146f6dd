"""bench/async_rl.py in its smallest ``--quick`` shape, for real: the app's RL jobs on Celery workers
the bench starts (parent, trainer, one sampler process), a synchronous and a decoupled run to the
same number of trained samples, each validated; and what the bench started (its database, its
workers) is gone after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
import psycopg
import pytest
import redis
from psycopg import sql

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.worker, pytest.mark.slow]


def _bench_database() -> tuple[str, str, dict]:
    """A database beside the test one (a leftover of an interrupted run is dropped first: the
    bench refuses a database it did not create)."""
    test_url = os.environ["DATABASE_URL"]
    db = dj_database_url.parse(test_url)
    name = f"{db['NAME']}_asyncrlbench"
    server = dict(
        host=db.get("HOST") or "127.0.0.1",
        port=db.get("PORT") or 5432,
        user=db.get("USER") or "postgres",
        password=db.get("PASSWORD") or None,
    )
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
    return urlsplit(test_url)._replace(path=f"/{name}").geturl(), name, server


def test_quick_bench_trains_both_modes_to_the_same_samples_and_leaves_nothing(tmp_path):
    database_url, name, server = _bench_database()
    broker = os.environ["CELERY_BROKER_URL"]  # the test broker (tests/env_defaults.py)
    with redis.Redis.from_url(broker) as queue:
        queue.flushdb()  # no task left by another test reaches the bench's workers
    figures_path = tmp_path / "figures.json"
    argv = ["--quick", "--samplers", "1", "--seeds", "0", "--eval-tasks", "5"]
    argv += ["--database-url", database_url, "--broker-url", broker, "--json", str(figures_path)]

    done = subprocess.run(  # noqa: S603 - our own bench
        [sys.executable, "bench/async_rl.py", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(figures_path.read_text())
    runs = {r["mode"]: r for r in figures["runs"]}
    assert set(runs) == {"sync", "decoupled"}
    for run in runs.values():
        # quick: 4 steps x 2 groups x 4 episodes, one version per step
        assert run["samples"] == 32 and run["steps"] == 4
        assert [v for v, _ in run["versions"]] == [0, 1, 2, 3, 4]
        assert sum(run["staleness"].values()) == 8
    assert set(runs["sync"]["staleness"]) == {"0"} and runs["sync"]["dropped"] == 0
    assert max(int(s) for s in runs["decoupled"]["staleness"]) <= 2  # max_staleness
    assert figures["speedup"]["1"]["rounds"] == [runs["sync"]["wall"] / runs["decoupled"]["wall"]]
    assert "sync − decoupled at equal time" in done.stdout
    # gone again: the database and every worker it started
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        assert not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert f"async-rl-{figures['tag']}-" not in left

"""Trajectory store at scale, on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/steplab_scale .venv/bin/python bench/trajectory_scale.py
    (--trajectories 100000 --steps-per 20: 2,000,000 steps; the fill is COPY from a generator and is
    kept between runs, so a second run only measures)

Prints the actual row counts and p50/p95 server times (the view, in-process, through Django's test
client) against the goals of the trajectories issue: list with two filters < 100 ms; full-text
search < 300 ms; first screen of a 500-step trajectory < 200 ms; diff of two 500-step
trajectories < 300 ms; import >= 10,000 steps/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/steplab_scale")
os.environ.setdefault("CELERY_BROKER_URL", "filesystem://")
os.environ.setdefault("STEPLAB_VAR_DIR", tempfile.mkdtemp(prefix="steplab-scale-"))
os.environ["ALLOWED_HOSTS"] = "testserver,localhost"

WORDS = "alpha beta gamma delta kernel parser socket index buffer render widget queue token cache".split()
TOOLS = ["bash", "read_file", "edit_file", "grep", "submit"]


def ensure_database() -> None:
    from django.db import connection
    from psycopg import connect

    dsn = connection.settings_dict
    with connect(
        host=dsn["HOST"] or "127.0.0.1",
        port=dsn["PORT"] or 5432,
        user=dsn["USER"] or "postgres",
        dbname="postgres",
        autocommit=True,
    ) as admin:
        if not admin.execute(
            "SELECT 1 FROM pg_database WHERE datname=%s", [dsn["NAME"]]
        ).fetchone():
            admin.execute(f'CREATE DATABASE "{dsn["NAME"]}"')


TRAJ_COLS = [
    "id",
    "task_ref",
    "task_set_name",
    "prompt",
    "domain",
    "agent",
    "model",
    "policy",
    "environment",
    "source",
    "source_format",
    "status",
    "success",
    "reward",
    "step_count",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "outcome",
    "metadata",
    "tags",
    "schema_version",
    "created_at",
]
STEP_COLS = ["trajectory_id", "index", "thought", "tool", "params", "observation", "metadata"]


def _trajectory_row(rng: random.Random, pk: int, steps_per: int, now) -> tuple:
    """One finished rollout row, in TRAJ_COLS order."""
    success = rng.random() < 0.4
    return (
        pk,
        f"task-{pk % 500}",
        "bench",
        f"Fix {rng.choice(WORDS)} in module {pk % 97}",
        rng.choice(["coding", "conversation", "arithmetic"]),
        rng.choice(["swe-agent", "openhands", "scripted"]),
        rng.choice(["gpt-4o", "claude", "tiny"]),
        "",
        "steplab/sandbox",
        "rollout",
        "steplab",
        "finished",
        success,
        1.0 if success else 0.0,
        steps_per,
        0,
        0,
        0.0,
        json.dumps({"success": success}),
        "{}",
        "[]",
        "1.0",
        now,
    )


def _step_rows(rng: random.Random, pk: int, steps_per: int):
    """The step rows of trajectory ``pk``, in STEP_COLS order."""
    for s in range(steps_per):
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        yield (
            pk,
            s,
            f"I think about {words}",
            rng.choice(TOOLS),
            json.dumps({"command": f"cat f{s}.py"}),
            f"output {words} line {s}",
            "{}",
        )


def _copy(cursor, table: str, cols: list[str], rows) -> None:
    """COPY ``rows`` into ``table`` (PostgreSQL's fastest bulk load)."""
    names = ", ".join(chr(34) + c + chr(34) for c in cols)
    with cursor.cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(row)


def fill(n_traj: int, steps_per: int) -> None:
    from django.db import connection
    from django.utils import timezone

    from webapp.trajectories.models import Step, Trajectory

    have = Trajectory.objects.count()
    if have >= n_traj:
        return
    rng = random.Random(have)
    now = timezone.now()
    start_id = (Trajectory.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
    todo = n_traj - have
    pks = range(start_id, start_id + todo)
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        traj_table, step_table = Trajectory._meta.db_table, Step._meta.db_table
        _copy(
            cursor, traj_table, TRAJ_COLS, (_trajectory_row(rng, pk, steps_per, now) for pk in pks)
        )
        _copy(
            cursor,
            step_table,
            STEP_COLS,
            (row for pk in pks for row in _step_rows(rng, pk, steps_per)),
        )
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{traj_table}', 'id'), (SELECT max(id) FROM {traj_table}))"
        )
    from webapp.trajectories.services import trajectories_index_for_search

    t1 = time.perf_counter()
    trajectories_index_for_search(ids=list(pks))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"search documents for {todo:,} trajectories in {time.perf_counter() - t1:.0f}s")
    print(
        f"filled {todo:,} trajectories / {todo * steps_per:,} steps in {time.perf_counter() - t0:.0f}s (COPY)"
    )


def long_pair() -> tuple[int, int]:
    from trainer_core.recording.importers import ImportResult
    from trainer_core.recording.schema import Step, TaskRef, Trajectory
    from webapp.trajectories.models import Trajectory as Row
    from webapp.trajectories.services import trajectories_import

    found = list(
        Row.objects.filter(task_ref="bench-long").order_by("id").values_list("id", flat=True)[:2]
    )
    if len(found) == 2:
        return found[0], found[1]
    specs = []
    for variant in range(2):
        steps = [
            Step(
                index=i,
                tool=TOOLS[i % 4],
                params={"command": f"step {i}{'x' if variant and i % 50 == 0 else ''}"},
                observation=f"observation {i} " + "text " * 40,
            )
            for i in range(500)
        ]
        specs.append(
            Trajectory(task=TaskRef(id="bench-long", prompt=f"long {variant}"), steps=steps)
        )
    created = trajectories_import(results=[ImportResult("long.json", "steplab", "", specs)]).created
    return created[0], created[1]


def timed(client, url: str, runs: int) -> tuple[float, float]:
    times = []
    client.get(url)  # warm
    for _ in range(runs):
        t0 = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)]


def import_rate() -> float:
    from trainer_core.recording.importers import ImportResult
    from trainer_core.recording.schema import Step, TaskRef, Trajectory
    from webapp.trajectories.services import trajectories_import

    tag = random.random()
    specs = [
        Trajectory(
            task=TaskRef(id=f"imp-{tag}-{t}", prompt=f"import {tag} {t}"),
            steps=[
                Step(
                    index=i,
                    tool="bash",
                    params={"command": f"echo {tag} {t} {i}"},
                    observation=f"{t} {i}",
                )
                for i in range(50)
            ],
        )
        for t in range(400)
    ]
    t0 = time.perf_counter()
    trajectories_import(results=[ImportResult("rate.json", "steplab", "", specs)])
    return 400 * 50 / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trajectories", type=int, default=100_000)
    parser.add_argument("--steps-per", type=int, default=20)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--common", default="kernel parser", help="a search that matches most steps"
    )
    parser.add_argument("--rare", default="zyzzyva", help="a search that matches (almost) nothing")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from webapp.accounts.models import User
    from webapp.trajectories.models import Step, Trajectory

    ensure_database()
    call_command("migrate", verbosity=0)
    fill(args.trajectories, args.steps_per)
    a, b = long_pair()
    print(f"rows: {Trajectory.objects.count():,} trajectories, {Step.objects.count():,} steps")
    user, _ = User.objects.get_or_create(username="bench", defaults={"role": "viewer"})
    client = Client()
    client.force_login(user)
    goals = [
        ("list, two filters", "/trajectories/?domain=coding&outcome=failure", 100),
        (
            "full-text search, common words",
            f"/trajectories/?q={args.common.replace(' ', '+')}",
            300,
        ),
        ("full-text search, rare word", f"/trajectories/?q={args.rare}", 300),
        ("500-step trajectory, first screen", f"/trajectories/{a}/", 200),
        ("diff of two 500-step trajectories", f"/trajectories/diff/?a={a}&b={b}", 300),
    ]
    print(f"{'what':<36} {'p50 ms':>8} {'p95 ms':>8} {'goal ms':>8}")
    for label, url, goal in goals:
        p50, p95 = timed(client, url, args.runs)
        print(f"{label:<36} {p50:>8.1f} {p95:>8.1f} {goal:>8} {'ok' if p95 < goal else 'MISSED'}")
    rate = import_rate()
    print(
        f"{'import (400 x 50 steps, COPY)':<36} {rate:>8,.0f} steps/s (goal >= 10,000) {'ok' if rate >= 10_000 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()

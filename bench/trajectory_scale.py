"""Trajectory store at scale, on PostgreSQL, over HTTP.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/steplab_scale .venv/bin/python bench/trajectory_scale.py
    (--trajectories 100000 --steps-per 20: 2,000,000 steps; the fill is COPY from a generator and is
    kept between runs, so a second run only measures; --in-process: Django's test client instead)

Serves the app as the run command does off loopback (gunicorn, DEBUG=0, static files collected)
on a free loopback port, logs one viewer in through the login form and prints the actual row
counts and p50/p95 client-side times against the goals of the trajectories issues: list with two
filters < 100 ms; the list with its filter menus recomputed (a new trajectory before each
request: the menus' cache key is the newest row) and cached < 100 ms; full-text search < 300 ms;
first screen of a 500-step trajectory < 200 ms; the diff of two 500-step trajectories < 300 ms,
timed from the page's request until every aligned row is shown (the page and every request it
triggers: the rows it loads as soon as it is shown, followed one after the other as a browser
does); the menus' query alone (in this process, cache cleared) < 100 ms; import >= 10,000
steps/s (400 trajectories of 50 steps through ``trajectories_import``; the many-small-files import
is ``bench/import_many.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import logging
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/steplab_scale")
os.environ.setdefault("CELERY_BROKER_URL", "filesystem://")
if "STEPLAB_VAR_DIR" not in os.environ:  # bench/load.py imports this with its own
    os.environ["STEPLAB_VAR_DIR"] = tempfile.mkdtemp(prefix="steplab-scale-")
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
    "message_count",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "outcome",
    "metadata",
    "tags",
    "schema_version",
    "created_at",
]
STEP_COLS = [
    "trajectory_id",
    "index",
    "kind",
    "role",
    "text",
    "thought",
    "tool",
    "params",
    "observation",
    "metadata",
]


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
            "tool",
            "",
            "",
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


def long_pair(task: str = "bench-long") -> tuple[int, int]:
    """Two 500-step trajectories of ``task`` (made once): every 50th step's command differs."""
    from trainer_core.recording.importers import ImportResult
    from trainer_core.recording.schema import Step, TaskRef, Trajectory
    from webapp.trajectories.models import Trajectory as Row
    from webapp.trajectories.services import trajectories_import

    found = list(Row.objects.filter(task_ref=task).order_by("id").values_list("id", flat=True)[:2])
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
        prompt = f"long {variant}" if task == "bench-long" else f"long {variant} {task}"
        specs.append(Trajectory(task=TaskRef(id=task, prompt=prompt), steps=steps))
    created = trajectories_import(results=[ImportResult("long.json", "steplab", "", specs)]).created
    return created[0], created[1]


def timed(get, url: str, runs: int, before=None) -> tuple[float, float]:
    """p50 and p95 ms of ``get(url)`` (``before()`` runs untimed before each request)."""
    times = []
    get(url)  # warm
    for _ in range(runs):
        if before is not None:
            before()
        t0 = time.perf_counter()
        status, _ = get(url)
        times.append((time.perf_counter() - t0) * 1000)
        assert status == 200, (url, status)
    return _p50_p95(times)


def _p50_p95(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)]


LOADER = re.compile(r'<tr[^>]*\bhx-get="([^"]+)"[^>]*\bhx-trigger="load"')
DIFF_ROW = re.compile(r'<tr class="diff-[^"]*" data-kind="')


def diff_until_shown(get, url: str) -> tuple[float, int, int]:
    """The diff page and every request it triggers (the rows it loads as soon as it is shown,
    one after the other as the browser does), until none is left: (ms, aligned rows shown,
    requests)."""
    t0 = time.perf_counter()
    status, body = get(url)
    assert status == 200, (url, status)
    rows, requests = len(DIFF_ROW.findall(body)), 1
    while found := LOADER.search(body):
        status, body = get(html.unescape(found.group(1)))
        assert status == 200, (found.group(1), status)
        rows, requests = rows + len(DIFF_ROW.findall(body)), requests + 1
    return (time.perf_counter() - t0) * 1000, rows, requests


def timed_diff(get, url: str, runs: int) -> tuple[float, float, int, int]:
    diff_until_shown(get, url)  # warm
    results = [diff_until_shown(get, url) for _ in range(runs)]
    p50, p95 = _p50_p95([ms for ms, _, _ in results])
    return p50, p95, results[-1][1], results[-1][2]


def add_trajectory() -> None:
    """A new trajectory (the filter menus' cache key is the newest row: they are recomputed)."""
    from webapp.trajectories.models import Trajectory

    Trajectory.objects.create(
        source="rollout", status="finished", agent="bench-new", domain="coding", model="tiny"
    )


@contextlib.contextmanager
def served(password_user: tuple[str, str]):
    """gunicorn as the run command starts it off loopback (DEBUG=0, a random SECRET_KEY, static
    files collected) on a free loopback port; yields ``get(url) -> (status, text)`` of a client
    logged in through the login form. Stopped at the end."""
    import httpx2
    from django.db import connection

    from webapp.cli.serving import web_argv

    logging.getLogger("httpx2").setLevel(logging.WARNING)  # not a line per request

    workdir = Path(tempfile.mkdtemp(prefix="steplab-scale-http-"))
    settings = connection.settings_dict
    env = dict(
        os.environ,
        DATABASE_URL=os.environ["DATABASE_URL"],
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(64),
        STEPLAB_HTTPS="0",
        ALLOWED_HOSTS="127.0.0.1",
        STEPLAB_VAR_DIR=str(workdir / "var"),
        STEPLAB_DATA_DIR=str(workdir / "data"),
        STATIC_ROOT=str(workdir / "static"),
        OMP_NUM_THREADS="1",
    )
    assert settings["NAME"] in env["DATABASE_URL"]
    collect = [sys.executable, "-m", "django", "collectstatic", "--noinput", "-v", "0"]
    subprocess.run(collect, cwd=REPO, env=env, check=True)  # noqa: S603
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(workdir / "web.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(  # noqa: S603
        web_argv("127.0.0.1", port, debug=False),
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=60.0, trust_env=False) as http:  # fmt: skip
            _wait_and_login(http, server, workdir / "web.log", *password_user)

            def get(url: str) -> tuple[int, str]:
                response = http.get(url)
                return response.status_code, response.text

            yield get
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_and_login(http, server, log: Path, username: str, password: str) -> None:
    import httpx2

    deadline = time.monotonic() + 60
    while True:
        if server.poll() is not None:
            raise SystemExit(f"the web server exited: {log.read_text()[-2000:]}")
        try:
            page = http.get("/login/")
            if page.status_code == 200:
                break
        except httpx2.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the web server did not answer within 60 s")
        time.sleep(0.2)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    data = {"username": username, "password": password, "csrfmiddlewaretoken": token}
    response = http.post("/login/", data=data)
    if response.status_code != 302 or "sessionid" not in http.cookies:
        raise SystemExit(f"logging in failed: HTTP {response.status_code}")


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
    parser.add_argument(
        "--in-process", action="store_true", help="Django's test client instead of HTTP"
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from webapp.trajectories.models import Step, Trajectory

    ensure_database()
    call_command("migrate", verbosity=0)
    fill(args.trajectories, args.steps_per)
    a, b = long_pair()
    print(f"rows: {Trajectory.objects.count():,} trajectories, {Step.objects.count():,} steps")
    account = bench_user()
    with contextlib.ExitStack() as stack:
        if args.in_process:
            get = in_process(account)
            print("server times: the views in-process, through Django's test client")
        else:
            get = stack.enter_context(served(account))
            print("over HTTP: gunicorn on loopback (2 workers), one client, times client-side")
        measure_pages(get, args, a, b)
    rate = import_rate()
    print(
        f"{'import (400 x 50 steps, COPY)':<44} {rate:>8,.0f} steps/s (goal >= 10,000) {'ok' if rate >= 10_000 else 'MISSED'}"
    )


def bench_user() -> tuple[str, str]:
    """A viewer account with a fresh password (username, password)."""
    from webapp.accounts.models import User

    password = secrets.token_urlsafe(16)
    user, _ = User.objects.get_or_create(username="bench", defaults={"role": "viewer"})
    user.set_password(password)
    user.save()
    return user.username, password


def in_process(account: tuple[str, str]):
    from django.test import Client

    from webapp.accounts.models import User

    client = Client()
    client.force_login(User.objects.get(username=account[0]))

    def get(url: str) -> tuple[int, str]:
        response = client.get(url)
        return response.status_code, response.content.decode()

    return get


def measure_pages(get, args, a: int, b: int) -> None:
    goals = [
        ("list, two filters", "/trajectories/?domain=coding&outcome=failure", 100, None),
        ("list, menus recomputed (new trajectory)", "/trajectories/", 100, add_trajectory),
        ("list, menus cached", "/trajectories/", 100, None),
        (
            "full-text search, common words",
            f"/trajectories/?q={args.common.replace(' ', '+')}",
            300,
            None,
        ),
        ("full-text search, rare word", f"/trajectories/?q={args.rare}", 300, None),
        ("500-step trajectory, first screen", f"/trajectories/{a}/", 200, None),
    ]
    print(f"{'what':<44} {'p50 ms':>8} {'p95 ms':>8} {'goal ms':>8}")
    for label, url, goal, before in goals:
        p50, p95 = timed(get, url, args.runs, before)
        print(f"{label:<44} {p50:>8.1f} {p95:>8.1f} {goal:>8} {'ok' if p95 < goal else 'MISSED'}")
    p50, p95, rows, requests = timed_diff(get, f"/trajectories/diff/?a={a}&b={b}", args.runs)
    label = f"diff, 500 steps: {rows} rows, {requests} requests"
    print(f"{label:<44} {p50:>8.1f} {p95:>8.1f} {300:>8} {'ok' if p95 < 300 else 'MISSED'}")
    pairs = [long_pair(f"bench-long-{n}") for n in range(args.runs)]
    firsts = [diff_until_shown(get, f"/trajectories/diff/?a={x}&b={y}")[0] for x, y in pairs]
    p50, p95 = _p50_p95(firsts)
    label = "diff, first view of a pair (not cached)"
    print(f"{label:<44} {p50:>8.1f} {p95:>8.1f} {300:>8} {'ok' if p95 < 300 else 'MISSED'}")
    p50, p95 = menus_query(args.runs)
    label = "menus' query alone (server, uncached)"
    print(f"{label:<44} {p50:>8.1f} {p95:>8.1f} {100:>8} {'ok' if p95 < 100 else 'MISSED'}")


def menus_query(runs: int) -> tuple[float, float]:
    from django.core.cache import cache

    from webapp.trajectories.selectors import filter_choices

    times = []
    for _ in range(runs):
        cache.clear()
        t0 = time.perf_counter()
        filter_choices()
        times.append((time.perf_counter() - t0) * 1000)
    return _p50_p95(times)


if __name__ == "__main__":
    main()

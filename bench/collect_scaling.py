"""Collect throughput with 1 and 2 rollouts worker processes, and the per-step overhead of
``steplab/mcp`` over the raw MCP call.

    eval "$(bash scripts/mcp-servers.sh)"   # optional: the stdio MCP server (else it is skipped)
    .venv/bin/python bench/collect_scaling.py [--episodes 200] [--delay 0.05 0] [--repeat 2]

What runs: a scripted collect job (``collect_launch``) of N arithmetic episodes (2 steps each:
calculator, submit) on real ``celery -A webapp.config worker`` processes (prefork pool), each
started in its own process group and killed with it at the end.

- Every scenario has one extra worker on the ``default`` queue only (pool of 1) for the parent job
  (``rollouts.collect``), so the comparison is about the ``rollouts`` queue alone:
  scenario "1 worker" = one worker process on ``rollouts`` with a pool of 1;
  scenario "2 workers" = two worker processes on ``rollouts``, each with a pool of 1.
  The run's ``concurrency`` (child jobs, default 4) is above the number of rollouts slots, so the
  slots, not the fan-out, limit the run.
- Policy: ``Policy(kind="scripted", parameters={"delay": D})``. The per-step think time D stands in
  for a model's latency (the real case: an LLM call per step), so the fan-out is what is measured;
  ``--delay 0`` shows the figure with no think time, bound by the CPU and the database's commits
  (on a 2-core machine the workers, PostgreSQL and this process share the cores). Each delay in
  ``--delay`` is measured in turn, ``--repeat`` times (the table shows the median run).
- Fresh workers per scenario, warmed by a small collect run (so first imports are not timed).
- Wall time: from ``collect_launch`` to the parent job's terminal state (polled every 20 ms);
  printed with the episodes, steps, episodes/minute and the ratio (2 workers / 1 worker). The
  counts are checked: every episode finished, one finished trajectory per episode, each with its
  steps stored once. The defaults take about 2.5 minutes on 2 cores.

Isolation: a throwaway PostgreSQL database (``steplab_bench_collect`` on 127.0.0.1:5432, dropped
and re-created, migrated, dropped at the end) and Redis database 14 (flushed first and at the
end), so neither the development data nor the test suite (Redis 15, ``test_steplab*``) is touched.

Then ``bench/mcp_overhead.py``'s ``measure(--mcp-calls)`` (raw ``ClientSession.call_tool`` vs
``McpEnv.step``, stdio and streamable HTTP), printed with its skip reason when mcp-server-time is
not installed; ``--mcp-calls 0`` skips it.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DB_NAME = "steplab_bench_collect"
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
DATABASE_URL = f"postgres://{PG['user']}@{PG['host']}:{PG['port']}/{DB_NAME}"
BROKER_URL = "redis://127.0.0.1:6379/14"
VAR_DIR = Path(tempfile.mkdtemp(prefix="steplab-bench-collect-"))

# Set before Django or Celery read their settings; the workers inherit the same environment.
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "webapp.config.settings",
        "DATABASE_URL": DATABASE_URL,
        "CELERY_BROKER_URL": BROKER_URL,
        "STEPLAB_VAR_DIR": str(VAR_DIR),
        "STEPLAB_DATA_DIR": str(VAR_DIR / "data"),
        "DEBUG": "0",  # no query log in memory: what a production worker pays
        "SECRET_KEY": secrets.token_urlsafe(48),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }
)

PARENT_QUEUE = "default"
ROLLOUTS_QUEUE = "rollouts"
WARMUP_EPISODES_PER_SLOT = 2
WARMUP_DELAY = 0.05  # long enough that every pool process gets an episode
POLL = 0.02


# --- the database and the broker ----------------------------------------------------------------


def _admin():
    from psycopg import connect

    return connect(dbname="postgres", autocommit=True, **PG)


def database_recreate() -> None:
    with _admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DB_NAME}"')


def database_drop() -> None:
    from django.db import connections

    connections.close_all()
    with _admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


def broker_flush() -> None:
    import redis

    client = redis.Redis.from_url(BROKER_URL)
    try:
        client.flushdb()
    finally:
        client.close()


# --- worker processes ---------------------------------------------------------------------------


class Worker:
    """A ``celery worker`` subprocess in its own process group (main process + pool children)."""

    def __init__(self, name: str, queues: str, pool: int = 1) -> None:
        self.name = name
        self.queues = queues
        self.pool = pool
        self.log_path = VAR_DIR / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> Worker:
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "webapp.config",
            "worker",
            "-Q",
            self.queues,
            "--pool",
            "prefork",
            "--concurrency",
            str(self.pool),
            "--loglevel",
            "INFO",
            "-n",
            f"{self.name}@bench",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(  # noqa: S603
            argv,
            cwd=ROOT,
            env=dict(os.environ),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise RuntimeError(f"worker {self.name} exited with {code}:\n{self.log_tail()}")
            if b" ready." in self.log_path.read_bytes():
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker {self.name} not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM the process group (warm shutdown), then SIGKILL whatever is left of it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # pool children that outlived the main one
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None


def start_workers(rollouts: int) -> list[Worker]:
    tag = uuid.uuid4().hex[:4]
    workers = [Worker(f"parent-{tag}", PARENT_QUEUE)]
    workers += [Worker(f"rollouts{i + 1}-{tag}", ROLLOUTS_QUEUE) for i in range(rollouts)]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.wait_ready()
    except BaseException:
        stop_workers(workers)
        raise
    return workers


def stop_workers(workers: list[Worker]) -> None:
    for worker in workers:
        worker.stop()


# --- one collect run ----------------------------------------------------------------------------


@dataclass
class Result:
    label: str
    rollouts_workers: int
    delay: float
    episodes: int
    finished: int
    trajectories: int
    steps: int
    children: int
    wall_s: float
    repeat: int = 1

    @property
    def per_minute(self) -> float:
        return self.episodes / self.wall_s * 60.0


def make_task_set(n: int, name: str):
    from trainer_core.tasks.files import dump_tasks_jsonl
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
    from webapp.tasks.services import task_set_import

    tasks = arithmetic_tasks("train", n=n)
    for task in tasks:
        task.environment = "steplab/arithmetic"
    task_set, _ = task_set_import(text=dump_tasks_jsonl(tasks), name=name)
    task_set.environment = "steplab/arithmetic"
    task_set.save(update_fields=["environment"])
    return task_set


def policy_for(delay: float):
    from webapp.rollouts.models import Policy

    policy, _ = Policy.objects.get_or_create(
        name=f"scripted-delay-{delay:g}",
        defaults={"kind": "scripted", "parameters": {"delay": delay}},
    )
    return policy


def collect(task_set, policy, concurrency: int, timeout: float) -> tuple[Any, float]:
    """Launch a collect run and wait for its parent job to end: (run, seconds)."""
    from webapp.jobs.models import Job
    from webapp.rollouts.services import collect_launch

    started = time.perf_counter()
    run = collect_launch(
        task_set=task_set,
        policy=policy,
        episodes_per_task=1,
        max_steps=8,
        concurrency=concurrency,
    )
    deadline = time.monotonic() + timeout
    while True:
        job = Job.objects.get(pk=run.job_id)
        if job.is_terminal:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"collect run {run.pk} not done after {timeout:.0f}s: job {job.pk} "
                f"{job.status}, {job.message!r}"
            )
        time.sleep(POLL)
    wall = time.perf_counter() - started
    if job.status != "succeeded":
        raise RuntimeError(f"collect job {job.pk} ended {job.status}: {job.error}")
    run.refresh_from_db()
    return run, wall


def verify(run) -> tuple[int, int, int, int]:
    """(finished episodes, finished trajectories, steps, child jobs); raises when they disagree."""
    from django.db.models import Count

    from webapp.jobs.models import Job
    from webapp.trajectories.models import Step, Trajectory

    episodes = run.episodes.all()
    finished = episodes.filter(status="finished").count()
    trajectories = Trajectory.objects.filter(metadata__collect_run=run.pk)
    done = trajectories.filter(status="finished").count()
    steps = Step.objects.filter(trajectory__in=trajectories).count()
    stored = sum(trajectories.values_list("step_count", flat=True))
    per = trajectories.annotate(n=Count("steps")).values_list("n", "step_count")
    children = Job.objects.filter(parent_id=run.job_id).count()
    problems = []
    if finished != run.episodes_total:
        problems.append(f"{finished} of {run.episodes_total} episodes finished")
    if done != run.episodes_total or trajectories.count() != run.episodes_total:
        problems.append(f"{done} finished trajectories of {trajectories.count()}")
    if steps != stored or any(n != count for n, count in per):
        problems.append(f"{steps} step rows but step_count adds up to {stored}")
    if run.successes != run.episodes_total:
        problems.append(f"{run.successes} successes of {run.episodes_total}")
    if problems:
        raise RuntimeError(f"collect run {run.pk}: " + "; ".join(problems))
    return finished, done, steps, children


def scenario(
    rollouts: int, delays: list[float], task_sets: dict[str, Any], args: argparse.Namespace
) -> list[Result]:
    label = f"{rollouts} worker{'s' if rollouts > 1 else ''}"
    workers = start_workers(rollouts)
    results = []
    try:
        # warm every pool process (imports, first connections) before anything is timed
        collect(task_sets["warmup"], policy_for(WARMUP_DELAY), args.concurrency, args.timeout)
        for delay in delays:
            for attempt in range(args.repeat):
                run, wall = collect(
                    task_sets["main"], policy_for(delay), args.concurrency, args.timeout
                )
                finished, trajectories, steps, children = verify(run)
                result = Result(
                    label=label,
                    rollouts_workers=rollouts,
                    delay=delay,
                    episodes=run.episodes_total,
                    finished=finished,
                    trajectories=trajectories,
                    steps=steps,
                    children=children,
                    wall_s=wall,
                    repeat=attempt + 1,
                )
                results.append(result)
                print(
                    f"  {label}, delay {delay:g} s, run {attempt + 1}/{args.repeat}: "
                    f"{result.episodes} episodes, {steps} steps in {wall:.2f} s = "
                    f"{result.per_minute:,.0f} episodes/min",
                    flush=True,
                )
    except Exception:
        for worker in workers:
            print(f"----- log of {worker.name} -----\n{worker.log_tail()}", file=sys.stderr)
        raise
    finally:
        stop_workers(workers)
    return results


def _median(results: list[Result]) -> Result:
    """One row for repeated runs: the first run's counts with the median wall time."""
    return dataclasses.replace(results[0], wall_s=statistics.median(r.wall_s for r in results))


def format_table(results: list[Result]) -> str:
    groups: dict[tuple[float, int], list[Result]] = {}
    for r in results:
        groups.setdefault((r.delay, r.rollouts_workers), []).append(r)
    lines = [
        f"{'delay s':>7} {'rollouts workers':>16} {'episodes':>8} {'finished':>8} "
        f"{'trajectories':>12} {'steps':>6} {'children':>8} {'wall s (median)':>15} "
        f"{'episodes/min':>12}  all runs, s"
    ]
    by: dict[tuple[float, int], Result] = {}
    for key in sorted(groups, key=lambda k: (-k[0], k[1])):
        r = by[key] = _median(groups[key])
        every = " ".join(f"{g.wall_s:.2f}" for g in groups[key])
        lines.append(
            f"{r.delay:>7g} {r.rollouts_workers:>16} {r.episodes:>8} {r.finished:>8} "
            f"{r.trajectories:>12} {r.steps:>6} {r.children:>8} {r.wall_s:>15.2f} "
            f"{r.per_minute:>12,.0f}  {every}"
        )
    lines.append("")
    for delay in sorted({d for d, _ in by}, reverse=True):
        one, two = by.get((delay, 1)), by.get((delay, 2))
        if one and two:
            lines.append(
                f"ratio 2 workers / 1 worker, delay {delay:g} s: "
                f"{two.per_minute / one.per_minute:.2f}x episodes/min "
                f"({one.per_minute:,.0f} -> {two.per_minute:,.0f})"
            )
    return "\n".join(lines)


# --- the MCP part -------------------------------------------------------------------------------


def mcp_part(calls: int) -> None:
    print(f"\n== steplab/mcp overhead per step over the raw MCP call ({calls} calls each) ==")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import mcp_overhead
    except ImportError as exc:
        print(f"skipped: {exc}")
        return
    results = mcp_overhead.measure(calls)
    print(mcp_overhead.format_results(results))  # a skipped transport's row says why


# --- main ---------------------------------------------------------------------------------------


def header(args: argparse.Namespace) -> str:
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg = cursor.fetchone()[0]
    import celery
    import django

    return "\n".join(
        [
            "== Collect scaling: episodes per minute with 1 and 2 rollouts worker processes ==",
            f"machine: {platform.node()} {platform.machine()}, {cores} cores ({usable} usable), "
            f"load average {load}",
            f"software: Python {platform.python_version()}, Django {django.get_version()}, "
            f"Celery {celery.__version__}, PostgreSQL {pg}",
            f"database: {DATABASE_URL} (throwaway); broker: {BROKER_URL} (flushed)",
            f"run: {args.episodes} arithmetic episodes (1 per task, 2 steps each), scripted "
            f"policy with per-step delay {', '.join(f'{d:g}' for d in args.delay)} s, "
            f"collect concurrency {args.concurrency} child jobs, {args.repeat} measured run(s) "
            "each (median)",
            "workers: prefork, pool of 1 each; +1 worker on 'default' for the parent job; "
            "scenarios: 1 vs 2 worker processes on 'rollouts' (fresh, warmed by "
            f"{WARMUP_EPISODES_PER_SLOT} episodes per slot)",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200, help="episodes per measured run")
    parser.add_argument(
        "--delay",
        type=float,
        nargs="+",
        default=[0.05, 0.0],
        help="scripted think time per step in seconds; each value is measured (default 0.05 0)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, help="child jobs per collect run (>= 2)"
    )
    parser.add_argument(
        "--repeat", type=int, default=2, help="measured runs per scenario and delay (median)"
    )
    parser.add_argument("--mcp-calls", type=int, default=200, help="0 skips the MCP part")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per collect run")
    args = parser.parse_args()
    if args.episodes < 1 or args.concurrency < 2 or args.repeat < 1:
        parser.error("--episodes and --repeat must be at least 1, --concurrency at least 2")
    if any(d < 0 or d > 60 for d in args.delay):
        parser.error("each --delay must be within 0..60 seconds")

    started = time.perf_counter()
    results: list[Result] = []
    try:
        database_recreate()
        broker_flush()
        import django

        django.setup()
        logging.getLogger().setLevel(logging.WARNING)  # no per-request lines from the MCP clients
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(header(args), flush=True)
        task_sets = {
            "main": make_task_set(args.episodes, "bench-collect"),
            "warmup": make_task_set(WARMUP_EPISODES_PER_SLOT * 2, "bench-collect-warmup"),
        }
        for rollouts in (1, 2):
            results += scenario(rollouts, args.delay, task_sets, args)
    finally:
        for cleanup in (broker_flush, database_drop):
            try:
                cleanup()
            except Exception as exc:
                print(f"cleanup {cleanup.__name__} failed: {exc}", file=sys.stderr)
        shutil.rmtree(VAR_DIR, ignore_errors=True)
    print()
    print(format_table(results))
    if args.mcp_calls > 0:
        mcp_part(args.mcp_calls)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Rule-only scoring at scale: a ``rewards.score`` job over 10,000 coding trajectories on a real
``judge``-queue worker, and where the time goes.

    .venv/bin/python bench/scoring_scale.py [--trajectories 10000] [--keep-db]

Goal (rewards issue): "Rule-only scoring of 10,000 trajectories finishes in seconds."

What runs:

- Fill: N coding trajectories of 10-20 steps each (read_file, grep, edit_file, bash running
  pytest, list_dir, a final submit; observations of a few hundred characters of numbered source
  lines, grep hits and pytest failures; about 1 in 5 trajectories re-reads a file it already
  read, some steps fail: a missing file, an edit whose text is not found, a command not found),
  stored with ``trajectories_import`` (COPY) in batches of 1,000. Prints the fill time and the
  row counts.
- ``rubrics_seed(domain="coding")`` and two rules-only reward-model versions (no judge): one to warm the
  worker up, one measured (a version scores each trajectory once, so the warm-up must not use
  the measured version).
- End to end: one ``celery worker -Q judge --pool prefork --concurrency 1`` in its own process
  group, started and warmed up by a 50-trajectory run of the warm-up version. Timed: from
  ``scoring_launch`` (all N trajectories) to the job's terminal state, polled every 20 ms. The
  counts are checked: N TrajectoryScore rows and one StepScore row per stored step.
- Breakdown, in this process with no worker, with a third version and the job's own code path
  (batches of ``webapp.rewards.jobs.BATCH``): the already-scored lookup and loading (``trajectory_specs``,
  the reference steps), scoring (``score_trajectory``), building the rows, and inserting them
  (the two ``bulk_create`` calls and the run's counters in one transaction). Then, for
  comparison, the same StepScore rows stored for a fourth version as tuples through COPY into a
  temporary table and ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` (not what the job does).
  The defaults take about 2 minutes on 2 cores (the fill is about 25 s of it).

Isolation: a throwaway PostgreSQL database (``steplab_bench_scoring`` on 127.0.0.1:5432, dropped
and re-created, migrated, dropped at the end unless ``--keep-db``) and Redis database 13 (flushed
first and at the end). The worker's process group is killed at the end, on errors and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DB_NAME = "steplab_bench_scoring"
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
DATABASE_URL = f"postgres://{PG['user']}@{PG['host']}:{PG['port']}/{DB_NAME}"
BROKER_URL = "redis://127.0.0.1:6379/13"
VAR_DIR = Path(tempfile.mkdtemp(prefix="steplab-bench-scoring-"))

# Set before Django or Celery read their settings; the worker inherits the same environment.
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

DOMAIN = "coding"
IMPORT_BATCH = 1_000
WARMUP_TRAJECTORIES = 50
POLL = 0.02
GOAL_SECONDS = 15.0  # "finishes in seconds": the figure this bench holds the job to

# --- realistic coding trajectories ----------------------------------------------------------------

MODULES = ["parser", "loader", "config", "models", "utils", "cache", "client", "server", "views"]
PACKAGES = ["src/app", "src/core", "lib/io", "pkg/net"]
FUNCS = [
    "load_config",
    "parse_header",
    "read_chunk",
    "build_index",
    "flush_cache",
    "open_session",
    "resolve_path",
    "encode_token",
    "render_page",
    "split_lines",
    "merge_items",
    "validate_input",
]
CLASSES = ["ConfigLoader", "HeaderParser", "ChunkReader", "IndexBuilder", "SessionPool"]
ERRORS = ["AttributeError", "KeyError", "ValueError", "TypeError", "AssertionError"]
THOUGHTS = [
    "Let me look at how {func} is used before changing it.",
    "The failing test points at {path}; reading it.",
    "{cls} probably mishandles an empty input here.",
    "Running the tests again to see whether the fix holds.",
    "Searching for other callers of {func}.",
]


def _path(rng: random.Random) -> str:
    return f"{rng.choice(PACKAGES)}/{rng.choice(MODULES)}.py"


def _source(rng: random.Random, start: int, lines: int) -> str:
    out = []
    for n in range(start, start + lines):
        kind = rng.random()
        if kind < 0.3:
            line = f"def {rng.choice(FUNCS)}(self, path, size=4096):"
        elif kind < 0.5:
            line = f"    return {rng.choice(CLASSES)}(path).{rng.choice(FUNCS)}()"
        elif kind < 0.7:
            line = f"    self.{rng.choice(FUNCS)}_count += 1  # see {_path(rng)}"
        else:
            line = f"    value = data[{n}] if {rng.choice(FUNCS)}(x) else None"
        out.append(f"{n:>4}\t{line}")
    return "\n".join(out)


def _pytest(rng: random.Random, failed: int) -> str:
    lines = [
        f"FAILED tests/test_{rng.choice(MODULES)}.py::test_{rng.choice(FUNCS)} - "
        f"{rng.choice(ERRORS)}: '{rng.choice(CLASSES)}' object has no attribute "
        f"'{rng.choice(FUNCS)}'"
        for _ in range(failed)
    ]
    passed = rng.randint(12, 80)
    summary = f"{failed} failed, {passed} passed" if failed else f"{passed} passed"
    return "\n".join([*lines, f"=== {summary} in 0.{rng.randint(10, 99)}s ==="])


class _Agent:
    """A simulated coding agent writing one trajectory's steps. Each move draws from ``rng`` in
    a fixed order, so a seed always gives the same trajectories."""

    def __init__(self, rng: random.Random, target: str, func: str, cls: str, failing: int) -> None:
        self.rng, self.target, self.func, self.cls = rng, target, func, cls
        self.failing = failing  # tests still failing: an edit may fix one
        self.steps: list[Any] = []
        self.read: list[str] = []  # files read so far
        self.edits: list[tuple[str, str, str]] = []  # (path, old, new) of the edits so far

    def add(self, tool: str, params: dict[str, Any], observation: str, **extra: Any) -> None:
        from trainer_core.recording.schema import Step

        rng = self.rng
        thought = rng.choice(THOUGHTS).format(func=self.func, path=self.target, cls=self.cls)
        self.steps.append(
            Step(
                index=len(self.steps),
                thought=thought,
                tool=tool,
                params=params,
                observation=observation,
                tokens_in=rng.randint(800, 4000),
                tokens_out=rng.randint(20, 200),
                duration=round(rng.uniform(0.01, 2.0), 3),
                **extra,
            )
        )

    def reread(self) -> None:
        """Read a file it already read, with nothing changed in between (redundant)."""
        path = self.rng.choice(self.read)
        self.add("read_file", {"file_path": path}, _source(self.rng, 1, self.rng.randint(6, 10)))

    def read_file(self) -> None:
        """Read the target or another file (1 in 20 is missing: a failed step)."""
        rng = self.rng
        path = self.target if rng.random() < 0.5 else _path(rng)
        if rng.random() < 0.05:
            missing = path.replace(".py", "_old.py")
            self.add(
                "read_file",
                {"file_path": missing},
                f"Error: file not found: {missing}",
                error="FileNotFoundError",
            )
            return
        start = rng.choice((1, 1, 40, 120))
        params: dict[str, Any] = {"file_path": path}
        if start > 1:
            params.update(start_line=start, end_line=start + 40)
        self.add("read_file", params, _source(rng, start, rng.randint(6, 10)))
        self.read.append(path)

    def grep(self) -> None:
        rng = self.rng
        hits = "\n".join(
            f"{_path(rng)}:{rng.randint(1, 400)}:    {self.func}(self.{rng.choice(FUNCS)})"
            for _ in range(rng.randint(3, 8))
        )
        self.add("grep", {"pattern": self.func, "path": rng.choice(PACKAGES)}, hits)

    def edit(self) -> None:
        """Edit the target or another file; 1 in 12 undoes an earlier edit (a regression) and
        1 in 12 fails (the old text is not found)."""
        rng = self.rng
        path = self.target if rng.random() < 0.7 else _path(rng)
        if self.edits and rng.random() < 0.08:  # undo an earlier edit (a regression)
            path, old, new = rng.choice(self.edits)
            old, new = new, old
        else:
            old = f"return {rng.choice(FUNCS)}(path)"
            new = f"return {self.func}(path, size={rng.randint(1, 9)})"
        if rng.random() < 0.08:
            self.add(
                "edit_file",
                {"file_path": path, "old_string": old, "new_string": new},
                f"Error: old_string not found in {path}. Read the file again and copy the "
                "text exactly.",
                error="edit failed",
            )
            return
        self.edits.append((path, old, new))
        self.add(
            "edit_file",
            {"file_path": path, "old_string": old, "new_string": new},
            f"The file {path} has been edited: 1 replacement.\n"
            + _source(rng, rng.randint(1, 200), 4),
        )
        self.failing = max(0, self.failing - (1 if rng.random() < 0.6 else 0))

    def run_tests(self) -> None:
        """Run pytest (1 in 25 is a typo: command not found)."""
        rng = self.rng
        if rng.random() < 0.04:
            self.add(
                "bash",
                {"command": "pytset -q"},
                "bash: pytset: command not found",
                exit_code=127,
            )
            return
        command = rng.choice(
            ("python -m pytest -q", "pytest -x tests", f"pytest -q -k {self.func}", "pytest -q")
        )
        self.add(
            "bash",
            {"command": command},
            _pytest(rng, self.failing),
            exit_code=1 if self.failing else 0,
        )

    def list_dir(self) -> None:
        package = self.rng.choice(PACKAGES)
        listing = "  ".join(f"{m}.py" for m in self.rng.sample(MODULES, 6))
        self.add(
            "list_dir",
            {"path": package},
            f"{package}/:\n{listing}\n__init__.py  README.md  tests/",
        )


def make_trajectory(number: int, rng: random.Random):
    """One coding agent's trajectory: explore, reproduce, edit, re-run the tests, submit."""
    from trainer_core.recording.schema import Outcome, TaskRef, Trajectory

    target, func, cls = _path(rng), rng.choice(FUNCS), rng.choice(CLASSES)
    length = rng.randint(10, 20)
    redundant = rng.random() < 0.2  # re-reads a file it read, with nothing changed in between
    success = rng.random() < 0.45
    agent = _Agent(rng, target, func, cls, failing=rng.randint(1, 3))
    while len(agent.steps) < length - 1:
        roll = rng.random()
        if redundant and agent.read and rng.random() < 0.15:
            agent.reread()
        elif roll < 0.28:
            agent.read_file()
        elif roll < 0.45:
            agent.grep()
        elif roll < 0.62:
            agent.edit()
        elif roll < 0.90:
            agent.run_tests()
        else:
            agent.list_dir()
    agent.add(
        "submit",
        {"summary": f"Fixed {func} in {target}: {cls} now handles an empty input."},
        "Submitted. The hidden tests will run.",
    )
    total = rng.randint(20, 80)
    passed = total if success else rng.randint(0, total - 1)
    return Trajectory(
        task=TaskRef(
            id=f"bench-task-{number % 500}",
            task_set="bench-scoring",
            domain=DOMAIN,
            prompt=f"#{number}: {cls}.{func} fails on an empty input in {target}; fix it "
            "so the tests pass.",
        ),
        agent=rng.choice(("swe-agent", "openhands", "steplab")),
        model=rng.choice(("gpt-4o", "claude-sonnet", "qwen2.5-coder")),
        environment="steplab/sandbox",
        steps=agent.steps,
        outcome=Outcome(
            success=success,
            tests_passed=passed,
            tests_failed=total - passed,
            partial_credit=round(passed / total, 3),
            terminated=True,
        ),
        metadata={"reference_steps": rng.randint(6, 12)},
    )


def fill(n: int) -> list[int]:
    from trainer_core.recording.importers import ImportResult
    from webapp.trajectories.models import Step, Trajectory
    from webapp.trajectories.services import trajectories_import

    rng = random.Random(20240601)
    ids: list[int] = []
    started = time.perf_counter()
    for first in range(0, n, IMPORT_BATCH):
        specs = [make_trajectory(i, rng) for i in range(first, min(n, first + IMPORT_BATCH))]
        summary = trajectories_import(
            results=[ImportResult(f"bench-{first}.json", "steplab", "1.0", specs)]
        )
        ids += summary.created
    seconds = time.perf_counter() - started
    trajectories, steps = Trajectory.objects.count(), Step.objects.count()
    print(
        f"fill: {trajectories:,} trajectories, {steps:,} steps "
        f"({steps / max(1, trajectories):.1f} steps each) in {seconds:.1f} s "
        f"(trajectories_import, {IMPORT_BATCH:,} per call; generation included)",
        flush=True,
    )
    if trajectories != n or len(ids) != n:
        raise RuntimeError(f"filled {trajectories} trajectories ({len(ids)} created), not {n}")
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return ids


# --- the database and the broker ------------------------------------------------------------------


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


# --- the worker -----------------------------------------------------------------------------------


class Worker:
    """``celery worker -Q judge`` in its own process group (main process + pool child)."""

    def __init__(self, name: str) -> None:
        self.name = name
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
            "judge",
            "--pool",
            "prefork",
            "--concurrency",
            "1",
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
            os.killpg(self.proc.pid, signal.SIGKILL)  # a pool child that outlived the main one
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


# --- end to end -----------------------------------------------------------------------------------


def score_and_wait(reward_model, ids: list[int], timeout: float) -> tuple[Any, Any, float]:
    """Launch a scoring run and wait for its job to end: (run, job, seconds)."""
    from webapp.jobs.models import Job
    from webapp.rewards.services import scoring_launch

    started = time.perf_counter()
    run = scoring_launch(reward_model=reward_model, trajectory_ids=ids)
    deadline = time.monotonic() + timeout
    while True:
        job = Job.objects.get(pk=run.job_id)
        if job.is_terminal:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"scoring run {run.pk} not done after {timeout:.0f}s: job {job.pk} "
                f"{job.status}, {job.message!r}"
            )
        time.sleep(POLL)
    wall = time.perf_counter() - started
    if job.status != "succeeded":
        raise RuntimeError(f"scoring job {job.pk} ended {job.status}: {job.error}")
    run.refresh_from_db()
    return run, job, wall


def verify(run, reward_model, ids: list[int]) -> tuple[int, int]:
    """(TrajectoryScore rows, StepScore rows) of this version; raises when they disagree with
    the trajectories and steps stored."""
    from webapp.rewards.models import StepScore, TrajectoryScore
    from webapp.trajectories.models import Step

    trajectory_rows = TrajectoryScore.objects.filter(reward_model=reward_model).count()
    step_rows = StepScore.objects.filter(reward_model=reward_model).count()
    steps = Step.objects.filter(trajectory_id__in=ids).count()
    unscored = TrajectoryScore.objects.filter(reward_model=reward_model, total__isnull=True).count()
    problems = []
    if trajectory_rows != len(ids) or run.scored != len(ids):
        problems.append(
            f"{trajectory_rows} TrajectoryScore rows, run.scored {run.scored}, "
            f"for {len(ids)} trajectories"
        )
    if step_rows != steps:
        problems.append(f"{step_rows} StepScore rows for {steps} steps")
    if unscored:
        problems.append(f"{unscored} trajectories unscored (total is None)")
    if problems:
        raise RuntimeError(f"scoring run {run.pk}: " + "; ".join(problems))
    return trajectory_rows, step_rows


# --- breakdown, in process ------------------------------------------------------------------------


STAGE_SQL = (
    "CREATE TEMP TABLE IF NOT EXISTS bench_stepscore_stage (reward_model_id bigint, "
    "trajectory_id bigint, index integer, total double precision, rubrics jsonb) "
    "ON COMMIT DELETE ROWS"
)
COPY_SQL = (
    "COPY bench_stepscore_stage (reward_model_id, trajectory_id, index, total, rubrics) FROM STDIN"
)
MOVE_SQL = (
    'INSERT INTO "{table}" (reward_model_id, trajectory_id, index, total, rubrics) '
    "SELECT reward_model_id, trajectory_id, index, total, rubrics "
    "FROM bench_stepscore_stage ON CONFLICT DO NOTHING"
)


def copy_step_scores(reward_model_id: int, results: list[tuple[int, Any]]) -> None:
    """The alternative to ``StepScore.objects.bulk_create`` this bench times (not what the job
    does): rows as tuples, COPY into a temporary table, then ``INSERT ... SELECT ... ON CONFLICT
    DO NOTHING`` so a row that exists is still skipped, as ``ignore_conflicts`` does."""
    import json

    from django.db import connection, transaction

    from webapp.rewards.models import StepScore
    from webapp.rewards.services import rubrics_json

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(STAGE_SQL)
        with cursor.cursor.copy(COPY_SQL) as copy:
            for pk, result in results:
                for step in result.steps:
                    copy.write_row(
                        (
                            reward_model_id,
                            pk,
                            step.index,
                            step.total,
                            json.dumps(rubrics_json(rubrics=step.rubrics)),
                        )
                    )
        cursor.execute(MOVE_SQL.format(table=StepScore._meta.db_table))


def breakdown(reward_model, ids: list[int], alternative=None) -> dict[str, float]:
    """The job's loop (``webapp.rewards.jobs.score_run``) with a timer around each part.
    With ``alternative`` (another version), the same scores are also stored for it with
    :func:`copy_step_scores`, timed as ``copy``."""
    from trainer_core.rewards.scoring import RewardConfig, score_trajectory
    from webapp.domains.selectors import current_profile_spec
    from webapp.rewards.jobs import BATCH
    from webapp.rewards.models import ScoringRun, StepScore, TrajectoryScore
    from webapp.trajectories.selectors import reference_steps, trajectory_specs

    run = ScoringRun.objects.create(reward_model=reward_model, trajectory_ids=ids, total=len(ids))
    config = RewardConfig.from_dict(reward_model.config)
    profile = current_profile_spec(name=reward_model.domain)
    parts = ("lookup", "load", "score", "build_trajectories", "build_steps")
    parts += ("insert_trajectories", "insert_steps", "copy")
    times = dict.fromkeys(parts, 0.0)

    def timed(part: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        value = fn()
        times[part] += time.perf_counter() - start
        return value

    started = time.perf_counter()
    for position in range(0, len(ids), BATCH):
        batch = ids[position : position + BATCH]
        done = timed(
            "lookup",
            lambda batch=batch: set(
                TrajectoryScore.objects.filter(
                    reward_model=reward_model, trajectory_id__in=batch
                ).values_list("trajectory_id", flat=True)
            ),
        )
        todo = [i for i in batch if i not in done]
        specs = timed("load", lambda todo=todo: trajectory_specs(ids=todo))
        references = timed("load", lambda todo=todo: reference_steps(ids=todo))
        results = timed(
            "score",
            lambda todo=todo, specs=specs, references=references: [
                (
                    pk,
                    score_trajectory(
                        specs[pk], config, profile=profile, reference_steps=references.get(pk)
                    ),
                )
                for pk in todo
            ],
        )

        _store_batch(reward_model, run, results, len(done), times)
        if alternative is not None:
            start = time.perf_counter()
            copy_step_scores(alternative.pk, results)
            times["copy"] += time.perf_counter() - start
    times["total"] = time.perf_counter() - started - times["copy"]
    run.refresh_from_db()
    verify(run, reward_model, ids)
    if alternative is not None:
        copied = StepScore.objects.filter(reward_model=alternative).count()
        expected = StepScore.objects.filter(reward_model=reward_model).count()
        if copied != expected:
            raise RuntimeError(f"COPY alternative stored {copied} step scores, not {expected}")
    return times


def _store_batch(reward_model, run, results: list[tuple[int, Any]], skipped: int, times) -> None:
    """One batch's rows built and inserted as the job does, each part timed into ``times``:
    the TrajectoryScore objects, the step-score rows, then in one transaction the TrajectoryScore
    rows, the step scores (the job's own path: COPY on PostgreSQL) and the run's counters."""
    from django.db import transaction
    from django.db.models import F

    from webapp.rewards.models import ScoringRun, TrajectoryScore
    from webapp.rewards.services import rubrics_json, step_scores_insert

    clock = time.perf_counter()
    trajectory_rows = [
        TrajectoryScore(
            reward_model=reward_model,
            trajectory_id=pk,
            total=result.total,
            process=result.process,
            outcome=result.outcome,
            efficiency=result.efficiency,
            unscored_reason=(result.unscored_reason or "")[:300],
        )
        for pk, result in results
    ]
    times["build_trajectories"] += time.perf_counter() - clock
    clock = time.perf_counter()
    step_rows = [
        (pk, step.index, step.total, None, rubrics_json(rubrics=step.rubrics))
        for pk, result in results
        for step in result.steps
    ]
    times["build_steps"] += time.perf_counter() - clock
    clock = time.perf_counter()
    with transaction.atomic():
        TrajectoryScore.objects.bulk_create(trajectory_rows, ignore_conflicts=True, batch_size=1000)
        inner = time.perf_counter()
        step_scores_insert(reward_model_id=reward_model.pk, rows=step_rows)  # the job's own path (COPY on PG)
        step_insert = time.perf_counter() - inner
        ScoringRun.objects.filter(pk=run.pk).update(
            scored=F("scored") + len(trajectory_rows), skipped=F("skipped") + skipped
        )
    times["insert_steps"] += step_insert
    # the TrajectoryScore rows, the run's counters and the commit
    times["insert_trajectories"] += time.perf_counter() - clock - step_insert


# --- main -----------------------------------------------------------------------------------------


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
            "== Rule-only scoring at scale: one rewards.score job on a judge-queue worker ==",
            f"machine: {platform.node()} {platform.machine()}, {cores} cores ({usable} usable), "
            f"load average {load}",
            f"software: Python {platform.python_version()}, Django {django.get_version()}, "
            f"Celery {celery.__version__}, PostgreSQL {pg}",
            f"database: {DATABASE_URL} (throwaway); broker: {BROKER_URL} (flushed)",
            f"run: {args.trajectories:,} coding trajectories, rules-only reward-model version "
            "(no judge); worker: prefork, concurrency 1, -Q judge",
        ]
    )


def goal_verdict(n: int, wall: float) -> str:
    at_10k = wall * 10_000 / n
    verdict = "met" if at_10k < GOAL_SECONDS else "NOT MET"
    if n == 10_000:
        return verdict
    return f"{verdict} if linear ({at_10k:.1f} s for 10,000 at this rate; run with 10,000)"


def _terminate(signum, _frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks: cleanup runs


def create_versions() -> list[Any]:
    """Seed the coding rubrics and create the four rules-only versions: (warm-up, measured,
    breakdown, COPY alternative); prints what was made."""
    from webapp.rewards.services import reward_model_create, rubrics_seed

    rubrics = rubrics_seed(domain=DOMAIN)
    versions = [
        reward_model_create(domain=DOMAIN, note=f"bench: {note}")
        for note in ("warm-up, rules only", "measured, rules only", "breakdown, rules only")
    ]
    versions.append(reward_model_create(domain=DOMAIN, note="bench: COPY alternative"))
    warm_version, measured, in_process, alternative = versions
    evaluators = sorted({r["evaluator"] for r in measured.config["rubrics"]})
    print(
        f"reward model: {rubrics} coding rubrics seeded (evaluators: "
        f"{', '.join(evaluators)}); versions {warm_version.version} (warm-up), "
        f"{measured.version} (measured), {in_process.version} (breakdown), "
        f"{alternative.version} (COPY alternative); judge: none",
        flush=True,
    )
    return versions


def end_to_end(worker: Worker, warm_version, measured, ids: list[int], timeout: float) -> int:
    """Start the worker, warm it up, then time the measured run of all ``ids`` and print the
    figures; returns the StepScore rows it stored."""
    worker.start()
    t0 = time.perf_counter()
    worker.wait_ready()
    ready = time.perf_counter() - t0
    _, _, warm = score_and_wait(warm_version, ids[:WARMUP_TRAJECTORIES], timeout)
    print(
        f"worker ready in {ready:.1f} s; warm-up run of {WARMUP_TRAJECTORIES} trajectories "
        f"in {warm:.2f} s",
        flush=True,
    )

    try:
        run, job, wall = score_and_wait(measured, ids, timeout)
    except Exception:
        print(f"----- log of {worker.name} -----\n{worker.log_tail()}", file=sys.stderr)
        raise
    trajectory_rows, step_rows = verify(run, measured, ids)
    in_job = (job.finished_at - job.started_at).total_seconds()
    print(
        f"\nend to end ({len(ids):,} trajectories, {step_rows:,} steps): {wall:.2f} s from "
        f"scoring_launch to the job's end ({in_job:.2f} s between the job's started_at and "
        f"finished_at; the rest is dispatch and pick-up)\n"
        f"  {len(ids) / wall:,.0f} trajectories/s, {step_rows / wall:,.0f} steps/s\n"
        f"  counts: TrajectoryScore {trajectory_rows:,} (== {len(ids):,} trajectories), "
        f"StepScore {step_rows:,} (== {step_rows:,} stored steps), run.scored "
        f"{run.scored:,}, skipped {run.skipped}: ok\n"
        f"  goal (rewards issue): 10,000 rule-only in seconds (held to < {GOAL_SECONDS:g} s "
        f"here): {goal_verdict(len(ids), wall)}",
        flush=True,
    )
    return step_rows


def print_breakdown(times: dict[str, float], step_rows: int) -> None:
    total = times["total"]
    print(f"\nbreakdown in process (no worker, the job's loop, batches of 250): {total:.2f} s")
    labels = {
        "lookup": "already-scored lookup (TrajectoryScore query)",
        "load": "load (trajectory_specs + reference steps)",
        "score": "score (score_trajectory)",
        "build_trajectories": "build TrajectoryScore objects",
        "build_steps": "build step-score rows (+ rubric JSON)",
        "insert_steps": "insert step scores (COPY + INSERT ... ON CONFLICT)",
        "insert_trajectories": "insert TrajectoryScore + run counters + commit",
    }
    for part, label in labels.items():
        print(f"  {label:<50} {times[part]:>6.2f} s  {times[part] / total:>5.1%}")
    other = total - sum(times[p] for p in labels)
    print(f"  {'other (the loop itself)':<50} {other:>6.2f} s  {other / total:>5.1%}")
    print(
        f"  score_trajectory alone: {step_rows / times['score']:,.0f} steps/s; "
        f"StepScore build + insert: {step_rows / (times['build_steps'] + times['insert_steps']):,.0f} rows/s"
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end: {load} (on {os.cpu_count()} cores)")


def cleanup(worker: Worker | None, keep_db: bool) -> None:
    """Stop the worker, flush the broker, drop the database (unless ``keep_db``), remove the
    temporary folder; a step that fails is reported and the others still run."""
    if worker is not None:
        try:
            worker.stop()
        except Exception as exc:
            print(f"cleanup: stopping the worker failed: {exc}", file=sys.stderr)
    cleanups = [broker_flush] + ([] if keep_db else [database_drop])
    for step in cleanups:
        try:
            step()
        except Exception as exc:
            print(f"cleanup {step.__name__} failed: {exc}", file=sys.stderr)
    if keep_db:
        print(f"kept the database: {DATABASE_URL}")
    shutil.rmtree(VAR_DIR, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument(
        "--keep-db", action="store_true", help=f"keep the database {DB_NAME} at the end"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the job")
    args = parser.parse_args()
    if args.trajectories < WARMUP_TRAJECTORIES:
        parser.error(f"--trajectories must be at least {WARMUP_TRAJECTORIES}")
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background

    started = time.perf_counter()
    worker: Worker | None = None
    try:
        database_recreate()
        broker_flush()
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(header(args), flush=True)

        ids = fill(args.trajectories)
        warm_version, measured, in_process, _alternative = create_versions()
        worker = Worker(f"judge-{secrets.token_hex(2)}")
        step_rows = end_to_end(worker, warm_version, measured, ids, args.timeout)
        worker.stop()
        print_breakdown(breakdown(in_process, ids), step_rows)
    finally:
        cleanup(worker, args.keep_db)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

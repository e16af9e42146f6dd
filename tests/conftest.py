"""Shared fixtures: users per role, a real Celery worker, waiting helpers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from webapp.accounts.models import Role
from webapp.jobs import names

REPO = Path(__file__).resolve().parent.parent
ALL_QUEUES = ",".join(names.ALL_QUEUES)


def wait_for(
    predicate: Callable[[], object],
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    what: str = "condition",
):
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture
def make_user(django_user_model):
    counter = {"n": 0}

    def make(
        role: str = Role.VIEWER, *, username: str | None = None, password: str = "correct-horse-9"
    ):
        counter["n"] += 1
        name = username or f"{role}-{counter['n']}-{uuid.uuid4().hex[:6]}"
        user = django_user_model.objects.create_user(username=name, password=password, role=role)
        user.raw_password = password
        return user

    return make


@pytest.fixture
def operator(make_user):
    return make_user(Role.OPERATOR)


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


# --- a real Celery worker -----------------------------------------------------------------------


def _worker_env() -> dict[str, str]:
    """The worker sees the test database (pytest-django has created and migrated it)."""
    from django.conf import settings
    from django.db import connection

    env = dict(os.environ)
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        user = db.get("USER") or "postgres"
        password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 5432
        env["DATABASE_URL"] = f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"
    else:
        env.pop("DATABASE_URL", None)
        env["STEPLAB_SQLITE_PATH"] = str(db["NAME"])
    env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    env["STEPLAB_DATA_DIR"] = str(settings.STEPLAB_DATA_DIR)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class WorkerProcess:
    """A ``celery worker`` subprocess in its own process group (main process + pool children)."""

    def __init__(self, name: str, log_path: Path, queues: str = ALL_QUEUES, concurrency: int = 2):
        self.name = name
        self.log_path = log_path
        self.queues = queues
        self.concurrency = concurrency
        self.proc: subprocess.Popen | None = None

    @property
    def hostname(self) -> str:
        return f"{self.name}@testhost"

    def start(self, timeout: float = 60.0) -> WorkerProcess:
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
            str(self.concurrency),
            "--loglevel",
            "INFO",
            "-n",
            self.hostname,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(  # noqa: S603
            argv,
            cwd=REPO,
            env=_worker_env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"worker {self.name} exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            if b" ready." in self.log_path.read_bytes():
                return self
            time.sleep(0.1)
        raise AssertionError(f"worker {self.name} not ready after {timeout}s:\n{self.log_tail()}")

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def pids(self) -> list[int]:
        """The main process and its pool children (the whole process group)."""
        if self.proc is None:
            return []
        out = subprocess.run(
            ["ps", "-o", "pid=", "-g", str(self.proc.pid)],
            capture_output=True,
            text=True,
            check=False,
        )  # noqa: S607
        return [int(p) for p in out.stdout.split()]

    def kill(self) -> None:
        """SIGKILL the main process and its children at once: nothing gets to clean up."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        if getattr(self, "_log", None):
            self._log.close()


def _flush_test_broker() -> None:
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        client.flushdb()
    finally:
        client.close()


@pytest.fixture
def worker_factory(transactional_db, tmp_path, request):
    """Start real Celery workers on Redis database 15 that see the test database.

    ``worker_factory()`` starts one consuming every queue and waits until it is ready; call
    ``.kill()`` to SIGKILL it (main process and pool). Every worker is stopped at teardown, and
    its log is printed when the test failed.
    """
    _flush_test_broker()
    started: list[WorkerProcess] = []

    def start(
        name: str | None = None, *, queues: str = ALL_QUEUES, concurrency: int = 2
    ) -> WorkerProcess:
        name = name or f"w{len(started) + 1}-{uuid.uuid4().hex[:6]}"
        worker = WorkerProcess(
            name, tmp_path / f"{name}.log", queues=queues, concurrency=concurrency
        )
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for worker in started:
            print(f"\n----- log of worker {worker.name} -----\n{worker.log_tail(120)}")
    from django.db import connections

    connections.close_all()


@pytest.fixture
def celery_worker(worker_factory):
    """One real Celery worker consuming every queue (the fixture later issues' worker tests use)."""
    return worker_factory("main")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)

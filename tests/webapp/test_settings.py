"""Twelve-factor settings: environment variables with safe development defaults."""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.sqlite


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("DATABASE_URL", "CELERY_", "STEPLAB_", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS")
        )
    }
    env.update(extra)
    return env


def _manage(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=check,
    )


def _settings_value(expr: str, env: dict[str, str]) -> str:
    code = f"import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE','webapp.config.settings'); from django.conf import settings; print({expr})"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = _clean_env(
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="steplab.example.org",
        STEPLAB_VAR_DIR=str(tmp_path),
    )
    proc = _manage("check", "--deploy", "--fail-level", "WARNING", env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout


def test_production_without_a_secret_key_refuses_to_start(tmp_path):
    proc = _manage("check", env=_clean_env(DEBUG="0", STEPLAB_VAR_DIR=str(tmp_path)), check=False)
    assert proc.returncode != 0
    assert "SECRET_KEY is not set and DEBUG=0" in proc.stderr


def test_a_bad_boolean_says_what_is_wrong(tmp_path):
    proc = _manage(
        "check", env=_clean_env(DEBUG="maybe", STEPLAB_VAR_DIR=str(tmp_path)), check=False
    )
    assert proc.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in proc.stderr


def test_defaults_are_sqlite_in_var_with_wal_and_the_filesystem_broker(tmp_path):
    env = _clean_env(STEPLAB_VAR_DIR=str(tmp_path))
    assert (
        _settings_value("settings.DATABASES['default']['ENGINE']", env)
        == "django.db.backends.sqlite3"
    )
    assert _settings_value("settings.DATABASES['default']['NAME']", env) == str(
        tmp_path / "steplab.sqlite3"
    )
    assert _settings_value("settings.CELERY_BROKER_URL", env) == "filesystem://"
    assert _settings_value("settings.STEPLAB_DATA_DIR", env) == str(tmp_path / "data")
    proc = _manage("migrate", "--noinput", env=env)
    assert proc.returncode == 0
    db = sqlite3.connect(tmp_path / "steplab.sqlite3")
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        db.close()
    assert {"jobs_job", "jobs_jobmetricpoint", "jobs_workerpresence", "accounts_user"} <= tables


def test_database_url_broker_url_and_data_dir_come_from_the_environment(tmp_path):
    env = _clean_env(
        DATABASE_URL="postgres://someone:pw@db.internal:6543/steplab_prod",
        CELERY_BROKER_URL="redis://cache.internal:6379/3",
        STEPLAB_DATA_DIR=str(tmp_path / "elsewhere"),
        ALLOWED_HOSTS="a.example,b.example",
        STEPLAB_VAR_DIR=str(tmp_path),
    )
    assert _settings_value("settings.DATABASES['default']['HOST']", env) == "db.internal"
    assert _settings_value("settings.DATABASES['default']['PORT']", env) == "6543"
    assert _settings_value("settings.DATABASES['default']['NAME']", env) == "steplab_prod"
    assert _settings_value("settings.CELERY_BROKER_URL", env) == "redis://cache.internal:6379/3"
    assert _settings_value("settings.STEPLAB_DATA_DIR", env) == str(tmp_path / "elsewhere")
    assert _settings_value("settings.ALLOWED_HOSTS", env) == "['a.example', 'b.example']"


def test_no_model_change_lacks_a_migration(tmp_path):
    proc = _manage(
        "makemigrations",
        "--check",
        "--dry-run",
        env=_clean_env(STEPLAB_VAR_DIR=str(tmp_path)),
        check=False,
    )
    assert proc.returncode == 0, f"models changed without a migration:\n{proc.stdout}{proc.stderr}"


def test_every_migration_runs_on_postgresql_too():
    """The suite itself runs on PostgreSQL in CI; this makes the claim explicit there."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    assert pending == [], f"unapplied migrations on {connection.vendor}: {pending}"


test_every_migration_runs_on_postgresql_too = pytest.mark.django_db(
    test_every_migration_runs_on_postgresql_too
)


def test_task_routes_send_each_area_to_its_queue():
    from django.conf import settings

    from webapp.jobs.names import ALL_QUEUES

    assert settings.STEPLAB_QUEUES == ALL_QUEUES
    from webapp.config.celery import app

    router = app.amqp.router
    for name, queue in [
        ("rollouts.run_episode", "rollouts"),
        ("judge.score", "judge"),
        ("gpu.train", "gpu"),
        ("jobs.diagnostic", "default"),
    ]:
        route = router.route({}, name)
        assert route["queue"].name == queue, (
            f"{name} routed to {route['queue'].name}, expected {queue}"
        )

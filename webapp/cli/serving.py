"""Running the app: ``serve`` (README command 1 ends in it: it migrates, loads the built-in
data, creates the first admin, and runs the web server and one Celery worker on every queue
until Ctrl+C) and ``worker``. Django is set up before this module is imported."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import click
from django.conf import settings
from django.core.management import call_command

from webapp.accounts.services import ensure_local_admin
from webapp.cli.django_setup import BASE_DIR
from webapp.common.errors import ApplicationError
from webapp.common.seed import seed_all
from webapp.jobs.names import ALL_QUEUES


def worker_argv(queues: list[str], concurrency: int, name: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "webapp.config",
        "worker",
        "-Q",
        ",".join(queues),
        "--pool",
        "prefork",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
        "-n",
        name,
        "--without-gossip",
        "--without-mingle",
    ]


@click.command()
@click.option(
    "-Q", "--queues", default=",".join(ALL_QUEUES), show_default=True, help="Queues to consume."
)
@click.option("-c", "--concurrency", default=2, show_default=True)
@click.option("-n", "--name", default=None, help="Worker name (default steplab@HOST).")
def worker(queues: str, concurrency: int, name: str | None) -> None:
    """Start a Celery worker (what `celery -A webapp.config worker` does, with our defaults)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    argv = worker_argv(queues.split(","), concurrency, name or f"steplab@{socket.gethostname()}")
    os.execv(sys.executable, argv)


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - our own loopback server
                if resp.status < 500:
                    return True
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


def stop(procs: list[subprocess.Popen], grace: float = 10.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        # The whole process group: prefork children and anything they started.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


@click.command()
@click.option(
    "--host",
    default=lambda: os.environ.get("STEPLAB_HOST", "127.0.0.1"),
    show_default="127.0.0.1 or $STEPLAB_HOST",
)
@click.option(
    "--port",
    default=lambda: int(os.environ.get("STEPLAB_PORT", "8000")),
    type=int,
    show_default="8000 or $STEPLAB_PORT",
)
@click.option("--concurrency", default=2, show_default=True, help="Worker processes.")
def serve(host: str, port: int, concurrency: int) -> None:
    """Run Steplab: migrate, load built-in data, create the first admin, then the web server and
    one worker on every queue. Ctrl+C stops both."""
    if not _port_free(host, port):
        raise click.ClickException(
            f"port {port} on {host} is taken; stop what uses it or set STEPLAB_PORT"
        )
    _prepare()
    procs: list[subprocess.Popen] = []
    stopping = False

    def handle(signum, frame):
        nonlocal stopping
        if not stopping:
            stopping = True
            click.echo("\nstopping the web server and the worker…")
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    try:
        _run(procs, host, port, concurrency)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop(procs)
        click.echo("stopped")


def _prepare() -> None:
    """Migrate, load the built-in data, create the first admin (and collect static files in
    production), saying what was done."""
    db = settings.DATABASES["default"]
    click.echo(f"database: {db['ENGINE'].rsplit('.', 1)[-1]} ({db['NAME']})")
    click.echo(f"broker:   {settings.CELERY_BROKER_URL.split('@')[-1]}")
    call_command("migrate", interactive=False, verbosity=0)
    click.echo("migrations applied")
    for line in seed_all():
        click.echo(line)
    try:
        admin = ensure_local_admin(var_dir=settings.VAR_DIR)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    if admin.created and admin.password_file:
        click.echo(f"created admin '{admin.username}'; its password is in {admin.password_file}")
    elif admin.created:
        click.echo(
            f"created admin '{admin.username}' with the password from STEPLAB_ADMIN_PASSWORD"
        )
    if not settings.DEBUG:
        call_command("collectstatic", interactive=False, verbosity=0)


def _run(procs: list[subprocess.Popen], host: str, port: int, concurrency: int) -> None:
    """Start the worker and the web server (into ``procs``) and watch them until one exits."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
    worker_name = f"steplab-local-{port}@{socket.gethostname()}"
    procs.append(
        subprocess.Popen(  # noqa: S603
            worker_argv(ALL_QUEUES, concurrency, worker_name),
            cwd=BASE_DIR,
            env=env,
            start_new_session=True,
        )
    )
    if settings.DEBUG:
        web = [sys.executable, "-m", "django", "runserver", "--noreload", f"{host}:{port}"]
    else:
        web = [sys.executable, "-m", "gunicorn", "webapp.config.wsgi", "-b", f"{host}:{port}"]
        web += ["-w", "2"]
    procs.append(subprocess.Popen(web, cwd=BASE_DIR, env=env, start_new_session=True))  # noqa: S603
    url = f"http://{host}:{port}/"
    if not _wait_http(url + "login/", procs[1]):
        raise click.ClickException("the web server did not start; see its output above")
    click.echo("")
    click.echo(click.style(f"Steplab is running at {url}", bold=True))
    click.echo(f"  first job to try: {url}jobs/diagnostic/new/ (the diagnostic)")
    click.echo("  Ctrl+C stops the web server and the worker")
    while True:
        for proc, what in zip(procs, ("worker", "web server"), strict=True):
            code = proc.poll()
            if code is not None:
                raise click.ClickException(f"the {what} exited with code {code}; stopping")
        time.sleep(0.5)

"""The ``steplab`` command.

Two kinds of commands:

* file-only commands (``version`` now; ``convert``, ``validate``, ``schema`` and scoring a file
  later) call trainer_core and never touch the database: they are plain ``@main.command()``s;
* the others need the database and the job system: ``@db_command`` sets Django up first.

``steplab serve`` is what README command 1 ends in: it migrates, loads the built-in data,
creates the first admin, and runs the web server and one Celery worker on every queue until
Ctrl+C.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import click

BASE_DIR = Path(__file__).resolve().parent.parent
QUEUES = ["default", "rollouts", "judge", "gpu"]


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if str(BASE_DIR) not in sys.path:
        sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()


def db_command(*args, **kwargs):
    """A command that needs the database: Django is set up before it runs."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            _setup_django()
            return fn(*a, **kw)

        return main.command(*args, **kwargs)(wrapper)

    return decorate


def _group_db_command(group, *args, **kwargs):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            _setup_django()
            return fn(*a, **kw)

        return group.command(*args, **kwargs)(wrapper)

    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Steplab: a workbench for training LLM tool-use agents.

    Collect trajectories, score every step, calibrate with human labels, export datasets, train
    policies and compare them. Commands that only read and write files need no database.
    """


# --- file-only commands ---------------------------------------------------------------------


@main.command()
def version() -> None:
    """Print the version (no database needed)."""
    import trainer_core

    click.echo(f"steplab {trainer_core.__version__}")


@main.command()
def schema() -> None:
    """Print the JSON Schema of the canonical trajectory (no database needed)."""
    from trainer_core.recording.schema import trajectory_json_schema_text

    click.echo(trajectory_json_schema_text())


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    required=True,
    help="Canonical JSONL to write.",
)
@click.option(
    "--format", "fmt", default=None, help="Skip detection and read every file as this format."
)
def convert(paths: tuple[str, ...], output: str, fmt: str | None) -> None:
    """Convert agent logs (any supported format) to canonical JSONL (no database needed).
    All or nothing: if any file fails, nothing is written."""
    from trainer_core.recording.importers import ImportFailure, import_path

    lines: list[str] = []
    try:
        for path in paths:
            for result in import_path(path, format=fmt):
                lines.extend(t.to_json() for t in result.trajectories)
                click.echo(
                    f"{result.file}: {result.format} {result.format_version}".rstrip()
                    + f", {len(result.trajectories)} trajectories",
                    err=True,
                )
    except ImportFailure as exc:
        raise click.ClickException(str(exc)) from None
    Path(output).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    click.echo(f"wrote {len(lines)} trajectories to {output}")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format", "fmt", default=None, help="Skip detection and read every file as this format."
)
def validate(paths: tuple[str, ...], fmt: str | None) -> None:
    """Check that agent logs import, and say what they hold (no database needed)."""
    from trainer_core.recording.importers import ImportFailure, import_path

    failed = 0
    for path in paths:
        try:
            results = import_path(path, format=fmt)
        except ImportFailure as exc:
            failed += 1
            click.echo(click.style(f"FAIL {exc}", fg="red"))
            continue
        for result in results:
            steps = sum(len(t.steps) for t in result.trajectories)
            version = f" {result.format_version}" if result.format_version else ""
            click.echo(
                f"ok   {result.file}: {result.format}{version}, {len(result.trajectories)} trajectories, {steps} steps"
            )
    if failed:
        raise SystemExit(1)


@main.command("validate-tasks")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def validate_tasks(path: str) -> None:
    """Check a task file (JSONL or YAML) without importing it (no database needed)."""
    from trainer_core.tasks.files import TaskFileError, load_tasks

    try:
        loaded = load_tasks(path)
    except TaskFileError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{path}: {len(loaded.tasks)} valid task(s)")


# --- database commands ----------------------------------------------------------------------


def _print_report(report: list[dict]) -> None:
    colors = {"ok": "green", "missing": "yellow", "error": "red"}
    width = max(len(c["name"]) for c in report)
    for check in report:
        status = click.style(f"{check['status']:<7}", fg=colors.get(check["status"]))
        click.echo(f"  {check['name']:<{width}}  {status}  {check['detail']}")
        if check.get("hint") and check["status"] != "ok":
            click.echo(f"  {'':<{width}}           → {check['hint']}")


@db_command()
@click.option(
    "--job", "as_job", is_flag=True, help="Run the diagnostic as a job on a worker and follow it."
)
@click.option("--steps", default=10, show_default=True, help="Steps for --job.")
def check(as_job: bool, steps: int) -> None:
    """The diagnostic: what this installation has (database, broker, sandboxes, browser, torch)."""
    if as_job:
        from webapp.jobs import kinds, services

        job = services.job_enqueue(
            kind=kinds.DIAGNOSTIC, params={"steps": steps, "step_seconds": 0.1}
        )
        click.echo(f"job {job.pk} queued; following it (Ctrl+C stops following, not the job)")
        final = _follow(job.pk)
        if final.result.get("report"):
            _print_report(final.result["report"])
        sys.exit(0 if final.status == "succeeded" else 1)
    from webapp.jobs.diagnostic import system_report

    report = system_report()
    click.echo("Steplab system report")
    _print_report(report)
    essential = {"database", "broker", "data dir"}
    sys.exit(1 if any(c["status"] == "error" and c["name"] in essential for c in report) else 0)


def _follow(job_id: int, timeout: float | None = None):
    from webapp.jobs.models import Job

    start = time.monotonic()
    last = None
    while True:
        job = Job.objects.get(pk=job_id)
        line = f"  [{job.status:<9}] {job.percent:>3}%  {job.message}"
        if line != last:
            click.echo(line)
            last = line
        if job.is_terminal:
            if job.error:
                click.echo(click.style(f"  error: {job.error}", fg="red"))
            return job
        if timeout is not None and time.monotonic() - start > timeout:
            return job
        time.sleep(0.5)


@db_command()
def seed() -> None:
    """Load the built-in data (idempotent)."""
    from webapp.common.seed import seed_all

    for line in seed_all():
        click.echo(line)


@db_command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def manage(args: tuple[str, ...]) -> None:
    """Run a Django management command: steplab manage migrate, ..."""
    from django.core.management import execute_from_command_line

    execute_from_command_line(["steplab manage", *args])


@main.group()
def jobs() -> None:
    """List, inspect and cancel jobs."""


@_group_db_command(jobs, "list")
@click.option("--status", default="", help="queued, running, succeeded, failed or cancelled")
@click.option("--kind", default="")
@click.option("--limit", default=20, show_default=True)
def jobs_list(status: str, kind: str, limit: int) -> None:
    """The newest jobs."""
    from webapp.jobs import selectors

    for job in selectors.job_list(kind=kind, status=status)[:limit]:
        click.echo(f"{job.pk:>6}  {job.kind:<14} {job.status:<10} {job.percent:>3}%  {job.message}")


@_group_db_command(jobs, "show")
@click.argument("job_id", type=int)
@click.option("--follow", is_flag=True, help="Follow progress until the job ends.")
def jobs_show(job_id: int, follow: bool) -> None:
    """One job: status, progress, message, error."""
    from webapp.jobs.models import Job

    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        raise click.ClickException(f"no job {job_id}; 'steplab jobs list' shows the existing ones")
    if follow:
        job = _follow(job_id)
    click.echo(
        json.dumps(
            {
                "id": job.pk,
                "kind": job.kind,
                "status": job.status,
                "progress": job.progress,
                "message": job.message,
                "error": job.error,
                "params": job.params,
                "result": job.result,
            },
            indent=2,
            default=str,
        )
    )


@_group_db_command(jobs, "cancel")
@click.argument("job_id", type=int)
def jobs_cancel(job_id: int) -> None:
    """Cancel a job (and its children)."""
    from webapp.common.errors import ApplicationError
    from webapp.jobs import services
    from webapp.jobs.models import Job

    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        raise click.ClickException(f"no job {job_id}")
    try:
        job = services.job_cancel(job=job)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"job {job.pk}: {job.status} — {job.message}")


@_group_db_command(jobs, "reap")
def jobs_reap() -> None:
    """Detect jobs whose worker died now (workers also do this every few seconds)."""
    from webapp.jobs import services

    reaped = services.jobs_reap_dead()
    click.echo(
        f"re-queued or failed {len(reaped)} dead job(s){': ' + ', '.join(map(str, reaped)) if reaped else ''}"
    )


@db_command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format", "fmt", default=None, help="Skip detection and read every file as this format."
)
def import_(paths: tuple[str, ...], fmt: str | None) -> None:
    """Import agent logs into the trajectory store (all or nothing; re-imports are reported)."""
    from webapp.common.errors import ApplicationError
    from webapp.trajectories.services import trajectories_import_files

    try:
        summary = trajectories_import_files(paths=list(paths), format=fmt)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    for item in summary.files:
        click.echo(
            f"{item['file']}: {item['format']} {item['version']}".rstrip()
            + f", {item['trajectories']} trajectories, {item['steps']} steps"
        )
    click.echo(
        f"imported {len(summary.created)} trajectories; {len(summary.duplicates)} duplicate(s) skipped"
    )


@main.group()
def tasks() -> None:
    """Import and list agent tasks."""


@_group_db_command(tasks, "import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--set",
    "set_name",
    default="",
    help="Task set to import into (default: the file's task_set.name).",
)
def tasks_import(path: str, set_name: str) -> None:
    """Import a task file (JSONL or YAML). All or nothing: errors name the line and field."""
    from webapp.common.errors import ApplicationError
    from webapp.tasks.services import task_set_import

    fmt = "yaml" if path.endswith((".yaml", ".yml")) else None
    try:
        task_set, count = task_set_import(
            text=Path(path).read_text(encoding="utf-8"), name=set_name, fmt=fmt
        )
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"imported {count} task(s) into {task_set.name!r}")


@_group_db_command(tasks, "list")
@click.option("--domain", default="")
def tasks_list(domain: str) -> None:
    """Task sets and their sizes."""
    from webapp.tasks.selectors import task_set_list

    for task_set in task_set_list(domain=domain):
        click.echo(
            f"{task_set.name:<28} {task_set.domain:<14} {task_set.task_count:>6} tasks  {task_set.environment}"
        )


# --- running the app ------------------------------------------------------------------------


def _worker_argv(queues: list[str], concurrency: int, name: str) -> list[str]:
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


@main.command()
@click.option(
    "-Q", "--queues", default=",".join(QUEUES), show_default=True, help="Queues to consume."
)
@click.option("-c", "--concurrency", default=2, show_default=True)
@click.option("-n", "--name", default=None, help="Worker name (default steplab@HOST).")
def worker(queues: str, concurrency: int, name: str | None) -> None:
    """Start a Celery worker (what `celery -A webapp.config worker` does, with our defaults)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    argv = _worker_argv(queues.split(","), concurrency, name or f"steplab@{socket.gethostname()}")
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


def _stop(procs: list[subprocess.Popen], grace: float = 10.0) -> None:
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


@main.command()
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
    _setup_django()
    from django.conf import settings
    from django.core.management import call_command

    from webapp.accounts.services import ensure_local_admin
    from webapp.common.seed import seed_all

    if not _port_free(host, port):
        raise click.ClickException(
            f"port {port} on {host} is taken; stop what uses it or set STEPLAB_PORT"
        )

    db = settings.DATABASES["default"]
    click.echo(f"database: {db['ENGINE'].rsplit('.', 1)[-1]} ({db['NAME']})")
    click.echo(f"broker:   {settings.CELERY_BROKER_URL.split('@')[-1]}")
    call_command("migrate", interactive=False, verbosity=0)
    click.echo("migrations applied")
    for line in seed_all():
        click.echo(line)
    from webapp.common.errors import ApplicationError

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

    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
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
        worker_name = f"steplab-local-{port}@{socket.gethostname()}"
        procs.append(
            subprocess.Popen(
                _worker_argv(QUEUES, concurrency, worker_name),
                cwd=BASE_DIR,
                env=env,
                start_new_session=True,
            )
        )  # noqa: S603
        if settings.DEBUG:
            web = [sys.executable, "-m", "django", "runserver", "--noreload", f"{host}:{port}"]
        else:
            web = [
                sys.executable,
                "-m",
                "gunicorn",
                "webapp.config.wsgi",
                "-b",
                f"{host}:{port}",
                "-w",
                "2",
            ]
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
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _stop(procs)
        click.echo("stopped")


# --- policies and rollouts ----------------------------------------------------------------------


def _task_set_and_policy(task_set_name: str, policy_name: str):
    """The named task set and policy, or a clear error saying where to look."""
    from webapp.rollouts.models import Policy
    from webapp.tasks.models import TaskSet

    task_set = TaskSet.objects.filter(name=task_set_name).first()
    policy = Policy.objects.filter(name=policy_name).first()
    if task_set is None:
        raise click.ClickException(f"no task set {task_set_name!r}; see `steplab tasks list`")
    if policy is None:
        raise click.ClickException(f"no policy {policy_name!r}; see `steplab policies list`")
    return task_set, policy


@main.command("collect")
@click.argument("tasks_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--env", "env_id", default=None, help="Environment id (default: each task's own).")
@click.option(
    "--policy",
    "kind",
    type=click.Choice(["scripted", "anthropic", "openai", "local"]),
    default="scripted",
    show_default=True,
)
@click.option("--model", default="", help="Model name, or a local model directory.")
@click.option(
    "--param",
    "params",
    multiple=True,
    help="Policy parameter as NAME=JSON, e.g. --param temperature=0.2 --param api_key_env='\"K\"'.",
)
@click.option("--prompt-format", type=click.Choice(["native", "react"]), default="native")
@click.option("--episodes", default=1, show_default=True, help="Episodes per task.")
@click.option("--max-steps", default=20, show_default=True)
@click.option("--step-timeout", type=float, default=None, help="Seconds per environment step.")
@click.option("--concurrency", default=1, show_default=True, help="Episodes at once (threads).")
@click.option("--seed", default=0, show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True)
def collect_file(
    tasks_file, env_id, kind, model, params, prompt_format, episodes, max_steps, step_timeout,
    concurrency, seed, output,
) -> None:  # fmt: skip
    """Play a task file's tasks with a policy and write the trajectories as canonical JSONL
    (no database, no worker: threads on this machine). For many episodes over Celery workers,
    use the Collect page or `steplab rollouts launch`."""
    import json as _json

    from trainer_core.errors import SteplabError
    from trainer_core.policies.factory import build_policy
    from trainer_core.rollouts.collect import collect
    from trainer_core.tasks.files import TaskFileError, load_tasks

    parameters = {}
    for item in params:
        name, _, raw = item.partition("=")
        try:
            parameters[name.strip()] = _json.loads(raw)
        except _json.JSONDecodeError:
            parameters[name.strip()] = raw
    try:
        loaded = load_tasks(Path(tasks_file).read_text(encoding="utf-8"))
    except TaskFileError as exc:
        raise click.ClickException(str(exc)) from None
    groups: dict[str, list] = {}
    for task in loaded.tasks:
        target = env_id or task.environment
        if not target:
            raise click.ClickException(
                f"task {task.id!r} names no environment; pass --env (e.g. steplab/arithmetic)"
            )
        groups.setdefault(target, []).append(task)
    written = successes = failed = 0
    with open(output, "w", encoding="utf-8") as out:

        def on_episode(result) -> None:
            nonlocal written, successes, failed
            out.write(result.trajectory.to_json() + "\n")
            written += 1
            successes += bool(result.trajectory.outcome.success)
            failed += result.failed
            status = (
                "crashed: " + result.error
                if result.failed
                else ("success" if result.trajectory.outcome.success else "failure")
            )
            click.echo(
                f"  {result.spec.task_id} #{result.spec.episode}: "
                f"{len(result.trajectory.steps)} steps, {status}"
            )

        try:
            for target, tasks in groups.items():
                collect(
                    target,
                    tasks,
                    lambda s: build_policy(
                        kind,
                        model=model,
                        prompt_format=prompt_format,
                        parameters=parameters,
                        seed=s,
                    ),  # fmt: skip
                    episodes_per_task=episodes,
                    max_steps=max_steps,
                    step_timeout=step_timeout,
                    concurrency=concurrency,
                    seed=seed,
                    on_episode=on_episode,
                    policy_name=kind,
                    model=model,
                )
        except SteplabError as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(
        f"wrote {written} trajectories to {output}: {successes} successful, {failed} crashed"
    )


@main.group()
def policies() -> None:
    """List policies."""


@_group_db_command(policies, "list")
def policies_list() -> None:
    from webapp.rollouts.models import Policy

    for policy in Policy.objects.all():
        click.echo(f"{policy.pk:>4}  {policy.name:<24} {policy.kind:<10} {policy.model}")


@main.group()
def rollouts() -> None:
    """Launch collect runs on the Celery workers."""


@_group_db_command(rollouts, "launch")
@click.option("--task-set", "task_set_name", required=True)
@click.option("--policy", "policy_name", required=True)
@click.option("--env", "environment", default="", help="Default: the task set's environment.")
@click.option("--episodes", default=1, show_default=True, help="Episodes per task.")
@click.option("--max-steps", default=20, show_default=True)
@click.option("--step-timeout", type=float, default=None)
@click.option("--concurrency", default=2, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--spend-cap", type=float, default=None, help="Stop at this many US dollars.")
@click.option("--follow/--no-follow", default=True, show_default=True)
def rollouts_launch(
    task_set_name, policy_name, environment, episodes, max_steps, step_timeout, concurrency,
    seed, spend_cap, follow,
) -> None:  # fmt: skip
    """Launch a collect run (a job fanned out over the rollouts queue) and follow it."""
    from webapp.common.errors import ApplicationError
    from webapp.rollouts.services import collect_launch

    task_set, policy = _task_set_and_policy(task_set_name, policy_name)
    try:
        run = collect_launch(
            task_set=task_set,
            policy=policy,
            environment=environment,
            episodes_per_task=episodes,
            max_steps=max_steps,
            step_timeout=step_timeout,
            concurrency=concurrency,
            seed=seed,
            spend_cap_usd=spend_cap,
        )
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"collect run {run.pk}: {run.episodes_total} episodes, job {run.job_id}")
    if follow:
        job = _follow(run.job_id)
        run.refresh_from_db()
        click.echo(
            f"{run.episodes_done} done, {run.episodes_failed} failed, {run.successes} successful, "
            f"${run.cost_usd:.4f}"
        )
        sys.exit(0 if job.status == "succeeded" else 1)


# --- rewards --------------------------------------------------------------------------------------


@main.command("score")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--domain", default="coding", show_default=True, help="Domain profile / rubric set.")
@click.option("--judge-kind", type=click.Choice(["anthropic", "openai"]), default=None)
@click.option("--judge-model", default=None, help="The judge model (with --judge-kind).")
@click.option("--judge-base-url", default=None)
@click.option("--judge-key-env", default=None, help="Environment variable holding the key.")
@click.option(
    "--cache",
    type=click.Path(dir_okay=False),
    default=None,
    help="A judge cache file (sqlite): re-scoring unchanged steps costs nothing.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None)
def score_files(
    paths, domain, judge_kind, judge_model, judge_base_url, judge_key_env, cache, output
) -> None:
    """Score agent logs (any supported format) with the rule layer, and the LLM judge when
    --judge-kind/--judge-model are given. No database. Prints one line per trajectory; -o writes
    the full scores as JSONL."""
    import json as _json

    from trainer_core.envs.profiles import get_profile
    from trainer_core.errors import SteplabError
    from trainer_core.recording.importers import ImportFailure, import_path
    from trainer_core.rewards.rubrics import rubric_set
    from trainer_core.rewards.scoring import RewardConfig, score_trajectory

    try:
        profile = get_profile(domain)
    except (SteplabError, KeyError):
        profile = None
    config = RewardConfig(
        rubrics=rubric_set(domain, profile.rubric_weights if profile else None), profile=domain
    )
    judge = None
    if judge_kind or judge_model:
        if not (judge_kind and judge_model):
            raise click.ClickException("give both --judge-kind and --judge-model")
        from trainer_core.rewards.judge import FileCache, Judge, JudgeConfig

        judge = Judge(
            JudgeConfig(
                kind=judge_kind,
                model=judge_model,
                base_url=judge_base_url,
                api_key_env=judge_key_env,
            ),
            cache=FileCache(cache) if cache else None,
        )
        try:
            judge.check_ready()
        except SteplabError as exc:
            raise click.ClickException(str(exc)) from None
    out = open(output, "w", encoding="utf-8") if output else None  # noqa: SIM115
    count = 0
    try:
        for path in paths:
            try:
                results = import_path(path)
            except ImportFailure as exc:
                raise click.ClickException(str(exc)) from None
            for result in results:
                for number, trajectory in enumerate(result.trajectories):
                    scored = score_trajectory(trajectory, config, profile=profile, judge=judge)
                    count += 1
                    total = "unscored" if scored.total is None else f"{scored.total:.3f}"
                    reason = f" ({scored.unscored_reason})" if scored.unscored_reason else ""
                    click.echo(
                        f"{result.file} #{number} {trajectory.task.id or ''}: total {total}, "
                        f"{len(trajectory.steps)} steps{reason}"
                    )
                    if out is not None:
                        out.write(
                            _json.dumps(
                                {"file": result.file, "index": number, **scored.to_dict()},
                                default=str,
                            )
                            + "\n"
                        )
    except SteplabError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if out is not None:
            out.close()
    click.echo(f"scored {count} trajectories" + (f"; wrote {output}" if output else ""))


@_group_db_command(main, "preferences")
@click.option("--version", "version_id", type=int, required=True, help="Reward-model version id.")
@click.option(
    "--method",
    type=click.Choice(["outside_in", "adjacent", "uncertain"]),
    default="outside_in",
    show_default=True,
)
@click.option("--min-margin", type=float, default=0.1, show_default=True)
def preferences(version_id: int, method: str, min_margin: float) -> None:
    """Build preference pairs from the trajectory totals a reward-model version gave."""
    from webapp.common.errors import ApplicationError
    from webapp.rewards.models import RewardModel
    from webapp.rewards.services import preferences_build

    version = RewardModel.objects.filter(pk=version_id).first()
    if version is None:
        raise click.ClickException(f"no reward-model version {version_id}")
    try:
        result = preferences_build(reward_model=version, method=method, min_margin=min_margin)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(
        f"{result['pairs']} pairs from {result['candidates']} scored trajectories; "
        f"{result['created']} new"
    )


# --- datasets and training ------------------------------------------------------------------------


@_group_db_command(main, "export")
@click.option(
    "--kind",
    type=click.Choice(["sft", "sft_knowlyr", "dpo", "grpo", "prm", "bench"]),
    required=True,
)
@click.option("--name", required=True, help="The dataset snapshot's name.")
@click.option("--version", "version_id", type=int, default=None, help="Reward-model version id.")
@click.option("--labels", type=click.Choice(["model", "human"]), default="model", show_default=True)
@click.option("--min-score", type=float, default=None, help="Keep totals at least this.")
@click.option("--outcome", type=click.Choice(["success", "failure"]), default=None)
@click.option("--task", default=None, help="Task id or task set (substring).")
@click.option("--domain", default=None)
@click.option("--policy", default=None)
@click.option("--task-set", default=None, help="For --kind bench.")
@click.option("--seed", type=int, default=0, show_default=True)
def export_dataset(
    kind, name, version_id, labels, min_score, outcome, task, domain, policy, task_set, seed
) -> None:
    """Export a dataset snapshot (a job on a worker) and print where its files are."""
    from webapp.common.errors import ApplicationError
    from webapp.datasets.models import DatasetSnapshot
    from webapp.datasets.services import snapshot_create
    from webapp.rewards.models import RewardModel

    version = None
    if version_id is not None:
        version = RewardModel.objects.filter(pk=version_id).first()
        if version is None:
            raise click.ClickException(f"no reward-model version {version_id}")
    query = {
        k: v
        for k, v in {
            "min_score": min_score, "outcome": outcome, "task": task, "domain": domain,
            "policy": policy, "task_set": task_set,
        }.items()
        if v not in (None, "")
    }  # fmt: skip
    try:
        snapshot = snapshot_create(
            name=name, kind=kind, query=query, reward_model=version, label_source=labels, seed=seed
        )
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"dataset {snapshot.pk}: export job {snapshot.job_id}")
    job = _follow(snapshot.job_id)
    snapshot = DatasetSnapshot.objects.get(pk=snapshot.pk)
    if job.status != "succeeded":
        sys.exit(1)
    click.echo(f"{snapshot.directory}: {snapshot.counts}")


@main.command("train")
@click.argument("method", type=click.Choice(["sft", "dpo", "grpo"]))
@click.option(
    "--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True
)
def train_cli(method: str, config_path: str) -> None:
    """Train on this machine from a YAML config (the same fields as the training form; `steplab
    train sft --config c.yaml`). No database. Multi-process: `accelerate launch --num_processes N
    -m webapp.cli train ...` (see docs/training.md)."""
    import importlib

    from trainer_core.errors import SteplabError
    from trainer_core.progress import ProgressEvent
    from trainer_core.training.common import config_from_yaml

    module = importlib.import_module(f"trainer_core.training.{method}")
    cls = getattr(module, f"{method.upper()}Config")
    try:
        config = config_from_yaml(cls, Path(config_path).read_text(encoding="utf-8"))
    except SteplabError as exc:
        raise click.ClickException(str(exc)) from None

    def on_progress(event: ProgressEvent) -> None:
        metrics = " ".join(f"{k}={v:.4g}" for k, v in (event.metrics or {}).items())
        click.echo(f"  step {event.step}: {metrics}")

    try:
        result = module.train(config, on_progress=on_progress)
    except SteplabError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"done: {result}")


# --- evaluation -----------------------------------------------------------------------------------


def _fmt_interval(value, low, high) -> str:
    if value is None:
        return "—"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def _print_evaluation(run) -> None:
    m = run.metrics or {}
    click.echo(
        f"evaluation {run.pk}: {run.policy.name} on {run.task_set.name}, k={run.samples_per_task}"
    )
    if not m.get("n"):
        click.echo("  no episode played")
        return
    click.echo(
        f"  success {_fmt_interval(m['success_rate'], m['success_low'], m['success_high'])}"
        f"  ({m['successes']}/{m['n']} episodes, {m.get('tasks', 0)} tasks, 95% Wilson)"
    )
    click.echo(
        f"  mean reward {_fmt_interval(m['mean_reward'], m['reward_low'], m['reward_high'])}"
        " (95% bootstrap)"
    )
    for k in sorted(m.get("pass_at_k") or {}, key=int):
        click.echo(f"  pass@{k} {m['pass_at_k'][k]:.3f}  pass^{k} {m['pass_hat_k'][k]:.3f}")
    click.echo(
        f"  per episode: {m['mean_steps']:.2f} steps, {m['mean_tokens']:.0f} tokens, "
        f"${m['mean_cost']:.4f}"
    )


@db_command("eval")
@click.option("--policy", "policy_name", required=True)
@click.option("--task-set", "task_set_name", required=True, help="Held-out tasks.")
@click.option("-k", "--samples", default=1, show_default=True, help="Samples per task.")
@click.option("--max-steps", default=10, show_default=True)
@click.option("--concurrency", default=2, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--follow/--no-follow", default=True, show_default=True)
def eval_cli(task_set_name, policy_name, samples, max_steps, concurrency, seed, follow) -> None:
    """Evaluate a policy on a task set (k seeded samples per task) on the workers."""
    from webapp.common.errors import ApplicationError
    from webapp.evaluation.models import EvaluationRun
    from webapp.evaluation.services import evaluation_launch

    task_set, policy = _task_set_and_policy(task_set_name, policy_name)
    try:
        run = evaluation_launch(
            policy=policy, task_set=task_set, samples_per_task=samples, max_steps=max_steps,
            concurrency=concurrency, seed=seed,
        )  # fmt: skip
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"evaluation {run.pk}: job {run.job_id}")
    if follow:
        job = _follow(run.job_id)
        _print_evaluation(EvaluationRun.objects.select_related("policy", "task_set").get(pk=run.pk))
        sys.exit(0 if job.status == "succeeded" else 1)


@db_command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@click.option(
    "--correction", type=click.Choice(["holm", "bonferroni", "none"]), default="holm",
    show_default=True,
)  # fmt: skip
def compare_cli(run_a: int, run_b: int, correction: str) -> None:
    """Compare two evaluation runs on their shared tasks (paired and unpaired tests)."""
    from webapp.evaluation.models import EvaluationRun
    from webapp.evaluation.selectors import comparison

    runs = {
        r.pk: r
        for r in EvaluationRun.objects.select_related("policy").filter(pk__in=[run_a, run_b])
    }
    for pk in (run_a, run_b):
        if pk not in runs:
            raise click.ClickException(f"no evaluation run {pk}; see `steplab leaderboard`")
    found = comparison(runs[run_a], runs[run_b], correction=correction)
    result = found["result"]
    click.echo(f"A = {runs[run_a].label}   B = {runs[run_b].label}")
    click.echo(
        f"{result.shared_tasks} shared tasks ({result.only_a} only in A, {result.only_b} only in B);"
        f" effects are B - A; p corrected by {correction}"
    )
    click.echo(f"{'test':<28} {'effect':>9} {'p':>9} {'p corr.':>9}  significant")
    for test in [*result.paired, *result.unpaired]:

        def num(v, p=False):
            if v is None:
                return f"{'—':>9}"
            return f"{v:9.3g}" if p else f"{v:9.4f}"

        sig = "yes" if test.significant else ("—" if test.significant is None else "no")
        click.echo(
            f"{test.name:<28} {num(test.effect)} {num(test.p_value, True)} "
            f"{num(test.p_adjusted, True)}  {sig}" + (f"  ({test.note})" if test.note else "")
        )


@db_command("leaderboard")
@click.option("--task-set", "task_set_name", default=None, help="Default: list the leaderboards.")
@click.option("--metric", type=click.Choice(["success", "reward"]), default="success")
@click.option(
    "--correction", type=click.Choice(["holm", "bonferroni", "none"]), default="holm",
    show_default=True,
)  # fmt: skip
@click.option("--every-run", is_flag=True, help="Every run, not only each policy's newest.")
def leaderboard_cli(task_set_name, metric, correction, every_run) -> None:
    """Print a task set's leaderboard: rank, best-worst rank, tie group, score ± interval."""
    from webapp.evaluation.selectors import leaderboard, leaderboard_index
    from webapp.tasks.models import TaskSet

    if task_set_name is None:
        for group in leaderboard_index():
            click.echo(group["domain"])
            for item in group["sets"]:
                click.echo(f"  {item['task_set'].name}  ({item['runs']} evaluations)")
        return
    task_set = TaskSet.objects.filter(name=task_set_name).first()
    if task_set is None:
        raise click.ClickException(f"no task set {task_set_name!r}; see `steplab leaderboard`")
    board = leaderboard(task_set, metric=metric, correction=correction, every_run=every_run)
    if not board["rows"]:
        click.echo("no finished evaluation on this task set yet")
        return
    click.echo(f"{'rank':>4} {'best-worst':>10} {'tie':>3}  {'score [95%]':<24} {'n':>5}  policy")
    for item in board["rows"]:
        row = item["row"]
        click.echo(
            f"{row.rank:>4} {f'{row.rank_upper}-{row.rank_lower}':>10} {row.tie_group:>3}  "
            f"{_fmt_interval(row.score, row.low, row.high):<24} {row.n:>5}  {row.label}"
        )


def _follow_pipeline(pipeline, timeout: float):
    """Print each stage as it starts and ends, with its job's last message."""
    from webapp.evaluation.models import PipelineStage
    from webapp.jobs.models import Job

    start = time.monotonic()
    seen: dict[int, str] = {}
    while True:
        for row in PipelineStage.objects.filter(pipeline=pipeline).select_related("job"):
            status = row.job.status if row.job else "done"
            if seen.get(row.pk) != status:
                seen[row.pk] = status
                what = f"iteration {row.iteration}" if row.iteration else "baseline"
                message = (row.job.message if row.job else row.note) or ""
                click.echo(
                    f"  [{time.monotonic() - start:5.0f} s] {what} {row.name}: {status}  {message}"
                )
        job = Job.objects.get(pk=pipeline.job_id)
        if job.is_terminal:
            if job.error:
                click.echo(click.style(f"  error: {job.error}", fg="red"))
            return job
        if time.monotonic() - start > timeout:
            click.echo(f"  still running after {timeout:.0f} s; see the pipeline page")
            return job
        time.sleep(1.0)


@db_command("demo")
@click.option("--name", default="", help="Pipeline name (default demo-<time>).")
@click.option("--seed", default=0, show_default=True, help="The tiny model's seed.")
@click.option(
    "--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None,
    help="A pipeline YAML instead of the demo's own.",
)  # fmt: skip
@click.option(
    "--worker/--no-worker", "start_worker", default=None,
    help="Start a worker for the demo (default: when none is alive).",
)  # fmt: skip
@click.option("--timeout", default=1800.0, show_default=True, help="Seconds to wait.")
def demo_cli(name, seed, config_path, start_worker, timeout) -> None:
    """Teach a tiny local model tool arithmetic through the whole loop: baseline → SFT on
    reference trajectories → GRPO on its own samples, evaluated on held-out tasks. Runs as a
    pipeline on the workers; the results stay in the app (Leaderboards → Pipelines)."""
    from datetime import timedelta

    from django.utils import timezone

    from webapp.common.errors import ApplicationError
    from webapp.evaluation.demo import demo_launch
    from webapp.evaluation.models import Pipeline
    from webapp.evaluation.selectors import pipeline_curve
    from webapp.jobs.models import WorkerPresence

    started = time.monotonic()
    if start_worker is None:
        recent = timezone.now() - timedelta(seconds=30)
        start_worker = not WorkerPresence.objects.filter(
            last_seen_at__gte=recent, stopped_at__isnull=True
        ).exists()
    proc = None
    if start_worker:
        from django.conf import settings

        logs = Path(settings.STEPLAB_DATA_DIR) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"demo-worker-{os.getpid()}.log"
        argv = _worker_argv(QUEUES, 2, f"demo-{os.getpid()}@{socket.gethostname()}")
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(  # noqa: S603
                argv, cwd=BASE_DIR, start_new_session=True, stdout=log, stderr=subprocess.STDOUT
            )
        click.echo(f"started a worker for the demo (pid {proc.pid}, log {log_path})")
    try:
        config = Path(config_path).read_text(encoding="utf-8") if config_path else None
        try:
            pipeline = demo_launch(name=name, config=config, seed=seed)
        except ApplicationError as exc:
            raise click.ClickException(exc.message) from None
        click.echo(f"pipeline {pipeline.name} (id {pipeline.pk}): job {pipeline.job_id}")
        job = _follow_pipeline(pipeline, timeout=timeout)
    finally:
        if proc is not None:
            _stop([proc])
    pipeline = Pipeline.objects.get(pk=pipeline.pk)
    curve = pipeline_curve(pipeline)
    click.echo("held-out success (95% Wilson):")
    for point in curve["points"]:
        click.echo(
            f"  {point['label']:<24} "
            f"{_fmt_interval(point['success_rate'], point['success_low'], point['success_high'])}"
            f"  n={point['n']}"
        )
    for c in curve["comparisons"]:
        test = c["mcnemar"]
        if test:
            click.echo(
                f"  {c['label']}: effect {test['effect']:+.3f}, exact McNemar p={test['p_value']:.4g}"
            )
    click.echo(
        f"wall time {time.monotonic() - started:.0f} s; see /leaderboards/pipelines/{pipeline.pk}/"
    )
    sys.exit(0 if job.status == "succeeded" else 1)


if __name__ == "__main__":
    main()

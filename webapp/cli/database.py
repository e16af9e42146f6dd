"""Commands on the database and the job system: check, seed, manage, jobs, import, tasks,
policies, models, rollouts, preferences, export. Django is set up before this module is
imported."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path

import click
from django.core.files import File
from django.core.management import execute_from_command_line

from trainer_core.recording.importers import format_names
from webapp.accounts.permissions import Need, user_can
from webapp.accounts.selectors import user_find
from webapp.cli.output import follow, print_import_table, print_report, task_set_and_policy
from webapp.common.errors import ApplicationError
from webapp.common.seed import seed_all
from webapp.datasets.selectors import snapshot_find
from webapp.datasets.services import snapshot_create
from webapp.datasets.token_check import policy_for_check
from webapp.jobs import selectors as job_selectors
from webapp.jobs import services as job_services
from webapp.jobs.names import Kinds
from webapp.rewards.selectors import version_find
from webapp.rewards.services import preferences_build
from webapp.rollouts.health import FLAGS as HEALTH_FLAGS
from webapp.rollouts.health import task_set_health, thresholds_from
from webapp.rollouts.selectors import policy_list
from webapp.rollouts.services import collect_launch
from webapp.tasks.selectors import task_find, task_set_find, task_set_list
from webapp.tasks.services import (
    task_quarantine,
    task_release,
    task_set_import,
    task_set_import_harbor,
)
from webapp.training.selectors import base_model_choices, tiny_model_free_name
from webapp.training.services import tiny_model_build
from webapp.trajectories.services import trajectories_import_files


@click.command()
@click.option("--job", "as_job", is_flag=True, help="Run the diagnostic as a job on a worker and follow it.")  # fmt: skip
@click.option("--steps", default=10, show_default=True, help="Steps for --job.")
def check(as_job: bool, steps: int) -> None:
    """The diagnostic: what this installation has (database, broker, sandboxes, browser, torch)."""
    if as_job:
        job = job_services.job_enqueue(
            kind=Kinds.DIAGNOSTIC, params={"steps": steps, "step_seconds": 0.1}
        )
        click.echo(f"job {job.pk} queued; following it (Ctrl+C stops following, not the job)")
        final = follow(job.pk)
        if final.result.get("report"):
            print_report(final.result["report"])
        sys.exit(0 if final.status == "succeeded" else 1)
    report = job_selectors.system_report()
    click.echo("Steplab system report")
    print_report(report)
    essential = {"database", "broker", "data dir"}
    sys.exit(1 if any(c["status"] == "error" and c["name"] in essential for c in report) else 0)


@click.command()
def seed() -> None:
    """Load the built-in data (idempotent)."""
    for line in seed_all():
        click.echo(line)


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def manage(args: tuple[str, ...]) -> None:
    """Run a Django management command: steplab manage migrate, ..."""
    execute_from_command_line(["steplab manage", *args])


# --- jobs ------------------------------------------------------------------------------------------


@click.group()
def jobs() -> None:
    """List, inspect and cancel jobs."""


@jobs.command("list")
@click.option("--status", default="", help="queued, running, succeeded, failed or cancelled")
@click.option("--kind", default="")
@click.option("--limit", default=20, show_default=True)
def jobs_list(status: str, kind: str, limit: int) -> None:
    """The newest jobs."""
    for job in job_selectors.job_list(kind=kind, status=status)[:limit]:
        click.echo(f"{job.pk:>6}  {job.kind:<14} {job.status:<10} {job.percent:>3}%  {job.message}")


def _job(job_id: int):
    job = job_selectors.job_get_or_none(id=job_id)
    if job is None:
        raise click.ClickException(f"no job {job_id}; 'steplab jobs list' shows the existing ones")
    return job


@jobs.command("show")
@click.argument("job_id", type=int)
@click.option("--follow", "following", is_flag=True, help="Follow progress until the job ends.")
def jobs_show(job_id: int, following: bool) -> None:
    """One job: status, progress, message, error."""
    job = _job(job_id)
    if following:
        job = follow(job_id)
    shown = {
        "id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "progress": job.progress,
        "message": job.message,
        "error": job.error,
        "params": job.params,
        "result": job.result,
    }
    click.echo(json.dumps(shown, indent=2, default=str))


@jobs.command("cancel")
@click.argument("job_id", type=int)
def jobs_cancel(job_id: int) -> None:
    """Cancel a job (and its children)."""
    try:
        job = job_services.job_cancel(job=_job(job_id))
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"job {job.pk}: {job.status} — {job.message}")


@jobs.command("reap")
def jobs_reap() -> None:
    """Detect jobs whose worker died now (workers also do this every few seconds)."""
    reaped = job_services.jobs_reap_dead()
    listed = ": " + ", ".join(map(str, reaped)) if reaped else ""
    click.echo(f"re-queued or failed {len(reaped)} dead job(s){listed}")


# --- trajectories and tasks ---------------------------------------------------------------------------


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", default=None, type=click.Choice(format_names()), help="Skip detection and read every file as this format.")  # fmt: skip
@click.option("--all-or-nothing", is_flag=True, help="Import nothing if any file is refused.")
def import_(paths: tuple[str, ...], fmt: str | None, all_or_nothing: bool) -> None:
    """Import agent logs into the trajectory store: every file that reads (each file all or
    nothing; a zip, each member), a table of every file, exit status 1 when any was refused."""
    try:
        summary = trajectories_import_files(
            paths=list(paths), format=fmt, all_or_nothing=all_or_nothing
        )
    except ApplicationError as exc:
        if exc.extra.get("files"):
            print_import_table(exc.extra["files"])
        raise click.ClickException(exc.message) from None
    print_import_table(summary.files)
    refused = f"; {len(summary.refused)} file(s) refused" if summary.refused else ""
    click.echo(
        f"imported {len(summary.created)} trajectories; "
        f"{len(summary.duplicates)} duplicate(s) skipped{refused}"
    )
    if summary.refused:
        raise SystemExit(1)


@click.group()
def tasks() -> None:
    """Import and list agent tasks; their health; quarantine and release them."""


@tasks.command("import")
@click.argument("path", type=click.Path(exists=True))
@click.option("--set", "set_name", default="", help="Task set to import into (default: the file's task_set.name).")  # fmt: skip
@click.option("--archive", "archives", multiple=True, type=click.Path(exists=True, dir_okay=False), help="A repository (tar archive) a task names in 'repo' by its file name; repeat for more.")  # fmt: skip
def tasks_import(path: str, set_name: str, archives: tuple[str, ...]) -> None:
    """Import a task file (JSONL or YAML; all or nothing: errors name the line and field), or a
    Harbor task directory or a folder of them (Terminal-Bench 2.0; refusals are listed)."""
    if Path(path).is_dir():
        _tasks_import_harbor(path, set_name)
        return
    fmt = "yaml" if path.endswith((".yaml", ".yml")) else None
    with ExitStack() as stack:
        files = [File(stack.enter_context(open(a, "rb")), name=Path(a).name) for a in archives]
        try:
            task_set, count = task_set_import(
                text=Path(path).read_text(encoding="utf-8"),
                name=set_name,
                fmt=fmt,
                archives=files,
            )
        except ApplicationError as exc:
            raise click.ClickException(exc.message) from None
    click.echo(f"imported {count} task(s) into {task_set.name!r}")


def _tasks_import_harbor(path: str, set_name: str) -> None:
    try:
        task_set, count, refused = task_set_import_harbor(path=path, name=set_name)
    except ApplicationError as exc:
        for _line, where, message in exc.extra.get("problems", []):
            click.echo(f"refused {where}: {message}", err=True)
        raise click.ClickException(exc.message) from None
    for refusal in refused:
        click.echo(f"refused {refusal.path}: {refusal.kind}: {refusal.reason}", err=True)
    click.echo(f"imported {count} Harbor task(s) into {task_set.name!r}; refused {len(refused)}")


@tasks.command("list")
@click.option("--domain", default="")
def tasks_list(domain: str) -> None:
    """Task sets and their sizes."""
    for task_set in task_set_list(domain=domain):
        click.echo(
            f"{task_set.name:<28} {task_set.domain:<14} {task_set.task_count:>6} tasks  "
            f"{task_set.environment}"
        )


def _task_set_named(name: str):
    task_set = task_set_find(name=name)
    if task_set is None:
        raise click.ClickException(f"no task set {name!r}; 'steplab tasks list' shows them")
    return task_set


@tasks.command("health")
@click.argument("set_name")
@click.option("--flag", default="", type=click.Choice(["", *HEALTH_FLAGS]), help="Only the tasks with this flag.")  # fmt: skip
@click.option("--threshold", "thresholds", multiple=True, metavar="NAME=VALUE", help="A detection's minimum evidence, e.g. min_episodes=10 (docs/task-health.md); repeat for more.")  # fmt: skip
@click.option("--limit", default=200, show_default=True, help="The most tasks printed.")
def tasks_health(set_name: str, flag: str, thresholds: tuple[str, ...], limit: int) -> None:
    """Each task's pass rate over every policy and run (Wilson interval) and its flags:
    always-fail, always-pass, flaky, possible false-negative checker, reference fails."""
    values = dict(t.partition("=")[::2] for t in thresholds)
    try:
        report = task_set_health(task_set=_task_set_named(set_name), thresholds=thresholds_from(values=values))  # fmt: skip
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    counts = ", ".join(f"{n} {f}" for f, n in report.health.counts().items())
    click.echo(f"{len(report.tasks)} tasks; {counts}; {len(report.quarantined)} quarantined")
    click.echo(f"strongest policy: {report.health.strongest or '(none with enough episodes)'}")
    for row in report.rows(flag=flag)[:limit]:
        rate = f"{row['successes']}/{row['episodes']}" if row["episodes"] else "-"
        interval = f"[{row['low']:.2f}, {row['high']:.2f}]" if row["episodes"] else ""
        held = " QUARANTINED" if row["quarantined"] else ""
        click.echo(f"{row['external_id']:<28} {rate:>9} {interval:<13} {' '.join(row['flags'])}{held}")  # fmt: skip


def _task_named(set_name: str, task_id: str):
    task = task_find(task_set_name=set_name, external_id=task_id)
    if task is None:
        raise click.ClickException(f"no task {task_id!r} in the task set {set_name!r}")
    return task


def _operator(username: str):
    user = user_find(username=username)
    if user is None or not user_can(user, Need.OPERATE):
        raise click.ClickException(
            f"{username!r} is not an active operator or admin; quarantining needs one (--user)."
        )
    return user


@tasks.command("quarantine")
@click.argument("set_name")
@click.argument("task_id")
@click.option("--reason", required=True, help="Why (required); kept with who and when.")
@click.option("--user", "username", required=True, help="Who quarantines it (an operator or admin).")  # fmt: skip
def tasks_quarantine(set_name: str, task_id: str, reason: str, username: str) -> None:
    """Quarantine a task: left out of dataset builds, evaluations, pipelines and RL runs."""
    try:
        task_quarantine(task=_task_named(set_name, task_id), user=_operator(username), reason=reason)  # fmt: skip
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"quarantined {set_name}/{task_id}")


@tasks.command("release")
@click.argument("set_name")
@click.argument("task_id")
@click.option("--note", default="", help="Optional: what was fixed.")
@click.option("--user", "username", required=True, help="Who releases it (an operator or admin).")  # fmt: skip
def tasks_release(set_name: str, task_id: str, note: str, username: str) -> None:
    """Release a task from quarantine."""
    try:
        task_release(task=_task_named(set_name, task_id), user=_operator(username), note=note)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"released {set_name}/{task_id}")


# --- policies and rollouts -------------------------------------------------------------------------


@click.group()
def policies() -> None:
    """List policies."""


@policies.command("list")
def policies_list() -> None:
    for policy in policy_list():
        click.echo(f"{policy.pk:>4}  {policy.name:<24} {policy.kind:<10} {policy.model}")


@click.group()
def rollouts() -> None:
    """Launch collect runs on the Celery workers."""


@rollouts.command("launch")
@click.option("--task-set", "task_set_name", required=True)
@click.option("--policy", "policy_name", required=True)
@click.option("--env", "environment", default="", help="Default: the task set's environment.")
@click.option("--episodes", default=1, show_default=True, help="Episodes per task.")
@click.option("--max-steps", default=20, show_default=True)
@click.option("--step-timeout", type=float, default=None)
@click.option("--concurrency", default=2, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--spend-cap", type=float, default=None, help="Stop at this many US dollars.")
@click.option("--follow/--no-follow", "following", default=True, show_default=True)
def rollouts_launch(
    task_set_name, policy_name, environment, episodes, max_steps, step_timeout, concurrency,
    seed, spend_cap, following,
) -> None:  # fmt: skip
    """Launch a collect run (a job fanned out over the rollouts queue) and follow it."""
    task_set, policy = task_set_and_policy(task_set_name, policy_name)
    try:
        run = collect_launch(
            task_set=task_set, policy=policy, environment=environment,
            episodes_per_task=episodes, max_steps=max_steps, step_timeout=step_timeout,
            concurrency=concurrency, seed=seed, spend_cap_usd=spend_cap,
        )  # fmt: skip
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"collect run {run.pk}: {run.episodes_total} episodes, job {run.job_id}")
    if following:
        job = follow(run.job_id)
        run.refresh_from_db()
        click.echo(
            f"{run.episodes_done} done, {run.episodes_failed} failed, {run.successes} successful, "
            f"${run.cost_usd:.4f}"
        )
        sys.exit(0 if job.status == "succeeded" else 1)


# --- rewards and datasets ---------------------------------------------------------------------------


@click.command("preferences")
@click.option("--version", "version_id", type=int, required=True, help="Reward-model version id.")
@click.option("--method", type=click.Choice(["outside_in", "adjacent", "uncertain"]), default="outside_in", show_default=True)  # fmt: skip
@click.option("--min-margin", type=float, default=0.1, show_default=True)
def preferences(version_id: int, method: str, min_margin: float) -> None:
    """Build preference pairs from the trajectory totals a reward-model version gave."""
    version = version_find(id=version_id)
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


@click.group()
def models() -> None:
    """Local models to train from: list them, or create a tiny starter model."""


@models.command("list")
def models_list() -> None:
    """The local models the training form offers: directories with a config.json under the data
    directory's models/ and the model roots, and registered local policies' models."""
    rows = base_model_choices()
    if not rows:
        click.echo("no local model yet: `steplab models create-tiny` makes one")
    for row in rows:
        click.echo(f"{row['path']}  {row['label']}")


@models.command("create-tiny")
@click.option("--name", default="", help="Its directory under STEPLAB_DATA_DIR/models (default: tiny-starter, or the next free tiny-starter-N).")  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the random weights.")
def models_create_tiny(name: str, seed: int) -> None:
    """Build a tiny starter model on this machine (a tokenizer trained on the spot, random
    weights, about 1M parameters; seconds on a CPU, nothing downloaded) and print its directory."""
    try:
        path = tiny_model_build(name=name or tiny_model_free_name(), seed=seed)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"created tiny model {path.name}; train from it with model_dir: {path}", err=True)
    click.echo(str(path))


@click.command("export")
@click.option("--kind", type=click.Choice(["sft", "sft_knowlyr", "dpo", "grpo", "prm", "bench"]), required=True)  # fmt: skip
@click.option("--name", required=True, help="The dataset snapshot's name.")
@click.option("--version", "version_id", type=int, default=None, help="Reward-model version id.")
@click.option("--labels", type=click.Choice(["model", "human"]), default="model", show_default=True)
@click.option("--min-score", type=float, default=None, help="Keep totals at least this.")
@click.option("--min-gdi", type=click.FloatRange(0, 1), default=None, help="Keep trajectories whose GDI is at least this (docs/gdi.md).")  # fmt: skip
@click.option("--top-gdi", type=click.IntRange(1, 200_000), default=None, help="Keep the N trajectories with the highest GDI.")  # fmt: skip
@click.option("--outcome", type=click.Choice(["success", "failure"]), default=None)
@click.option("--task", default=None, help="Task id or task set (substring).")
@click.option("--domain", default=None)
@click.option("--policy", default=None)
@click.option("--task-set", default=None, help="For --kind bench.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--build-pairs", is_flag=True, help="DPO from --version's scores: build preference pairs among the selected trajectories first, in the same job.")  # fmt: skip
@click.option("--pair-method", type=click.Choice(["outside_in", "adjacent"]), default="outside_in", show_default=True, help="With --build-pairs.")  # fmt: skip
@click.option("--min-margin", type=float, default=0.1, show_default=True, help="With --build-pairs.")  # fmt: skip
@click.option("--token-policy", type=int, default=None, help="Export for this policy's tokenizer (its id): the drift check runs on the files and a mismatch fails the export (docs/drift-check.md).")  # fmt: skip
def export(
    kind, name, version_id, labels, min_score, min_gdi, top_gdi, outcome, task, domain, policy,
    task_set, seed, build_pairs, pair_method, min_margin, token_policy,
) -> None:  # fmt: skip
    """Export a dataset snapshot (a job on a worker) and print where its files are."""
    version = None
    if version_id is not None:
        version = version_find(id=version_id)
        if version is None:
            raise click.ClickException(f"no reward-model version {version_id}")
    query = {
        k: v
        for k, v in {
            "min_score": min_score, "outcome": outcome, "task": task, "domain": domain,
            "policy": policy, "task_set": task_set, "min_gdi": min_gdi, "top_gdi": top_gdi,
        }.items()
        if v not in (None, "")
    }  # fmt: skip
    try:
        snapshot = snapshot_create(
            name=name, kind=kind, query=query, reward_model=version, label_source=labels, seed=seed,
            build_pairs={"method": pair_method, "min_margin": min_margin} if build_pairs else None,
            token_policy=policy_for_check(policy_id=token_policy),
        )  # fmt: skip
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"dataset {snapshot.pk}: export job {snapshot.job_id}")
    job = follow(snapshot.job_id)
    snapshot = snapshot_find(id=snapshot.pk)
    if snapshot.token_check:
        click.echo(snapshot.token_check.get("summary", ""), err=True)
    if job.status != "succeeded":
        sys.exit(1)
    click.echo(f"{snapshot.directory}: {snapshot.counts}")

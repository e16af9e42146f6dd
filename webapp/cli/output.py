"""What the database commands print and follow: a job until it ends, the system report, an
interval. Imported only by command modules that have Django set up."""

from __future__ import annotations

import time

import click

from webapp.jobs.models import Job
from webapp.jobs.selectors import job_get_or_none
from webapp.rollouts.selectors import policy_find
from webapp.tasks.selectors import task_set_find


def follow(job_id: int, timeout: float | None = None) -> Job:
    """Print the job's status line whenever it changes, until it ends (or ``timeout``)."""
    start = time.monotonic()
    last = None
    while True:
        job = job_get_or_none(id=job_id)
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


def print_report(report: list[dict]) -> None:
    colors = {"ok": "green", "missing": "yellow", "error": "red"}
    width = max(len(c["name"]) for c in report)
    for check in report:
        status = click.style(f"{check['status']:<7}", fg=colors.get(check["status"]))
        click.echo(f"  {check['name']:<{width}}  {status}  {check['detail']}")
        if check.get("hint") and check["status"] != "ok":
            click.echo(f"  {'':<{width}}           → {check['hint']}")


def print_import_table(files: list[dict]) -> None:
    """One line per imported file: format, trajectories, steps (and messages), duplicates; a
    refused file in red with its error (which names the file, the record and the field)."""
    for row in files:
        if row.get("error"):
            click.echo(click.style(f"REFUSED {row['error']}", fg="red"))
            continue
        kind = f"{row['format']} {row['version']}".rstrip()
        messages = f" and {row['messages']} messages" if row.get("messages") else ""
        click.echo(
            f"ok      {row['file']}: {kind}, {row['trajectories']} trajectories, "
            f"{row['steps']} steps{messages}, {row.get('duplicates', 0)} duplicate(s)"
        )


def fmt_interval(value, low, high) -> str:
    if value is None:
        return "—"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def task_set_and_policy(task_set_name: str, policy_name: str):
    """The named task set and policy, or a clear error saying where to look."""
    task_set = task_set_find(name=task_set_name)
    policy = policy_find(name=policy_name)
    if task_set is None:
        raise click.ClickException(f"no task set {task_set_name!r}; see `steplab tasks list`")
    if policy is None:
        raise click.ClickException(f"no policy {policy_name!r}; see `steplab policies list`")
    return task_set, policy

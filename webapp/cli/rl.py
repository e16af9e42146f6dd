"""``steplab rl``: decoupled RL runs (issue 19) — launch one from a YAML file or flags (the RL
form's fields, every problem named before anything is made), list them, show one's status
(samplers online and their episodes per minute, the queue, versions, staleness, the last steps),
add a sampler while it runs, cancel it. Django is set up before this module is imported."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
import yaml
from django.http import Http404

from trainer_core.safeparse import load_yaml
from webapp.cli.output import follow
from webapp.common.errors import ApplicationError
from webapp.rollouts.selectors import policy_find
from webapp.tasks.selectors import task_set_find
from webapp.training import rl_pages, rl_services

#: The keys a launch file may hold besides ``config`` (the trainer's options).
FILE_KEYS = (
    "name", "task_set", "environment", "base_model", "checkpoint", "samplers", "sampler_policy",
    "reward_model", "max_queue",
)  # fmt: skip

POLL_SECONDS = 2.0


@click.group()
def rl() -> None:
    """Decoupled RL runs: launch from a YAML file or flags, status, add a sampler, cancel."""


def _launch_file(path: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the run's fields, the trainer's options) of a launch file; ClickException naming what
    is wrong."""
    if not path:
        return {}, {}
    try:
        data = load_yaml(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise click.ClickException(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise click.ClickException(f"{path} must be a mapping of the run's fields and config.")
    unknown = sorted(set(data) - set(FILE_KEYS) - {"config"})
    if unknown:
        raise click.ClickException(
            f"{path}: unknown key(s) {', '.join(map(str, unknown))}; a launch file holds "
            f"{', '.join(FILE_KEYS)} and config (the trainer's options)."
        )
    config = data.pop("config", None) or {}
    if not isinstance(config, dict):
        raise click.ClickException(f"{path}: config must be a mapping of option: value.")
    return data, config


def _text(value: Any) -> str:
    """A value as the form sends it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _by_name(fields: dict[str, Any]) -> dict[str, str]:
    """The launch's form data: a task set and a sampler policy may be named (or given by id)."""
    data = {name: _text(value) for name, value in fields.items()}
    task_set = data.get("task_set", "")
    if task_set and not task_set.isdigit():
        found = task_set_find(name=task_set)
        if found is None:
            raise click.ClickException(f"no task set {task_set!r}; see `steplab tasks list`")
        data["task_set"] = str(found.pk)
    policy = data.get("sampler_policy", "")
    if policy and not policy.isdigit():
        found = policy_find(name=policy)
        if found is None:
            raise click.ClickException(f"no policy {policy!r}; see `steplab policies list`")
        data["sampler_policy"] = str(found.pk)
    return data


def _option(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise click.ClickException(f"--set takes option=value (got {text!r})")
    return name.strip(), value


def _run(run_id: int):
    try:
        return rl_pages.rl_run_page_get(id=run_id)
    except Http404:
        raise click.ClickException(f"no RL run {run_id}; `steplab rl list` shows them") from None


def _show(run_id: int, following: bool) -> int:
    """Print the run's status (again whenever it changes, while following); the exit status."""
    last: list[str] = []
    while True:
        run = _run(run_id)
        lines = rl_pages.status_text(run=run)
        if lines != last:
            click.echo("\n".join(lines))
            last = lines
        if not following or run.job is None or run.job.is_terminal:
            break
        time.sleep(POLL_SECONDS)
    if run.job is not None and run.job.error:
        click.echo(click.style(f"  error: {run.job.error}", fg="red"))
    ended_badly = run.job is not None and run.job.is_terminal and run.job.status != "succeeded"
    return 1 if following and ended_badly else 0


@rl.command("launch")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), help="A YAML file: name, task_set (name or id), environment, base_model, checkpoint, samplers, sampler_policy (name or id), reward_model, max_queue, and config (the trainer's options). Flags override it.")  # fmt: skip
@click.option("--task-set", default=None, help="The task set the samplers play (name or id).")
@click.option("--env", "environment", default=None, help="Default: the task set's environment.")
@click.option("--base-model", default=None, help="A local model directory under the model roots.")
@click.option("--checkpoint", type=int, default=None, help="Start from this earlier checkpoint.")
@click.option("--samplers", type=int, default=None, help="Sampler jobs to start (default 2).")
@click.option("--sampler-policy", default=None, help="An inference-server policy (name or id); default: the run's own model.")  # fmt: skip
@click.option("--reward-model", type=int, default=None, help="The reward-model version that scores every episode.")  # fmt: skip
@click.option("--max-queue", type=int, default=None, help="Ready groups above which samplers wait (0: four steps' worth).")  # fmt: skip
@click.option("--name", default=None)
@click.option("--synchronous", is_flag=True, help="The synchronous baseline (no overlap; staleness 0).")  # fmt: skip
@click.option("--set", "options", multiple=True, metavar="OPTION=VALUE", help="A trainer option (repeat): --set max_staleness=1 --set publish_every=2.")  # fmt: skip
@click.option("--follow/--no-follow", "following", default=True, show_default=True, help="Follow the run until it ends (Ctrl+C stops following, not the run).")  # fmt: skip
def rl_launch(config_path, following, synchronous, options, **flags) -> None:
    """Launch a decoupled RL run: samplers on the rollouts queue, the trainer on the gpu queue."""
    fields, config = _launch_file(config_path)
    fields.update({name: value for name, value in flags.items() if value is not None})
    config.update(dict(_option(text) for text in options))
    if synchronous:
        config["synchronous"] = True
    values = {name: _text(value) for name, value in config.items() if value is not None}
    choices, problems = rl_pages.launch_problems(data=_by_name(fields), values=values)
    if problems:
        for problem in problems:
            click.echo(
                click.style(f"  {problem['field']}: {problem['problem']}", fg="red"), err=True
            )
        raise click.ClickException(
            f"the run is invalid ({len(problems)} problem(s)); nothing was launched"
        )
    try:
        run = rl_services.rl_run_create(**rl_pages.launch_inputs(choices=choices), values=values)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(
        f"RL run {run.pk}: job {run.job_id}, training run {run.training_run_id}; its page is "
        f"/training/rl/{run.pk}/"
    )
    if following:
        click.echo("following it (Ctrl+C stops following, not the run)")
        job = follow(run.job_id)
        click.echo("\n".join(rl_pages.status_text(run=_run(run.pk))))
        sys.exit(0 if job.status == "succeeded" else 1)


@rl.command("list")
@click.option("--limit", default=20, show_default=True)
def rl_list(limit: int) -> None:
    """The newest RL runs."""
    for run in rl_pages.rl_run_keyset(before_id=None, limit=limit):
        status = run.job.status if run.job is not None else "—"
        click.echo(
            f"{run.pk:>5}  {status:<10} {run.samplers} sampler(s)  {run.task_set.name}  "
            f"{run.training_run.name}"
        )


@rl.command("status")
@click.argument("run_id", type=int)
@click.option("--follow", "following", is_flag=True, help="Print it again as it changes, until the run ends.")  # fmt: skip
def rl_status(run_id: int, following: bool) -> None:
    """A run's samplers (online, episodes/min), queue depth, versions, staleness, last steps."""
    sys.exit(_show(run_id, following))


@rl.command("add-sampler")
@click.argument("run_id", type=int)
def rl_add_sampler(run_id: int) -> None:
    """Start one more sampler job for a running RL run."""
    try:
        job = rl_services.rl_run_add_sampler(run=_run(run_id))
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"sampler job {job.pk} added to RL run {run_id}; it starts on a rollouts worker")


@rl.command("cancel")
@click.argument("run_id", type=int)
def rl_cancel(run_id: int) -> None:
    """Cancel an RL run: its samplers and trainer stop; its groups and versions stay."""
    run = _run(run_id)
    if run.job is None or run.job.is_terminal:
        raise click.ClickException(f"RL run {run_id} has already ended: there is nothing to cancel")
    try:
        rl_services.rl_run_cancel(run=run)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"RL run {run_id} cancelled: {_run(run_id).job.message}")

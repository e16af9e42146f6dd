"""The loop from the command line: eval, compare, leaderboard, demo. Django is set up before
this module is imported."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
from django.conf import settings

from webapp.cli.django_setup import BASE_DIR
from webapp.cli.output import fmt_interval, follow, task_set_and_policy
from webapp.cli.serving import stop, worker_argv
from webapp.common.errors import ApplicationError
from webapp.evaluation import selectors
from webapp.evaluation.demo import demo_launch
from webapp.evaluation.services import evaluation_launch
from webapp.jobs.names import ALL_QUEUES
from webapp.jobs.selectors import job_get_or_none, workers_online
from webapp.tasks.selectors import task_set_find

CORRECTION = click.option(
    "--correction",
    type=click.Choice(["holm", "bonferroni", "none"]),
    default="holm",
    show_default=True,
)


def _print_evaluation(run) -> None:
    m = run.metrics or {}
    click.echo(
        f"evaluation {run.pk}: {run.policy.name} on {run.task_set.name}, k={run.samples_per_task}"
    )
    if not m.get("n"):
        click.echo("  no episode played")
        return
    click.echo(
        f"  success {fmt_interval(m['success_rate'], m['success_low'], m['success_high'])}"
        f"  ({m['successes']}/{m['n']} episodes, {m.get('tasks', 0)} tasks, 95% Wilson)"
    )
    click.echo(
        f"  mean reward {fmt_interval(m['mean_reward'], m['reward_low'], m['reward_high'])}"
        " (95% bootstrap)"
    )
    for k in sorted(m.get("pass_at_k") or {}, key=int):
        click.echo(f"  pass@{k} {m['pass_at_k'][k]:.3f}  pass^{k} {m['pass_hat_k'][k]:.3f}")
    click.echo(
        f"  per episode: {m['mean_steps']:.2f} steps, {m['mean_tokens']:.0f} tokens, "
        f"${m['mean_cost']:.4f}"
    )


@click.command("eval")
@click.option("--policy", "policy_name", required=True)
@click.option("--task-set", "task_set_name", required=True, help="Held-out tasks.")
@click.option("-k", "--samples", default=1, show_default=True, help="Samples per task.")
@click.option("--max-steps", default=10, show_default=True)
@click.option("--concurrency", default=2, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--follow/--no-follow", "following", default=True, show_default=True)
def eval_cli(task_set_name, policy_name, samples, max_steps, concurrency, seed, following):
    """Evaluate a policy on a task set (k seeded samples per task) on the workers."""
    task_set, policy = task_set_and_policy(task_set_name, policy_name)
    try:
        run = evaluation_launch(
            policy=policy, task_set=task_set, samples_per_task=samples, max_steps=max_steps,
            concurrency=concurrency, seed=seed,
        )  # fmt: skip
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"evaluation {run.pk}: job {run.job_id}")
    if following:
        job = follow(run.job_id)
        _print_evaluation(selectors.evaluation_find(id=run.pk))
        sys.exit(0 if job.status == "succeeded" else 1)


def _num(value, p: bool = False) -> str:
    if value is None:
        return f"{'—':>9}"
    return f"{value:9.3g}" if p else f"{value:9.4f}"


@click.command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@CORRECTION
def compare(run_a: int, run_b: int, correction: str) -> None:
    """Compare two evaluation runs on their shared tasks (paired and unpaired tests)."""
    runs = {pk: selectors.evaluation_find(id=pk) for pk in (run_a, run_b)}
    for pk, run in runs.items():
        if run is None:
            raise click.ClickException(f"no evaluation run {pk}; see `steplab leaderboard`")
    found = selectors.comparison(run_a=runs[run_a], run_b=runs[run_b], correction=correction)
    result = found["result"]
    click.echo(f"A = {runs[run_a].label}   B = {runs[run_b].label}")
    click.echo(
        f"{result.shared_tasks} shared tasks ({result.only_a} only in A, {result.only_b} only in B);"
        f" effects are B - A; p corrected by {correction}"
    )
    click.echo(f"{'test':<28} {'effect':>9} {'p':>9} {'p corr.':>9}  significant")
    for test in [*result.paired, *result.unpaired]:
        sig = "yes" if test.significant else ("—" if test.significant is None else "no")
        click.echo(
            f"{test.name:<28} {_num(test.effect)} {_num(test.p_value, True)} "
            f"{_num(test.p_adjusted, True)}  {sig}" + (f"  ({test.note})" if test.note else "")
        )


@click.command("leaderboard")
@click.option("--task-set", "task_set_name", default=None, help="Default: list the leaderboards.")
@click.option("--metric", type=click.Choice(["success", "reward"]), default="success")
@CORRECTION
@click.option("--every-run", is_flag=True, help="Every run, not only each policy's newest.")
def leaderboard(task_set_name, metric, correction, every_run) -> None:
    """Print a task set's leaderboard: rank, best-worst rank, tie group, score ± interval."""
    if task_set_name is None:
        for group in selectors.leaderboard_index():
            click.echo(group["domain"])
            for item in group["sets"]:
                click.echo(f"  {item['task_set'].name}  ({item['runs']} evaluations)")
        return
    task_set = task_set_find(name=task_set_name)
    if task_set is None:
        raise click.ClickException(f"no task set {task_set_name!r}; see `steplab leaderboard`")
    board = selectors.leaderboard(
        task_set=task_set, metric=metric, correction=correction, every_run=every_run
    )
    if not board["rows"]:
        click.echo("no finished evaluation on this task set yet")
        return
    click.echo(f"{'rank':>4} {'best-worst':>10} {'tie':>3}  {'score [95%]':<24} {'n':>5}  policy")
    for item in board["rows"]:
        row = item["row"]
        click.echo(
            f"{row.rank:>4} {f'{row.rank_upper}-{row.rank_lower}':>10} {row.tie_group:>3}  "
            f"{fmt_interval(row.score, row.low, row.high):<24} {row.n:>5}  {row.label}"
        )


# --- the demo ------------------------------------------------------------------------------------


def _follow_pipeline(pipeline, timeout: float):
    """Print each stage as it starts and ends, with its job's last message."""
    start = time.monotonic()
    seen: dict[int, str] = {}
    while True:
        for row in selectors.pipeline_stages(pipeline=pipeline):
            status = row.job.status if row.job else "done"
            if seen.get(row.pk) != status:
                seen[row.pk] = status
                what = f"iteration {row.iteration}" if row.iteration else "baseline"
                message = (row.job.message if row.job else row.note) or ""
                click.echo(
                    f"  [{time.monotonic() - start:5.0f} s] {what} {row.name}: {status}  {message}"
                )
        job = job_get_or_none(id=pipeline.job_id)
        if job.is_terminal:
            if job.error:
                click.echo(click.style(f"  error: {job.error}", fg="red"))
            return job
        if time.monotonic() - start > timeout:
            click.echo(f"  still running after {timeout:.0f} s; see the pipeline page")
            return job
        time.sleep(1.0)


def _start_demo_worker() -> subprocess.Popen:
    """A worker on every queue for the demo, logging to STEPLAB_DATA_DIR/logs."""
    logs = Path(settings.STEPLAB_DATA_DIR) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"demo-worker-{os.getpid()}.log"
    argv = worker_argv(ALL_QUEUES, 2, f"demo-{os.getpid()}@{socket.gethostname()}")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(  # noqa: S603
            argv, cwd=BASE_DIR, start_new_session=True, stdout=log, stderr=subprocess.STDOUT
        )
    click.echo(f"started a worker for the demo (pid {proc.pid}, log {log_path})")
    return proc


def _print_curve(pipeline) -> None:
    curve = selectors.pipeline_curve(pipeline=pipeline)
    click.echo("held-out success (95% Wilson):")
    for point in curve["points"]:
        click.echo(
            f"  {point['label']:<24} "
            f"{fmt_interval(point['success_rate'], point['success_low'], point['success_high'])}"
            f"  n={point['n']}"
        )
    for c in curve["comparisons"]:
        test = c["mcnemar"]
        if test:
            click.echo(
                f"  {c['label']}: effect {test['effect']:+.3f}, exact McNemar p={test['p_value']:.4g}"
            )


@click.command("demo")
@click.option("--name", default="", help="Pipeline name (default demo-<time>).")
@click.option("--seed", default=0, show_default=True, help="The tiny model's seed.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None, help="A pipeline YAML instead of the demo's own.")  # fmt: skip
@click.option("--worker/--no-worker", "start_worker", default=None, help="Start a worker for the demo (default: when none is alive).")  # fmt: skip
@click.option("--timeout", default=1800.0, show_default=True, help="Seconds to wait.")
def demo(name, seed, config_path, start_worker, timeout) -> None:
    """Teach a tiny local model tool arithmetic through the whole loop: baseline → SFT on
    reference trajectories → GRPO on its own samples, evaluated on held-out tasks. Runs as a
    pipeline on the workers; the results stay in the app (Leaderboards → Pipelines)."""
    started = time.monotonic()
    if start_worker is None:
        start_worker = not any(w.online for w in workers_online())
    proc = _start_demo_worker() if start_worker else None
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
            stop([proc])
    _print_curve(selectors.pipeline_find(id=pipeline.pk))
    click.echo(
        f"wall time {time.monotonic() - started:.0f} s; see /leaderboards/pipelines/{pipeline.pk}/"
    )
    sys.exit(0 if job.status == "succeeded" else 1)

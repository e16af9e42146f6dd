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
from webapp.evaluation.demo import (
    DEMO_EVAL_TASKS,
    PRIMARY_SUITE,
    SEEDS,
    SUITES,
    demo_launch,
    demo_report,
)
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


def _follow_pipelines(pipelines, timeout: float) -> list:
    """Print each stage of each pipeline as it starts and ends, with its job's last message;
    returns the pipelines' jobs once all have ended (or at the timeout)."""
    start = time.monotonic()
    seen: dict[int, str] = {}
    while True:
        jobs = []
        for pipeline in pipelines:
            tag = f"seed {pipeline.config.get('seed', 0)}" if len(pipelines) > 1 else ""
            for row in selectors.pipeline_stages(pipeline=pipeline):
                status = row.job.status if row.job else "done"
                if seen.get(row.pk) != status:
                    seen[row.pk] = status
                    what = f"iteration {row.iteration}" if row.iteration else "baseline"
                    message = (row.job.message if row.job else row.note) or ""
                    click.echo(
                        f"  [{time.monotonic() - start:5.0f} s] {tag} {what} {row.name}: "
                        f"{status}  {message}"
                    )
            jobs.append(job_get_or_none(id=pipeline.job_id))
        if all(job.is_terminal for job in jobs):
            for job in jobs:
                if job.error:
                    click.echo(click.style(f"  error: {job.error}", fg="red"))
            return jobs
        if time.monotonic() - start > timeout:
            click.echo(f"  still running after {timeout:.0f} s; see the pipelines' pages")
            return jobs
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


def _print_estimators(pipelines, suite) -> None:
    estimators = sorted(
        {
            str((it.get("train") or {}).get("values", {}).get("advantage", "outcome"))
            for p in pipelines
            for it in p.config.get("iterations", [])
            if (it.get("train") or {}).get("method") == "grpo"
        }
    )
    if estimators:
        click.echo(f"GRPO advantage estimator: {', '.join(estimators)}")
        if suite is not None:
            click.echo(f"  why: {suite.estimator_why}")


@click.command("demo")
@click.option("--suite", default=PRIMARY_SUITE, show_default=True, type=click.Choice(sorted(SUITES)), help="The suite to learn (the primary suite by default).")  # fmt: skip
@click.option("--seeds", default=",".join(map(str, SEEDS)), show_default=True, help="Training seeds, comma-separated: one pipeline each.")  # fmt: skip
@click.option("--split", default="test", show_default=True, type=click.Choice(["test", "validation"]), help="Where to evaluate: validation is where the recipe was chosen.")  # fmt: skip
@click.option("--eval-tasks", default=DEMO_EVAL_TASKS, show_default=True, type=click.IntRange(10, 2000), help="Tasks of the split to evaluate on (the test split has 300).")  # fmt: skip
@click.option("--name", default="", help="Pipeline name prefix (default demo-<suite>-<time>).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None, help="A pipeline YAML instead of the suite's recipe.")  # fmt: skip
@click.option("--worker/--no-worker", "start_worker", default=None, help="Start a worker for the demo (default: when none is alive).")  # fmt: skip
@click.option("--timeout", default=3600.0, show_default=True, help="Seconds to wait.")
def demo(suite, seeds, split, eval_tasks, name, config_path, start_worker, timeout) -> None:
    """Teach tiny local models the primary suite through the whole loop, one per training seed:
    baseline → SFT on a few reference trajectories → GRPO on their own samples, evaluated on
    the test split; prints per-seed and pooled success with Wilson intervals and pooled exact
    McNemar tests. Runs as pipelines on the workers (Leaderboards → Pipelines)."""
    started = time.monotonic()
    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(
            "seeds are whole numbers, e.g. 0,1,2", param_hint="--seeds"
        ) from None
    if not seed_list or len(set(seed_list)) != len(seed_list):
        raise click.BadParameter("give distinct seeds, e.g. 0,1,2", param_hint="--seeds")
    if start_worker is None:
        start_worker = not any(w.online for w in workers_online())
    proc = _start_demo_worker() if start_worker else None
    try:
        config = Path(config_path).read_text(encoding="utf-8") if config_path else None
        try:
            pipelines = demo_launch(
                suite=suite, seeds=seed_list, split=split, eval_tasks=eval_tasks, name=name,
                config=config,
            )  # fmt: skip
        except ApplicationError as exc:
            raise click.ClickException(exc.message) from None
        for p in pipelines:
            click.echo(f"pipeline {p.name} (id {p.pk}): job {p.job_id}")
        jobs = _follow_pipelines(pipelines, timeout=timeout)
    finally:
        if proc is not None:
            stop([proc])
    pipelines = [selectors.pipeline_find(id=p.pk) for p in pipelines]
    try:
        report = demo_report(pipelines=pipelines, suite=suite, split=split)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    for line in report.lines():
        click.echo(line)
    _print_estimators(pipelines, None if config_path else SUITES[suite])
    click.echo(
        f"wall time {time.monotonic() - started:.0f} s; pipelines: "
        + ", ".join(f"/leaderboards/pipelines/{p.pk}/" for p in pipelines)
    )
    sys.exit(0 if all(job.status == "succeeded" for job in jobs) else 1)

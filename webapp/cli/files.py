"""File-only commands: each calls one trainer_core function and never touches the database.

version, schema, convert, validate, validate-tasks, collect, score, train.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

import trainer_core
from trainer_core.errors import SteplabError
from trainer_core.policies.factory import KINDS as POLICY_KINDS
from trainer_core.progress import ProgressEvent
from trainer_core.recording.importers import ImportLimits, format_names
from trainer_core.recording.importers.files import CONVERT_TARGETS, convert_files, validate_files
from trainer_core.recording.schema import trajectory_json_schema_text
from trainer_core.rewards.judge import JudgeConfig
from trainer_core.rewards.scoring import score_files
from trainer_core.rollouts.files import collect_file
from trainer_core.tasks.files import TaskFileError, load_tasks
from trainer_core.training.advantages import describe_estimator
from trainer_core.training.methods import METHODS, train_from_yaml

FORMAT_HELP = "Skip detection and read every file as this format."
_format = click.Choice(format_names())
_files = click.Path(exists=True, dir_okay=False)


@click.command()
def version() -> None:
    """Print the version (no database needed)."""
    click.echo(f"steplab {trainer_core.__version__}")


@click.command()
def schema() -> None:
    """Print the JSON Schema of the canonical trajectory (no database needed)."""
    click.echo(trajectory_json_schema_text())


@click.command()
@click.argument("paths", nargs=-1, required=True, type=_files)
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="The file to write (canonical JSONL, or ATIF with --to atif).")  # fmt: skip
@click.option("--format", "fmt", default=None, type=_format, help=FORMAT_HELP)
@click.option("--to", "to", default="steplab", show_default=True, type=click.Choice(CONVERT_TARGETS), help="What to write: Steplab's canonical JSONL, or ATIF v1.7 (one document in OUTPUT, or one per line when OUTPUT ends in .jsonl; subagents embedded in their parents).")  # fmt: skip
def convert(paths: tuple[str, ...], output: str, fmt: str | None, to: str) -> None:
    """Convert agent logs (any supported format) to canonical JSONL (no database needed).
    All or nothing: if any file fails, nothing is written. ``--to atif`` writes Harbor's ATIF
    v1.7 instead (docs/import-formats.md)."""

    def said(result) -> None:
        click.echo(
            f"{result.file}: {result.format} {result.format_version}".rstrip()
            + f", {len(result.trajectories)} trajectories",
            err=True,
        )

    try:
        results = convert_files(
            paths, output, format=fmt, on_result=said, limits=ImportLimits.from_env(), to=to
        )
    except SteplabError as exc:  # an ImportFailure, or a trajectory ATIF cannot hold
        raise click.ClickException(str(exc)) from None
    written = sum(len(result.trajectories) for result in results)
    what = " as ATIF" if to == "atif" else ""
    click.echo(f"wrote {written} trajectories{what} to {output}")


@click.command()
@click.argument("paths", nargs=-1, required=True, type=_files)
@click.option("--format", "fmt", default=None, type=_format, help=FORMAT_HELP)
def validate(paths: tuple[str, ...], fmt: str | None) -> None:
    """Check that agent logs import, and say what they hold (no database needed)."""
    failed = 0
    for report in validate_files(paths, format=fmt, limits=ImportLimits.from_env()):
        for result in report.results:
            version = f" {result.format_version}" if result.format_version else ""
            messages = f" and {result.messages} messages" if result.messages else ""
            click.echo(
                f"ok   {result.file}: {result.format}{version}, "
                f"{len(result.trajectories)} trajectories, {result.steps} steps{messages}"
            )
        for failure in report.failures:
            failed += 1
            click.echo(click.style(f"FAIL {failure}", fg="red"))
    if failed:
        raise SystemExit(1)


@click.command("validate-tasks")
@click.argument("path", type=_files)
def validate_tasks(path: str) -> None:
    """Check a task file (JSONL or YAML) without importing it (no database needed)."""
    try:
        loaded = load_tasks(path)
    except TaskFileError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{path}: {len(loaded.tasks)} valid task(s)")


def _parameters(items: tuple[str, ...]) -> dict:
    """``NAME=JSON`` pairs (a value that is not JSON is taken as a string)."""
    parameters = {}
    for item in items:
        name, _, raw = item.partition("=")
        try:
            parameters[name.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            parameters[name.strip()] = raw
    return parameters


def _episode_line(result) -> str:
    status = (
        "crashed: " + result.error
        if result.failed
        else ("success" if result.trajectory.outcome.success else "failure")
    )
    return (
        f"  {result.spec.task_id} #{result.spec.episode}: "
        f"{len(result.trajectory.steps)} steps, {status}"
    )


@click.command("collect")
@click.argument("tasks_file", type=_files)
@click.option("--env", "env_id", default=None, help="Environment id (default: each task's own).")
@click.option("--policy", "kind", type=click.Choice(POLICY_KINDS), default="scripted", show_default=True)  # fmt: skip
@click.option("--model", default="", help="Model name, or a local model directory.")
@click.option("--param", "params", multiple=True, help="Policy parameter as NAME=JSON, e.g. --param temperature=0.2 --param api_key_env='\"K\"'.")  # fmt: skip
@click.option("--prompt-format", type=click.Choice(["native", "react"]), default="native")
@click.option("--episodes", default=1, show_default=True, help="Episodes per task.")
@click.option("--max-steps", default=20, show_default=True)
@click.option("--step-timeout", type=float, default=None, help="Seconds per environment step.")
@click.option("--concurrency", default=1, show_default=True, help="Episodes at once (threads).")
@click.option("--seed", default=0, show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True)
def collect(
    tasks_file, env_id, kind, model, params, prompt_format, episodes, max_steps, step_timeout,
    concurrency, seed, output,
) -> None:  # fmt: skip
    """Play a task file's tasks with a policy and write the trajectories as canonical JSONL
    (no database, no worker: threads on this machine). For many episodes over Celery workers,
    use the Collect page or `steplab rollouts launch`."""
    try:
        summary = collect_file(
            tasks_file, output, env_id=env_id, policy_kind=kind, model=model,
            parameters=_parameters(params), prompt_format=prompt_format, episodes=episodes,
            max_steps=max_steps, step_timeout=step_timeout, concurrency=concurrency, seed=seed,
            on_episode=lambda result: click.echo(_episode_line(result)),
        )  # fmt: skip
    except SteplabError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"wrote {summary.written} trajectories to {output}: {summary.successes} successful, "
        f"{summary.failed} crashed"
    )


def _judge_config(kind, model, base_url, key_env) -> JudgeConfig | None:
    if not (kind or model):
        return None
    if not (kind and model):
        raise click.ClickException("give both --judge-kind and --judge-model")
    return JudgeConfig(kind=kind, model=model, base_url=base_url, api_key_env=key_env)


@click.command("score")
@click.argument("paths", nargs=-1, required=True, type=_files)
@click.option("--domain", default="coding", show_default=True, help="Domain profile / rubric set.")
@click.option("--judge-kind", type=click.Choice(["anthropic", "openai"]), default=None)
@click.option("--judge-model", default=None, help="The judge model (with --judge-kind).")
@click.option("--judge-base-url", default=None)
@click.option("--judge-key-env", default=None, help="Environment variable holding the key.")
@click.option("--cache", type=click.Path(dir_okay=False), default=None, help="A judge cache file (sqlite): re-scoring unchanged steps costs nothing.")  # fmt: skip
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None)
def score(
    paths, domain, judge_kind, judge_model, judge_base_url, judge_key_env, cache, output
) -> None:
    """Score agent logs (any supported format) with the rule layer, and the LLM judge when
    --judge-kind/--judge-model are given. No database. Prints one line per trajectory; -o writes
    the full scores as JSONL."""
    judge = _judge_config(judge_kind, judge_model, judge_base_url, judge_key_env)
    out = open(output, "w", encoding="utf-8") if output else None  # noqa: SIM115
    count = 0
    try:
        for file, number, trajectory, scored in score_files(
            paths, domain=domain, judge=judge, cache_path=cache
        ):
            count += 1
            total = "unscored" if scored.total is None else f"{scored.total:.3f}"
            reason = f" ({scored.unscored_reason})" if scored.unscored_reason else ""
            click.echo(
                f"{file} #{number} {trajectory.task.id or ''}: total {total}, "
                f"{len(trajectory.tool_steps)} steps{reason}"
            )
            if out is not None:
                row = {"file": file, "index": number, **scored.to_dict()}
                out.write(json.dumps(row, default=str) + "\n")
    except SteplabError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if out is not None:
            out.close()
    click.echo(f"scored {count} trajectories" + (f"; wrote {output}" if output else ""))


@click.command("train")
@click.argument("method", type=click.Choice(list(METHODS)))
@click.option("--config", "config_path", type=_files, required=True)
def train(method: str, config_path: str) -> None:
    """Train on this machine from a YAML config (the same fields as the training form; `steplab
    train sft --config c.yaml`). No database. Multi-process: `accelerate launch --num_processes N
    -m webapp.cli train ...` (see docs/training.md)."""

    def on_progress(event: ProgressEvent) -> None:
        metrics = " ".join(f"{k}={v:.4g}" for k, v in (event.metrics or {}).items())
        click.echo(f"  step {event.step}: {metrics}")

    def on_config(config) -> None:
        if method == "grpo":
            line = describe_estimator(
                config.advantage, process_weight=config.process_weight, scale=config.scale_rewards
            )
            click.echo(f"advantage estimator: {line}")

    try:
        result = train_from_yaml(
            method, Path(config_path), on_progress=on_progress, on_config=on_config
        )
    except SteplabError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"done: {result}")

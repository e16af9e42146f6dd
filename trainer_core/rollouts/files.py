"""Collecting from a task file into a trajectory file: ``collect_file`` reads a JSONL / YAML task
file, plays its tasks with a policy built from its description (each task in its own
environment, or the one given) and writes every episode as one canonical JSON line, as it ends.
No database and no worker: threads on this machine (``steplab collect`` is this function)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.policies.factory import build_policy
from trainer_core.rollouts.collect import EpisodeResult, collect
from trainer_core.tasks.files import load_tasks
from trainer_core.tasks.model import Task

__all__ = ["CollectSummary", "collect_file", "tasks_by_environment"]


@dataclass
class CollectSummary:
    """What a collect_file run wrote: trajectories, how many succeeded, how many crashed."""

    written: int = 0
    successes: int = 0
    failed: int = 0

    def add(self, result: EpisodeResult) -> None:
        self.written += 1
        self.successes += bool(result.trajectory.outcome.success)
        self.failed += result.failed


def tasks_by_environment(tasks: Iterable[Task], env_id: str | None = None) -> dict[str, list[Task]]:
    """The tasks grouped by the environment they run in: ``env_id`` when given, else each task's
    own ``environment`` (in first-seen order). A task that names none is a ConfigError."""
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        target = env_id or task.environment
        if not target:
            raise ConfigError(
                f"task {task.id!r} names no environment; pass --env (e.g. steplab/arithmetic)"
            )
        groups.setdefault(target, []).append(task)
    return groups


def collect_file(
    tasks_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    env_id: str | None = None,
    policy_kind: str = "scripted",
    model: str = "",
    parameters: Mapping[str, Any] | None = None,
    prompt_format: str = "native",
    episodes: int = 1,
    max_steps: int = 20,
    step_timeout: float | None = None,
    concurrency: int = 1,
    seed: int = 0,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> CollectSummary:
    """Play every task of the file at ``tasks_path`` ``episodes`` times and write the
    trajectories to ``output_path`` (canonical JSONL, one line per episode as it ends).

    ``policy_kind``, ``model``, ``prompt_format`` and ``parameters`` describe the policy as
    :func:`~trainer_core.policies.factory.build_policy` takes it; a fresh policy is built per
    episode from the episode's seed. ``on_episode(result)`` is called after each line is
    written. Raises a :class:`~trainer_core.errors.SteplabError` subclass with a message to show
    as is: ``TaskFileError`` for a bad task file, ``ConfigError`` for a task that names no
    environment (nothing is written then) or a bad policy description.
    """
    loaded = load_tasks(Path(tasks_path).read_text(encoding="utf-8"))
    groups = tasks_by_environment(loaded.tasks, env_id)
    params = dict(parameters or {})

    def make_policy(episode_seed: int) -> Any:
        return build_policy(
            policy_kind,
            model=model,
            prompt_format=prompt_format,
            parameters=params,
            seed=episode_seed,
        )

    summary = CollectSummary()
    with open(output_path, "w", encoding="utf-8") as out:

        def write(result: EpisodeResult) -> None:
            out.write(result.trajectory.to_json() + "\n")
            summary.add(result)
            if on_episode is not None:
                on_episode(result)

        for target, tasks in groups.items():
            collect(
                target,
                tasks,
                make_policy,
                episodes_per_task=episodes,
                max_steps=max_steps,
                step_timeout=step_timeout,
                concurrency=concurrency,
                seed=seed,
                on_episode=write,
                policy_name=policy_kind,
                model=model,
            )
    return summary

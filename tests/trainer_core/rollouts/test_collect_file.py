"""collect_file(): a task file played with a policy description, written as canonical JSONL —
what ``steplab collect`` calls."""

from __future__ import annotations

import json

import pytest

from trainer_core.errors import ConfigError
from trainer_core.recording.schema import Trajectory
from trainer_core.rollouts.files import CollectSummary, collect_file, tasks_by_environment
from trainer_core.tasks.files import TaskFileError, dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks


def _task_file(tmp_path, *, environment="steplab/arithmetic", n=2):
    tasks = arithmetic_tasks("train", n=n)
    for task in tasks:
        task.environment = environment
    path = tmp_path / "tasks.jsonl"
    path.write_text(dump_tasks_jsonl(tasks))
    return path, tasks


def test_collect_file_writes_one_line_per_episode_and_counts_them(tmp_path):
    path, tasks = _task_file(tmp_path)
    out = tmp_path / "out.jsonl"
    seen = []
    summary = collect_file(path, out, episodes=2, max_steps=6, seed=3, on_episode=seen.append)
    assert summary == CollectSummary(written=4, successes=4, failed=0)
    lines = [Trajectory.model_validate(json.loads(line)) for line in out.read_text().splitlines()]
    assert [(t.task.id, t.metadata["episode"]) for t in lines] == [
        (task.id, e) for task in tasks for e in range(2)
    ]
    assert [r.trajectory for r in seen] == lines
    assert {t.policy for t in lines} == {"scripted"} and {t.environment for t in lines} == {
        "steplab/arithmetic"
    }


def test_collect_file_builds_the_policy_from_its_description(tmp_path):
    path, _ = _task_file(tmp_path)
    out = tmp_path / "out.jsonl"
    summary = collect_file(
        path, out, policy_kind="scripted", parameters={"mistakes": {"wrong_answer": 1.0}}
    )
    assert summary == CollectSummary(written=2, successes=0, failed=0)
    outcomes = [json.loads(line)["outcome"]["success"] for line in out.read_text().splitlines()]
    assert outcomes == [False, False]
    with pytest.raises(ConfigError, match="delay must be"):
        collect_file(path, out, parameters={"delay": -1})


def test_a_task_without_an_environment_needs_env_id(tmp_path):
    path, tasks = _task_file(tmp_path, environment="")
    out = tmp_path / "out.jsonl"
    with pytest.raises(ConfigError) as caught:
        collect_file(path, out)
    assert str(caught.value) == (
        f"task {tasks[0].id!r} names no environment; pass --env (e.g. steplab/arithmetic)"
    )
    assert not out.exists()
    summary = collect_file(path, out, env_id="steplab/arithmetic", concurrency=2)
    assert summary.written == 2 and summary.failed == 0


def test_a_bad_task_file_raises_the_task_file_error(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "a"}\n')
    with pytest.raises(TaskFileError, match="prompt"):
        collect_file(path, tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


def test_tasks_by_environment_keeps_first_seen_order():
    tasks = arithmetic_tasks("train", n=3)
    tasks[0].environment, tasks[1].environment, tasks[2].environment = "b/x", "a/y", "b/x"
    groups = tasks_by_environment(tasks)
    assert list(groups) == ["b/x", "a/y"]
    assert groups["b/x"] == [tasks[0], tasks[2]]
    assert list(tasks_by_environment(tasks, "c/z")) == ["c/z"]

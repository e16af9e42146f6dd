"""``steplab rl``: launch a decoupled RL run from a YAML file with flags over it (every problem
named, nothing made when one is wrong), its status (samplers online and their episodes per
minute, queue depth, versions, staleness, the last steps), add a sampler, cancel."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from django.conf import settings

from tests.webapp.training.test_rl_pages import (
    _dead_after_an_hour,
    _launch,
    _running,
    _task_set,
    _trained,
)
from webapp.cli.rl import rl
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.names import Kinds
from webapp.training.models import RLRun, TrainingRun

pytestmark = [
    pytest.mark.sqlite,
    pytest.mark.django_db,
    pytest.mark.usefixtures(_dead_after_an_hour.__name__),
]


@pytest.fixture
def base_model():
    """A model directory under the data directory (a model root)."""
    path = Path(settings.STEPLAB_DATA_DIR) / "models" / f"rl-cli-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return str(path.resolve())


def test_launch_from_a_file_with_flags_over_it(tmp_path, base_model):
    task_set = _task_set()
    path = tmp_path / "run.yaml"
    path.write_text(
        f"name: from a file\ntask_set: {task_set.name}\nbase_model: {base_model}\n"
        "samplers: 3\nconfig:\n  max_staleness: 1\n  batch_size: 2\n  group_size: 2\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        rl,
        ["launch", "--config", str(path), "--samplers", "4", "--set", "publish_every=2",
         "--synchronous", "--no-follow"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run = RLRun.objects.get()
    assert f"RL run {run.pk}: job {run.job_id}" in result.output
    assert f"/training/rl/{run.pk}/" in result.output
    config = run.training_run.config
    assert (run.samplers, run.task_set_id, run.training_run.name) == (4, task_set.pk, "from a file")
    assert (config["publish_every"], config["batch_size"], config["synchronous"]) == (2, 2, True)
    assert config["max_staleness"] == 0  # the synchronous baseline forces it
    assert run.job.kind == Kinds.RL and run.job.status == JobStatus.QUEUED


def test_a_bad_launch_names_every_problem_and_launches_nothing(tmp_path, base_model):
    path = tmp_path / "run.yaml"
    path.write_text("task_set: no-such-set\n", encoding="utf-8")
    result = CliRunner().invoke(rl, ["launch", "--config", str(path), "--no-follow"])
    assert result.exit_code != 0 and "no task set 'no-such-set'" in result.output
    task_set = _task_set()
    result = CliRunner().invoke(
        rl,
        ["launch", "--task-set", str(task_set.pk), "--base-model", "/nowhere",
         "--set", "importance_cap=0.5", "--set", "stale_groups=sometimes", "--no-follow"],
    )  # fmt: skip
    assert result.exit_code != 0
    for field in ("base_model:", "config.importance_cap:", "config.stale_groups:"):
        assert field in result.output, result.output
    assert "invalid (3 problem(s)); nothing was launched" in result.output
    path.write_text("task_set: 1\nlearning_rate: 0.1\n", encoding="utf-8")
    result = CliRunner().invoke(rl, ["launch", "--config", str(path), "--no-follow"])
    assert result.exit_code != 0 and "unknown key(s) learning_rate" in result.output
    assert not RLRun.objects.exists() and not TrainingRun.objects.exists()


def test_status_add_sampler_and_cancel(base_model):
    run = _launch(base_model)
    samplers, _, _ = _trained(run)
    runner = CliRunner()
    status = runner.invoke(rl, ["status", str(run.pk)])
    assert status.exit_code == 0, status.output
    text = status.output
    assert "groups: 1 ready (queue depth), 0 sampling, 0 taken, 3 trained on, 1 dropped" in text
    assert "versions: 4 (newest 3)" in text
    assert f"sampler job {samplers[0].pk}: online, 5 groups, 5.0 episodes/min" in text
    assert f"sampler job {samplers[1].pk}: offline: no heartbeat" in text
    assert "staleness 3: 0 trained on, 1 dropped" in text
    assert "step 2: reward 0.750, 1 groups trained on, 1 dropped" in text
    listed = runner.invoke(rl, ["list"])
    assert listed.exit_code == 0 and f"{run.pk:>5}  running" in listed.output

    added = runner.invoke(rl, ["add-sampler", str(run.pk)])
    assert added.exit_code == 0, added.output
    assert Job.objects.filter(parent=run.job, kind=Kinds.RL_SAMPLER).count() == 3
    cancelled = runner.invoke(rl, ["cancel", str(run.pk)])
    assert cancelled.exit_code == 0 and f"RL run {run.pk} cancelled" in cancelled.output
    assert Job.objects.get(pk=run.job_id).status == JobStatus.CANCELLED
    again = runner.invoke(rl, ["cancel", str(run.pk)])
    assert again.exit_code != 0 and "already ended" in again.output
    late = runner.invoke(rl, ["add-sampler", str(run.pk)])
    assert late.exit_code != 0 and "no sampler to add" in late.output
    missing = runner.invoke(rl, ["status", "999999"])
    assert missing.exit_code != 0 and "no RL run 999999" in missing.output


def test_adding_a_sampler_before_the_run_started_says_why(base_model):
    run = _launch(base_model)
    result = CliRunner().invoke(rl, ["add-sampler", str(run.pk)])
    assert result.exit_code != 0 and "has not started its samplers yet" in result.output
    _running(run)
    assert CliRunner().invoke(rl, ["add-sampler", str(run.pk)]).exit_code == 0

"""What a SIGKILLed worker leaves behind, on real Celery workers: the sandbox a collect episode
had open (its workspace in /tmp and its cgroups) is reclaimed by the reaper as soon as another
worker runs; a training run resumed from its last checkpoint records each step's metrics once
(the steps it re-does update their points)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from tests.conftest import wait_for
from trainer_core.sandboxes import registry
from webapp.jobs import services as jobs
from webapp.jobs.models import Job, JobMetricPoint, JobStatus
from webapp.jobs.names import Kinds
from webapp.rollouts import services
from webapp.rollouts.models import Policy
from webapp.tasks.services import task_set_import

pytestmark = [pytest.mark.worker, pytest.mark.slow]


def _sleepy_task_set():
    """One sandbox task whose first step sleeps, so the sandbox is open when the worker dies."""
    task = {
        "id": "nap",
        "prompt": "Wait, then answer.",
        "domain": "coding",
        "environment": "steplab/sandbox",
        "expected_answer": "x",
        "files": {"hello.txt": "hello\n"},
        "reference_solution": [
            {"tool": "bash", "params": {"command": "sleep 25"}},
            {"tool": "submit", "params": {"answer": "x"}},
        ],
    }
    task_set, _ = task_set_import(text=json.dumps(task) + "\n", name="sleepy")
    task_set.environment = "steplab/sandbox"
    task_set.save()
    return task_set


def _terminal(pk: int) -> Job | None:
    job = Job.objects.get(pk=pk)
    return job if job.is_terminal else None


def test_the_sandbox_of_a_killed_worker_is_reclaimed_by_the_reaper(
    worker_factory, operator, tmp_path, monkeypatch
):
    # this test's own registry: the workers inherit it, and nothing else on the machine uses it
    monkeypatch.setenv(registry.REGISTRY_SETTING, str(tmp_path / "registry"))
    task_set = _sleepy_task_set()
    policy = Policy.objects.create(name="scripted", kind="scripted")
    run = services.collect_launch(
        task_set=task_set, policy=policy, max_steps=4, step_timeout=None, user=operator
    )
    doomed = worker_factory("doomed")
    (record,) = wait_for(
        lambda: [r for r in registry.live_records() if "job" in r["owner"]] or None,
        timeout=90,
        interval=0.1,
        what="the episode's sandbox to start",
    )
    workspace = record["workspace"]
    assert workspace and os.path.isdir(os.path.join(workspace, "work"))
    owner = Job.objects.get(pk=int(record["owner"].split()[1]))  # "job <id> (<kind>) on <worker>"
    assert run.job_id in (owner.pk, owner.parent_id)

    doomed.kill()  # SIGKILL: no finalizer runs, the sandbox stays behind
    assert os.path.isdir(workspace), "the killed worker's workspace is still there"
    assert all(os.path.isdir(group) for group in record["cgroups"])

    worker_factory("rescuer")  # its reaper pass reclaims what the dead worker's sandbox left
    wait_for(
        lambda: not os.path.exists(workspace) or None,
        timeout=30,
        interval=0.1,
        what="the reaper to remove the dead worker's workspace",
    )
    assert not any(os.path.exists(group) for group in record["cgroups"])
    assert record["record"] not in [r["record"] for r in registry.live_records()]
    jobs.job_cancel(job=Job.objects.get(pk=run.job_id), user=operator)  # no need to finish it
    wait_for(lambda: _terminal(run.job_id), timeout=60, what="the collect job to stop")


def test_a_training_run_resumed_after_a_kill_records_each_step_once(
    worker_factory, operator, tmp_path
):
    from trainer_core.policies import chat_format as cf
    from trainer_core.training import tiny
    from trainer_core.training.checkpoint import list_checkpoints
    from trainer_core.training.lineage import read_lineage
    from trainer_core.training.sft import SFTConfig
    from webapp.training.models import TrainingRun

    model = tiny.build_tiny_model(tmp_path / "tiny", hidden_size=32, num_layers=2)
    data = tmp_path / "train.jsonl"
    with data.open("w") as fh:
        for t in tiny.reference_trajectories("train", 8):
            fh.write(json.dumps({"messages": cf.trajectory_to_messages(t, system="Tools.")}) + "\n")
    steps, every = 300, 100
    config = SFTConfig(
        model_dir=str(model),
        output_dir=str(tmp_path / "out"),
        dataset=str(data),
        max_steps=steps,
        batch_size=2,
        save_every=every,
        device="cpu",
        seed=1,
    )
    run = TrainingRun.objects.create(
        method="sft",
        base_model=str(model),
        config=dataclasses.asdict(config),
        output_dir=config.output_dir,
    )
    run.job = jobs.job_enqueue(kind=Kinds.TRAIN, params={"run_id": run.pk}, user=operator)
    run.save()

    def recorded() -> int:
        return max(JobMetricPoint.objects.filter(job=run.job).values_list("step", flat=True) or [0])

    doomed = worker_factory("doomed")
    wait_for(lambda: recorded() > every + 20 or None, timeout=120, interval=0.05, what="steps")
    doomed.kill()
    last_checkpoint = list_checkpoints(config.output_dir)[-1][0]
    assert recorded() > last_checkpoint, "the resumed run re-does steps it had recorded"

    worker_factory("rescuer")
    ended = wait_for(lambda: _terminal(run.job_id), timeout=180, what="the resumed run")
    assert ended.status == JobStatus.SUCCEEDED, f"{ended.error}\n{ended.log_tail}"
    assert ended.attempts == 2
    points = list(JobMetricPoint.objects.filter(job=ended).values_list("step", flat=True))
    assert sorted(points) == sorted(set(points)), "a step recorded twice"
    assert [s for s in sorted(points) if s > 0] == list(range(1, steps + 1))
    # the lineage file, too: each step once (the killed attempt's steps after its checkpoint gone)
    lineage = read_lineage(config.output_dir)
    assert [entry["step"] for entry in lineage] == list(range(1, steps + 1))
    assert all(len(entry["consumed"]) == 2 for entry in lineage)

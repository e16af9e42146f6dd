"""Collect jobs on real Celery workers: fan-out over the rollouts queue, streaming into the
trajectory store, and a worker SIGKILLed in the middle."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts import services
from webapp.rollouts.models import CollectRun, Episode, Policy
from webapp.tasks.services import task_set_import
from webapp.trajectories.models import Step, Trajectory

pytestmark = [pytest.mark.worker]


def _task_set(n: int = 2, name: str = "arith-two"):
    tasks = arithmetic_tasks("train", n=n)
    for task in tasks:
        task.environment = "steplab/arithmetic"
    task_set, _ = task_set_import(text=dump_tasks_jsonl(tasks), name=name)
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    return task_set


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


def _assert_exactly_six(run: CollectRun) -> None:
    trajectories = Trajectory.objects.filter(metadata__collect_run=run.pk)
    assert trajectories.count() == 6
    assert set(trajectories.values_list("status", flat=True)) == {"finished"}
    keys = set(trajectories.values_list("idempotency_key", flat=True))
    assert keys == {e.idempotency_key for e in run.episodes.all()}
    for trajectory in trajectories:
        indexes = list(Step.objects.filter(trajectory=trajectory).values_list("index", flat=True))
        assert sorted(indexes) == list(range(len(indexes))), "each step stored once"
        assert trajectory.step_count == len(indexes) >= 2
        assert trajectory.steps.order_by("-index").first().tool == "submit"


@pytest.mark.sqlite
def test_scripted_collect_job_makes_six_trajectories_with_correct_outcomes(celery_worker, operator):
    task_set = _task_set()
    policy = Policy.objects.create(name="scripted", kind="scripted")
    noisy = Policy.objects.create(
        name="always-wrong", kind="scripted", parameters={"mistakes": {"wrong_answer": 1.0}}
    )
    run = services.collect_launch(
        task_set=task_set, policy=policy, episodes_per_task=3, max_steps=8, user=operator
    )
    job = wait_for(lambda: _finished(run.job_id), timeout=90, what="collect job to end")
    assert job.status == JobStatus.SUCCEEDED, job.error
    run.refresh_from_db()
    assert run.episodes_total == 6 and run.episodes_done == 6 and run.successes == 6
    assert job.children.count() == 2 and job.progress == 1.0
    assert set(run.episodes.values_list("status", flat=True)) == {"finished"}
    _assert_exactly_six(run)
    assert set(Trajectory.objects.filter(policy="scripted").values_list("success", flat=True)) == {
        True
    }

    wrong = services.collect_launch(
        task_set=task_set, policy=noisy, episodes_per_task=3, max_steps=8, concurrency=1
    )
    job = wait_for(lambda: _finished(wrong.job_id), timeout=90, what="second collect job")
    assert job.status == JobStatus.SUCCEEDED, job.error
    wrong.refresh_from_db()
    assert wrong.episodes_done == 6 and wrong.successes == 0
    assert set(wrong.episodes.values_list("success", flat=True)) == {False}
    assert job.result["episodes"]["finished"] == 6


@pytest.mark.slow
def test_sigkill_mid_job_then_a_new_worker_finishes_with_exactly_six(worker_factory, operator):
    task_set = _task_set(name="arith-kill")
    # slow steps so the kill lands in the middle: 2 tasks x 3 episodes x ~3 steps x 0.3 s
    policy = Policy.objects.create(name="scripted-slow", kind="scripted", parameters={"delay": 0.3})
    run = services.collect_launch(
        task_set=task_set,
        policy=policy,
        episodes_per_task=3,
        max_steps=8,
        step_timeout=None,
        concurrency=2,
    )
    from django.conf import settings

    doomed = worker_factory("doomed")
    wait_for(
        lambda: (
            Episode.objects.filter(run=run, status="finished").exists()
            and Episode.objects.filter(run=run, status="running").exists()
        ),
        timeout=60,
        interval=0.05,
        what="an episode finished and one running",
    )
    doomed.kill()  # SIGKILL to the main process and its pool at once
    assert not _finished(run.job_id)
    running_before = Episode.objects.filter(run=run, status="running").count()
    assert running_before >= 1
    worker_factory("rescuer")
    job = wait_for(lambda: _finished(run.job_id), timeout=120, what="collect job to end")
    assert job.status == JobStatus.SUCCEEDED, job.error
    run.refresh_from_db()
    assert run.episodes_done == 6 and run.successes == 6 and run.episodes_failed == 0
    _assert_exactly_six(run)
    assert Episode.objects.filter(run=run, attempts__gte=2).exists(), "an episode was re-run"
    assert settings.STEPLAB_JOB_DEAD_AFTER_SECONDS < 10


@pytest.mark.slow
def test_cancel_stops_scheduling_and_the_running_episode(celery_worker, operator):
    from webapp.jobs.services import job_cancel

    task_set = _task_set(name="arith-cancel")
    policy = Policy.objects.create(name="slow", kind="scripted", parameters={"delay": 0.4})
    run = services.collect_launch(
        task_set=task_set, policy=policy, episodes_per_task=3, max_steps=8, concurrency=1
    )
    wait_for(
        lambda: Episode.objects.filter(run=run, status="running").exists(),
        timeout=60,
        what="an episode running",
    )
    job_cancel(job=Job.objects.get(pk=run.job_id), user=operator)
    job = wait_for(lambda: _finished(run.job_id), timeout=30, what="the run to stop")
    assert job.status == JobStatus.CANCELLED
    wait_for(
        lambda: not Episode.objects.filter(run=run, status__in=["running", "pending"]).exists(),
        timeout=30,
        what="no episode left running or pending",
    )
    run.refresh_from_db()
    assert run.stop_reason == "cancelled"
    assert run.episodes.filter(status="skipped").count() >= 4  # never started
    assert run.finished_episodes < 6


@pytest.fixture
def fake_key(monkeypatch):
    """Set before the worker starts (it copies the environment)."""
    monkeypatch.setenv("STEPLAB_FAKE_ANTHROPIC_KEY", "sk-test-not-a-real-key")


def test_an_llm_collect_run_stops_at_its_spend_cap(fake_key, celery_worker, operator):
    """An Anthropic policy (the real SDK in the worker, against a loopback server) that never
    submits: every call costs $0.01, the cap is $0.025, so the run stops after the third call."""
    from tests.trainer_core.policies.fake_llm_servers import (
        FakeLLMServer,
        anthropic_message,
        anthropic_tool_use,
    )

    task_set = _task_set(name="arith-cap")
    with FakeLLMServer() as server:
        server.enqueue(
            *[
                anthropic_message(
                    [anthropic_tool_use("calculator", {"expression": "1+1"})],
                    input_tokens=1000,
                    output_tokens=0,
                )
                for _ in range(40)
            ]
        )
        policy = Policy.objects.create(
            name="claude-loop",
            kind="anthropic",
            model="claude-test",
            parameters={
                "base_url": server.anthropic_base_url,
                "api_key_env": "STEPLAB_FAKE_ANTHROPIC_KEY",
                "price_in": 10.0,  # $ per million tokens: 1,000 tokens = $0.01
                "price_out": 0.0,
                "max_retries": 0,
            },
        )
        run = services.collect_launch(
            task_set=task_set,
            policy=policy,
            episodes_per_task=3,
            max_steps=8,
            concurrency=1,
            spend_cap_usd=0.025,
        )
        job = wait_for(lambda: _finished(run.job_id), timeout=90, what="collect job to end")
    assert job.status == JobStatus.SUCCEEDED, job.error
    run.refresh_from_db()
    assert "spend cap" in run.stop_reason
    assert run.cost_usd == pytest.approx(0.03)  # three calls: the third crossed the cap
    assert len(server.requests_to("/v1/messages")) == 3
    assert run.tokens_in == 3000
    assert run.episodes.filter(status="skipped").count() == 5
    stopped = run.episodes.get(status="finished")
    assert stopped.steps == 3 and stopped.success is False
    assert "spend cap" in stopped.error


def test_a_run_whose_environment_cannot_be_made_fails_with_the_reason(worker_factory, operator):
    """Every episode fails with the environment's error (the episode workers go on to the next
    episode), and the run fails saying so instead of succeeding with nothing played."""
    task_set = _task_set(name="arith-no-env")
    policy = Policy.objects.create(name="scripted-no-env", kind="scripted")
    run = services.collect_launch(
        task_set=task_set, policy=policy, episodes_per_task=2, max_steps=8, user=operator
    )
    # the environment disappears before a worker picks the run up (e.g. a plugin uninstalled)
    CollectRun.objects.filter(pk=run.pk).update(environment="steplab/no-such-environment")
    worker_factory("no-env")
    job = wait_for(lambda: _finished(run.job_id), timeout=90, what="collect job to end")
    assert job.status == JobStatus.FAILED
    assert "No episode finished: all 4 that were played failed" in job.error
    assert "steplab/no-such-environment" in job.error
    statuses = set(Episode.objects.filter(run=run).values_list("status", flat=True))
    assert statuses == {"failed"}
    for child in Job.objects.filter(parent_id=run.job_id):
        assert child.status == JobStatus.SUCCEEDED  # the children kept going

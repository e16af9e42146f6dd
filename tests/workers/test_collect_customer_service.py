"""Collect jobs on a real Celery worker play simulated-user episodes of steplab/customer-service:
the trajectory store gets the dialogue as message steps (the first observation — the rules and
the customer's opening —, each respond as an assistant message and the customer's reply as a
user message) and
the database calls as tool steps; the reference passes and a policy acting on guesses fails."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from trainer_core.envs.users import STOP
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.customer_service import TEMPLATES, customer_service_tasks
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts import services
from webapp.rollouts.models import Policy
from webapp.tasks.services import task_set_import
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.worker]


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


def _task_set():
    # a one-goal and a two-goal template (the second goal is revealed when the first is done)
    tasks = [t for t in customer_service_tasks("validation", len(TEMPLATES))]
    tasks = [t for t in tasks if t.metadata["template"] in ("cancel_order", "cancel_then_address")]
    task_set, _ = task_set_import(text=dump_tasks_jsonl(tasks), name="service-two")
    task_set.environment = "steplab/customer-service"
    task_set.save()
    return task_set


@pytest.mark.sqlite
def test_collect_plays_simulated_user_episodes_into_message_steps(celery_worker, operator):
    task_set = _task_set()
    reference = Policy.objects.create(name="scripted", kind="scripted")
    guesser = Policy.objects.create(
        name="guesser", kind="scripted", parameters={"mistakes": {"follow_decoy": 1.0}}
    )
    run = services.collect_launch(
        task_set=task_set, policy=reference, episodes_per_task=1, max_steps=40, user=operator
    )
    job = wait_for(lambda: _finished(run.job_id), timeout=120, what="collect job to end")
    assert job.status == JobStatus.SUCCEEDED, job.error
    run.refresh_from_db()
    assert run.episodes_done == 2 and run.successes == 2
    for trajectory in Trajectory.objects.filter(metadata__collect_run=run.pk):
        steps = list(trajectory.steps.order_by("index"))
        assert [s.index for s in steps] == list(range(len(steps)))
        assert [(s.kind, s.role) for s in steps[:3]] == [
            ("message", "user"),
            ("message", "assistant"),
            ("message", "user"),
        ]
        assert steps[0].text == trajectory.prompt
        assert steps[-1].role == "user" and steps[-1].text == STOP
        assistant = [s for s in steps if s.kind == "message" and s.role == "assistant"]
        assert all(s.tool == "" and s.metadata["tool"] == "respond" for s in assistant)
        assert {s.tool for s in steps if s.kind == "tool"} >= {"get_customer", "cancel_order"}
        assert trajectory.success is True

    guessed = services.collect_launch(
        task_set=task_set, policy=guesser, episodes_per_task=1, max_steps=40, concurrency=1
    )
    job = wait_for(lambda: _finished(guessed.job_id), timeout=120, what="second collect job")
    assert job.status == JobStatus.SUCCEEDED, job.error
    guessed.refresh_from_db()
    assert guessed.episodes_done == 2 and guessed.successes == 0


def test_a_policy_plays_the_customer_of_a_collect_run(celery_worker, operator):
    """The run's user policy (a chat-completions model on loopback, through the real SDK in the
    worker) plays the customer: it answers as the task's scripted customer would, so the
    reference agent still succeeds, and every customer turn was the model's."""
    from tests.trainer_core.policies.fake_llm_servers import (
        OPENAI_PATH,
        FakeLLMServer,
        openai_completion,
        openai_tool_call,
    )
    from trainer_core.envs.users import ScriptedUser

    task_set = _task_set()
    task = next(t for t in customer_service_tasks("validation", len(TEMPLATES))
                if t.metadata["template"] == "cancel_order")  # fmt: skip
    task_set.tasks.exclude(external_id=task.id).delete()
    scripted = ScriptedUser()

    def answer(request):
        messages = request.json["messages"]
        text = (
            scripted.reset(task) if len(messages) == 1 else scripted.reply(messages[-1]["content"])
        )
        return openai_completion(None, [openai_tool_call("reply", {"message": text})])

    with FakeLLMServer() as server:
        server.enqueue(*[answer] * 40)
        customer = Policy.objects.create(
            name="customer-model",
            kind="openai",
            model="user-model",
            parameters={
                "base_url": server.openai_base_url,
                "api_key_env": None,
                "price_in": 1.0,
                "price_out": 2.0,
            },
        )
        run = services.collect_launch(
            task_set=task_set,
            policy=Policy.objects.create(name="scripted", kind="scripted"),
            user_policy=customer,
            episodes_per_task=1,
            max_steps=40,
            user=operator,
        )
        job = wait_for(lambda: _finished(run.job_id), timeout=120, what="collect job to end")
        calls = len(server.bodies(OPENAI_PATH))
    assert job.status == JobStatus.SUCCEEDED, job.error
    run.refresh_from_db()
    assert run.user_policy == customer and run.successes == 1
    trajectory = Trajectory.objects.get(metadata__collect_run=run.pk)
    customer_turns = [
        s for s in trajectory.steps.order_by("index") if s.kind == "message" and s.role == "user"
    ]
    assert calls == len(customer_turns) >= 3  # the opening and each reply came from the model
    # the customer's model cost counts for the run (the scripted agent costs nothing)
    billed = [s.metadata.get("user_cost", 0.0) for s in trajectory.steps.all()]
    assert run.cost_usd > 0 and run.cost_usd == pytest.approx(sum(billed))
    one_call = (10 * 1.0 + 5 * 2.0) / 1_000_000  # the fake server's usage at the set prices
    assert run.cost_usd == pytest.approx(calls * one_call)


def test_a_user_policy_is_refused_for_an_environment_without_a_simulated_user(operator):
    from webapp.common.errors import ApplicationError

    task_set = _task_set()
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    scripted = Policy.objects.create(name="scripted", kind="scripted")
    with pytest.raises(ApplicationError, match="no simulated user"):
        services.collect_launch(task_set=task_set, policy=scripted, user_policy=scripted)

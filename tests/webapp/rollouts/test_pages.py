"""Policy and collect pages: secrets refused, "try it", the estimate, launching a run."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.accounts.models import Role
from webapp.jobs.models import Job
from webapp.rollouts.models import CollectRun, Episode, Policy
from webapp.tasks.services import task_set_import

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.fixture
def task_set():
    tasks = arithmetic_tasks("train", n=3)
    ts, _ = task_set_import(text=dump_tasks_jsonl(tasks), name="arith-3")
    ts.environment = "steplab/arithmetic"
    ts.save()
    return ts


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user(Role.ADMIN))
    return client


def _policy_post(client, **fields):
    data = {
        "name": "p",
        "kind": "anthropic",
        "model": "claude-sonnet-4-5",
        "prompt_format": "native",
        "parameters": "{}",
        "description": "",
        **fields,
    }
    return client.post(reverse("rollouts:policy_new"), data)


def test_policies_never_store_secrets(admin_client):
    response = _policy_post(admin_client, parameters=json.dumps({"api_key": "sk-ant-123"}))
    assert response.status_code == 200 and b"looks like a secret" in response.content
    response = _policy_post(admin_client, parameters=json.dumps({"api_key_env": "sk-ant-123"}))
    assert b"NAME of an environment variable" in response.content
    assert not Policy.objects.exists()
    response = _policy_post(
        admin_client, parameters=json.dumps({"api_key_env": "MY_KEY", "temperature": 0.2})
    )
    assert response.status_code == 302
    policy = Policy.objects.get(name="p")
    assert policy.parameters == {"api_key_env": "MY_KEY", "temperature": 0.2}
    page = admin_client.get(reverse("rollouts:policy", args=[policy.pk])).content.decode()
    assert "MY_KEY" in page and "sk-ant" not in page


def test_only_admins_edit_policies_operators_launch(client, make_user, task_set):
    client.force_login(make_user(Role.OPERATOR))
    assert client.get(reverse("rollouts:policy_new")).status_code == 403
    assert client.get(reverse("rollouts:collect")).status_code == 200
    client.force_login(make_user(Role.VIEWER))
    assert client.get(reverse("rollouts:collect")).status_code == 403
    assert client.get(reverse("rollouts:runs")).status_code == 200


def test_try_it_launches_a_job_and_the_page_polls_for_its_result(admin_client, task_set):
    """The web process never plays the step itself: it launches a job (tests/workers plays it)."""
    policy = Policy.objects.create(name="scripted", kind="scripted")
    task = task_set.tasks.first()
    body = admin_client.post(
        reverse("rollouts:policy_try", args=[policy.pk]), {"task": task.pk}
    ).content.decode()
    job = Job.objects.get(kind="rollouts.try")
    assert job.params == {"policy_id": policy.pk, "task_id": task.pk}
    assert 'data-testid="try-waiting"' in body
    assert reverse("rollouts:policy_try_result", args=[policy.pk, job.pk]) in body
    assert "try-tool" not in body  # nothing was played here


def test_the_form_estimates_calls_and_cost_before_launch(admin_client, task_set):
    claude = Policy.objects.create(
        name="claude", kind="anthropic", model="claude-sonnet-4-5", parameters={}
    )
    unpriced = Policy.objects.create(
        name="mystery",
        kind="openai",
        model="my-finetune",
        parameters={"base_url": "http://127.0.0.1:9/v1"},
    )
    scripted = Policy.objects.create(name="scripted", kind="scripted")
    query = {"task_set": task_set.pk, "episodes_per_task": 2, "max_steps": 10}
    body = admin_client.get(
        reverse("rollouts:estimate"), {**query, "policy": claude.pk}
    ).content.decode()
    assert "<strong>6</strong> episodes" in body and "at most 60" in body
    assert 'data-testid="cost-estimate">$' in body
    body = admin_client.get(
        reverse("rollouts:estimate"), {**query, "policy": unpriced.pk}
    ).content.decode()
    assert "No known price" in body
    body = admin_client.get(
        reverse("rollouts:estimate"), {**query, "policy": scripted.pk}
    ).content.decode()
    assert "No API cost" in body


def test_launch_creates_the_run_its_episodes_and_its_job(admin_client, task_set):
    policy = Policy.objects.create(name="scripted", kind="scripted")
    response = admin_client.post(
        reverse("rollouts:collect"),
        {
            "task_set": task_set.pk,
            "environment": "",
            "policy": policy.pk,
            "episodes_per_task": 2,
            "max_steps": 6,
            "concurrency": 2,
            "seed": 5,
        },
    )
    run = CollectRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "rollouts:run", args=[run.pk]
    )
    assert run.episodes_total == 6 and Episode.objects.filter(run=run).count() == 6
    assert run.environment == "steplab/arithmetic"
    assert Job.objects.get(pk=run.job_id).kind == "rollouts.collect"
    page = admin_client.get(response["Location"]).content.decode()
    assert page.count("data-episode=") == 6 and 'hx-trigger="every 1s"' in page
    bad = admin_client.post(
        reverse("rollouts:collect"),
        {
            "task_set": task_set.pk,
            "environment": "steplab/nope",
            "policy": policy.pk,
            "episodes_per_task": 1,
            "max_steps": 6,
            "concurrency": 1,
            "seed": 0,
        },
    )
    assert bad.status_code == 200 and CollectRun.objects.count() == 1

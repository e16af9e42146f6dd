""" "Try it" runs where collect runs: a job on a worker, whose result the policy page polls."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.conftest import wait_for
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.accounts.models import Role
from webapp.jobs.models import Job
from webapp.rollouts.models import Policy
from webapp.tasks.services import task_set_import

pytestmark = [pytest.mark.worker]


def _try(client, policy, task) -> str:
    """Press "Try one step", then poll as the page does until the result replaces the poller."""
    body = client.post(
        reverse("rollouts:policy_try", args=[policy.pk]), {"task": task.pk}
    ).content.decode()
    poll = re.search(r'hx-get="([^"]+)"', body).group(1)

    def done():
        answer = client.get(poll).content.decode()
        return answer if "try-waiting" not in answer else None

    return wait_for(done, timeout=60, interval=0.3, what="the Try it job")


def test_try_it_plays_one_step_on_a_worker_and_shows_action_usage_or_error(
    celery_worker, client, make_user
):
    tasks = arithmetic_tasks("train", n=1)
    task_set, _ = task_set_import(text=dump_tasks_jsonl(tasks), name="arith-try")
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    task = task_set.tasks.first()
    client.force_login(make_user(Role.ADMIN))

    body = _try(client, Policy.objects.create(name="scripted", kind="scripted"), task)
    assert 'data-testid="try-tool">calculator<' in body
    assert "0 tokens in" in body
    assert Job.objects.get(kind="rollouts.try", status="succeeded").worker == ""

    missing_key = Policy.objects.create(
        name="claude",
        kind="anthropic",
        model="claude-sonnet-4-5",
        parameters={"api_key_env": "STEPLAB_TEST_SURELY_UNSET_KEY"},
    )
    body = _try(client, missing_key, task)
    assert "STEPLAB_TEST_SURELY_UNSET_KEY" in body and 'class="error"' in body

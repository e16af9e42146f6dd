"""The host-file read through a task's repo, tried as an operator would: a stored task whose
repo names the app's var/ directory (edited in the database, past every form) plays no step
that reads it — not in a collect job, not through "Try it"."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings
from django.urls import reverse

from tests.conftest import wait_for
from webapp.accounts.models import Role
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts import services
from webapp.rollouts.models import Episode, Policy
from webapp.tasks.models import Task
from webapp.tasks.services import task_set_import
from webapp.trajectories.models import Step

pytestmark = [pytest.mark.worker]

SECRET = "s3cret-admin-password"


def _sneaky_task_set():
    task = {
        "id": "peek",
        "prompt": "Show the password file.",
        "domain": "coding",
        "environment": "steplab/sandbox",
        "expected_answer": "x",
        "files": {"hello.txt": "hello\n"},
        "reference_solution": [
            {"tool": "bash", "params": {"command": "cat admin-password.txt"}},
            {"tool": "submit", "params": {"answer": "x"}},
        ],
    }
    task_set, _ = task_set_import(text=json.dumps(task) + "\n", name="sneaky")
    task_set.environment = "steplab/sandbox"
    task_set.save()
    row = task_set.tasks.get()
    Task.objects.filter(pk=row.pk).update(data={**row.data, "repo": str(settings.VAR_DIR)})
    return task_set


def test_collect_and_try_it_never_copy_a_host_directory(celery_worker, client, make_user):
    (settings.VAR_DIR / "admin-password.txt").write_text(SECRET + "\n")
    task_set = _sneaky_task_set()
    policy = Policy.objects.create(name="scripted", kind="scripted")

    run = services.collect_launch(task_set=task_set, policy=policy, max_steps=4)
    job = wait_for(
        lambda: Job.objects.filter(pk=run.job_id, status__in=["succeeded", "failed"]).first(),
        timeout=90,
        what="the collect job",
    )
    episode = Episode.objects.get(run=run)
    assert episode.status == Episode.Status.FAILED, (job.status, episode.error)
    assert "outside the directories repositories may come from" in episode.error
    assert not Step.objects.filter(observation__contains=SECRET).exists()

    client.force_login(make_user(Role.OPERATOR))
    body = client.post(
        reverse("rollouts:policy_try", args=[policy.pk]), {"task": task_set.tasks.get().pk}
    ).content.decode()
    poll = re.search(r'hx-get="([^"]+)"', body).group(1)
    answer = wait_for(
        lambda: (a := client.get(poll).content.decode()) and "try-waiting" not in a and a,
        timeout=60,
        what="the Try it job",
    )
    assert "outside the directories" in answer and SECRET not in answer
    assert Job.objects.get(kind="rollouts.try").status == JobStatus.FAILED

"""Every place the app reads a user's YAML refuses an alias bomb with a message and writes
nothing (issue 17, point 3): the task import form, the task service, ``steplab tasks import`` and
``steplab validate-tasks``, the domain profile editor, the pipeline configuration. JSON nested
past what Python reads is a form error too, not a server error."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.test_cli import _db_env, _run
from tests.trainer_core.test_safeparse import DEEP_JSON, alias_bomb
from webapp.accounts.models import Role
from webapp.common.errors import ApplicationError
from webapp.domains import services as domain_services
from webapp.domains.models import DomainProfile
from webapp.evaluation.pipeline_config import parse_config
from webapp.tasks import services as task_services
from webapp.tasks.models import Task, TaskSet

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

BOMB_TASKS = alias_bomb() + "tasks:\n  - prompt: hi\n    metadata: {blow: *a8}\n"


def test_the_task_service_refuses_the_bomb():
    with pytest.raises(ApplicationError) as caught:
        task_services.task_set_import(text=BOMB_TASKS, name="bomb", fmt="yaml")
    assert "alias bomb" in caught.value.message and "line 2" in caught.value.message
    assert not TaskSet.objects.filter(name="bomb").exists() and not Task.objects.exists()


def test_the_task_import_form_refuses_the_bomb_and_writes_nothing(client, make_user):
    client.force_login(make_user(Role.OPERATOR))
    upload = SimpleUploadedFile("bomb.yaml", BOMB_TASKS.encode(), content_type="application/yaml")
    response = client.post(reverse("tasks:import"), {"name": "bomb", "file": upload})
    body = response.content.decode()
    assert response.status_code == 200 and len(body) < 200_000
    assert 'data-testid="problems"' in body and "alias bomb" in body
    assert not TaskSet.objects.filter(name="bomb").exists()


def test_steplab_validate_tasks_refuses_the_bomb(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB_TASKS)
    proc = _run("validate-tasks", str(path))
    assert proc.returncode != 0 and "alias bomb" in proc.stderr and "line 2" in proc.stderr


@pytest.mark.django_db(transaction=True)
def test_steplab_tasks_import_refuses_the_bomb(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB_TASKS)
    proc = _run("tasks", "import", str(path), "--set", "bomb", env=_db_env())
    assert proc.returncode != 0, proc.stdout
    assert "alias bomb" in proc.stderr and "MemoryError" not in proc.stderr
    assert not TaskSet.objects.filter(name="bomb").exists()


def test_the_profile_editor_refuses_the_bomb(client, make_user):
    domain_services.profiles_seed_builtin()
    with pytest.raises(ApplicationError, match="alias bomb"):
        domain_services.profile_save_text(name="coding", text="name: coding\n" + alias_bomb())
    client.force_login(make_user(Role.ADMIN))
    response = client.post(
        reverse("domains:edit", args=["coding"]), {"text": "name: coding\n" + alias_bomb()}
    )
    assert response.status_code == 200 and b"alias bomb" in response.content
    assert not DomainProfile.objects.filter(name="coding", version__gt=1).exists()


def test_the_pipeline_configuration_refuses_the_bomb():
    with pytest.raises(ApplicationError, match="not valid YAML: .*alias bomb"):
        parse_config("baseline: true\n" + alias_bomb())


def test_json_nested_too_deeply_is_a_form_error_not_a_500(client, make_user):
    client.force_login(make_user(Role.ADMIN))
    response = client.post(
        reverse("rollouts:policy_new"),
        {"name": "p", "kind": "scripted", "model": "", "prompt_format": "native",
         "parameters": DEEP_JSON, "description": ""},
    )  # fmt: skip
    assert response.status_code == 200 and b"nested too deeply to read" in response.content
    task_set, _ = task_services.task_set_import(
        text='{"id": "a", "prompt": "2+2?", "expected_answer": 4, "checker": "number"}', name="s"
    )
    task = Task.objects.get(task_set=task_set)
    response = client.post(reverse("tasks:edit", args=[task.pk]), {"data": DEEP_JSON})
    assert response.status_code == 200 and b"nested too deeply to read" in response.content
    response = client.post(reverse("tasks:import"), {"name": "deep", "text": DEEP_JSON})
    assert response.status_code == 200 and b"nested too deeply" in response.content
    assert not TaskSet.objects.filter(name="deep").exists()

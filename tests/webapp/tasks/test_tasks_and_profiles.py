"""Task sets, task import (all or nothing), task editing, domain profiles (versioned)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from webapp.accounts.models import Role
from webapp.common.errors import ApplicationError
from webapp.domains import services as domain_services
from webapp.domains.models import DomainProfile
from webapp.tasks import services
from webapp.tasks.models import Task, TaskSet

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

GOOD = "\n".join(
    json.dumps(t)
    for t in [
        {
            "id": "q1",
            "prompt": "What is 2+3?",
            "domain": "arithmetic",
            "expected_answer": 5,
            "checker": "number",
        },
        {
            "id": "q2",
            "prompt": "What is 4*4?",
            "domain": "arithmetic",
            "expected_answer": 16,
            "checker": "number",
        },
    ]
)
BAD = "\n".join(
    [
        json.dumps({"id": "ok", "prompt": "fine", "expected_answer": 1, "checker": "number"}),
        json.dumps({"id": "no-prompt"}),
        "{not json",
        json.dumps({"id": "x", "prompt": "p", "checker": "no-such-checker"}),
        json.dumps({"id": "y", "prompt": "p", "reference_solution": [{"params": {}}]}),
    ]
)


def test_a_valid_file_imports_into_a_new_set():
    task_set, count = services.task_set_import(text=GOOD, name="mine")
    assert count == 2 and task_set.domain == "arithmetic"
    row = Task.objects.get(task_set=task_set, external_id="q2")
    assert (
        row.prompt == "What is 4*4?"
        and row.data["expected_answer"] == 16
        and row.checker == "number"
    )


def test_every_malformed_line_is_named_and_nothing_is_written():
    with pytest.raises(ApplicationError) as caught:
        services.task_set_import(text=BAD, name="broken")
    problems = caught.value.extra["problems"]
    lines = {p[0] for p in problems}
    assert {2, 3, 4, 5} <= lines, problems
    fields = {(p[0], p[1]) for p in problems}
    assert (2, "prompt") in fields
    assert any(line == 4 and "checker" in field for line, field in fields)
    assert any(line == 5 and "reference_solution" in field for line, field in fields)
    assert not TaskSet.objects.filter(name="broken").exists()
    assert not Task.objects.exists()


def test_importing_ids_that_exist_in_the_set_writes_nothing():
    services.task_set_import(text=GOOD, name="mine")
    more = GOOD.replace('"q1"', '"q3"')
    with pytest.raises(ApplicationError, match="already has tasks with these ids: q2"):
        services.task_set_import(text=more, name="mine")
    assert Task.objects.filter(task_set__name="mine").count() == 2


def test_builtin_suites_seed_idempotently_and_cannot_be_imported_into():
    first = services.task_sets_seed_builtin()
    assert "arithmetic-train 200" in first
    count = Task.objects.count()
    services.task_sets_seed_builtin()
    assert Task.objects.count() == count
    with pytest.raises(ApplicationError, match="built-in task set"):
        services.task_set_import(text=GOOD, name="arithmetic-train")


def test_the_import_form_lists_problems_by_line_and_field(client, make_user):
    client.force_login(make_user(Role.OPERATOR))
    upload = SimpleUploadedFile("bad.jsonl", BAD.encode(), content_type="application/x-ndjson")
    response = client.post(reverse("tasks:import"), {"name": "broken", "file": upload})
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="problems"' in body and "nothing was imported" in body
    assert not TaskSet.objects.filter(name="broken").exists()
    response = client.post(reverse("tasks:import"), {"name": "good", "text": GOOD})
    task_set = TaskSet.objects.get(name="good")
    assert response.status_code == 302 and response["Location"] == reverse(
        "tasks:set", args=[task_set.pk]
    )


def test_task_pages_show_prompt_checker_and_reference_and_operators_edit(client, make_user):
    services.task_sets_seed_builtin()
    task = Task.objects.get(external_id="arith-train-0000003")
    client.force_login(make_user(Role.VIEWER))
    body = client.get(reverse("tasks:detail", args=[task.pk])).content.decode()
    assert task.data["metadata"]["expression"] in body and "calculator" in body and "number" in body
    assert client.get(reverse("tasks:edit", args=[task.pk])).status_code == 403
    client.force_login(make_user(Role.OPERATOR))
    data = dict(task.data, prompt="A new prompt")
    assert (
        client.post(reverse("tasks:edit", args=[task.pk]), {"data": json.dumps(data)}).status_code
        == 302
    )
    task.refresh_from_db()
    assert task.prompt == "A new prompt"
    bad = client.post(
        reverse("tasks:edit", args=[task.pk]),
        {"data": json.dumps(dict(data, reference_solution="nope"))},
    )
    assert b"Invalid task" in bad.content


def test_profiles_seed_and_every_edit_is_a_new_version(client, make_user):
    domain_services.profiles_seed_builtin()
    assert set(DomainProfile.objects.values_list("name", flat=True)) >= {
        "coding",
        "browser",
        "conversation",
        "engineering",
        "advisory",
        "discussion",
        "crew",
        "arithmetic",
        "generic",
    }
    coding = DomainProfile.objects.get(name="coding", is_current=True)
    assert coding.version == 1
    client.force_login(make_user(Role.VIEWER))
    body = client.get(reverse("domains:detail", args=["coding"])).content.decode()
    assert "edit_file" in body and "str_replace" in body and "goal_progress" in body
    assert client.get(reverse("domains:edit", args=["coding"])).status_code == 403

    client.force_login(make_user(Role.ADMIN))
    import yaml

    data = dict(coding.data)
    data["rubric_weights"] = dict(data["rubric_weights"], goal_progress=0.5)
    response = client.post(
        reverse("domains:edit", args=["coding"]),
        {"text": yaml.safe_dump(data), "change_note": "more progress"},
    )
    assert response.status_code == 302
    current = DomainProfile.objects.get(name="coding", is_current=True)
    assert current.version == 2 and current.data["rubric_weights"]["goal_progress"] == 0.5
    assert (
        DomainProfile.objects.get(name="coding", version=1).data["rubric_weights"]["goal_progress"]
        == 0.3
    )

    data["tools"][0]["category"] = "telepathy"
    response = client.post(reverse("domains:edit", args=["coding"]), {"text": yaml.safe_dump(data)})
    assert response.status_code == 200
    assert (
        b'data-testid="profile-error"' in response.content
        and b"tools.0.category" in response.content
    )
    assert DomainProfile.objects.get(name="coding", is_current=True).version == 2

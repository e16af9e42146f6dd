"""A task set's repositories come from archives uploaded with it (or an administrator's roots),
never from a path on the server."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from webapp.accounts.models import Role
from webapp.common.errors import ApplicationError
from webapp.tasks.models import Task
from webapp.tasks.services import task_set_import, task_update

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _task(**fields) -> str:
    data = {"id": "t1", "prompt": "Read it.", "expected_answer": "x", "domain": "coding"}
    return json.dumps({**data, **fields}) + "\n"


def _archive(name: str = "repo.tar.gz", member: str = "NOTES") -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(member)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"hi\n"))
    return SimpleUploadedFile(name, buffer.getvalue())


@pytest.mark.parametrize("repo", ["VAR_DIR", "/", "/etc", "../../etc"])
def test_a_server_path_is_refused_at_import_and_nothing_is_stored(repo):
    repo = str(settings.VAR_DIR) if repo == "VAR_DIR" else repo
    with pytest.raises(ApplicationError) as caught:
        task_set_import(text=_task(repo=repo), name="sneaky")
    assert "repo" in str(caught.value.extra["problems"])
    assert not Task.objects.exists()


def test_an_uploaded_archive_is_the_tasks_repository():
    task_set, count = task_set_import(
        text=_task(repo="repo.tar.gz"), name="shipped", archives=[_archive()]
    )
    stored = task_set.tasks.get().data["repo"]
    assert stored.startswith(str(settings.STEPLAB_TASK_ARCHIVES_DIR))
    assert stored.endswith("/repo.tar.gz")
    with pytest.raises(ApplicationError, match="not a tar archive"):
        task_set_import(
            text=_task(id="t2", repo="x.tar"),
            name="bad",
            archives=[SimpleUploadedFile("x.tar", b"not a tar")],
        )


def test_an_edit_cannot_point_a_task_at_the_server():
    task_set, _ = task_set_import(text=_task(), name="plain")
    task = task_set.tasks.get()
    with pytest.raises(ApplicationError, match="outside the directories"):
        task_update(task=task, data={**task.data, "repo": str(settings.VAR_DIR)})
    task.refresh_from_db()
    assert not task.data.get("repo")


def test_the_import_form_takes_archives(client, make_user):
    client.force_login(make_user(Role.OPERATOR))
    response = client.post(
        reverse("tasks:import"),
        {
            "name": "from-form",
            "text": _task(repo="repo.tar.gz"),
            "archives": [_archive()],
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Task.objects.get().data["repo"].endswith("/repo.tar.gz")
    response = client.post(
        reverse("tasks:import"), {"name": "from-form-2", "text": _task(id="t9", repo="/etc")}
    )
    assert response.status_code == 200 and b"outside the directories" in response.content

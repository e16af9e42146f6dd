"""A far-future timestamp (issue 17, problem 4): refused at upload with a message naming file,
record and field; and a row that holds one already (written before the check, or straight into
the database) no longer breaks the trajectory's pages and exports: the value shows as empty."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse

from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Step, TaskRef, Trajectory
from webapp.accounts.models import Role
from webapp.trajectories import services
from webapp.trajectories.models import Step as StepRow
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = pytest.mark.django_db

FAR_FUTURE = "9999-12-31T23:59:59-14:00"


def _trajectory(marker: str) -> Trajectory:
    return Trajectory(
        task=TaskRef(id=f"task-{marker}", prompt=f"Fix {marker}", domain="coding"),
        agent="swe-agent",
        steps=[
            Step(index=i, tool=tool, params={"command": tool}, observation=f"out {i}")
            for i, tool in enumerate(["read", "edit", "test"])
        ],
    )


@pytest.mark.sqlite
def test_the_upload_form_refuses_a_far_future_step_time(client, make_user):
    client.force_login(make_user(Role.OPERATOR))
    data = json.loads(_trajectory("late").to_json())
    data["steps"][1]["started_at"] = FAR_FUTURE
    upload = SimpleUploadedFile("late.jsonl", (json.dumps(data) + "\n").encode())
    response = client.post(reverse("trajectories:import"), {"files": [upload]}, follow=True)
    body = response.content.decode()
    assert response.status_code == 200
    assert "late.jsonl" in body and "steps[1].started_at" in body
    assert f"{FAR_FUTURE} is out of range" in body and "fix the time in the file" in body
    assert not TrajectoryRow.objects.exists() and not StepRow.objects.exists()


@pytest.fixture
def broken(client, make_user):
    """Two stored trajectories; the first has an unreadable step time and finish time, written
    straight into PostgreSQL (as rows imported before the check would hold them)."""
    client.force_login(make_user(Role.VIEWER))
    bad, good = services.trajectories_import(
        results=[ImportResult("f.json", "test", "1", [_trajectory("bad"), _trajectory("good")])]
    ).created
    with connection.cursor() as cursor:
        cursor.execute(
            'UPDATE trajectories_step SET started_at = %s WHERE trajectory_id = %s AND "index" = 1',
            [FAR_FUTURE, bad],
        )
        cursor.execute(
            "UPDATE trajectories_trajectory SET finished_at = 'infinity' WHERE id = %s", [bad]
        )
        cursor.execute(
            "SELECT count(*) FROM trajectories_step WHERE started_at > '9999-12-31'::timestamptz"
        )
        assert cursor.fetchone() == (1,)  # the database holds it: only Python cannot
    return client, bad, good


def test_pages_of_a_stored_unreadable_time_render(broken, caplog):
    client, bad, good = broken
    caplog.set_level(logging.WARNING, logger="webapp.common.stored_values")
    pages = [
        (reverse("trajectories:list"), {}),
        (reverse("trajectories:list"), {"q": "bad"}),
        (reverse("trajectories:detail", args=[bad]), {}),
        (reverse("trajectories:steps", args=[bad]), {"after": -1}),
        (reverse("trajectories:observation", args=[bad, 1]), {}),
        (reverse("trajectories:diff"), {"a": bad, "b": good}),
    ]
    for url, params in pages:
        response = client.get(url, params)
        assert response.status_code == 200, (url, response.status_code)
    detail = client.get(reverse("trajectories:detail", args=[bad])).content.decode()
    assert 'id="step-1"' in detail and "out 1" in detail
    assert "cannot be read" in caplog.text and "shown as empty" in caplog.text


def test_exports_of_a_stored_unreadable_time_write_null(broken):
    client, bad, good = broken
    download = client.get(reverse("trajectories:download", args=[bad]))
    assert download.status_code == 200
    steps = json.loads(download.content)["steps"]
    assert [s["started_at"] for s in steps] == [None, None, None]
    assert [s["observation"] for s in steps] == ["out 0", "out 1", "out 2"]
    selection = client.post(reverse("trajectories:export_selection"), {"selected": [bad, good]})
    assert selection.status_code == 200
    lines = [json.loads(line) for line in selection.content.decode().splitlines()]
    assert [line["task"]["id"] for line in lines] == ["task-bad", "task-good"]
    assert lines[0]["steps"][1]["started_at"] is None


def test_readable_times_still_load_exactly(broken):
    _, bad, _ = broken
    with connection.cursor() as cursor:
        cursor.execute(
            'UPDATE trajectories_step SET started_at = %s WHERE trajectory_id = %s AND "index" = 0',
            ["2999-12-31T09:00:00-14:00", bad],
        )
    first = StepRow.objects.get(trajectory_id=bad, index=0)
    assert first.started_at.isoformat() == "2999-12-31T23:00:00+00:00"
    assert StepRow.objects.get(trajectory_id=bad, index=1).started_at is None
    assert TrajectoryRow.objects.get(pk=bad).finished_at is None

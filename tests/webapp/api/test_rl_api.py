"""Decoupled RL runs over the API, as the RL page does them: launch with the form's checks (every
bad input named in a 422, nothing created), the run's overview (samplers, queue depth, versions,
staleness, the curve with each step's groups), a step's groups in cursor pages with their
episodes' trajectories, add a sampler, cancel; roles and read-only tokens below operator refused."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.conf import settings

from tests.webapp.training.test_rl_pages import (
    _dead_after_an_hour,
    _launch,
    _running,
    _task_set,
    _trained,
)
from webapp.accounts.models import Role
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.names import Kinds
from webapp.training.models import RLRun, TrainingRun

pytestmark = [
    pytest.mark.sqlite,
    pytest.mark.django_db,
    pytest.mark.usefixtures(_dead_after_an_hour.__name__),
]


@pytest.fixture
def base_model():
    """A model directory under the data directory (a model root)."""
    path = Path(settings.STEPLAB_DATA_DIR) / "models" / f"rl-api-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return str(path.resolve())


@pytest.fixture
def as_role(make_user, make_token):
    def headers(role, scope: str = "full") -> dict[str, str]:
        return {"Authorization": f"Bearer {make_token(make_user(role), scope=scope)}"}

    return headers


def post(client, url: str, body, headers):
    return client.post(url, body, content_type="application/json", headers=headers)


def test_an_operator_launches_a_run_as_the_form_does(client, as_role, base_model):
    task_set = _task_set()
    response = post(
        client,
        "/api/v1/rl-runs",
        {
            "task_set": task_set.pk, "base_model": base_model, "samplers": 3, "name": "api rl",
            "config": {"synchronous": True, "batch_size": 2, "group_size": 2, "max_steps": 5},
        },
        as_role(Role.OPERATOR),
    )  # fmt: skip
    assert response.status_code == 202, response.content
    body = response.json()
    run = RLRun.objects.get()
    assert body["id"] == run.pk and body["status"] == "queued" and body["name"] == "api rl"
    assert body["samplers"] == 3 and body["environment"] == "steplab/arithmetic"
    assert body["config"]["synchronous"] is True and body["config"]["max_staleness"] == 0
    assert [v["version"] for v in body["versions"]] == [0]
    assert body["queue_depth"] == 0 and body["curve"] == [] and body["sampler_jobs"] == []
    assert run.job.kind == Kinds.RL


def test_a_bad_launch_names_every_problem_and_makes_nothing(client, as_role, base_model):
    headers = as_role(Role.OPERATOR)
    response = post(
        client,
        "/api/v1/rl-runs",
        {
            "task_set": 999_999, "base_model": "/nowhere", "sampler_policy": 999_999,
            "environment": "no/such-env",
            "config": {"importance_cap": 0.5, "stale_groups": "sometimes", "env_id": "x",
                       "bogus": 1},
        },
        headers,
    )  # fmt: skip
    assert response.status_code == 422, response.content
    fields = {f["field"] for f in response.json()["error"]["fields"]}
    assert fields == {
        "task_set", "base_model", "sampler_policy", "environment", "config.importance_cap",
        "config.stale_groups", "config.env_id", "config.bogus",
    }  # fmt: skip
    response = post(client, "/api/v1/rl-runs", {"base_model": base_model}, headers)
    assert response.status_code == 422 and "task_set" in response.json()["error"]["message"]
    response = post(client, "/api/v1/rl-runs", {"task_set": _task_set().pk, "samplers": 0}, headers)
    assert response.status_code == 422
    assert not RLRun.objects.exists() and not TrainingRun.objects.exists()


def test_roles_and_tokens_below_operator_cannot_launch_add_or_cancel(client, as_role, base_model):
    task_set = _task_set()
    run = _launch(base_model)
    _running(run)
    for headers in (as_role(Role.VIEWER), as_role(Role.ANNOTATOR), as_role(Role.ADMIN, "read")):
        body = {"task_set": task_set.pk, "base_model": base_model}
        assert post(client, "/api/v1/rl-runs", body, headers).status_code == 403
        assert post(client, f"/api/v1/rl-runs/{run.pk}/samplers", {}, headers).status_code == 403
        assert post(client, f"/api/v1/rl-runs/{run.pk}/cancel", {}, headers).status_code == 403
        assert client.get(f"/api/v1/rl-runs/{run.pk}", headers=headers).status_code == 200
    assert RLRun.objects.count() == 1 and not RLRun.objects.get().stopping


def test_the_overview_has_samplers_queue_versions_staleness_and_the_curve(
    client, as_role, base_model
):
    run = _launch(base_model)
    samplers, trainer, rows = _trained(run)
    body = client.get(f"/api/v1/rl-runs/{run.pk}", headers=as_role(Role.VIEWER)).json()
    assert body["trainer_job_id"] == trainer.pk and body["status"] == "running"
    assert body["queue_depth"] == 1 and body["dropped_total"] == 1
    assert (body["staleness_mean"], body["staleness_max"]) == (1.25, 3)  # (0+0+2+3) / 4
    assert body["counts"] == {"sampling": 0, "ready": 1, "taken": 0, "consumed": 3, "dropped": 1}
    assert [v["version"] for v in body["versions"]] == [0, 1, 2, 3]
    online = {s["job_id"]: s["online"] for s in body["sampler_jobs"]}
    assert online == {samplers[0].pk: True, samplers[1].pk: False}
    assert body["samplers_online"] == 1
    assert [s["episodes_per_min"] for s in body["sampler_jobs"]] == [5.0, 0.0]
    assert body["staleness"] == [
        {"staleness": 0, "consumed": 2, "dropped": 0},
        {"staleness": 2, "consumed": 1, "dropped": 0},
        {"staleness": 3, "consumed": 0, "dropped": 1},
    ]
    curve = {p["step"]: p for p in body["curve"]}
    assert curve[1]["consumed_ids"] == [rows[0].pk, rows[1].pk] and curve[1]["dropped_ids"] == []
    assert curve[2]["consumed_ids"] == [rows[3].pk] and curve[2]["dropped_ids"] == [rows[2].pk]
    assert curve[2]["metrics"]["reward"] == 0.75 and curve[2]["metrics"]["dropped"] == 1.0
    listing = client.get("/api/v1/rl-runs", headers=as_role(Role.VIEWER)).json()
    assert [r["id"] for r in listing["items"]] == [run.pk]
    assert client.get("/api/v1/rl-runs/999999", headers=as_role(Role.VIEWER)).status_code == 404


def test_a_steps_groups_come_in_cursor_pages_with_their_trajectories(client, as_role, base_model):
    run = _launch(base_model)
    _, _, rows = _trained(run)
    headers = as_role(Role.VIEWER)
    url = f"/api/v1/rl-runs/{run.pk}/steps/2/groups"
    first = client.get(url, {"limit": 1}, headers=headers).json()
    second = client.get(url, {"limit": 1, "cursor": first["next_cursor"]}, headers=headers).json()
    assert second["next_cursor"] is None
    groups = first["items"] + second["items"]
    assert [g["id"] for g in groups] == [rows[2].pk, rows[3].pk]
    dropped, consumed = groups
    assert (dropped["status"], dropped["staleness"], dropped["weight"]) == ("dropped", 3, None)
    assert (consumed["status"], consumed["staleness"], consumed["weight"]) == ("consumed", 2, 1.0)
    assert consumed["version"] == 1 and consumed["step"] == 2
    assert [e["trajectory_id"] for e in consumed["episodes"]] == rows[3].payload["trajectory_ids"]
    assert [e["reward"] for e in consumed["episodes"]] == [1.0, 0.0]
    assert [e["success"] for e in consumed["episodes"]] == [True, False]
    assert client.get(f"/api/v1/rl-runs/{run.pk}/steps/9/groups", headers=headers).json() == {
        "items": [], "next_cursor": None,
    }  # fmt: skip


def test_an_operator_adds_a_sampler_and_cancels(client, as_role, base_model):
    run = _launch(base_model)
    _running(run)
    headers = as_role(Role.OPERATOR)
    response = post(client, f"/api/v1/rl-runs/{run.pk}/samplers", {}, headers)
    assert response.status_code == 202
    added = Job.objects.get(pk=response.json()["job_id"])
    assert added.kind == Kinds.RL_SAMPLER and added.parent_id == run.job_id
    response = post(client, f"/api/v1/rl-runs/{run.pk}/cancel", {}, headers)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == JobStatus.CANCELLED and response.json()["stopping"]
    again = post(client, f"/api/v1/rl-runs/{run.pk}/cancel", {}, headers)
    assert again.status_code == 400 and "already ended" in again.json()["error"]["message"]
    late = post(client, f"/api/v1/rl-runs/{run.pk}/samplers", {}, headers)
    assert late.status_code == 400 and "no sampler to add" in late.json()["error"]["message"]

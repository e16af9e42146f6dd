"""A decoupled RL run's pages (issue 19): the launch form with the decoupled trainer's options and
their help (the synchronous baseline a checkbox), the run's page — samplers online or not from
their heartbeats with their episodes per minute, the queue of ready groups, the version timeline,
the staleness histogram, the dropped total, the reward curve whose every step opens the groups it
trained on (with each episode's trajectory) — followed live until the run ends, add a sampler and
cancel for operators only; links from the training list, a training run's page and the job page;
agent-written text escaped."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from trainer_core.training.data import Encoded
from trainer_core.training.episodes import Completion, Group
from webapp.accounts.models import Role
from webapp.common.htmx import STOP_POLLING
from webapp.jobs.models import Job, JobMetricPoint, JobStatus
from webapp.jobs.names import Kinds
from webapp.tasks.models import Task
from webapp.tasks.services import task_set_import
from webapp.training import rl_selectors, rl_services
from webapp.training.models import RLRun, SampleGroup, TrainingRun

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

MARKUP = '<img src=x onerror="alert(1)">'


@pytest.fixture
def base_model():
    """A model directory under the data directory (a model root)."""
    path = Path(settings.STEPLAB_DATA_DIR) / "models" / f"rl-base-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return str(path.resolve())


@pytest.fixture(autouse=True)
def _dead_after_an_hour(settings):
    """A sampler counts as offline after an hour of silence (the tests' default is 4 s), so a
    fresh heartbeat stays fresh however slowly a test runs."""
    settings.STEPLAB_JOB_DEAD_AFTER_SECONDS = 3600


@pytest.fixture
def as_role(client, make_user):
    def login(role):
        client.force_login(make_user(role))
        return client

    return login


def _task_set(n: int = 3):
    task_set, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("train", n=n)), name=f"rl-{uuid.uuid4().hex[:8]}"
    )
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    return task_set


def _launch(base_model: str, **values) -> RLRun:
    return rl_services.rl_run_create(
        task_set=_task_set(),
        base_model=base_model,
        values={"batch_size": 2, "group_size": 2, "max_steps": 4, **values},
        samplers=2,
        name="rl page run",
    )


def _group(reward: float, success: bool) -> Group:
    def completion(r: float, ok: bool) -> Completion:
        done = Completion(
            Encoded([1, 2, 3], [-100, 2, 3], [-1, 0, 0], [1.0] * 3), r, [None], success=ok
        )
        done.behaviour_logprobs = [0.0, -0.5, -0.25]
        done.turns = [
            {
                "text": MARKUP,
                "action": {"tool": "answer", "params": {"value": MARKUP}},
                "error": None,
                "observation": MARKUP,
                "reward": r,
            }
        ]
        return done

    return Group([completion(reward, success), completion(0.0, False)], key="t")


def _play(run: RLRun, job: Job, version: int, reward: float = 1.0) -> SampleGroup:
    """A group played by sampler ``job`` with ``version``, stored with its episodes."""
    row = rl_services.group_claim(run=run, job_id=job.pk, version=version)
    group = _group(reward, True)
    ids = rl_services.episodes_store(run=run, row=row, group=group, model="tiny")
    assert rl_services.group_store(run=run, row=row, job_id=job.pk, group=group, trajectory_ids=ids)
    row.refresh_from_db()
    return row


def _running(run: RLRun):
    """The run as its job leaves it once started: the parent waiting on two samplers (one with a
    fresh heartbeat, one silent for two hours) and the trainer."""
    now = timezone.now()
    parent = run.job
    samplers, trainer = rl_services.rl_run_start_children(run=run, parent=parent)
    Job.objects.filter(pk=parent.pk).update(
        status=JobStatus.RUNNING, awaiting_children=True, started_at=now
    )
    Job.objects.filter(pk=samplers[0].pk).update(
        status=JobStatus.RUNNING, worker="sampler-a@host", heartbeat_at=now, started_at=now,
        attempts=1,
    )  # fmt: skip
    Job.objects.filter(pk=samplers[1].pk).update(
        status=JobStatus.RUNNING, worker="sampler-b@host", started_at=now - timedelta(hours=3),
        heartbeat_at=now - timedelta(hours=2), attempts=1,
    )  # fmt: skip
    Job.objects.filter(pk=trainer.pk).update(
        status=JobStatus.RUNNING, worker="gpu@host", heartbeat_at=now, started_at=now
    )
    run.refresh_from_db()
    return samplers, trainer


def _trained(run: RLRun):
    """Two steps: step 1 trains on two fresh groups; step 2 (by version 3) trains on one group of
    version 1 and drops one of version 0 as too stale (staleness 3 > 2); one group stays ready."""
    samplers, trainer = _running(run)
    fast = samplers[0]
    config = rl_selectors.decoupled_config(run=run)
    rows = [_play(run, fast, v) for v in (0, 0, 0, 1, 1)]
    source = rl_services.DbGroupSource(run, config=config)
    publisher = rl_services.DbPublisher(run)
    first = source.take(2, timeout=0)
    source.settle(1, 0, first, [])
    for version in (1, 2, 3):
        publisher.publish(version, f"/ckpt/checkpoint-{version}", version)
    second = source.take(2, timeout=0)  # rows 2 (v0) and 3 (v1)
    source.settle(2, 3, [second[1]], [second[0]])
    for step, values in (
        (1, {"loss": 0.5, "reward": 0.25, "success_rate": 0.5, "version": 0.0,
             "staleness_mean": 0.0, "dropped": 0.0}),
        (2, {"loss": 0.4, "reward": 0.75, "success_rate": 1.0, "version": 3.0,
             "staleness_mean": 2.0, "dropped": 1.0, "importance_weight_mean": 0.98,
             "importance_weight_min": 0.9, "importance_weight_max": 1.2}),
    ):  # fmt: skip
        JobMetricPoint.objects.create(job=trainer, step=step, values=values)
    return samplers, trainer, rows


# --- the launch form -------------------------------------------------------------------------------


def test_the_form_shows_the_decoupled_options_with_their_help_and_a_synchronous_checkbox(as_role):
    body = as_role(Role.OPERATOR).get(reverse("training:rl_new")).content.decode()
    for name in ("max_staleness", "stale_groups", "stale_weight", "importance_cap",
                 "publish_every", "wait_seconds", "group_size", "temperature"):  # fmt: skip
        assert f'name="{name}"' in body, name
    assert "The most versions a group may lag the trainer" in body  # max_staleness's help
    assert 'type="checkbox" name="synchronous" value="true"' in body
    assert '<select name="stale_groups"' in body and '<option value="downweight"' in body
    # the run fills these in itself: not offered
    for name in ("model_dir", "output_dir", "env_id", "tasks", "num_tasks", "dataset"):
        assert f'name="{name}"' not in body, name
    # the decoupled trainer's own options come before GRPO's
    assert body.index('name="max_staleness"') < body.index('name="learning_rate"')


def test_viewers_and_annotators_cannot_open_the_form_or_launch(as_role, base_model):
    task_set = _task_set()
    for role in (Role.VIEWER, Role.ANNOTATOR):
        client = as_role(role)
        assert client.get(reverse("training:rl_new")).status_code == 403
        response = client.post(
            reverse("training:rl_new"),
            {"launch": "1", "task_set": task_set.pk, "base_model": base_model},
        )
        assert response.status_code == 403
    assert not RLRun.objects.exists()


def test_launching_from_the_form_makes_the_run_and_opens_its_page(as_role, base_model):
    task_set = _task_set()
    client = as_role(Role.OPERATOR)
    response = client.post(
        reverse("training:rl_new"),
        {
            "launch": "1", "name": "sync baseline", "task_set": task_set.pk,
            "base_model": base_model, "samplers": "3", "max_queue": "0",
            "synchronous": ["false", "true"], "batch_size": "2", "group_size": "2",
            "max_steps": "5", "stale_groups": "downweight",
        },
    )  # fmt: skip
    run = RLRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("training:rl_detail", args=[run.pk])
    config = run.training_run.config
    assert config["synchronous"] is True and config["max_staleness"] == 0
    assert (config["max_steps"], config["stale_groups"], config["env_id"]) == (
        5, "downweight", "steplab/arithmetic",
    )  # fmt: skip
    assert run.samplers == 3 and run.training_run.name == "sync baseline"
    assert run.job.kind == Kinds.RL and run.job.status == JobStatus.QUEUED
    assert list(run.versions.values_list("version", flat=True)) == [0]


def test_an_unchecked_box_is_false_and_a_bad_option_is_shown_and_launches_nothing(
    as_role, base_model
):
    task_set = _task_set()
    client = as_role(Role.OPERATOR)
    form = {"launch": "1", "task_set": task_set.pk, "base_model": base_model}
    response = client.post(
        reverse("training:rl_new"), {**form, "synchronous": "false", "importance_cap": "0.5"}
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-testid="form-error"' in body and "importance_cap must be at least 1" in body
    response = client.post(reverse("training:rl_new"), {**form, "samplers": "0"})
    assert "samplers must be between 1 and 64" in response.content.decode()
    response = client.post(reverse("training:rl_new"), {"launch": "1", "base_model": base_model})
    assert "Pick the task set" in response.content.decode()
    assert not RLRun.objects.exists() and not TrainingRun.objects.exists()
    client.post(reverse("training:rl_new"), {**form, "synchronous": "false"})
    assert RLRun.objects.get().training_run.config["synchronous"] is False


def test_the_preview_is_the_exact_yaml_or_says_what_is_wrong(as_role, base_model):
    task_set = _task_set()
    client = as_role(Role.OPERATOR)
    text = client.post(
        reverse("training:rl_preview"),
        {"task_set": task_set.pk, "base_model": base_model, "max_staleness": "3"},
    ).content.decode()
    assert "max_staleness: 3" in text and "env_id: steplab/arithmetic" in text
    assert f"model_dir: {base_model}" in text and "num_tasks: 3" in text
    text = client.post(reverse("training:rl_preview"), {"stale_weight": "2"}).content.decode()
    assert text.startswith("# ") and "stale_weight" in text


# --- the run's page ------------------------------------------------------------------------------


def test_the_page_shows_samplers_queue_versions_staleness_and_the_curve(as_role, base_model):
    run = _launch(base_model)
    samplers, trainer, rows = _trained(run)
    body = as_role(Role.VIEWER).get(reverse("training:rl_detail", args=[run.pk])).content.decode()
    assert 'data-testid="queue-depth">1 ready group not' in body
    assert 'data-testid="dropped-total">1<' in body
    # samplers: online from a fresh heartbeat, offline after two silent hours
    assert f'data-job-id="{samplers[0].pk}" data-online="true"' in body
    assert f'data-job-id="{samplers[1].pk}" data-online="false"' in body
    silent = int(re.search(r"offline: no heartbeat for (\d+) s", body).group(1))
    assert 7200 <= silent < 7260
    assert 'data-testid="samplers-online">1 online of 2' in body
    # 5 groups of 2 episodes in the last two minutes: 5 episodes per minute
    assert 'data-testid="episodes-per-min">5.0<' in body
    # the version timeline, newest first, with the start model
    versions = [f'data-version="{v}"' for v in (3, 2, 1, 0)]
    assert all(v in body for v in versions)
    assert [body.index(v) for v in versions] == sorted(body.index(v) for v in versions)
    # staleness histogram: 0 → 2 trained on; 2 → 1 trained on; 3 → 1 dropped (beyond the bound)
    for staleness, consumed, dropped in ((0, 2, 0), (2, 1, 0), (3, 0, 1)):
        row = body.split(f'data-staleness="{staleness}"')[1].split("</tr>")[0]
        assert f'data-testid="consumed">{consumed}<' in row
        assert f'data-testid="dropped">{dropped}<' in row
    assert "beyond the bound" in body.split('data-staleness="3"')[1].split("</tr>")[0]
    # every step links to its groups
    for step in (1, 2):
        assert f'href="{reverse("training:rl_step", args=[run.pk, step])}"' in body
    # the curve's data: every trained step, each series kind on its own scale
    data = json.loads(body.split('id="rl-curve-data" type="application/json">')[1].split("<")[0])
    assert data["steps"] == [1, 2]
    assert data["series"]["reward"] == {"scale": "reward", "values": [0.25, 0.75]}
    assert data["series"]["success_rate"]["scale"] == "rate"
    assert data["series"]["staleness_mean"]["scale"] == "versions"
    assert data["series"]["dropped"] == {"scale": "groups", "values": [0.0, 1.0]}
    assert f'href="/jobs/{trainer.pk}/"' in body
    assert "rl_chart.js" in body and "uPlot.iife.min.js" in body


def test_a_step_opens_the_groups_it_trained_on_and_dropped_with_their_trajectories(
    as_role, base_model
):
    run = _launch(base_model)
    _, _, rows = _trained(run)
    client = as_role(Role.VIEWER)
    url = reverse("training:rl_step", args=[run.pk, 2])
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in fragment and 'data-testid="rl-step" data-step="2"' in fragment
    consumed = fragment.split(f'data-group="{rows[3].pk}"')[1].split("</tr>")[0]
    dropped = fragment.split(f'data-group="{rows[2].pk}"')[1].split("</tr>")[0]
    assert 'data-status="consumed"' in fragment and "trained on" in consumed
    assert "<td>v1</td><td>2</td><td>1.000</td>" in consumed  # version, staleness, weight
    assert "<td>v0</td><td>3</td><td>—</td>" in dropped
    for row in (rows[2], rows[3]):
        for trajectory_id in row.payload["trajectory_ids"]:
            assert f'href="/trajectories/{trajectory_id}/"' in fragment
    assert f'data-group="{rows[0].pk}"' not in fragment  # step 1's
    assert "reward 0.750" in fragment and "importance weights 0.900–1.200" in fragment
    page = client.get(url).content.decode()
    assert "<html" in page and f'data-group="{rows[3].pk}"' in page
    empty = client.get(reverse("training:rl_step", args=[run.pk, 9])).content.decode()
    assert "No group was settled at step 9" in empty
    assert client.get(reverse("training:rl_step", args=[999_999, 1])).status_code == 404


def test_agent_and_user_text_is_escaped(as_role, base_model):
    run = _launch(base_model)
    _, _, rows = _trained(run)
    TrainingRun.objects.filter(pk=run.training_run_id).update(name=MARKUP)
    Task.objects.filter(pk=rows[3].task_id).update(external_id=MARKUP)
    Job.objects.filter(parent=run.job, kind=Kinds.RL_SAMPLER).update(message=MARKUP, worker=MARKUP)
    client = as_role(Role.VIEWER)
    for url in (
        reverse("training:rl_detail", args=[run.pk]),
        reverse("training:rl_step", args=[run.pk, 2]),
    ):
        body = client.get(url).content.decode()
        assert MARKUP not in body, url
    assert (
        "&lt;img src=x"
        in client.get(reverse("training:rl_step", args=[run.pk, 2])).content.decode()
    )


def test_the_live_part_polls_while_the_run_goes_on_and_stops_when_it_ends(as_role, base_model):
    run = _launch(base_model)
    _trained(run)
    client = as_role(Role.VIEWER)
    url = reverse("training:rl_detail", args=[run.pk])
    page = client.get(url).content.decode()
    assert 'id="rl-live" hx-get="' in page and 'data-follow="live"' in page
    headers = {"HX-Request": "true", "HX-Target": "rl-live"}
    live = client.get(url, headers=headers)
    assert live.status_code == 200 and b"<html" not in live.content
    assert b'id="rl-curve-data"' in live.content
    Job.objects.filter(pk=run.job_id).update(
        status=JobStatus.SUCCEEDED, awaiting_children=False, finished_at=timezone.now()
    )
    ended = client.get(url, headers=headers)
    assert ended.status_code == STOP_POLLING and b'data-follow="ended"' in ended.content
    assert b'data-testid="cancel"' not in ended.content
    assert b'data-testid="add-sampler"' not in ended.content


def test_a_killed_workers_jobs_show_as_offline_then_resumed(as_role, base_model):
    """A sampler whose worker died is re-queued by the reaper and resumes on the next worker; the
    trainer resumes from its newest checkpoint: the page says which is which."""
    run = _launch(base_model)
    samplers, trainer = _running(run)
    Job.objects.filter(pk=samplers[1].pk).update(status=JobStatus.QUEUED, worker="")
    Job.objects.filter(pk=trainer.pk).update(attempts=2, worker="gpu-2@host")
    client = as_role(Role.VIEWER)
    body = client.get(reverse("training:rl_detail", args=[run.pk])).content.decode()
    row = body.split(f'data-job-id="{samplers[1].pk}"')[1].split("</tr>")[0]
    assert 'data-online="false"' in row
    assert "re-queued after attempt 1 (its worker stopped); waiting for a rollouts worker" in row
    trainer_state = body.split('data-testid="trainer-state">')[1].split("</dd>")[0]
    assert (
        "online" in trainer_state
        and "attempt 2 (resumed from its newest checkpoint)" in trainer_state
    )
    Job.objects.filter(pk=trainer.pk).update(heartbeat_at=timezone.now() - timedelta(hours=2))
    body = client.get(reverse("training:rl_detail", args=[run.pk])).content.decode()
    assert (
        "offline: no heartbeat for"
        in body.split('data-testid="trainer-state">')[1].split("</dd>")[0]
    )


# --- add a sampler, cancel ------------------------------------------------------------------------


def test_an_operator_adds_a_sampler_to_a_running_run(as_role, base_model):
    run = _launch(base_model)
    _running(run)
    client = as_role(Role.OPERATOR)
    page = client.get(reverse("training:rl_detail", args=[run.pk])).content.decode()
    assert 'data-testid="add-sampler"' in page and 'data-testid="cancel"' in page
    response = client.post(reverse("training:rl_add_sampler", args=[run.pk]), follow=True)
    added = Job.objects.filter(parent=run.job, kind=Kinds.RL_SAMPLER).order_by("-pk").first()
    assert Job.objects.filter(parent=run.job, kind=Kinds.RL_SAMPLER).count() == 3
    assert added.queue == "rollouts" and added.status == JobStatus.QUEUED
    assert f"Sampler job {added.pk} added" in response.content.decode()
    assert f'data-job-id="{added.pk}" data-online="false"' in response.content.decode()


def test_adding_a_sampler_to_a_run_not_yet_started_says_why(as_role, base_model):
    run = _launch(base_model)
    client = as_role(Role.OPERATOR)
    page = client.get(reverse("training:rl_detail", args=[run.pk])).content.decode()
    assert 'data-testid="add-sampler"' not in page  # nothing to add to yet
    response = client.post(reverse("training:rl_add_sampler", args=[run.pk]), follow=True)
    assert "has not started its samplers yet" in response.content.decode()
    assert not Job.objects.filter(kind=Kinds.RL_SAMPLER).exists()


def test_an_operator_cancels_the_run_and_its_groups_and_versions_stay(as_role, base_model):
    run = _launch(base_model)
    samplers, trainer, _ = _trained(run)
    client = as_role(Role.OPERATOR)
    response = client.post(reverse("training:rl_cancel", args=[run.pk]), follow=True)
    assert "is cancelled" in response.content.decode()
    run.refresh_from_db()
    assert run.stopping and "cancelled by" in run.stop_reason
    assert Job.objects.get(pk=run.job_id).status == JobStatus.CANCELLED
    # running children are asked to stop at their next report
    assert all(
        j.cancel_requested_at is not None or j.status == JobStatus.CANCELLED
        for j in Job.objects.filter(pk__in=[s.pk for s in samplers] + [trainer.pk])
    )
    assert run.groups.count() == 5 and run.versions.count() == 4
    again = client.post(reverse("training:rl_cancel", args=[run.pk]), follow=True)
    assert "has already ended" in again.content.decode()


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ANNOTATOR])
def test_roles_below_operator_cannot_cancel_or_add_samplers(as_role, base_model, role):
    run = _launch(base_model)
    _running(run)
    client = as_role(role)
    page = client.get(reverse("training:rl_detail", args=[run.pk])).content.decode()
    assert 'data-testid="cancel"' not in page and 'data-testid="add-sampler"' not in page
    assert client.post(reverse("training:rl_cancel", args=[run.pk])).status_code == 403
    assert client.post(reverse("training:rl_add_sampler", args=[run.pk])).status_code == 403
    run.refresh_from_db()
    assert not run.stopping and run.job.status == JobStatus.RUNNING
    assert Job.objects.filter(parent=run.job, kind=Kinds.RL_SAMPLER).count() == 2


# --- links to the page ---------------------------------------------------------------------------------


def test_the_training_list_the_run_page_and_the_job_pages_link_to_it(as_role, base_model):
    run = _launch(base_model)
    samplers, trainer = _running(run)
    plain = TrainingRun.objects.create(method="sft", base_model="/m", config={})
    client = as_role(Role.VIEWER)
    target = f'href="{reverse("training:rl_detail", args=[run.pk])}"'
    listing = client.get(reverse("training:list")).content.decode()
    assert target in listing and listing.count('data-testid="rl-run-link"') == 1
    assert (
        target
        in client.get(reverse("training:detail", args=[run.training_run_id])).content.decode()
    )
    assert (
        "rl-run-link"
        not in client.get(reverse("training:detail", args=[plain.pk])).content.decode()
    )
    for job in (run.job, trainer, samplers[0]):  # the job page of each of the run's jobs
        body = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
        assert 'data-testid="rl-run-link"' in body and target in body, job.kind
    # the part asks nothing of another kind's job (a job with no parent, no run)
    part = render_to_string(
        "training/partials/rl_job_detail.html",
        {"job": Job.objects.create(kind=Kinds.RL_SAMPLER)},
    )
    assert "rl-run-link" not in part
    assert (
        'data-testid="new-rl-run"'
        in as_role(Role.OPERATOR).get(reverse("training:list")).content.decode()
    )
    assert client.get(reverse("training:rl_detail", args=[999_999])).status_code == 404

"""Task health (docs/task-health.md) on constructed runs: always-fail, always-pass, flaky and
possible false-negative tasks are flagged with links to their episodes and a healthy task is not;
thresholds change what is flagged; a quarantined task leaves dataset builds and evaluation runs
and comes back when released; only operators quarantine; the CLI and the API say the same."""

from __future__ import annotations

import uuid

import pytest
from click.testing import CliRunner
from django.urls import reverse

from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.accounts.models import Role
from webapp.api import services as token_services
from webapp.cli.database import tasks as tasks_cli
from webapp.datasets.models import DatasetSnapshot
from webapp.datasets.selectors import selection_ids
from webapp.evaluation.services import evaluation_launch, evaluation_start_collect
from webapp.rollouts import health
from webapp.rollouts.models import Episode, Policy
from webapp.tasks.models import TaskQuarantine
from webapp.tasks.services import task_quarantine, task_release, task_set_import
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

# (task index, policy, outcomes, seed or None per episode) — see the module docstring's cases:
# t0 healthy, t1 always fails (and so does its reference), t2 always passes, t3 flips on an
# identical rerun of the seeded noisy policy, t4 the strongest policy fails while the reference
# passes. "strong" (a local model at temperature 0) is the strongest policy: 9/16 on the set;
# its episode cut short by the step limit ("cut") fails but is no rerun, so t0 is not flaky.
PLAN = [
    (0, "weak", [1, 1, 0, 0]), (0, "strong", [1, 1, 1, "cut"]), (0, "ref", [1]),
    (1, "weak", [0, 0, 0]), (1, "strong", [0, 0, 0]), (1, "ref", [0]),
    (2, "weak", [1, 1, 1]), (2, "strong", [1, 1, 1]),
    (3, "noisy", [1, 0]), (3, "weak", [1, 0]), (3, "strong", [1, 1, 1]),
    (4, "weak", [1, 1, 0]), (4, "strong", [0, 0, 0]), (4, "ref", [1]),
]  # fmt: skip


@pytest.fixture
def world():
    """Five arithmetic tasks, four policies, and the episodes of PLAN as finished trajectories."""
    suffix = uuid.uuid4().hex[:6]
    task_set, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("train", n=5)), name=f"health-{suffix}"
    )
    tasks = list(task_set.tasks.order_by("external_id"))
    names = {key: f"{key}-{suffix}" for key in ("weak", "strong", "ref", "noisy")}
    Policy.objects.bulk_create(
        [
            Policy(name=names["weak"], kind="openai", model="m", parameters={"temperature": 1}),
            Policy(name=names["strong"], kind="local", model="/m", parameters={"temperature": 0}),
            Policy(name=names["ref"], kind="scripted"),
            Policy(
                name=names["noisy"], kind="scripted", parameters={"mistakes": {"wrong_answer": 0.3}}
            ),  # fmt: skip
        ]
    )
    rows = []
    for index, key, outcomes in PLAN:
        task = tasks[index]
        for episode, success in enumerate(outcomes):
            # the noisy policy's two episodes are reruns: the same seed and episode number
            seed = 11 if key == "noisy" else 100 * index + episode
            rows.append(
                Trajectory(
                    task=task, task_ref=task.external_id, task_set_name=task_set.name,
                    policy=names[key], source="rollout", status="finished", success=success == 1,
                    outcome={"truncated": success == "cut"},
                    metadata={"seed": seed, "episode": 0 if key == "noisy" else episode},
                )
            )  # fmt: skip
    Trajectory.objects.bulk_create(rows)
    return task_set, tasks, names


def test_each_detection_fires_on_its_task_and_a_healthy_task_is_not_flagged(world):
    task_set, tasks, names = world
    report = health.task_set_health(task_set=task_set)
    flags = {t.external_id: report.health.tasks[t.pk].flags for t in tasks}
    ids = [t.external_id for t in tasks]
    assert flags == {
        ids[0]: [],
        ids[1]: ["always_fail", "reference_fails"],
        ids[2]: ["always_pass"],
        ids[3]: ["flaky"],
        ids[4]: ["false_negative"],
    }
    assert report.health.strongest == names["strong"]
    row = report.rows()[0]
    assert (row["successes"], row["episodes"]) == (6, 9)
    assert row["low"] == pytest.approx(0.3542, abs=1e-3)  # the Wilson interval of 6/9
    assert row["high"] == pytest.approx(0.8794, abs=1e-3)

    # the episodes behind each detection
    _, page = health.health_episodes(task=tasks[3], kind="flaky")
    assert {(t.policy, t.success) for t in page} == {
        (names["noisy"], True),
        (names["noisy"], False),
    }
    _, page = health.health_episodes(task=tasks[4], kind="false_negative")
    assert sorted((t.policy, t.success) for t in page) == sorted(
        [(names["strong"], False)] * 3 + [(names["ref"], True)]
    )
    _, page = health.health_episodes(task=tasks[1], kind="always_fail")
    assert len(page.object_list) == 7 and not any(t.success for t in page)


def test_the_minimum_evidence_is_settable(world):
    task_set, tasks, _ = world
    strict = health.thresholds_from(values={"min_episodes": "10", "strongest_min_episodes": "4"})
    report = health.task_set_health(task_set=task_set, thresholds=strict)
    assert report.health.tasks[tasks[1].pk].flags == ["reference_fails"]
    assert report.health.tasks[tasks[4].pk].flags == []
    loose = health.thresholds_from(values={"min_reruns": "3"})
    assert "flaky" not in health.task_set_health(task_set=task_set, thresholds=loose).health.tasks[tasks[3].pk].flags  # fmt: skip
    with pytest.raises(Exception, match="min_reruns"):
        health.thresholds_from(values={"min_reruns": "1"})


def test_pages_show_health_and_link_the_episodes(client, make_user, world):
    task_set, tasks, names = world
    client.force_login(make_user(Role.VIEWER))
    page = client.get(reverse("health:set", kwargs={"pk": task_set.pk}), {"flag": "flaky"})
    text = page.content.decode()
    assert page.status_code == 200 and f"health-row-{tasks[3].external_id}" in text
    assert f"health-row-{tasks[0].external_id}" not in text
    assert reverse("health:episodes", kwargs={"pk": tasks[3].pk}) + "?kind=flaky" in text
    panel = client.get(reverse("health:task", kwargs={"pk": tasks[4].pk}), headers={"HX-Request": "true"})  # fmt: skip
    assert b"task-flag-false_negative" in panel.content and b"<html" not in panel.content
    assert (
        reverse("health:set", kwargs={"pk": task_set.pk}).encode()
        in client.get(reverse("tasks:set", kwargs={"pk": task_set.pk})).content
    )
    full = client.get(reverse("health:task", kwargs={"pk": tasks[1].pk}), {"min_episodes": "x"})
    assert b"task-flag-always_fail" in full.content
    assert b"min_episodes must be a number" in full.content
    episodes = client.get(reverse("health:episodes", kwargs={"pk": tasks[3].pk}), {"kind": "flaky"})
    flipped = Trajectory.objects.filter(task=tasks[3], policy=names["noisy"])
    for pk in flipped.values_list("pk", flat=True):
        assert reverse("trajectories:detail", kwargs={"pk": pk}).encode() in episodes.content


def test_only_operators_quarantine_and_release_with_who_when_and_why(client, make_user, world):
    _, tasks, _ = world
    task = tasks[1]
    url = reverse("tasks:quarantine", kwargs={"pk": task.pk})
    client.force_login(make_user(Role.ANNOTATOR))
    assert client.post(url, {"reason": "broken"}).status_code == 403
    operator = make_user(Role.OPERATOR)
    client.force_login(operator)
    client.post(url, {"reason": ""})
    assert not TaskQuarantine.objects.filter(task=task).exists()  # a reason is required
    client.post(url, {"reason": "the checker rejects <b>42.0</b>"})
    row = TaskQuarantine.objects.get(task=task)
    assert (row.quarantined_by, row.reason, row.released_at) == (operator, "the checker rejects <b>42.0</b>", None)  # fmt: skip
    page = client.get(reverse("tasks:detail", kwargs={"pk": task.pk})).content.decode()
    assert "&lt;b&gt;42.0&lt;/b&gt;" in page and 'data-testid="release"' in page
    client.force_login(make_user(Role.VIEWER))
    assert client.post(reverse("tasks:release", kwargs={"pk": task.pk})).status_code == 403
    client.force_login(operator)
    client.post(reverse("tasks:release", kwargs={"pk": task.pk}), {"note": "fixed"})
    row.refresh_from_db()
    assert (row.released_by, row.release_note) == (operator, "fixed") and row.released_at


def test_a_quarantined_task_leaves_datasets_and_evaluations_until_released(make_user, world):
    task_set, tasks, names = world
    task_set.environment = "steplab/arithmetic"
    task_set.save(update_fields=["environment"])
    operator = make_user(Role.OPERATOR)
    snapshot = DatasetSnapshot(name="s", kind="sft", query={"task": task_set.name})

    def dataset_tasks():
        return set(Trajectory.objects.filter(pk__in=selection_ids(snapshot=snapshot)).values_list("task_id", flat=True))  # fmt: skip

    def evaluated_tasks():
        run = evaluation_launch(policy=Policy.objects.get(name=names["ref"]), task_set=task_set)
        collect = evaluation_start_collect(run=run, parent_job=run.job)
        return set(Episode.objects.filter(run=collect).values_list("task_id", flat=True))

    everything = {t.pk for t in tasks}
    assert dataset_tasks() == everything
    task_quarantine(task=tasks[1], user=operator, reason="always fails, reference too")
    assert dataset_tasks() == everything - {tasks[1].pk}
    assert evaluated_tasks() == everything - {tasks[1].pk}
    assert health.task_set_health(task_set=task_set).quarantined == {tasks[1].pk}
    task_release(task=tasks[1], user=operator)
    assert dataset_tasks() == everything
    assert evaluated_tasks() == everything


def test_cli_health_quarantine_and_release(make_user, world):
    task_set, tasks, _ = world
    operator = make_user(Role.OPERATOR)
    viewer = make_user(Role.VIEWER)
    runner = CliRunner()
    result = runner.invoke(tasks_cli, ["health", task_set.name, "--flag", "false_negative"])
    assert result.exit_code == 0, result.output
    assert tasks[4].external_id in result.output and tasks[0].external_id not in result.output
    args = ["quarantine", task_set.name, tasks[4].external_id, "--reason", "strict checker"]
    assert runner.invoke(tasks_cli, [*args, "--user", viewer.username]).exit_code != 0
    assert runner.invoke(tasks_cli, [*args, "--user", operator.username]).exit_code == 0
    assert TaskQuarantine.objects.get(task=tasks[4]).quarantined_by == operator
    assert "QUARANTINED" in runner.invoke(tasks_cli, ["health", task_set.name]).output
    release = ["release", task_set.name, tasks[4].external_id, "--user", operator.username]
    assert runner.invoke(tasks_cli, release).exit_code == 0
    assert TaskQuarantine.objects.get(task=tasks[4]).released_by == operator


def _token(user) -> str:
    return token_services.token_create(user=user, name="health", scope="full")[1]


def test_api_health_and_quarantine(client, make_user, world):
    task_set, tasks, names = world
    viewer, operator = make_user(Role.VIEWER), make_user(Role.OPERATOR)
    read = {"Authorization": f"Bearer {_token(viewer)}"}
    body = client.get(f"/api/v1/task-sets/{task_set.pk}/health", {"flag": "always_pass"}, headers=read).json()  # fmt: skip
    assert [i["external_id"] for i in body["items"]] == [tasks[2].external_id]
    assert body["strongest_policy"] == names["strong"] and body["counts"]["flaky"] == 1
    detail = client.get(f"/api/v1/tasks/{tasks[3].pk}/health", headers=read).json()
    assert detail["flags"] == ["flaky"] and detail["flipped_groups"] == 1
    url = f"/api/v1/tasks/{tasks[3].pk}/quarantine"
    payload = {"data": '{"reason": "flaky"}', "content_type": "application/json"}
    assert client.post(url, headers=read, **payload).status_code == 403
    write = {"Authorization": f"Bearer {_token(operator)}"}
    made = client.post(url, headers=write, **payload)
    assert made.status_code == 201 and made.json()["quarantined_by"] == operator.username
    released = client.post(f"/api/v1/tasks/{tasks[3].pk}/release", headers=write, data="{}", content_type="application/json")  # fmt: skip
    assert released.status_code == 200 and released.json()["released_by"] == operator.username

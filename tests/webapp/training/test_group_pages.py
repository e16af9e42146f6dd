"""The group view and the samples behind a curve point (issue 21): a decoupled run's group shows
its samples side by side with their steps aligned, each step's advantage equal to the one the
trainer trained its tokens with (a group sampled by a real tiny model, taken by the trainer's own
group source and collated by the trainer's own batch code); an offline GRPO row the same; a
training run's step lists what it trained on from its lineage; a task lists the runs and groups
that trained on it; agent text is escaped; every page is read-only and open to viewers."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from tests.webapp.training.test_rl_pages import MARKUP, _launch, _play, _trained
from trainer_core.training.lineage import append_step
from webapp.accounts.models import Role
from webapp.training import rl_services
from webapp.training.models import SampleGroup, TrainingRun

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.fixture
def base_model():
    path = Path(settings.STEPLAB_DATA_DIR) / "models" / f"group-base-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return str(path.resolve())


@pytest.fixture
def as_role(client, make_user):
    def login(role):
        client.force_login(make_user(role))
        return client

    return login


def _shown_advantages(body: str) -> list[list[float | None]]:
    """Per sample, the advantages of its steps in table order, as the page prints them."""
    rows = re.findall(r'<tr data-column="\d+".*?</tr>', body, flags=re.S)
    per_sample: dict[int, list[float | None]] = {}
    for row in rows:
        cells = re.findall(r"<td class=\"rel-[a-z_]+\"[^>]*>(.*?)</td>", row, flags=re.S)
        for k, cell in enumerate(cells):
            found = re.search(r'data-testid="cell-advantage" data-value="([^"]*)"', cell)
            if found is not None:
                per_sample.setdefault(k, []).append(
                    float(found.group(1)) if found.group(1) else None
                )
    return [per_sample[k] for k in sorted(per_sample)]


def test_the_advantage_shown_is_the_one_the_trainer_trained_each_step_with(as_role, base_model):
    """A group sampled by a real tiny model (the decoupled sampler's own call), stored as samplers
    store it; the trainer's group source takes it and its batch code gives every token its
    advantage: the page shows, at every step, the advantage of that step's trained tokens."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
    from trainer_core.training import grpo
    from trainer_core.training.modelling import IGNORE_INDEX, load_model_and_tokenizer
    from trainer_core.training.tiny import build_tiny_model
    from webapp.training import rl_selectors

    model_dir = build_tiny_model(Path(base_model) / "tiny", hidden_size=32, num_layers=1, seed=3)
    run = _launch(
        str(model_dir), group_size=3, max_new_tokens=6, max_episode_steps=2, system_prompt=False
    )
    # the mixed estimator (launched with a reward model's step scores; set on the stored config)
    training = run.training_run
    training.config = {**training.config, "advantage": "mixed", "process_weight": 0.5}
    training.save(update_fields=["config"])
    config = rl_selectors.decoupled_config(run=run)
    model, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
    task = arithmetic_tasks("train", n=1)[0]
    (group,) = grpo.rollout_groups(model, tokenizer, [task], config, seed=11, record_behaviour=True)
    # rewards with a spread (an untrained model earns none), and step scores per turn
    for k, completion in enumerate(group.completions):
        completion.reward = [1.0, 0.0, 0.5][k]
        turns = max(completion.encoded.step_ids) + 1
        completion.step_rewards = [0.25 * (k + t) - 0.3 for t in range(turns)]
    samplers, _ = rl_services.rl_run_start_children(run=run, parent=run.job)
    row = rl_services.group_claim(run=run, job_id=samplers[0].pk, version=0)
    ids = rl_services.episodes_store(run=run, row=row, group=group, model="tiny")
    assert rl_services.group_store(
        run=run, row=row, job_id=samplers[0].pk, group=group, trajectory_ids=ids
    )

    # the trainer's side: its source takes the group, its batch code spreads the advantages
    (taken,) = rl_services.DbGroupSource(run, config=config).take(1, timeout=0)
    batch = grpo._group_batch([taken], config, tokenizer.pad_token_id, "cpu")
    trained = []
    for k, completion in enumerate(taken.completions):
        by_step: dict[int, float] = {}
        for p, (s, label) in enumerate(
            zip(completion.encoded.step_ids, completion.encoded.labels, strict=True)
        ):
            if s >= 0 and label != IGNORE_INDEX:
                by_step.setdefault(s, float(batch["advantages"][k, p]))
        trained.append([by_step.get(t) for t in range(max(by_step) + 1)])
    assert len({a for steps in trained for a in steps}) > 2  # the steps differ

    body = as_role(Role.VIEWER).get(reverse("training:group", args=[run.pk, row.pk])).content
    shown = _shown_advantages(body.decode())
    # float32 in the trainer's tensor, float64 on the page: the same number
    assert shown == [pytest.approx(steps, abs=1e-6) for steps in trained]
    assert "mixed (outcome" in body.decode()


def test_the_group_view_aligns_samples_and_shows_outcome_version_and_staleness(as_role, base_model):
    run = _launch(base_model)
    _, _, rows = _trained(run)
    dropped = SampleGroup.objects.get(run=run, status="dropped")
    client = as_role(Role.VIEWER)
    body = client.get(reverse("training:group", args=[run.pk, dropped.pk])).content.decode()
    assert 'data-testid="group-version">v0<' in body
    assert "3 versions behind the trainer" in body
    assert body.count('data-testid="sample-outcome"') == 2
    assert 'data-testid="sample-trajectory"' in body and "success" in body
    # both samples answered: one aligned step, the same tool, different values
    assert body.count('data-column="') == 1
    assert 'data-relation="same"' in body
    # the step page and the task page reach it
    step = client.get(reverse("training:rl_step", args=[run.pk, 2])).content.decode()
    assert reverse("training:group", args=[run.pk, dropped.pk]) in step
    task_page = client.get(reverse("tasks:detail", args=[dropped.task_id])).content.decode()
    assert reverse("training:task_groups", args=[dropped.task_id]) in task_page
    listed = client.get(reverse("training:task_groups", args=[dropped.task_id])).content.decode()
    assert reverse("training:group", args=[run.pk, dropped.pk]) in listed
    assert f'data-run="{run.pk}"' in listed


def test_agent_text_is_escaped_and_a_group_of_another_run_is_not_found(as_role, base_model):
    run = _launch(base_model)
    _, _, rows = _trained(run)
    other = _launch(base_model)
    client = as_role(Role.VIEWER)
    body = client.get(reverse("training:group", args=[run.pk, rows[0].pk])).content.decode()
    assert MARKUP not in body and "&lt;img src=x" in body
    assert client.get(reverse("training:group", args=[other.pk, rows[0].pk])).status_code == 404


def test_every_page_is_open_to_every_role_and_closed_to_the_anonymous(
    client, make_user, base_model
):
    run = _launch(base_model)
    _, _, rows = _trained(run)
    urls = [
        reverse("training:group", args=[run.pk, rows[0].pk]),
        reverse("training:step_samples", args=[run.training_run_id, 1]),
        reverse("training:task_groups", args=[rows[0].task_id]),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code in (302, 403)
    for role in (Role.VIEWER, Role.ANNOTATOR, Role.OPERATOR, Role.ADMIN):
        client.force_login(make_user(role))
        for url in urls:
            assert client.get(url).status_code == 200, (role, url)
        for url in urls:  # read-only pages
            assert client.post(url).status_code == 405, (role, url)


def test_a_decoupled_runs_curve_point_lists_its_groups_each_a_group_view(as_role, base_model):
    run = _launch(base_model)
    _trained(run)
    client = as_role(Role.VIEWER)
    page = client.get(reverse("training:detail", args=[run.training_run_id])).content.decode()
    data = json.loads(re.search(r'id="job-metrics-data"[^>]*>(.*?)</script>', page, re.S)[1])
    assert data["steps"] == [1, 2] and set(data["series"]) == {"loss", "reward"}
    url = reverse("training:step_samples", args=[run.training_run_id, 0])
    assert f'data-step-url="{url}"' in page
    body = client.get(reverse("training:step_samples", args=[run.training_run_id, 2])).content
    settled = SampleGroup.objects.filter(run=run, step=2)
    for group in settled:
        assert reverse("training:group", args=[run.pk, group.pk]) in body.decode()
    assert body.decode().count('data-testid="group-link"') == settled.count() == 2


def _grpo_rows(tmp_path) -> str:
    rows = []
    for n in range(3):
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"What is {n} + 1?"}],
                "completions": [
                    [
                        {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [
                                {
                                    "type": "function",
                                    "function": {
                                        "name": "calculator",
                                        "arguments": json.dumps({"expression": f"{n}+1"}),
                                    },
                                }
                            ],
                        },  # noqa: E501
                        {"role": "tool", "content": MARKUP},
                        {"role": "assistant", "content": f"{n + 1}"},
                    ],
                    [{"role": "assistant", "content": "7"}],
                ],
                "rewards": [1.0, 0.0],
                "step_rewards": [[0.5, 1.0], [-1.0]],
                "task_id": f"task-{n}",
            }
        )
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_an_offline_grpo_step_opens_its_rows_as_group_views(as_role, tmp_path):
    from trainer_core.training.advantages import estimate

    out = tmp_path / "out"
    run = TrainingRun.objects.create(
        method="grpo",
        base_model=str(tmp_path / "no-model"),
        config={"dataset": _grpo_rows(tmp_path), "advantage": "process", "group_size": 4},
        output_dir=str(out),
    )
    append_step(out, 1, [2, 0])
    client = as_role(Role.VIEWER)
    body = client.get(reverse("training:step_samples", args=[run.pk, 1])).content.decode()
    assert [int(n) for n in re.findall(r"/groups/(\d+)/", body)] == [2, 0]
    page = client.get(reverse("training:offline_group", args=[run.pk, 2])).content.decode()
    assert MARKUP not in page and "&lt;img src=x" in page
    expected = estimate("process", [1.0, 0.0], [[0.5, 1.0], [-1.0]])
    shown = _shown_advantages(page)
    assert shown == [pytest.approx(e) for e in expected]
    assert 'data-testid="group-problem"' in page  # no tokenizer here: said so
    assert client.get(reverse("training:offline_group", args=[run.pk, 9])).status_code == 404
    # no lineage for a step not trained
    none = client.get(reverse("training:step_samples", args=[run.pk, 5])).content.decode()
    assert 'data-testid="no-lineage"' in none


def test_a_tasks_page_reaches_the_offline_grpo_rows_that_are_its_groups(as_role, tmp_path):
    from webapp.tasks.models import Task, TaskSet

    run = TrainingRun.objects.create(
        method="grpo",
        base_model=str(tmp_path / "no-model"),
        config={"dataset": _grpo_rows(tmp_path), "advantage": "process", "group_size": 4},
        output_dir=str(tmp_path / "out"),
    )
    task_set = TaskSet.objects.create(name=f"offline-{run.pk}")
    task = Task.objects.create(task_set=task_set, external_id="task-1", prompt="1 + 1?", data={})
    other = Task.objects.create(task_set=task_set, external_id="task-9", prompt="?", data={})
    client = as_role(Role.VIEWER)
    page = client.get(reverse("training:task_groups", args=[task.pk])).content.decode()
    assert re.findall(r'href="([^"]+)" data-testid="task-offline-group"', page) == [
        reverse("training:offline_group", args=[run.pk, 1])
    ]
    page = client.get(reverse("training:task_groups", args=[other.pk])).content.decode()
    assert 'data-testid="task-offline-group"' not in page and "task-no-runs" in page


def test_a_pipeline_or_checkpoint_curve_point_links_its_evaluations_episodes():
    from webapp.evaluation.selectors import _point

    class Run:
        pk, collect_run_id, metrics = 7, 12, {"success_rate": 0.5, "n": 4}

    point = _point("iteration 1", 1, Run())
    assert point["url"] == f"{reverse('trajectories:list')}?collect_run=12"
    assert _point("start", 0, None)["url"] is None


def test_a_tasks_groups_are_bounded(base_model, monkeypatch):
    from webapp.training import group_pages

    run = _launch(base_model)
    samplers, _ = rl_services.rl_run_start_children(run=run, parent=run.job)
    played = [_play(run, samplers[0], 0) for _ in range(6)]  # every task of three, twice
    task = played[0].task
    assert sum(1 for g in played if g.task_id == task.pk) == 2
    page = group_pages.task_groups_page(task=task)
    assert [len(r["groups"]) for r in page["runs"]] == [2] and not page["more"]
    monkeypatch.setattr(group_pages, "MAX_GROUPS", 1)
    page = group_pages.task_groups_page(task=task)
    assert [len(r["groups"]) for r in page["runs"]] == [1] and page["more"]

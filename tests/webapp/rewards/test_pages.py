"""Reward pages: rubrics (admin-edited), versions, scores on trajectory and diff pages,
distributions, the score form's estimate, preference pairs."""

from __future__ import annotations

import pytest
from django.urls import reverse

from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.accounts.models import Role
from webapp.rewards import services
from webapp.rewards.models import PreferencePair, RewardModel, Rubric, StepScore, TrajectoryScore
from webapp.trajectories import services as store

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _import(n: int, task: str = "t1", policy: str = "p") -> list[int]:
    return store.trajectories_import(
        results=[
            ImportResult(
                f"{task}-{policy}.jsonl",
                "test",
                "1",
                [
                    Trajectory(
                        task=TaskRef(id=task, prompt=f"do {task}", domain="coding"),
                        policy=policy,
                        steps=[
                            Step(index=s, tool="bash", params={"c": f"{i}-{s}"}, observation="ok")
                            for s in range(2)
                        ],
                        outcome=Outcome(success=i % 2 == 0),
                    )
                    for i in range(n)
                ],
            )
        ]
    ).created


def _score(version, pk, total, steps=(0.5, 1.0)):
    TrajectoryScore.objects.create(
        reward_model=version, trajectory_id=pk, total=total, process=total
    )
    for index, value in enumerate(steps):
        StepScore.objects.create(
            reward_model=version,
            trajectory_id=pk,
            index=index,
            total=value,
            rubrics={
                "non_redundancy": {
                    "value": value,
                    "layer": "rule",
                    "rationale": "",
                    "interpolated": False,
                },
                "goal_progress": {
                    "value": None,
                    "layer": "model",
                    "rationale": "<b>judge said</b>",
                    "interpolated": False,
                },
            },
        )


@pytest.fixture
def version(db):
    services.rubrics_seed(domain="coding")
    return services.reward_model_create(domain="coding")


@pytest.fixture
def admin(client, make_user):
    client.force_login(make_user(Role.ADMIN))
    return client


def test_seeding_creates_rubrics_from_the_profile_and_a_rules_version(db):
    from webapp.domains.services import profiles_seed_builtin

    profiles_seed_builtin()
    services.rubrics_seed_builtin()
    coding = {r.rubric_id: r for r in Rubric.objects.filter(domain="coding")}
    assert coding["goal_progress"].weight == 0.30 and coding["goal_progress"].evaluator == "model"
    assert coding["non_redundancy"].evaluator == "rule"
    assert set(
        Rubric.objects.filter(domain="conversation").values_list("rubric_id", flat=True)
    ) >= {"response_quality"}
    assert RewardModel.objects.filter(domain="coding", version=1).exists()
    again = services.rubrics_seed_builtin()
    assert again.startswith("0 rubrics and 0")


def test_only_admins_edit_rubrics_and_versions_snapshot_them(client, make_user, version):
    rubric = Rubric.objects.get(domain="coding", rubric_id="tool_selection")
    client.force_login(make_user(Role.OPERATOR))
    form = {
        "rubric": rubric.pk,
        f"r{rubric.pk}-weight": "0.5",
        f"r{rubric.pk}-evaluator": "model",
        f"r{rubric.pk}-description": "x",
    }
    assert client.post(reverse("rewards:rubrics", args=["coding"]), form).status_code == 403
    client.force_login(make_user(Role.ADMIN))
    response = client.post(reverse("rewards:rubrics", args=["coding"]), form)
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert rubric.weight == 0.5
    snap = {r["id"]: r["weight"] for r in version.config["rubrics"]}
    assert snap["tool_selection"] == 0.20  # the old version keeps its snapshot
    response = client.post(
        reverse("rewards:version_new", args=["coding"]),
        {
            "rule_weight": 0.6,
            "model_weight": 0.4,
            "human_weight": 1,
            "outcome_weight": 0.4,
            "process_weight": 0.5,
            "efficiency_weight": 0.1,
            "judge": '{"kind": "anthropic", "model": "claude-haiku-4-5", "api_key": "sk-x"}',
        },
    )
    assert response.status_code == 200 and b"api_key" in response.content  # refused
    response = client.post(
        reverse("rewards:version_new", args=["coding"]),
        {
            "rule_weight": 0.6,
            "model_weight": 0.4,
            "human_weight": 1,
            "outcome_weight": 0.4,
            "process_weight": 0.5,
            "efficiency_weight": 0.1,
            "judge": '{"kind": "anthropic", "model": "claude-haiku-4-5", "api_key_env": "K"}',
        },
    )
    v2 = RewardModel.objects.get(domain="coding", version=2)
    assert response.status_code == 302
    assert {r["id"]: r["weight"] for r in v2.config["rubrics"]}["tool_selection"] == 0.5
    assert v2.judge["model"] == "claude-haiku-4-5" and v2.parent_id == version.pk


def test_trajectory_page_shows_step_scores_by_rubric_and_layer(admin, version):
    (pk,) = _import(1)
    _score(version, pk, 0.75)
    page = admin.get(reverse("trajectories:detail", args=[pk])).content.decode()
    assert reverse("rewards:trajectory_scores", args=[pk]) in page and 'id="scores-step-1"' in page
    panel = admin.get(reverse("rewards:trajectory_scores", args=[pk])).content.decode()
    assert 'id="scores-step-0" hx-swap-oob="true"' in panel
    assert "non_redundancy" in panel and "rule" in panel and "0.50" in panel
    assert "&lt;b&gt;judge said&lt;/b&gt;" in panel  # the rationale is untrusted text
    assert "0.750" in panel


def test_diff_shows_per_step_reward_differences_from_a_common_version(admin, version):
    a, b = _import(2)
    _score(version, a, 0.5, steps=(0.5, 1.0))
    _score(version, b, 0.4, steps=(0.25, 1.0))
    body = admin.get(reverse("trajectories:diff"), {"a": a, "b": b}).content.decode()
    assert 'data-testid="reward-delta">-0.250<' in body and version.label in body


def test_version_page_shows_distributions_by_policy_and_task(admin, version):
    for total, pk in zip((0.1, 0.15, 0.9), _import(3, policy="alpha"), strict=True):
        _score(version, pk, total)
    (other,) = _import(1, task="t2", policy="beta")
    _score(version, other, None)
    page = admin.get(reverse("rewards:version", args=[version.pk])).content.decode()
    assert 'data-group="alpha"' in page and "3 scored" in page and "mean 0.383" in page
    assert 'data-group="beta"' in page and "1 unscored" in page
    by_task = admin.get(reverse("rewards:version", args=[version.pk]), {"by": "task"}).content
    assert b'data-group="t1"' in by_task and b'data-group="t2"' in by_task


def test_score_form_from_a_selection_shows_the_estimate(admin, version):
    ids = _import(3)
    judged = services.reward_model_create(
        domain="coding",
        judge={"kind": "anthropic", "model": "claude-sonnet-4-5", "max_judged_steps": 2},
    )
    body = admin.get(
        reverse("rewards:score"), {"selected": ids, "reward_model": judged.pk}
    ).content.decode()
    assert "<strong>3</strong> trajectories (6 steps)" in body
    assert (
        "At most <strong>6</strong> judge calls" in body and 'data-testid="cost-estimate"' in body
    )
    body = admin.get(reverse("rewards:score"), {"selected": ids, "reward_model": version.pk})
    assert b"Rules only: no API calls" in body.content
    matching = admin.get(
        reverse("rewards:score"), {"all_matching": "1", "outcome": "success"}
    ).content.decode()
    assert "<strong>2</strong> trajectories" in matching
    # the filter travels as its query, not as a hidden id per trajectory
    assert (
        'name="all_matching" value="1"' in matching and 'name="outcome" value="success"' in matching
    )
    assert 'name="selected"' not in matching


def test_preference_pairs_from_scores(admin, version):
    ids = _import(4)
    for total, pk in zip((0.9, 0.7, 0.3, 0.1), ids, strict=True):
        _score(version, pk, total)
    response = admin.post(
        reverse("rewards:pairs_build"),
        {"reward_model": version.pk, "method": "outside_in", "min_margin": "0.1"},
        follow=True,
    )
    assert b"2 pairs from 4 scored trajectories (2 new)" in response.content
    pairs = {(p.chosen_id, p.rejected_id) for p in PreferencePair.objects.all()}
    assert pairs == {(ids[0], ids[3]), (ids[1], ids[2])}
    assert set(PreferencePair.objects.values_list("source", flat=True)) == {"rules"}
    admin.post(reverse("rewards:pairs_build"), {"reward_model": version.pk, "method": "outside_in"})
    assert PreferencePair.objects.count() == 2  # nothing twice


def test_the_rule_layer_as_it_is_is_the_newest_version_no_calibration_made():
    from webapp.rewards.selectors import latest_uncalibrated_version, latest_version

    services.rubrics_seed(domain="arithmetic")
    rules = services.reward_model_create(domain="arithmetic", note="rules")
    calibrated = services.reward_model_create(domain="arithmetic", note="calibrated")
    calibrated.calibration = {"method": "isotonic", "applied": True}
    calibrated.save()
    assert latest_version(domain="arithmetic") == calibrated
    assert latest_uncalibrated_version(domain="arithmetic") == rules

"""Reward-model versions and domain profiles: a version freezes the profile version current when
it is made (shown on its page); a rubric-weight edit in a profile reaches the next version
created; the migration gives existing versions and scores their profile versions."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
import yaml
from django.apps import apps
from django.urls import reverse
from django.utils import timezone

from tests.webapp.rewards.test_pages import _import, _score
from webapp.accounts.models import Role
from webapp.domains.models import DomainProfile
from webapp.domains.services import profile_save, profiles_seed_builtin
from webapp.rewards import services
from webapp.rewards.models import RewardModel, Rubric, TrajectoryScore

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

VERSION_FORM = {
    "rule_weight": 0.6,
    "model_weight": 0.4,
    "human_weight": 1,
    "outcome_weight": 0.4,
    "process_weight": 0.5,
    "efficiency_weight": 0.1,
    "judge": "",
}


def _weights(version: RewardModel) -> dict[str, float]:
    return {r["id"]: r["weight"] for r in version.config["rubrics"]}


def _edit_profile(client, change) -> DomainProfile:
    data = dict(DomainProfile.objects.get(name="coding", is_current=True).data)
    change(data)
    response = client.post(reverse("domains:edit", args=["coding"]), {"text": yaml.safe_dump(data)})
    assert response.status_code == 302
    return DomainProfile.objects.get(name="coding", is_current=True)


@pytest.fixture
def admin(client, make_user):
    client.force_login(make_user(Role.ADMIN))
    return client


@pytest.fixture
def seeded(db):
    profiles_seed_builtin()
    services.rubrics_seed_builtin()
    return RewardModel.objects.get(domain="coding", version=1)


def test_a_rubric_weight_edit_in_the_profile_reaches_the_next_version_created(admin, seeded):
    v1 = seeded
    assert _weights(v1)["goal_progress"] == 0.30 and "tool_success" not in _weights(v1)
    # an admin sets another rubric's weight on the rubrics page first
    selection = Rubric.objects.get(domain="coding", rubric_id="tool_selection")
    services.rubric_update(
        rubric=selection, weight=0.5, description=selection.description, evaluator="model"
    )

    profile = _edit_profile(
        admin,
        lambda d: d["rubric_weights"].update(goal_progress=0.5, tool_success=0.1),
    )
    assert profile.version == 2
    response = admin.post(reverse("rewards:version_new", args=["coding"]), VERSION_FORM)
    assert response.status_code == 302
    v2 = RewardModel.objects.get(domain="coding", version=2)
    assert _weights(v2)["goal_progress"] == 0.5 and _weights(v2)["tool_success"] == 0.1
    assert _weights(v2)["tool_selection"] == 0.5  # the profile edit left it alone: kept
    assert v2.profile == profile
    v1.refresh_from_db()
    assert _weights(v1)["goal_progress"] == 0.30 and v1.profile.version == 1  # unchanged

    # an edit of the profile's tools only leaves the rubric weights as they are
    _edit_profile(admin, lambda d: d.update(description="Fix bugs; hidden tests decide."))
    v3 = services.reward_model_create(domain="coding")
    assert _weights(v3) == _weights(v2) and v3.profile.version == 3

    # removing a rubric from the profile's weights drops it from the next version's total
    _edit_profile(admin, lambda d: d["rubric_weights"].pop("tool_success"))
    v4 = services.reward_model_create(domain="coding")
    assert _weights(v4)["tool_success"] == 0.0 and _weights(v4)["goal_progress"] == 0.5


def test_the_version_page_names_its_frozen_profile_and_a_newer_one(admin, seeded):
    v1 = seeded
    page = admin.get(reverse("rewards:version", args=[v1.pk])).content.decode()
    assert '<a href="/domains/coding/v1/">coding v1</a>' in page
    assert 'data-testid="profile-newer"' not in page
    _edit_profile(admin, lambda d: d.update(description="edited"))
    page = admin.get(reverse("rewards:version", args=[v1.pk])).content.decode()
    assert '<a href="/domains/coding/v1/">coding v1</a>' in page
    assert 'data-testid="profile-newer"' in page and "v2</a> now" in page
    form = admin.get(reverse("rewards:version_new", args=["coding"])).content.decode()
    assert '<a href="/domains/coding/v2/">coding v2</a>' in form
    overview = admin.get(reverse("rewards:overview")).content.decode()
    assert '<a href="/domains/coding/v1/">coding v1</a>' in overview


def test_a_version_made_before_any_profile_was_saved_scores_with_the_built_in_one(admin):
    services.rubrics_seed(domain="coding")
    version = services.reward_model_create(domain="coding")
    assert version.profile is None
    page = admin.get(reverse("rewards:version", args=[version.pk])).content.decode()
    assert "built-in <code>coding</code> profile" in page
    profiles_seed_builtin()
    version.refresh_from_db()
    assert version.profile is None  # saving a profile later does not change the version


def test_the_migration_freezes_current_profiles_and_records_when_scores_were_made():
    migration = importlib.import_module("webapp.rewards.migrations.0003_reward_model_profile")
    profiles_seed_builtin()
    services.rubrics_seed(domain="coding")
    first = DomainProfile.objects.get(name="coding", version=1)
    old = services.reward_model_create(domain="coding")
    early, middle, late = _import(3)
    for pk in (early, middle, late):
        _score(old, pk, 0.5)
    data = dict(first.data, description="edited")
    second = profile_save(data=data)
    now = timezone.now()
    # as a database from before the migration: no version or score knows its profile
    RewardModel.objects.update(profile=None)
    TrajectoryScore.objects.update(profile=None)
    DomainProfile.objects.filter(pk=first.pk).update(created_at=now - timedelta(days=2))
    DomainProfile.objects.filter(pk=second.pk).update(created_at=now - timedelta(days=1))
    for pk, age in ((early, 3), (middle, 1.5), (late, 0.5)):
        TrajectoryScore.objects.filter(trajectory_id=pk).update(scored_at=now - timedelta(days=age))

    migration.freeze_profiles(apps, None)

    old.refresh_from_db()
    assert old.profile == second  # current at migration time
    recorded = dict(TrajectoryScore.objects.values_list("trajectory_id", "profile_id"))
    assert recorded == {early: None, middle: first.pk, late: second.pk}

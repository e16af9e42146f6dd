"""A GRPO run's page, its job's log and the pipeline page say which advantage estimator was used;
runs stored with the old step-level flag say they used the earlier, wrong estimator."""

from __future__ import annotations

import pytest
from django.urls import reverse

from webapp.accounts.models import Role
from webapp.training.models import TrainingRun
from webapp.training.services import form_fields

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.fixture
def viewer(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    return client


def test_a_grpo_run_page_names_its_estimator(viewer):
    run = TrainingRun.objects.create(
        method="grpo", base_model="/m", config={"advantage": "mixed", "process_weight": 0.5}
    )
    body = viewer.get(reverse("training:detail", args=[run.pk])).content.decode()
    assert 'data-testid="estimator">mixed (outcome: GRPO' in body
    assert "0.5 × process: DeepSeekMath process supervision" in body
    assert "estimator-note" not in body


def test_a_run_stored_with_the_old_flag_says_it_used_the_wrong_estimator(viewer):
    run = TrainingRun.objects.create(
        method="grpo", base_model="/m", config={"step_level_advantage": True}
    )
    body = viewer.get(reverse("training:detail", args=[run.pk])).content.decode()
    assert 'data-testid="estimator">mixed' in body
    assert "earlier, wrong step-level advantage" in body
    sft = TrainingRun.objects.create(method="sft", base_model="/m", config={})
    assert "estimator" not in viewer.get(reverse("training:detail", args=[sft.pk])).content.decode()


def test_the_form_offers_the_estimators_as_a_menu():
    (field,) = [f for f in form_fields(method="grpo") if f["name"] == "advantage"]
    assert field["choices"] == ("outcome", "process", "mixed") and field["default"] == "outcome"
    names = {f["name"] for f in form_fields(method="grpo")}
    assert "step_level_advantage" not in names and "step_error_penalty" not in names

"""The agreement page (ceiling beside human-to-model, reliability plot, confusion matrix,
breakdowns) and fitting a calibration from it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.webapp.rewards.test_pages import _import, _score
from webapp.accounts.models import Role
from webapp.calibration import services
from webapp.calibration.models import Calibration, StepLabel
from webapp.rewards import services as rewards

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def labelled(make_user):
    rewards.rubrics_seed(domain="coding")
    version = rewards.reward_model_create(domain="coding")
    ids = _import(12)
    queue = services.queue_create(name="agree", trajectory_ids=ids, annotators_per_item=2)
    alice, bob = make_user(Role.ANNOTATOR), make_user(Role.ANNOTATOR)
    for n, item in enumerate(queue.items.all()):
        model = [0.2 + 0.05 * (n % 10), 0.9 - 0.04 * (n % 7)]
        _score(version, item.trajectory_id, sum(model) / 2, steps=model)
        for index, value in enumerate(model):
            human = round(value**2, 3)
            for who, noise in ((alice, 0.0), (bob, 0.05 if n % 2 else -0.05)):
                StepLabel.objects.create(
                    item=item,
                    annotator=who,
                    trajectory_id=item.trajectory_id,
                    index=index,
                    value=min(1.0, max(0.0, human + noise)),
                )
    queue.items.update(completed=2)  # both submitted: the labels are no longer blind
    return version, queue


def test_agreement_page_shows_the_ceiling_beside_the_model(client, make_user, labelled):
    version, queue = labelled
    client.force_login(make_user(Role.VIEWER))
    page = client.get(
        reverse("calibration:calibration"), {"version": version.pk, "queue": queue.pk}
    ).content.decode()
    assert "48 step labels; 24 labelled steps" in page
    assert 'data-testid="ceiling"' in page and 'data-measure="alpha"' in page
    assert 'data-measure="kappa"' in page  # exactly two annotators
    assert 'data-testid="human-model"' in page and 'data-measure="spearman"' in page
    assert 'data-testid="reliability"' in page and "<circle" in page
    assert 'data-testid="confusion"' in page
    assert "By rubric" in page and "By tool" in page and "By domain" in page


def test_fit_shows_held_out_agreement_before_and_after(client, make_user, labelled):
    version, _ = labelled
    client.force_login(make_user(Role.OPERATOR))
    response = client.post(reverse("calibration:fit"), {"version": version.pk})
    calibration = Calibration.objects.get()
    assert response.status_code == 302 and calibration.labels == 24
    page = client.get(reverse("calibration:fitted", args=[calibration.pk])).content.decode()
    assert 'data-testid="before"' in page and 'data-testid="after"' in page
    assert 'data-testid="apply"' in page
    before = calibration.result["cv"]["before"]["mae"]["value"]
    after = calibration.result["cv"]["after"]["mae"]["value"]
    assert after < before  # people are a monotone distortion of the model: the map helps

"""Annotation queues: creation from a selection and from where the reward model is least
trustworthy, reservations with blind overlap, labels with history and optimistic locking,
first-error marking, pairwise preferences."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.webapp.rewards.test_pages import _import, _score
from webapp.accounts.models import Role
from webapp.calibration import services
from webapp.calibration.models import AnnotationQueue, LabelEdit, Reservation, StepLabel
from webapp.rewards import services as rewards
from webapp.rewards.models import PreferencePair
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.fixture
def version(db):
    rewards.rubrics_seed(domain="coding")
    return rewards.reward_model_create(domain="coding")


def test_queue_from_a_selection_through_the_bulk_action(client, make_user):
    ids = _import(3)
    client.force_login(make_user(Role.OPERATOR))
    page = client.post(reverse("calibration:queue_new"), {"selected": ids}).content.decode()
    assert 'data-testid="selection-count"><strong>3</strong>' in page
    response = client.post(
        reverse("calibration:queue_new"),
        {
            "create": "1",
            "selected": ids,
            "name": "first",
            "mode": "steps",
            "source": "selection",
            "scale_points": 5,
            "annotators_per_item": 2,
            "reservation_minutes": 30,
            "budget": 2,
            "seed": 0,
        },
    )
    queue = AnnotationQueue.objects.get(name="first")
    assert response.status_code == 302
    assert queue.items.count() == 2  # the budget
    # "Queue all matching" from the list's filters
    form = client.get(
        reverse("calibration:queue_new"), {"all_matching": "1", "outcome": "failure"}
    ).content.decode()
    assert "<strong>1</strong> trajectories match the filter" in form
    assert 'name="outcome" value="failure"' in form and 'name="selected"' not in form
    client.post(
        reverse("calibration:queue_new"),
        {
            "create": "1",
            "all_matching": "1",
            "outcome": "failure",
            "name": "failures",
            "mode": "steps",
            "source": "selection",
            "scale_points": 3,
            "annotators_per_item": 1,
            "reservation_minutes": 30,
            "budget": 10,
            "seed": 0,
        },
    )
    failures = AnnotationQueue.objects.get(name="failures")
    assert [i.trajectory.success for i in failures.items.all()] == [False]


def test_automatic_sources_pick_the_untrustworthy_trajectories(version):
    uncertain, confident, failed_high = _import(3)
    _score(version, uncertain, 0.5, steps=(0.45, 1.0))
    _score(version, confident, 0.95, steps=(0.95, 1.0))
    _score(version, failed_high, 0.9, steps=(1.0, 1.0))
    Trajectory.objects.filter(pk=failed_high).update(success=False)
    Trajectory.objects.filter(pk__in=[uncertain, confident]).update(success=True)
    queue = services.queue_create(name="u", source="uncertain", reward_model=version)
    assert [i.trajectory_id for i in queue.items.all()] == [uncertain]
    assert "near the middle" in queue.items.get().reason
    from webapp.rewards.models import TrajectoryScore

    TrajectoryScore.objects.filter(trajectory_id=failed_high).update(process=0.9)
    queue = services.queue_create(name="f", source="failed_high", reward_model=version)
    assert [i.trajectory_id for i in queue.items.all()] == [failed_high]
    other = rewards.reward_model_create(domain="coding")
    _score(other, confident, 0.2)
    _score(other, uncertain, 0.55)
    queue = services.queue_create(
        name="v", source="versions", reward_model=version, other_reward_model=other
    )
    assert [i.trajectory_id for i in queue.items.all()] == [confident]
    with pytest.raises(Exception, match="score trajectories with that version first"):
        services.queue_create(name="d", source="disagreement", reward_model=version)


def test_stratified_sampling_spreads_the_budget_over_strata():
    candidates = [(i, 1.0 - i / 100, "x") for i in range(40)]
    strata = {i: ("big" if i < 30 else "small") for i in range(40)}
    picked = services.stratified_sample(candidates=candidates, strata=strata, budget=8, seed=1)
    kinds = [strata[c[0]] for c in picked]
    assert len(picked) == 8 and kinds.count("big") == 6 and kinds.count("small") == 2
    assert (
        services.stratified_sample(candidates=candidates, strata=strata, budget=8, seed=1) == picked
    )


def test_blind_overlap_and_reservations(make_user):
    ids = _import(2)
    queue = services.queue_create(name="overlap", trajectory_ids=ids, annotators_per_item=2)
    ann = [make_user(Role.ANNOTATOR) for _ in range(3)]
    first = services.next_item(queue=queue, user=ann[0])
    assert services.next_item(queue=queue, user=ann[0]) == first  # held
    assert services.next_item(queue=queue, user=ann[1]) == first  # second overlap slot
    assert services.next_item(queue=queue, user=ann[2]).position == 1  # first item is full
    services.submit(item=first, user=ann[0])
    assert services.next_item(queue=queue, user=ann[0]).position == 1
    # an expired reservation goes back to the pool
    other = make_user(Role.ANNOTATOR)
    assert (
        services.next_item(queue=queue, user=other) is None
    )  # first: 1 done + 1 held; second held
    Reservation.objects.filter(annotator=ann[1]).update(expires_at=timezone.now() - timedelta(1))
    assert services.next_item(queue=queue, user=other) == first  # the expired slot is free again


def test_two_annotators_on_one_step_both_kept_and_stale_edits_refused(client, make_user):
    (pk,) = _import(1)
    queue = services.queue_create(name="both", trajectory_ids=[pk], annotators_per_item=2)
    item = queue.items.get()
    alice, bob = make_user(Role.ANNOTATOR), make_user(Role.ANNOTATOR)
    assert services.next_item(queue=queue, user=alice) == services.next_item(queue=queue, user=bob)
    url = reverse("calibration:label", args=[queue.pk, item.pk])
    # both load the page (version 0 for step 0) and label at the same time
    client.force_login(alice)
    assert client.post(url, {"index": 0, "key": 5, "version": 0}).json()["version"] == 1
    client.force_login(bob)
    assert client.post(url, {"index": 0, "key": 1, "version": 0}).json()["version"] == 1
    labels = {lb.annotator_id: lb.value for lb in StepLabel.objects.filter(item=item, index=0)}
    assert labels == {alice.pk: 1.0, bob.pk: 0.0}
    assert LabelEdit.objects.filter(item=item, index=0).count() == 2
    # alice, from a second tab still at version 0: refused, with a clear message, nothing lost
    client.force_login(alice)
    stale = client.post(url, {"index": 0, "key": 2, "version": 0})
    assert stale.status_code == 409 and "Reload" in stale.json()["error"]
    assert StepLabel.objects.get(item=item, annotator=alice, index=0).value == 1.0
    ok = client.post(url, {"index": 0, "neutral": "1", "version": 1}).json()
    assert ok["neutral"] is True and ok["value"] is None and ok["version"] == 2
    history = client.get(reverse("calibration:history", args=[queue.pk, item.pk])).content.decode()
    assert history.count("<tr><td>") == 2  # blind overlap: only her own edits for now
    client.force_login(make_user(Role.ADMIN))
    history = client.get(reverse("calibration:history", args=[queue.pk, item.pk])).content.decode()
    assert history.count("<tr><td>") == 3


def test_first_error_marks_earlier_good_the_step_bad_later_downstream(make_user):
    (pk,) = _import(1)
    queue = services.queue_create(name="fe", mode="first_error", trajectory_ids=[pk])
    user = make_user(Role.ANNOTATOR)
    item = services.next_item(queue=queue, user=user)
    services.first_error_set(item=item, user=user, index=1)
    labels = {lb.index: (lb.value, lb.origin) for lb in StepLabel.objects.filter(item=item)}
    assert labels == {0: (1.0, "first_error"), 1: (0.0, "first_error")}


def test_first_error_keeps_a_label_typed_on_an_earlier_step(make_user):
    (pk,) = _import(1)
    queue = services.queue_create(name="fe-kept", trajectory_ids=[pk], scale_points=5)
    user = make_user(Role.ANNOTATOR)
    item = services.next_item(queue=queue, user=user)
    services.label_set(item=item, user=user, index=0, key=2)
    services.first_error_set(item=item, user=user, index=1)
    labels = {lb.index: (lb.value, lb.origin) for lb in StepLabel.objects.filter(item=item)}
    assert labels == {0: (0.25, "key"), 1: (0.0, "first_error")}
    # a label the mark made is the mark's: moving the mark replaces it
    services.first_error_set(item=item, user=user, index=0)
    labels = {lb.index: (lb.value, lb.origin) for lb in StepLabel.objects.filter(item=item)}
    assert labels == {0: (0.0, "first_error"), 1: (None, "downstream")}


def test_pairwise_choice_makes_a_human_preference_pair(make_user):
    a, b = _import(2)
    # free labelling: an annotator may come back and change a submitted choice
    queue = services.queue_create(
        name="pairs", mode="pairwise", trajectory_ids=[a, b], free_labelling=True
    )
    item = queue.items.get()
    assert {item.trajectory_id, item.other_id} == {a, b}
    user = make_user(Role.ANNOTATOR)
    with pytest.raises(Exception, match="Choose A, B or E"):
        services.submit(item=item, user=user)
    services.submit(item=item, user=user, choice="B")
    pair = PreferencePair.objects.get(source="human")
    assert (pair.chosen_id, pair.rejected_id) == (item.other_id, item.trajectory_id)
    services.submit(item=item, user=user, choice="E")  # changed mind: equal → no pair
    assert not PreferencePair.objects.filter(source="human").exists()


def test_pairwise_item_page_shows_the_aligned_diff(client, make_user):
    a, b = _import(2)
    queue = services.queue_create(name="pair-page", mode="pairwise", trajectory_ids=[a, b])
    item = queue.items.get()
    client.force_login(make_user(Role.ANNOTATOR))
    page = client.get(reverse("calibration:item", args=[queue.pk, item.pk])).content.decode()
    assert 'data-testid="pair"' in page and 'data-testid="diff"' in page
    assert "first divergence" in page and 'data-kind="' in page

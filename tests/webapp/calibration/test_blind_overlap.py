"""Annotation rules enforced on the server: in blind overlap a second annotator cannot read the
first one's labels, reasons, comment or history through any page or endpoint of the annotation
app (every URL of ``webapp.calibration.urls`` is tried), nor through the preference pairs page
or a dataset export, until the item is complete for everyone; admins see everything. Labelling
and submitting without holding the item's reservation are refused with nothing written, unless
the queue allows free labelling."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.webapp.rewards.test_pages import _import, _score
from webapp.accounts.models import Role
from webapp.calibration import services
from webapp.calibration.models import (
    AnnotationQueue,
    Calibration,
    LabelEdit,
    Reservation,
    StepLabel,
    Submission,
)
from webapp.calibration.urls import urlpatterns
from webapp.datasets.models import DatasetSnapshot
from webapp.datasets.selectors import export_records
from webapp.rewards import services as rewards
from webapp.rewards.models import PreferencePair

pytestmark = [pytest.mark.django_db]

REASON = "alice-reason-7Q4"
COMMENT = "alice-comment-9Z2"
POSTS = {"label", "first_error", "submit", "fit", "apply"}  # the rest are GETs


@pytest.fixture
def scene(client, make_user):
    """A two-annotator step queue over one scored trajectory: Alice labelled step 0 (key 4 of
    5, with a reason), marked step 1 neutral and submitted with a comment; Bob has not started."""
    rewards.rubrics_seed(domain="coding")
    version = rewards.reward_model_create(domain="coding")
    (pk,) = _import(1)
    _score(version, pk, 0.6, steps=(0.5, 1.0))
    queue = services.queue_create(
        name="blind", trajectory_ids=[pk], annotators_per_item=2, reward_model=version
    )
    alice, bob = make_user(Role.ANNOTATOR), make_user(Role.ANNOTATOR)
    client.force_login(alice)
    item = services.next_item(queue=queue, user=alice)
    label = reverse("calibration:label", args=[queue.pk, item.pk])
    assert client.post(label, {"index": 0, "key": 4, "reason": REASON}).status_code == 200
    assert client.post(label, {"index": 1, "neutral": "1"}).status_code == 200
    submit = reverse("calibration:submit", args=[queue.pk, item.pk])
    assert client.post(submit, {"trajectory_key": 5, "comment": COMMENT}).status_code == 200
    calibration = Calibration.objects.create(reward_model=version, result={}, labels=1)
    return {
        "queue": queue,
        "item": item,
        "alice": alice,
        "bob": bob,
        "version": version,
        "calibration": calibration,
    }


def _every_calibration_url(scene) -> list[tuple[str, str, str]]:
    """(name, method, url) for every URL of the annotation app, with the scene's ids."""
    queue, item, calibration = scene["queue"], scene["item"], scene["calibration"]
    out = []
    for pattern in urlpatterns:
        route = str(pattern.pattern)
        if route.startswith("calibration/<int:pk>"):
            args = [calibration.pk]
        elif "<int:item>" in route:
            args = [queue.pk, item.pk]
        elif "<int:pk>" in route:
            args = [queue.pk]
        else:
            args = []
        url = reverse(f"calibration:{pattern.name}", args=args)
        if pattern.name == "calibration":
            url += f"?version={scene['version'].pk}&queue={queue.pk}"
        out.append((pattern.name, "post" if pattern.name in POSTS else "get", url))
    assert {name for name, _, _ in out} >= {"item", "history", "label", "submit", "peek"}
    return out


def _leaks(scene, body: str) -> list[str]:
    """What of Alice's work ``body`` shows."""
    found = [s for s in (REASON, COMMENT) if s in body]
    if re.search(r'data-value="[^"]+"|data-neutral="1"', body):
        found.append("a step label in the grid")
    if re.search(r"\b[1-9]\d* step labels", body):
        found.append("labels counted on the agreement page")
    if "<tr><td>" in body and 'data-testid="history"' in body:
        found.append("a row of the item's history")
    return found


def test_a_second_annotator_reads_nothing_of_the_first_until_the_item_is_complete(
    client, make_user, scene
):
    queue, item = scene["queue"], scene["item"]
    history = reverse("calibration:history", args=[queue.pk, item.pk])
    agreement = next(url for name, _, url in _every_calibration_url(scene) if name == "calibration")
    # an admin sees it all on these pages, so the checks below would catch a leak
    client.force_login(make_user(Role.ADMIN))
    assert _leaks(scene, client.get(history).content.decode())
    assert "1 step labels" in client.get(agreement).content.decode()

    client.force_login(scene["bob"])
    seen = {}
    # the reads first, then the writes (Bob's own labels; his submit, last, completes the item)
    urls = sorted(_every_calibration_url(scene), key=lambda u: (u[1] == "post", u[0] == "submit"))
    for name, method, url in urls:
        data = {"index": 1, "key": 2} if name == "label" else {"index": 1}
        response = getattr(client, method)(url, data if method == "post" else None)
        assert response.status_code in (200, 302, 403), (name, response.status_code)
        if name == "submit":
            assert response.status_code == 200, response.content  # Bob held the item
            break
        seen[name] = _leaks(scene, response.content.decode())
        if name in ("item", "history", "label", "first_error", "peek"):
            # who else works on this item is not shown either (the queue page counts per person)
            assert scene["alice"].username not in response.content.decode(), name
    assert len(seen) == len(urls) - 1 and all(not found for found in seen.values()), seen

    # Bob's submission completed the item: now each sees the other's labels and history
    page = client.get(history).content.decode()
    assert REASON in page and COMMENT in page and scene["alice"].username in page
    assert "3 step labels" in client.get(agreement).content.decode()  # hers and his two


def test_an_operator_who_is_not_admin_sees_only_their_own_too(client, make_user, scene):
    client.force_login(make_user(Role.OPERATOR))
    for name, method, url in _every_calibration_url(scene):
        if method == "get":
            assert not _leaks(scene, client.get(url).content.decode()), name


def test_a_dataset_export_and_a_fit_use_only_labels_of_complete_items(client, scene):
    snapshot = DatasetSnapshot(name="prm", kind="prm", label_source="human", query={})
    rows, _ = export_records(snapshot=snapshot)
    assert list(rows) == [], "Alice's labels of an item still being annotated were exported"
    with pytest.raises(Exception, match="Cannot fit a calibration"):
        services.calibration_fit(reward_model=scene["version"])
    services.next_item(queue=scene["queue"], user=scene["bob"])
    services.submit(item=scene["item"], user=scene["bob"])
    rows, _ = export_records(snapshot=snapshot)
    assert [r["labels"] for r in rows] == [[True]]  # Alice's 0.75 on step 0, now settled


def test_pairwise_choices_become_pairs_only_when_everyone_has_chosen(client, make_user):
    a, b = _import(2)
    queue = services.queue_create(
        name="pairs", mode="pairwise", trajectory_ids=[a, b], annotators_per_item=2
    )
    alice, bob = make_user(Role.ANNOTATOR), make_user(Role.ANNOTATOR)
    item = services.next_item(queue=queue, user=alice)
    services.submit(item=item, user=alice, choice="A", comment=COMMENT)
    assert not PreferencePair.objects.exists()
    client.force_login(bob)
    page = client.get(reverse("rewards:pairs")).content.decode()
    assert f"queue:{queue.pk}" not in page and alice.username not in page
    assert client.get(reverse("calibration:item", args=[queue.pk, item.pk])).status_code == 200
    assert (
        'data-testid="choice">—<'
        in client.get(reverse("calibration:item", args=[queue.pk, item.pk])).content.decode()
    )
    services.submit(item=item, user=bob, choice="B")
    pairs = {(p.created_by_id, p.chosen_id) for p in PreferencePair.objects.all()}
    assert pairs == {(alice.pk, item.trajectory_id), (bob.pk, item.other_id)}


def _state(item):
    return (
        list(StepLabel.objects.filter(item=item).values_list("annotator", "index", "value")),
        list(Submission.objects.filter(item=item).values_list("annotator", "submitted_at")),
        LabelEdit.objects.filter(item=item).count(),
        PreferencePair.objects.count(),
    )


def test_labelling_or_submitting_without_the_reservation_is_refused_with_nothing_written(
    client, make_user
):
    ids = _import(2)
    queue = services.queue_create(name="one", trajectory_ids=ids)  # one annotator per item
    holder, other = make_user(Role.ANNOTATOR), make_user(Role.ANNOTATOR)
    item = services.next_item(queue=queue, user=holder)
    before = _state(item)
    client.force_login(other)
    urls = {
        name: reverse(f"calibration:{name}", args=[queue.pk, item.pk])
        for name in ("label", "first_error", "submit")
    }
    for name, data in (
        ("label", {"index": 0, "key": 1}),
        ("first_error", {"index": 0}),
        ("submit", {"trajectory_key": 1, "comment": "not mine"}),
    ):
        response = client.post(urls[name], data)
        assert response.status_code == 403, (name, response.content)
        assert "Nothing was saved" in response.json()["error"]
    with pytest.raises(services.NotHeld):
        services.submit(item=item, user=other)
    assert _state(item) == before
    # opening the page does not take a place that is held: it says so
    page = client.get(reverse("calibration:item", args=[queue.pk, item.pk])).content.decode()
    assert 'data-testid="not-held"' in page and "read-only for you" in page
    assert not Reservation.objects.filter(item=item, annotator=other).exists()

    # an expired reservation is no reservation: refused, and the message says when it ran out
    Reservation.objects.filter(item=item).update(expires_at=timezone.now() - timedelta(1))
    client.force_login(holder)
    refused = client.post(urls["submit"], {"comment": "late"})
    assert refused.status_code == 403 and "ran out at" in refused.json()["error"]
    assert _state(item) == before
    # reopening the item reserves it again (the place is free), and then it works
    client.get(reverse("calibration:item", args=[queue.pk, item.pk]))
    assert client.post(urls["submit"], {"comment": "done"}).status_code == 200
    assert Submission.objects.get(item=item).comment == "done"
    # submitted: no second submission without free labelling
    again = client.post(urls["submit"], {"comment": "changed"})
    assert again.status_code == 403
    assert Submission.objects.get(item=item).comment == "done"


def test_a_free_labelling_queue_needs_no_reservation(client, make_user):
    ids = _import(1)
    queue = services.queue_create(name="free", trajectory_ids=ids, free_labelling=True)
    item = queue.items.get()
    user = make_user(Role.ANNOTATOR)
    services.label_set(item=item, user=user, index=0, key=5)
    services.submit(item=item, user=user, comment="first")
    services.submit(item=item, user=user, comment="changed my mind")
    assert Submission.objects.get(item=item).comment == "changed my mind"
    assert not Reservation.objects.exists()


def test_the_queue_form_offers_free_labelling(client, make_user):
    ids = _import(1)
    client.force_login(make_user(Role.OPERATOR))
    form = {
        "create": "1",
        "selected": ids,
        "name": "free-form",
        "mode": "steps",
        "source": "selection",
        "scale_points": 5,
        "annotators_per_item": 1,
        "reservation_minutes": 30,
        "free_labelling": "on",
        "budget": 5,
        "seed": 0,
    }
    assert client.post(reverse("calibration:queue_new"), form).status_code == 302
    queue = AnnotationQueue.objects.get(name="free-form")
    assert queue.free_labelling
    page = client.get(reverse("calibration:queue", args=[queue.pk])).content.decode()
    assert "free labelling" in page

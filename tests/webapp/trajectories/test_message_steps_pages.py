"""Message steps on the pages: the trajectory page shows the dialogue as a conversation (every
turn in its place, untrusted text escaped), the annotation grid lets annotators label the agent's
replies but never a user's or system's message, and the diff aligns two conversations."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pytest
from django.urls import reverse

from trainer_core.recording.importers import ImportResult, import_path
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.accounts.models import Role
from webapp.calibration import services as calibration
from webapp.calibration.models import StepLabel
from webapp.common.errors import ApplicationError
from webapp.trajectories import services
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent_logs"
EVIL = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">{{ 7*7 }}'


def _dialogue(reply: str = "Booked HAT136.", user: str = EVIL) -> Trajectory:
    return Trajectory(
        task=TaskRef(id="hat", prompt="Book a flight"),
        agent="tau-bench",
        steps=[
            Step(index=0, kind="message", role="system", text="You are an airline agent."),
            Step(index=1, kind="message", role="user", text=user),
            Step(index=2, tool="search", params={"q": "HAT136"}, observation="HAT136 08:00"),
            Step(index=3, kind="message", role="assistant", text=reply, thought="It is free."),
        ],
        outcome=Outcome(success=True),
    )


def _store(*trajectories: Trajectory) -> list[int]:
    return services.trajectories_import(
        results=[ImportResult("d.json", "test", "1", list(trajectories))]
    ).created


@pytest.fixture
def viewer(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    return client


def test_the_trajectory_page_shows_the_dialogue_as_a_conversation(viewer):
    (pk,) = _store(_dialogue())
    body = viewer.get(reverse("trajectories:detail", args=[pk])).content.decode()
    turns = [
        body.index('data-role="system"'),
        body.index('data-role="user"'),
        body.index("<code>search</code>"),
        body.index('data-role="assistant"'),
    ]
    assert turns == sorted(turns)  # in order
    assert "Booked HAT136." in body and "It is free." in body
    assert 'data-testid="message-count">3<' in body and 'data-testid="step-count">1<' in body
    assert EVIL not in body and escape(EVIL) in body  # the user's text is data, never markup
    assert 'id="scores-step-3"' in body and 'id="scores-step-1"' not in body  # no reward there
    download = json.loads(viewer.get(reverse("trajectories:download", args=[pk])).content)
    assert [s["kind"] for s in download["steps"]] == ["message", "message", "tool", "message"]


def test_an_imported_conversation_keeps_every_turn_on_its_page(viewer):
    summary = services.trajectories_import_files(paths=[str(FIXTURES / "tau_bench_hat136.json")])
    (pk,) = summary.created
    row = TrajectoryRow.objects.get(pk=pk)
    (spec,) = import_path(FIXTURES / "tau_bench_hat136.json")[0].trajectories
    assert (row.step_count, row.message_count) == (len(spec.tool_steps), len(spec.message_steps))
    body = viewer.get(reverse("trajectories:detail", args=[pk])).content.decode()
    for step in spec.message_steps:
        if step.role != "system":
            assert escape(step.text)[:60] in body
    # search finds words that only the dialogue holds (a reply, a user's turn)
    for phrase in ('"Could you give me your user ID"', "HATHAT", '"go with the first option"'):
        found = viewer.get(reverse("trajectories:list"), {"q": phrase}).content.decode()
        assert f'data-trajectory-id="{pk}"' in found, phrase


def test_the_grid_labels_replies_but_never_a_users_message(client, make_user):
    (pk,) = _store(_dialogue())
    queue = calibration.queue_create(name="dialogue", mode="first_error", trajectory_ids=[pk])
    annotator = make_user(Role.ANNOTATOR)
    item = calibration.next_item(queue=queue, user=annotator)
    client.force_login(annotator)
    page = client.get(reverse("calibration:item", args=[queue.pk, item.pk])).content.decode()
    assert 'class="context message-step" data-kind="message" data-role="user"' in page
    assert 'class="step message-step" tabindex="-1" data-index="3"' in page  # the reply
    assert 'data-index="1"' not in page  # a user's message is no labelled row
    assert EVIL not in page and escape(EVIL) in page
    url = reverse("calibration:label", args=[queue.pk, item.pk])
    assert client.post(url, {"index": 3, "key": 5, "version": 0}).json()["version"] == 1
    refused = client.post(url, {"index": 1, "key": 5, "version": 0})
    assert refused.status_code >= 400 and "user message" in refused.content.decode()
    with pytest.raises(ApplicationError, match="system message"):
        calibration.first_error_set(item=item, user=annotator, index=0)
    calibration.first_error_set(item=item, user=annotator, index=3)
    labels = {lb.index: (lb.value, lb.origin) for lb in StepLabel.objects.filter(item=item)}
    assert labels == {2: (1.0, "first_error"), 3: (0.0, "first_error")}


def test_the_diff_aligns_two_conversations(viewer):
    a, b = _store(_dialogue(), _dialogue(reply="Sorry, HAT136 is full.", user="Book HAT136"))
    body = viewer.get(reverse("trajectories:diff"), {"a": a, "b": b}).content.decode()
    assert 'data-kind="changed_text"' in body  # the two replies, paired
    assert 'data-testid="diff-message"' in body
    assert "<del>" in body and "<ins>" in body
    # the differing user turn is shown as a word diff, every piece escaped
    assert "<script>" not in body.split("<main", 1)[1] and "&lt;script&gt;" in body

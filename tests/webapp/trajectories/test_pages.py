"""Trajectory pages: upload, list filters and search, detail, diff, tags; untrusted text escaped."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.accounts.models import Role
from webapp.trajectories import services
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

EVIL = (
    '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">{{ 7*7 }}{% now "Y" %}'
)


def _traj(marker: str, tools: list[str], *, success=True, observation_suffix="", model="gpt-4"):
    return Trajectory(
        task=TaskRef(id=f"task-{marker}", prompt=f"Fix {marker}", domain="coding"),
        agent="swe-agent",
        model=model,
        steps=[
            Step(
                index=i,
                tool=tool,
                params={"command": f"{tool} {i}"},
                observation=f"out {i}{observation_suffix if i == 1 else ''}",
                thought=f"thinking about {marker}",
            )
            for i, tool in enumerate(tools)
        ],
        outcome=Outcome(success=success),
    )


def _store(*trajectories):
    return services.trajectories_import(
        results=[ImportResult("f.json", "test", "1", list(trajectories))]
    ).created


@pytest.fixture
def viewer(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    return client


def test_list_filters_and_search_and_keyset_pages(viewer):
    ok, bad = _store(
        _traj("alpha", ["bash", "edit"], success=True),
        _traj("beta", ["bash", "grep", "edit"], success=False, model="claude"),
    )
    body = viewer.get(reverse("trajectories:list")).content.decode()
    assert f'data-trajectory-id="{ok}"' in body and f'data-trajectory-id="{bad}"' in body
    body = viewer.get(reverse("trajectories:list"), {"outcome": "failure"}).content.decode()
    assert f'data-trajectory-id="{bad}"' in body and f'data-trajectory-id="{ok}"' not in body
    body = viewer.get(
        reverse("trajectories:list"), {"model": "claude", "min_steps": "3"}
    ).content.decode()
    assert f'data-trajectory-id="{bad}"' in body and f'data-trajectory-id="{ok}"' not in body
    body = viewer.get(reverse("trajectories:list"), {"q": "alpha"}).content.decode()
    assert f'data-trajectory-id="{ok}"' in body and f'data-trajectory-id="{bad}"' not in body
    body = viewer.get(reverse("trajectories:list"), {"q": "grep"}).content.decode()
    assert f'data-trajectory-id="{bad}"' in body and f'data-trajectory-id="{ok}"' not in body
    body = viewer.get(reverse("trajectories:list"), {"before": str(bad)}).content.decode()
    assert f'data-trajectory-id="{ok}"' in body and f'data-trajectory-id="{bad}"' not in body


def test_detail_collapses_long_observations_and_loads_them_on_demand(viewer):
    (pk,) = _store(_traj("long", ["bash", "bash"], observation_suffix="x" * 5000))
    body = viewer.get(reverse("trajectories:detail", args=[pk])).content.decode()
    assert "show all 5005 characters" in body and "x" * 5000 not in body
    full = viewer.get(reverse("trajectories:observation", args=[pk, 1])).content.decode()
    assert "x" * 5000 in full
    download = viewer.get(reverse("trajectories:download", args=[pk]))
    data = json.loads(download.content)
    assert data["schema_version"] == "1.0" and len(data["steps"]) == 2


def test_diff_aligns_steps_and_marks_the_first_divergence(viewer):
    a, b = _store(
        _traj("same", ["read", "edit", "test", "submit"]),
        _traj("same", ["read", "grep", "edit", "test", "submit"], success=False),
    )
    body = viewer.get(reverse("trajectories:diff"), {"a": a, "b": b}).content.decode()
    assert 'data-kind="right_only"' in body
    assert "first divergence" in body
    assert (
        'data-testid="left-outcome">success' in body
        and 'data-testid="right-outcome">failure' in body
    )
    selected = viewer.get(reverse("trajectories:diff"), {"selected": [a, b]})
    assert selected.status_code == 200
    one = viewer.get(reverse("trajectories:diff"), {"selected": [a]}, follow=True)
    assert b"Select exactly two trajectories" in one.content


def test_upload_form_imports_and_reports_duplicates(client, make_user):
    client.force_login(make_user(Role.OPERATOR))
    content = _traj("up", ["bash"]).to_json().encode()
    upload = SimpleUploadedFile("run.jsonl", content)
    response = client.post(reverse("trajectories:import"), {"files": [upload]}, follow=True)
    assert b"Imported 1 trajectories" in response.content
    again = client.post(
        reverse("trajectories:import"),
        {"files": [SimpleUploadedFile("run.jsonl", content)]},
        follow=True,
    )
    assert b"Imported 0 trajectories" in again.content and b"1 duplicate(s)" in again.content
    broken = client.post(
        reverse("trajectories:import"), {"files": [SimpleUploadedFile("bad.json", b"{ nope")]}
    )
    assert b"bad.json" in broken.content and b"formats tried" in broken.content
    assert TrajectoryRow.objects.count() == 1


def test_tagging_a_selection(client, make_user):
    client.force_login(make_user(Role.OPERATOR))
    a, b = _store(_traj("t1", ["bash"]), _traj("t2", ["bash"]))
    client.post(reverse("trajectories:tag"), {"selected": [a, b], "tag": "look-at-me"})
    assert TrajectoryRow.objects.get(pk=a).tags == ["look-at-me"]
    body = client.get(reverse("trajectories:list"), {"tag": "look-at-me"}).content.decode()
    assert f'data-trajectory-id="{a}"' in body and f'data-trajectory-id="{b}"' in body


def test_everything_a_model_wrote_is_shown_literally(viewer):
    evil = Trajectory(
        task=TaskRef(id=EVIL, prompt=EVIL, domain="coding"),
        agent=EVIL,
        model=EVIL,
        steps=[Step(index=0, tool=EVIL[:150], params={EVIL: EVIL}, observation=EVIL, thought=EVIL)],
        outcome=Outcome(success=False, metadata={"note": EVIL}),
    )
    (pk,) = services.trajectories_import(results=[ImportResult(EVIL, "test", "1", [evil])]).created
    services.trajectories_tag(ids=[pk], tag=EVIL[:64])
    (other,) = _store(_traj("plain", ["bash"]))
    for url in (
        reverse("trajectories:list"),
        reverse("trajectories:detail", args=[pk]),
        reverse("trajectories:diff") + f"?a={pk}&b={other}",
    ):
        body = viewer.get(url).content.decode()
        assert "<script>window.__pwned" not in body, url
        assert "<img src=x" not in body, url
        assert (
            "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body or "&lt;script&gt;" in body
        ), url
        assert "{{ 7*7 }}" in body or "{{ 7*7 }}"[:5] in body, url

"""Trajectory pages: upload, list filters and search, detail, diff, tags; untrusted text escaped."""

from __future__ import annotations

import html
import json
import re

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
    assert data["schema_version"] == "1.1" and len(data["steps"]) == 2


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
    selected = viewer.get(reverse("trajectories:diff"), {"selected": [b, a], "csrf": "x"})
    assert selected.status_code == 302
    assert selected["Location"] == reverse("trajectories:diff") + f"?a={a}&b={b}"
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


def _ids(body: str) -> list[int]:
    import re

    return [int(m) for m in re.findall(r'data-trajectory-id="(\d+)"', body)]


def _walk(viewer, params: dict) -> list[int]:
    """Every page of the list in order, following the "next page" cursor."""
    import re
    from html import unescape

    seen: list[int] = []
    query = dict(params)
    for _ in range(20):
        body = viewer.get(reverse("trajectories:list"), query).content.decode()
        seen.extend(_ids(body))
        nxt = re.search(r'href="\?([^"]*)" data-testid="older"', body)
        if not nxt:
            return seen
        from urllib.parse import parse_qsl

        query = dict(parse_qsl(unescape(nxt.group(1))))
    raise AssertionError(f"the pages never ended: {params} {query} {seen[:120]}")


def test_sorting_with_keyset_pages_visits_every_row_once_in_order(viewer):
    # 120 trajectories: rewards repeat (ties broken by id), some are NULL (sorted last).
    specs = []
    for i in range(120):
        t = _traj(f"s{i}", ["bash"] * (1 + i % 7), success=None if i % 5 == 0 else i % 2 == 0)
        t.outcome = Outcome(success=t.outcome.success, score=None if i % 5 == 0 else (i % 4) / 4)
        specs.append(t)
    ids = _store(*specs)
    rows = {r.pk: r for r in TrajectoryRow.objects.filter(pk__in=ids)}

    def expected(key, descending):
        present = [pk for pk in ids if key(rows[pk]) is not None]
        missing = [pk for pk in ids if key(rows[pk]) is None]
        present.sort(key=lambda pk: (key(rows[pk]), pk), reverse=descending)
        return present + sorted(missing, reverse=descending)

    assert _walk(viewer, {"sort": "newest"}) == sorted(ids, reverse=True)
    assert _walk(viewer, {"sort": "oldest"}) == sorted(ids)
    assert _walk(viewer, {"sort": "reward_high"}) == expected(lambda r: r.reward, True)
    assert _walk(viewer, {"sort": "reward_low"}) == expected(lambda r: r.reward, False)
    assert _walk(viewer, {"sort": "steps_most"}) == expected(lambda r: r.step_count, True)
    fewest = _walk(viewer, {"sort": "steps_fewest", "outcome": "success"})
    assert fewest == [
        pk for pk in expected(lambda r: r.step_count, False) if rows[pk].success is True
    ]
    # a nonsense sort or cursor falls back to the default instead of failing
    assert viewer.get(reverse("trajectories:list"), {"sort": "x", "after": "zz"}).status_code == 200


def test_date_and_id_filters(viewer):
    import datetime as dt

    old, new = _store(_traj("old", ["bash"]), _traj("new", ["bash"]))
    TrajectoryRow.objects.filter(pk=old).update(
        created_at=dt.datetime(2024, 3, 1, 12, tzinfo=dt.UTC)
    )
    body = viewer.get(reverse("trajectories:list"), {"until": "2024-03-01"}).content.decode()
    assert _ids(body) == [old]
    body = viewer.get(reverse("trajectories:list"), {"since": "2024-03-02"}).content.decode()
    assert _ids(body) == [new]
    body = viewer.get(reverse("trajectories:list"), {"min_id": new, "max_id": new}).content.decode()
    assert _ids(body) == [new]


def test_export_selection_bulk_action_downloads_canonical_jsonl(viewer):
    a, b, c = _store(_traj("e1", ["bash"]), _traj("e2", ["grep", "edit"]), _traj("e3", ["x"]))
    page = viewer.get(reverse("trajectories:list")).content.decode()
    assert 'data-testid="bulk-export"' in page
    response = viewer.post(reverse("trajectories:export_selection"), {"selected": [a, b]})
    lines = response.content.decode().splitlines()
    assert response["Content-Type"] == "application/x-ndjson"
    assert [json.loads(line)["task"]["id"] for line in lines] == ["task-e1", "task-e2"]
    assert [len(json.loads(line)["steps"]) for line in lines] == [1, 2]


def test_long_trajectories_load_more_steps_on_demand(viewer):
    (pk,) = _store(_traj("long", ["bash"] * 450))
    body = viewer.get(reverse("trajectories:detail", args=[pk])).content.decode()
    assert body.count('class="step"') == 200 and "Show the next 200 of 250 more steps" in body
    more = viewer.get(reverse("trajectories:steps", args=[pk]), {"after": 199}).content.decode()
    assert 'id="step-200"' in more and 'id="step-399"' in more and 'id="step-400"' not in more
    assert "Show the next 50 of 50 more steps" in more
    last = viewer.get(reverse("trajectories:steps", args=[pk]), {"after": 399}).content.decode()
    assert last.count('class="step"') == 50 and "more steps" not in last
    assert 'data-testid="live-steps"' not in last


def test_a_running_trajectory_shows_new_steps_as_they_arrive(viewer):
    from trainer_core.recording.schema import Step as StepSpec

    row = services.trajectory_begin(key="run-1:t:0:-", prompt="live task", agent="steplab")
    body = viewer.get(reverse("trajectories:detail", args=[row.pk])).content.decode()
    assert 'data-testid="live-steps"' in body and 'hx-trigger="every 2s"' in body
    assert "after=-1" in body
    services.trajectory_append_step(
        trajectory=row, step=StepSpec(index=0, tool="calculator", observation="4")
    )
    poll = viewer.get(reverse("trajectories:steps", args=[row.pk]), {"after": -1}).content.decode()
    assert 'id="step-0"' in poll and "calculator" in poll
    assert 'data-testid="live-steps"' in poll and "after=0" in poll  # keeps polling from step 0
    assert 'hx-swap-oob="true"' in poll and 'data-testid="status">running' in poll
    services.trajectory_append_step(
        trajectory=row, step=StepSpec(index=1, tool="submit", observation="done")
    )
    services.trajectory_finish(trajectory=row, outcome={"success": True, "terminated": True})
    poll = viewer.get(reverse("trajectories:steps", args=[row.pk]), {"after": 0}).content.decode()
    assert 'id="step-1"' in poll and 'id="step-0"' not in poll
    assert 'data-testid="live-steps"' not in poll  # finished: the polling stops
    assert 'data-testid="status">finished' in poll and 'data-testid="outcome">success' in poll


def _long_observations(marker: str, alphabet: str, steps: int, size: int) -> Trajectory:
    import random

    rng = random.Random(marker)

    def text() -> str:
        words = (
            "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 7))) for _ in range(size)
        )
        return " ".join(words)[:size]

    return Trajectory(
        task=TaskRef(id="task-long", prompt="Read the logs", domain="coding"),
        agent="swe-agent",
        steps=[
            Step(index=i, tool="bash", params={"command": f"cat log{i}"}, observation=text())
            for i in range(steps)
        ],
        outcome=Outcome(success=True),
    )


def _diff_positions(body: str) -> list[int]:
    return [int(p) for p in re.findall(r'<tr class="diff-[^"]*" data-kind="\w+"[^>]*>\s*<td>(\d+)', body)]  # fmt: skip


def test_a_diff_of_long_unlike_observations_has_a_bounded_cost_and_loads_in_parts(viewer):
    """The worst case of the old diff (2 KB observations sharing only their spaces, on every
    step): each request spends at most its budget of comparisons, later rows load their own
    differences on demand, and the page shows its first rows, then loads the rest (the row
    that loads them is shown, and fetched, until every row is there); bodies are cut."""
    from webapp.trajectories.selectors import DIFF_BODY_CHARS, DIFF_FIRST_ROWS, DIFF_PAGE_BUDGET

    a, b = _store(
        _long_observations("left", "abcdefghij", 250, 2_000),
        _long_observations("right", "klmnopqrst", 250, 2_000),
    )
    response = viewer.get(reverse("trajectories:diff"), {"a": a, "b": b})
    assert response.status_code == 200
    assert response.context["diff_work"] <= DIFF_PAGE_BUDGET
    assert len(response.context["rows"]) == DIFF_FIRST_ROWS
    body = response.content.decode()
    assert 'data-testid="textdiff"' in body and 'data-testid="textdiff-deferred"' in body
    row = response.context["rows"][-1]  # the head of a long observation, the rest on demand
    assert row["kind"] == "changed_observation" and row["observation_deferred"]
    assert row["left"].cut and len(row["left"].preview) == DIFF_BODY_CHARS
    assert f"show all {row['left'].observation_length} characters" in body
    positions = _diff_positions(body)
    while 'data-testid="diff-more"' in body:
        more = re.search(r'data-testid="diff-more" hx-get="([^"]+)" hx-trigger="load"', body)
        response = viewer.get(html.unescape(more.group(1)))
        assert response.status_code == 200
        body = response.content.decode()
        positions += _diff_positions(body)
        assert 'data-testid="textdiff-deferred"' in body
    assert positions == list(range(250))
    # the plain link of the loading row opens the page from that row
    later = viewer.get(reverse("trajectories:diff"), {"a": a, "b": b, "start": 200})
    assert [r["position"] for r in later.context["rows"]] == list(range(200, 250))
    assert "Aligned rows from 200 of 250" in later.content.decode()
    one = viewer.get(
        reverse("trajectories:diff_step"), {"a": a, "b": b, "left": 199, "right": 199}
    ).content.decode()
    assert 'data-testid="textdiff"' in one and "<del>" in one and "<ins>" in one


def test_parameters_are_indented_as_json_dumps_indents_them():
    """The diff and step pages write tool parameters with ``pretty_json``: objects of plain
    values take a fast path that must read exactly as ``json.dumps(indent=2)``."""
    from webapp.common.templatetags.steplab import pretty_json

    values = [
        {"command": "ls -la", "path": "/a/b", "n": 3, "f": 1.5, "t": True, "z": None},
        {"b": "café ☃ \u2028", "a": 'quote " and \\ and \n', "e": "", "big": 10**30, "x": 1e-7},
        {"nested": {"a": [1, 2]}, "s": "x"},
        {"nan": float("nan"), "inf": float("-inf")},
        {},
        [1, {"a": 2}],
        "text",
    ]
    for value in values:
        assert pretty_json(value) == json.dumps(value, indent=2, sort_keys=True, default=str)

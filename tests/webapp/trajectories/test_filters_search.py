"""The trajectory list's filter menus and search: every distinct value with its count at a size
where the newest rows are all alike (imported agents still offered), and search that finds text
inside tool parameters and quoted phrases, on PostgreSQL and (marker) SQLite."""

from __future__ import annotations

import html
import re
from collections import Counter

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.accounts.models import Role
from webapp.trajectories import selectors, services
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

IMPORTED = [  # (agent, model, domain, source format): what real logs import as
    ("swe-agent", "gpt-4o", "coding", "swe-agent"),
    ("openhands", "claude-3-5-sonnet", "coding", "openhands"),
    ("tau-bench", "gpt-4o-mini", "retail", "tau-bench"),
    ("inspect_ai", "claude-3-haiku", "qa", "inspect"),
    ("mini-swe-agent", "o3", "coding", "mini-swe-agent"),
]


@pytest.fixture
def viewer(client, make_user):
    client.force_login(make_user(Role.VIEWER))
    return client


def _menu(body: str, name: str) -> dict[str, int]:
    """The options of one filter menu: value → the count it shows."""
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', body, re.S)
    assert select, f"no {name} menu"
    options = re.findall(r'<option value="([^"]+)"[^>]*>[^<]*\((\d+)\)</option>', select.group(1))
    return {html.unescape(value): int(count) for value, count in options}


def _mixed_rows(n: int = 1000) -> list[TrajectoryRow]:
    """``n`` trajectories: the imports first (older), then rollouts of one scripted policy, so
    the newest several hundred rows all carry the same agent, model and domain."""
    rows = []
    for i in range(n):
        if i < 300:
            agent, model, domain, fmt = IMPORTED[i % len(IMPORTED)]
            if i % 7 == 0:
                model = f"model-{i}"  # a long tail of models
            rows.append(
                TrajectoryRow(
                    agent=agent,
                    model=model,
                    domain=domain,
                    source="import",
                    source_format=fmt,
                    content_hash=f"hash-{i}",
                    step_count=1,
                )
            )
        else:
            rows.append(
                TrajectoryRow(
                    agent="steplab",
                    model="scripted",
                    domain="arithmetic",
                    source="rollout",
                    idempotency_key=f"collect-1:task-{i}:0:0",
                    step_count=2,
                )
            )
    return TrajectoryRow.objects.bulk_create(rows)


def test_filter_menus_list_every_distinct_value_with_its_count_at_1000_rows(viewer):
    rows = _mixed_rows(1000)
    body = viewer.get(reverse("trajectories:list")).content.decode()
    for name, column in (
        ("domain", "domain"),
        ("agent", "agent"),
        ("model", "model"),
        ("source", "source"),
        ("format", "source_format"),
    ):
        expected = Counter(getattr(row, column) for row in rows if getattr(row, column))
        assert _menu(body, name) == dict(expected), name
    assert _menu(body, "agent")["inspect_ai"] == 60
    assert len(_menu(body, "model")) > 40  # the long tail, every model once

    # picking an imported agent shows its trajectories and keeps it selected
    body = viewer.get(reverse("trajectories:list"), {"agent": "openhands"}).content.decode()
    shown = {int(pk) for pk in re.findall(r'data-trajectory-id="(\d+)"', body)}
    assert shown and all(TrajectoryRow.objects.get(pk=pk).agent == "openhands" for pk in shown)
    assert '<option value="openhands" selected>openhands (60)</option>' in body
    body = viewer.get(reverse("trajectories:list"), {"format": "tau-bench"}).content.decode()
    shown = {int(pk) for pk in re.findall(r'data-trajectory-id="(\d+)"', body)}
    assert shown and all(TrajectoryRow.objects.get(pk=pk).agent == "tau-bench" for pk in shown)


def test_the_menus_are_one_query_cached_and_a_new_trajectory_refreshes_them(viewer):
    _mixed_rows(200)
    cache.clear()
    with CaptureQueriesContext(connection) as first:
        choices = selectors.filter_choices()
    with CaptureQueriesContext(connection) as again:
        assert selectors.filter_choices() == choices
    assert len(first) == 2  # the newest row (the cache key) and one GROUP BY query
    assert len(again) == 1  # cached: only the key
    assert "brand-new-agent" not in {v["value"] for v in choices["agent"]}

    services.trajectories_import(
        results=[
            ImportResult(
                "new.json",
                "test",
                "1",
                [Trajectory(task=TaskRef(id="t", prompt="p"), agent="brand-new-agent")],
            )
        ]
    )
    with CaptureQueriesContext(connection) as refresh:
        body = viewer.get(reverse("trajectories:list")).content.decode()
    assert _menu(body, "agent")["brand-new-agent"] == 1
    assert _menu(body, "agent") == {
        **{v["value"]: v["count"] for v in choices["agent"]},
        "brand-new-agent": 1,
    }
    # only the trajectory added since the cached counts is counted again, not the whole table
    grouping = [q["sql"] for q in refresh.captured_queries if "GROUP BY" in q["sql"]]
    assert len(grouping) == 1 and "WHERE id >" in grouping[0]


def test_the_menus_count_again_in_full_when_the_newest_counted_trajectory_is_gone(viewer):
    rows = _mixed_rows(320)
    viewer.get(reverse("trajectories:list"))  # counted and cached
    newest = max(rows, key=lambda row: row.pk)
    newest.delete()  # the counts' base is gone: adding rows on top of it would be wrong
    TrajectoryRow.objects.create(agent="later-agent", model="m", domain="d", source="import")
    body = viewer.get(reverse("trajectories:list")).content.decode()
    expected = Counter(TrajectoryRow.objects.values_list("agent", flat=True))
    assert _menu(body, "agent") == dict(expected)


def test_a_selected_value_no_trajectory_has_stays_in_its_menu(viewer):
    body = viewer.get(reverse("trajectories:list"), {"model": "gone<model>"}).content.decode()
    assert _menu(body, "model") == {"gone<model>": 0}
    assert "gone&lt;model&gt;" in body and "gone<model>" not in body


# --- search ---------------------------------------------------------------------------------------


def _store(marker: str, steps: list[Step], prompt: str = "") -> int:
    spec = Trajectory(
        task=TaskRef(id=f"task-{marker}", prompt=prompt or f"Task {marker}"),
        agent="swe-agent",
        steps=steps,
        outcome=Outcome(success=True),
    )
    (pk,) = services.trajectories_import(
        results=[ImportResult(f"{marker}.json", "test", "1", [spec])]
    ).created
    return pk


def _found(client, query: str) -> set[int]:
    body = client.get(reverse("trajectories:list"), {"q": query}).content.decode()
    return {int(pk) for pk in re.findall(r'data-trajectory-id="(\d+)"', body)}


def test_search_finds_text_inside_tool_parameters(viewer):
    edit = _store(
        "edit",
        [
            Step(
                index=0,
                tool="str_replace_editor",
                params={
                    "path": "/repo/src/needle_module.py",
                    "edits": [{"old": "frobnicate_widget()", "new": "café"}],
                    "line": 314159,
                },
                observation="done",
            )
        ],
    )
    search = _store(
        "search",
        [Step(index=0, tool="web_search", params={"query": "flux capacitor wiring"})],
    )
    other = _store("other", [Step(index=0, tool="bash", params={"command": "ls"})])

    assert _found(viewer, "frobnicate_widget") == {edit}  # nested inside a list of objects
    assert _found(viewer, "needle_module.py") == {edit}  # a file name inside a path
    assert _found(viewer, "/repo/src/needle_module.py") == {edit}
    assert _found(viewer, "café") == {edit}
    assert _found(viewer, "314159") == {edit}  # a number
    assert _found(viewer, "capacitor") == {search}
    assert _found(viewer, "ls") == {other}
    assert _found(viewer, "capacitor -wiring") == set()
    assert _found(viewer, "capacitor or frobnicate_widget") == {edit, search}


def test_search_finds_a_quoted_phrase_and_only_as_a_phrase(viewer):
    phrase = _store(
        "phrase",
        [
            Step(
                index=0,
                tool="bash",
                params={"command": "pytest -x"},
                observation="FAILED tests/test_app.py\nprocess ended with exit code 1 after 3s",
            )
        ],
    )
    scattered = _store(
        "scattered",
        [Step(index=0, tool="bash", params={"command": "make"}, observation="code 1 exit")],
    )
    in_params = _store(
        "params",
        [Step(index=0, tool="web_search", params={"query": "Flux Capacitor wiring diagram"})],
    )

    assert _found(viewer, '"exit code 1"') == {phrase}
    assert _found(viewer, "exit code 1") == {phrase, scattered}  # words: anywhere, any order
    assert _found(viewer, '"code 1 exit"') == {scattered}
    assert _found(viewer, '"flux capacitor wiring"') == {in_params}  # case-insensitive
    assert _found(viewer, '"capacitor flux"') == set()
    assert _found(viewer, '"exit code 1" -pytest') == set()
    assert _found(viewer, '"exit code 1" pytest') == {phrase}

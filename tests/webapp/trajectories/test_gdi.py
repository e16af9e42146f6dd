"""GDI ranking (docs/gdi.md) on the real services: the stored components follow their inputs
without a scheduler (an import, a new score, a human label, a dataset build each recompute it),
human feedback survives a whole-database recompute, the list's GDI sort pages through ranked then
unranked trajectories, the dataset build's GDI filters include and exclude as they say, the
trajectory page shows the components, and ``steplab gdi`` recomputes and shows."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from click.testing import CliRunner
from django.urls import reverse
from django.utils import timezone

from tests.workers.test_scoring_job import _coding_trajectory, _import
from webapp.accounts.models import Role
from webapp.calibration import services as calibration
from webapp.datasets import selectors as dataset_selectors
from webapp.datasets.jobs import export_run
from webapp.datasets.models import DatasetSnapshot
from webapp.datasets.services import snapshot_create
from webapp.jobs.context import JobContext
from webapp.jobs.services import job_start
from webapp.rewards import services as rewards
from webapp.rewards.jobs import score_run
from webapp.trajectories import selectors
from webapp.trajectories.gdi import gdi_recompute, gdi_recompute_all
from webapp.trajectories.models import Trajectory, TrajectoryGdi

pytestmark = pytest.mark.django_db


def _gdi(pk: int) -> TrajectoryGdi:
    return TrajectoryGdi.objects.get(trajectory_id=pk)


def _run(runner, job) -> None:
    """Run a job's runner here, as a worker would (started, then its context)."""
    started = job_start(job_id=job.pk, task_id=None, worker="test:1") or job
    runner(ctx=JobContext(started, worker="test:1"))


@pytest.fixture
def pair():
    return _import(
        _coding_trajectory("a", repeat_read=False, success=True),
        _coding_trajectory("b", repeat_read=True, success=False),
    )


def test_each_input_updates_the_stored_gdi_and_feedback_survives_a_recompute(
    pair, operator, make_user, django_capture_on_commit_callbacks
):
    good, bad = pair
    # imported: the outcome is the reward, nothing else yet
    first = _gdi(good)
    assert (first.reward, first.reward_source, first.builds, first.feedback_signals) == (
        1.0, "trajectory reward", 0, 0,
    )  # fmt: skip
    assert _gdi(bad).reward == 0.0 and first.total > _gdi(bad).total

    # a new score: the newest reward-model version's total becomes the reward
    rewards.rubrics_seed(domain="coding")
    version = rewards.reward_model_create(domain="coding")
    run = rewards.scoring_launch(reward_model=version, trajectory_ids=[good, bad])
    _run(score_run, run.job)
    scored = _gdi(bad)
    assert scored.reward_source == f"reward model coding v{version.version}"
    bad_total = version.scores.get(trajectory_id=bad).total
    assert bad_total is not None and scored.reward == pytest.approx(max(0.0, min(1.0, bad_total)))

    # a new human label and trajectory score (settled when submitted)
    annotator = make_user(Role.ANNOTATOR)
    queue = calibration.queue_create(
        name="gdi", trajectory_ids=[bad], user=operator, free_labelling=True
    )
    item = calibration.next_item(queue=queue, user=annotator)
    with django_capture_on_commit_callbacks(execute=True):
        calibration.label_set(item=item, user=annotator, index=0, key=5)  # 1.0
        calibration.label_set(item=item, user=annotator, index=1, key=3)  # 0.5
    assert _gdi(bad).feedback_signals == 0  # not settled before it is submitted (blind)
    with django_capture_on_commit_callbacks(execute=True):
        calibration.submit(item=item, user=annotator, trajectory_key=5)  # 1.0
    assert (_gdi(bad).feedback_signals, _gdi(bad).feedback) == (2, (0.75 + 1.0) / 2)
    item.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):  # a settled label changed
        calibration.label_set(item=item, user=annotator, index=1, key=1)  # 0.5 → 0.0
    judged = _gdi(bad)
    assert (judged.feedback_signals, judged.feedback) == (2, pytest.approx((0.5 + 1.0) / 2))
    assert judged.total > scored.total

    # a new dataset build: reuse counts it once, however often its export runs
    snapshot = snapshot_create(name="sft-gdi", kind="sft", query={"task": "fix-total-b"})
    for _ in range(2):
        _run(export_run, snapshot.job)
    reused = _gdi(bad)
    assert (reused.builds, _gdi(good).builds) == (1, 0)
    assert reused.reuse > 0 and reused.total > judged.total

    # the whole database again (knowlyr resets feedback here): every input is read again
    assert gdi_recompute_all(batch=1) >= 2
    again = _gdi(bad)
    assert (again.feedback_signals, again.feedback, again.builds) == (
        2, judged.feedback, 1,
    )  # fmt: skip
    assert again.total == pytest.approx(reused.total, abs=1e-4)


def _bulk(n: int) -> list[int]:
    now = timezone.now()
    rows = Trajectory.objects.bulk_create(
        [Trajectory(source="rollout", task_ref=f"t{i}", status="finished") for i in range(n)]
    )
    ids = [row.pk for row in rows]
    Trajectory.objects.filter(pk__in=ids).update(created_at=now - timedelta(days=1))
    return ids


def test_the_gdi_sort_pages_ranked_then_unranked_and_the_list_page_uses_it(client, operator):
    ids = _bulk(selectors.PAGE_SIZE + 10)
    ranked = ids[:55]
    for i, pk in enumerate(ranked):  # rewards 0.00, 0.01, ...: the last ranked is the highest
        Trajectory.objects.filter(pk=pk).update(reward=(i % 50) / 50)
    gdi_recompute(ids=ranked)
    totals = dict(TrajectoryGdi.objects.values_list("trajectory_id", "total"))
    expected = sorted(ranked, key=lambda pk: (-totals[pk], -pk)) + sorted(ids[55:], reverse=True)
    seen, cursor = [], None
    while True:
        rows, cursor = selectors.keyset_page(
            qs=selectors.trajectory_list(filters=selectors.Filters(sort="gdi")),
            cursor=cursor, sort="gdi", list_rows=True,
        )  # fmt: skip
        seen += [row.pk for row in rows]
        if cursor is None:
            break
    assert seen == expected

    client.force_login(operator)
    page = client.get(reverse("trajectories:list"), {"sort": "gdi"}).content.decode()
    shown = [int(pk) for pk in re.findall(r'name="selected" value="(\d+)"', page)]
    assert shown == expected[: selectors.PAGE_SIZE]
    assert '<option value="gdi" selected>highest GDI</option>' in page
    top = TrajectoryGdi.objects.get(trajectory_id=expected[0]).total
    assert page.count('data-testid="gdi">GDI ') == selectors.PAGE_SIZE  # every row ranked
    assert f'data-testid="gdi">GDI {top:.3f}</span>' in page


def test_the_dataset_build_filters_by_min_gdi_and_top_n(pair, operator_client):
    good, bad = pair
    unranked = _bulk(1)[0]
    high, low = _gdi(good).total, _gdi(bad).total
    cases = [
        ({"min_gdi": (high + low) / 2}, [good]),
        ({"min_gdi": 0.0}, [good, bad]),  # a trajectory never ranked passes no GDI filter
        ({"top_gdi": 1}, [good]),
        ({"top_gdi": 5, "min_gdi": 0.99}, []),
        ({}, [good, bad, unranked]),
    ]
    for n, (query, expected) in enumerate(cases):
        snapshot = snapshot_create(name=f"gdi-{n}", kind="sft", query=query)
        assert dataset_selectors.selection_ids(snapshot=snapshot) == sorted(expected), query

    response = operator_client.post(
        reverse("datasets:new"),
        {"name": "top", "kind": "sft", "label_source": "model", "seed": 0, "top_gdi": 1,
         "min_gdi": "0.1"},
    )  # fmt: skip
    assert response.status_code == 302
    made = DatasetSnapshot.objects.get(name="top")  # the form's query carries both filters
    assert (made.query["top_gdi"], made.query["min_gdi"]) == (1, 0.1)
    api = operator_client.post(
        "/api/v1/datasets",
        {"name": "api-top", "kind": "sft", "top_gdi": 1},
        content_type="application/json",
    )
    assert api.status_code == 202, api.content
    assert api.json()["query"] == {"top_gdi": 1}
    made = DatasetSnapshot.objects.get(name="api-top")
    assert dataset_selectors.selection_ids(snapshot=made) == [good]


def test_the_page_shows_the_components_and_the_cli_recomputes_and_shows(pair, client, operator):
    from webapp.cli.gdi import gdi

    good, _ = pair
    client.force_login(operator)
    page = client.get(reverse("trajectories:detail", args=[good])).content.decode()
    assert 'data-testid="gdi-components"' in page
    for name in ("reward", "reuse", "feedback", "recency"):
        assert f'data-component="{name}"' in page
    assert "trajectory reward" in page and "none yet (neutral)" in page

    runner = CliRunner()
    done = runner.invoke(gdi, ["recompute", "--weights", "reward=1,reuse=0,feedback=0,recency=0"])
    assert done.exit_code == 0, done.output
    assert "reward=1.000, reuse=0.000" in done.output
    assert _gdi(good).total == 1.0
    shown = runner.invoke(gdi, ["show", str(good)])
    assert shown.exit_code == 0 and "GDI 1.0000" in shown.output and "reward" in shown.output
    refused = runner.invoke(gdi, ["recompute", "--weights", "speed=1"])
    assert refused.exit_code != 0 and "Unknown GDI component 'speed'" in refused.output
    # the API's trajectory carries the same stored GDI (null before one was computed)
    from webapp.api import services as token_services

    _, secret = token_services.token_create(user=operator, name="gdi", scope="read")
    headers = {"Authorization": f"Bearer {secret}"}
    got = client.get(f"/api/v1/trajectories/{good}", headers=headers).json()["gdi"]
    assert got["total"] == 1.0 and got["components"]["reward"] == 1.0
    TrajectoryGdi.objects.filter(trajectory_id=good).delete()
    assert client.get(f"/api/v1/trajectories/{good}", headers=headers).json()["gdi"] is None

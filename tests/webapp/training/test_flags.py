"""Reward-hacking flags in the app (issue 21): computed over a stored run (its lineage, dataset
rows, trajectories and scores) and stored with the samples behind them; shown on the run's page;
one click makes an annotation queue of the samples (operators only); a human's confirm/reject is
kept with the flag; ``steplab flags`` prints them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from django.urls import reverse

from webapp.accounts.models import Role
from webapp.calibration.models import AnnotationQueue
from webapp.cli.flags import flags as flags_command
from webapp.training import flag_services
from webapp.training.models import RunFlag

from .flag_runs import PER_STEP, STEPS, build_run

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _flag(run) -> RunFlag:
    flag_services.run_flags_compute(run=run, config=flag_services.flag_config(values={"window": 4}))
    return RunFlag.objects.get(training_run=run, kind="failed_high_process", start_step=1)


def test_a_run_with_the_pattern_stores_a_flag_with_its_samples_and_a_quiet_run_none():
    run = build_run(hacked=True)
    results = flag_services.run_flags_compute(run=run)  # the defaults: one window of 8 steps
    stored = list(RunFlag.objects.filter(training_run=run))
    assert [(f.kind, f.start_step, f.end_step) for f in stored] == [("failed_high_process", 1, 8)]
    flag = stored[0]
    assert flag.statistic == "share_failed_with_high_process" and flag.value == 1.0
    assert flag.threshold == 0.25 and flag.window == 8 and flag.config["process_high"] == 0.7
    assert len(flag.trajectory_ids) == STEPS * PER_STEP // 2  # every failed episode
    assert {r.kind for r in results} >= {"failed_high_process"}
    # computing again updates the same flag; a quiet run stores nothing
    flag_services.run_flags_compute(run=run)
    assert RunFlag.objects.filter(training_run=run).count() == 1
    quiet = build_run(hacked=False)
    flag_services.run_flags_compute(run=quiet)
    assert not RunFlag.objects.filter(training_run=quiet).exists()


def test_the_run_page_shows_its_flags(client, make_user):
    run = build_run(hacked=True, name='<img src=x onerror="alert(1)">')
    flag = _flag(run)
    client.force_login(make_user(Role.VIEWER))
    page = client.get(reverse("training:detail", args=[run.pk])).content.decode()
    assert 'data-testid="run-flags"' in page
    assert reverse("training:run_flags", args=[run.pk]) in page
    fragment = client.get(
        reverse("training:run_flags", args=[run.pk]), headers={"HX-Request": "true"}
    ).content.decode()
    assert f'id="flag-{flag.pk}"' in fragment and "failed_high_process" in fragment
    assert "run-flags-data" in fragment  # the chart markers
    assert (
        "<img src=x"
        not in client.get(reverse("training:run_flags", args=[run.pk])).content.decode()
    )
    detail = client.get(reverse("training:flag", args=[flag.pk])).content.decode()
    assert "share_failed_with_high_process" in detail
    assert f"/trajectories/{flag.trajectory_ids[0]}/" in detail


def test_one_click_makes_a_queue_of_the_samples_for_operators_only(client, make_user):
    flag = _flag(build_run(hacked=True))
    url = reverse("training:flag_queue", args=[flag.pk])
    for role in (Role.VIEWER, Role.ANNOTATOR):
        client.force_login(make_user(role))
        assert client.post(url).status_code == 403
    assert not AnnotationQueue.objects.exists()
    client.force_login(make_user(Role.OPERATOR))
    response = client.post(url)
    flag.refresh_from_db()
    queue = flag.queue
    assert response.status_code == 302 and response.url == reverse(
        "calibration:queue", args=[queue.pk]
    )
    assert sorted(queue.items.values_list("trajectory_id", flat=True)) == sorted(
        int(i) for i in flag.trajectory_ids
    )
    client.post(url)  # a second click opens the same queue
    assert AnnotationQueue.objects.count() == 1


def test_the_human_answer_is_kept_with_the_flag(client, make_user):
    flag = _flag(build_run(hacked=True))
    url = reverse("training:flag_review", args=[flag.pk])
    client.force_login(make_user(Role.VIEWER))
    assert client.post(url, {"answer": "confirmed"}).status_code == 403
    annotator = make_user(Role.ANNOTATOR)
    client.force_login(annotator)
    client.post(url, {"answer": "rejected", "note": "the checker is right, scores are off"})
    flag.refresh_from_db()
    assert flag.review == "rejected" and flag.reviewed_by == annotator
    assert flag.reviewed_at is not None and flag.review_note.startswith("the checker")
    # a reviewed flag stays when it no longer fires
    flag_services.run_flags_compute(
        run=flag.training_run, config=flag_services.flag_config(values={"process_high": 0.95})
    )
    flag.refresh_from_db()
    assert flag.details["fires_now"] is False and flag.review == "rejected"


def test_the_cli_prints_the_flags():
    run = build_run(hacked=True)
    result = CliRunner().invoke(flags_command, [str(run.pk), "--compute", "--set", "window=4"])
    assert result.exit_code == 0, result.output
    assert "FIRED  failed_high_process" in result.output
    assert "failed_high_process 2/2" in result.output
    stored = CliRunner().invoke(flags_command, [str(run.pk)])
    assert "share_failed_with_high_process 1.000 (threshold 0.25, window 4)" in stored.output
    bad = CliRunner().invoke(flags_command, [str(run.pk), "--set", "alpha=3"])
    assert bad.exit_code != 0 and "alpha must be between" in bad.output


def test_an_rl_runs_samples_are_its_consumed_groups_and_its_page_loads_the_flags(client, make_user):
    import uuid
    from pathlib import Path

    from django.conf import settings

    from tests.webapp.training.test_rl_pages import _launch, _trained
    from webapp.training import flag_selectors
    from webapp.training.models import SampleGroup

    base = Path(settings.STEPLAB_DATA_DIR) / "models" / f"rl-flags-{uuid.uuid4().hex[:8]}"
    base.mkdir(parents=True)
    run = _launch(str(base.resolve()))
    _trained(run)
    expected: dict[int, list[int]] = {}
    for group in SampleGroup.objects.filter(run=run, status="consumed").order_by("step", "index"):
        expected.setdefault(group.step, []).extend(group.payload["trajectory_ids"])
    assert flag_selectors.step_samples(run=run.training_run) == expected
    assert sorted(expected) == [1, 2]  # the dropped and ready groups are not samples
    flag_services.run_flags_compute(run=run.training_run)  # computes over them without error
    client.force_login(make_user(Role.VIEWER))
    page = client.get(reverse("training:rl_detail", args=[run.pk])).content.decode()
    assert reverse("training:run_flags", args=[run.training_run_id]) in page

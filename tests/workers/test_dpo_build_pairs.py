"""A DPO export on a real worker that builds its preference pairs first (the dataset form's
checkbox): pairs among the selected trajectories from the version's totals, then the files. When a
DPO selection has no pair, or nothing to pair, the job's error names the missing step (pairs,
scores) and its page offers to export again with pairs built first."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from django.urls import reverse

from tests.conftest import wait_for
from tests.workers.test_scoring_job import _coding_trajectory, _import
from webapp.datasets import services
from webapp.datasets.models import DatasetSnapshot
from webapp.jobs.models import Job, JobStatus
from webapp.rewards import services as rewards
from webapp.rewards.models import PreferencePair

pytestmark = [pytest.mark.worker]


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


def _wait(snapshot: DatasetSnapshot) -> Job:
    return wait_for(lambda: _finished(snapshot.job_id), timeout=90, what="the export")


def _rows(snapshot: DatasetSnapshot) -> list[dict]:
    rows = []
    for split in ("train", "validation", "test"):
        entry = snapshot.files.get(f"data/{split}.jsonl")
        if entry:
            text = (Path(snapshot.directory) / entry["path"]).read_text()
            rows += [json.loads(line) for line in text.splitlines()]
    return rows


def test_a_dpo_export_builds_its_pairs_first_or_says_which_step_is_missing(
    celery_worker, operator_client
):
    rewards.rubrics_seed(domain="coding")
    shared = _import(
        *[
            _coding_trajectory("shared", repeat_read=r, success=s)
            for r in (False, True)
            for s in (True, False)
        ]
    )
    other = _import(
        _coding_trajectory("other", repeat_read=False, success=True),
        _coding_trajectory("other", repeat_read=True, success=False),
    )
    _import(_coding_trajectory("unscored", repeat_read=False, success=True))
    version = rewards.reward_model_create(domain="coding")
    run = rewards.scoring_launch(reward_model=version, trajectory_ids=shared + other)
    assert wait_for(lambda: _finished(run.job_id), timeout=90, what="scoring").status == "succeeded"

    # 1. the form's checkbox: the export job builds the pairs of the selection, then exports them
    response = operator_client.post(
        reverse("datasets:new"),
        {
            "name": "dpo-shared", "kind": "dpo", "reward_model": version.pk,
            "label_source": "model", "task": "fix-total-shared", "seed": 0,
            "build_pairs": "on", "pair_method": "outside_in", "min_margin": "0",
        },
    )  # fmt: skip
    assert response.status_code == 302
    snapshot = DatasetSnapshot.objects.get(name="dpo-shared")
    job = _wait(snapshot)
    assert job.status == JobStatus.SUCCEEDED, job.error
    snapshot.refresh_from_db()
    pairs = PreferencePair.objects.filter(reward_model=version, source="rules", status="pair")
    assert pairs.count() == 2 and {p.chosen_id for p in pairs} | {
        p.rejected_id for p in pairs
    } == set(shared)
    assert snapshot.counts["pairs"] == 2 and snapshot.counts["pairs_built"] == 2
    rows = _rows(snapshot)
    assert len(rows) == 2 and {"prompt", "chosen", "rejected"} <= set(rows[0])
    assert "preference pairs: 2 from 4 scored trajectories (2 new)" in job.log_tail

    # 2. pairs exist, but none joins two selected trajectories: the job says so, not "widen the
    #    filters", and its page offers to export again building them first
    other_snapshot = services.snapshot_create(
        name="dpo-other", kind="dpo", reward_model=version, query={"task": "fix-total-other"}
    )
    job = _wait(other_snapshot)
    assert job.status == JobStatus.FAILED
    assert "No preference pair of reward-model version" in job.error
    assert (
        "joins two of the 2 selected trajectories (the version has 2 pair(s) in all)" in job.error
    )
    assert "Export again with “Build preference pairs first” ticked" in job.error
    assert "widen the filters" not in job.error
    page = html.unescape(
        operator_client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    )
    again = reverse("datasets:new") + f"?again={other_snapshot.pk}"
    assert f'href="{again}" data-testid="dpo-retry"' in page
    assert f'href="{reverse("rewards:pairs")}"' in page
    form = html.unescape(operator_client.get(again).content.decode())
    assert 'name="name" value="dpo-other-2"' in form and 'value="fix-total-other"' in form
    retried = operator_client.post(
        again,
        {
            "name": "dpo-other-2", "kind": "dpo", "reward_model": version.pk,
            "label_source": "model", "task": "fix-total-other", "seed": 0,
            "build_pairs": "on", "pair_method": "outside_in", "min_margin": "0",
        },
    )  # fmt: skip
    assert retried.status_code == 302
    job = _wait(DatasetSnapshot.objects.get(name="dpo-other-2"))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert pairs.filter(chosen_id__in=other, rejected_id__in=other).count() == 1

    # 3. nothing scored in the selection: building pairs says to score first
    unscored = services.snapshot_create(
        name="dpo-unscored", kind="dpo", reward_model=version, query={"task": "unscored"},
        build_pairs={"method": "outside_in", "min_margin": 0},
    )  # fmt: skip
    job = _wait(unscored)
    assert job.status == JobStatus.FAILED
    assert "None of the 1 selected trajectories has a total from reward-model version" in job.error
    assert "score them with that version first" in job.error

"""Applying a calibration: a new reward-model version, and a re-scoring job on a real worker
that leaves the old version's scores as they were."""

from __future__ import annotations

import json

import pytest

from tests.conftest import wait_for
from tests.workers.test_scoring_job import _coding_trajectory, _import
from webapp.calibration import services
from webapp.calibration.models import StepLabel
from webapp.jobs.models import Job, JobStatus
from webapp.rewards import services as rewards
from webapp.rewards.models import RewardModel, StepScore, TrajectoryScore

pytestmark = [pytest.mark.worker]


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


def test_apply_creates_a_version_and_rescoring_leaves_old_scores_intact(
    celery_worker, operator, make_user
):
    from webapp.accounts.models import Role

    rewards.rubrics_seed(domain="coding")
    ids = _import(
        *[
            _coding_trajectory(f"cal{i}", repeat_read=i % 2 == 0, success=i % 3 != 0)
            for i in range(6)
        ]
    )
    old = rewards.reward_model_create(domain="coding", note="rules")
    run = rewards.scoring_launch(reward_model=old, trajectory_ids=ids)
    job = wait_for(lambda: _finished(run.job_id), timeout=60, what="first scoring")
    assert job.status == JobStatus.SUCCEEDED, job.error
    before = {
        (s.trajectory_id, s.index): (s.total, json.dumps(s.rubrics, sort_keys=True))
        for s in StepScore.objects.filter(reward_model=old)
    }
    # people are harsher than the rules: a monotone distortion of the rule totals
    queue = services.queue_create(name="cal", trajectory_ids=ids)
    annotator = make_user(Role.ANNOTATOR)
    for item in queue.items.all():
        for score in StepScore.objects.filter(reward_model=old, trajectory_id=item.trajectory_id):
            if score.total is None:
                continue
            StepLabel.objects.create(
                item=item,
                annotator=annotator,
                trajectory_id=item.trajectory_id,
                index=score.index,
                value=round(score.total**3, 3),
            )
    queue.items.update(completed=1)  # submitted: settled labels, what a calibration fits on
    calibration = services.calibration_fit(reward_model=old, user=operator)
    assert calibration.labels == len(before)
    services.calibration_apply(calibration=calibration, user=operator)
    calibration.refresh_from_db()
    new = calibration.applied_as
    assert new.version == old.version + 1 and new.parent_id == old.pk
    assert new.calibration["isotonic"] == calibration.result["isotonic"]
    assert RewardModel.objects.filter(domain="coding").count() == 2
    job = wait_for(
        lambda: _finished(calibration.rescoring_run.job_id), timeout=60, what="re-scoring"
    )
    assert job.status == JobStatus.SUCCEEDED, job.error
    after_old = {
        (s.trajectory_id, s.index): (s.total, json.dumps(s.rubrics, sort_keys=True))
        for s in StepScore.objects.filter(reward_model=old)
    }
    assert after_old == before  # untouched
    assert TrajectoryScore.objects.filter(reward_model=new).count() == len(ids)
    new_totals = {
        (s.trajectory_id, s.index): s.total for s in StepScore.objects.filter(reward_model=new)
    }
    # the calibrated totals are closer to the people than the old ones
    labels = {(lb.trajectory_id, lb.index): lb.value for lb in StepLabel.objects.all()}
    old_error = sum(abs(before[k][0] - v) for k, v in labels.items()) / len(labels)
    new_error = sum(abs(new_totals[k] - v) for k, v in labels.items()) / len(labels)
    assert new_error < old_error

"""A pipeline with a calibrate stage on a real Celery worker: the simulated annotator labels the
iteration's training trajectories through a queue, a calibration is fitted on those labels and
applied as a new reward-model version, the iteration is re-scored with it, and the GRPO dataset
is built from the new version's scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse

from tests.conftest import wait_for
from tests.workers.test_evaluation_pipeline import _finished, _task_set
from trainer_core.calibration.simulated import simulate_labels
from webapp.accounts.models import Role
from webapp.calibration.models import AnnotationQueue, StepLabel, Submission
from webapp.calibration.services import SIMULATED_USERNAME
from webapp.evaluation.models import PipelineStage
from webapp.evaluation.services import pipeline_launch
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.names import Kinds
from webapp.rewards.models import StepScore, TrajectoryScore
from webapp.rewards.services import reward_model_create, rubrics_seed
from webapp.rollouts.models import Policy
from webapp.training.selectors import dataset_train_path
from webapp.trajectories.models import Step, Trajectory
from webapp.trajectories.selectors import collected_ids, trajectory_specs

pytestmark = [pytest.mark.worker]

CALIBRATED_PIPELINE = """
baseline: false
evaluate: {samples_per_task: 1, max_steps: 2, concurrency: 1}
iterations:
- collect: {policy: noisy, episodes_per_task: 3, max_steps: 6}
  calibrate: {annotator: simulated, error_rate: 0.1, trajectories: 10, seed: 4}
  dataset: {kind: grpo}
  train: {method: grpo, values: {max_steps: 1, batch_size: 1}}
"""


def _launch(name: str):
    from django.conf import settings

    from trainer_core.training.tiny import build_tiny_model

    model_dir = build_tiny_model(
        settings.STEPLAB_DATA_DIR / "models" / f"tiny-{name}", hidden_size=32, num_layers=1
    )
    base = Policy.objects.create(
        name=f"tiny-{name}",
        kind="local",
        model=str(model_dir),
        parameters={"model_dir": str(model_dir), "temperature": 0.0, "max_new_tokens": 16},
    )
    # a scripted policy that leaves the reference path now and then: good and bad steps
    Policy.objects.create(
        name="noisy",
        kind="scripted",
        parameters={"mistakes": {"wrong_tool": 0.3, "bad_params": 0.3, "wrong_answer": 0.3}},
    )
    rubrics_seed(domain="arithmetic")
    reward_model = reward_model_create(domain="arithmetic", note="rules")
    pipeline = pipeline_launch(
        name=name,
        base_policy=base,
        train_task_set=_task_set("train", 4, f"{name}-train"),
        eval_task_set=_task_set("heldout", 1, f"{name}-heldout"),
        reward_model=reward_model,
        config=CALIBRATED_PIPELINE,
    )
    return pipeline, reward_model


def _labels_match_the_annotator(annotation) -> None:
    """Every step label is the simulated annotator's, recorded under its user, and equals what
    the pure annotator gives for that trajectory against its task's reference."""
    queue = annotation.queue
    labelled = {item.trajectory_id for item in queue.items.all()}
    specs = trajectory_specs(ids=sorted(labelled))
    labels = StepLabel.objects.filter(item__queue=queue)
    assert set(labels.values_list("annotator__username", flat=True)) == {SIMULATED_USERNAME}
    assert Submission.objects.filter(item__queue=queue, submitted_at__isnull=False).count() == len(
        labelled
    )
    flipped = 0
    for tid in labelled:
        trajectory = Trajectory.objects.select_related("task").get(pk=tid)
        assert trajectory.task.task_set_id == annotation.task_set_id  # training tasks only
        reference = trajectory.task.data["reference_solution"]
        expected = simulate_labels(specs[tid], reference, error_rate=0.1, seed=4, key=tid)
        given = dict(labels.filter(trajectory_id=tid).values_list("index", "value"))
        assert given == {i: (1.0 if g else 0.0) for i, g in enumerate(expected.given)}
        assert annotation.labels[str(tid)]["truth"] == expected.truth
        flipped += len(expected.flipped)
    assert annotation.summary["flipped"] == flipped


def _dataset_uses(dataset, version) -> None:
    """The GRPO rows carry ``version``'s trajectory totals and step totals."""
    rows = [json.loads(line) for line in Path(dataset_train_path(snapshot=dataset)).open()]
    assert rows
    for row in rows:
        for tid, step_ids, step_rewards, reward in zip(
            row["trajectory_ids"], row["step_ids"], row["step_rewards"], row["rewards"], strict=True
        ):
            assert reward == pytest.approx(
                TrajectoryScore.objects.get(reward_model=version, trajectory_id=tid).total
            )
            index = dict(Step.objects.filter(pk__in=step_ids).values_list("pk", "index"))
            totals = dict(
                StepScore.objects.filter(reward_model=version, trajectory_id=tid).values_list(
                    "index", "total"
                )
            )
            assert step_rewards == pytest.approx([totals[index[s]] for s in step_ids])


@pytest.mark.slow
def test_a_calibrate_stage_fits_simulated_labels_and_the_dataset_uses_the_new_version(
    celery_worker, client, make_user
):
    pipeline, old = _launch("calib")
    job = wait_for(lambda: _finished(pipeline.job_id), timeout=540, what="the pipeline to end")
    assert job.status == JobStatus.SUCCEEDED, job.error
    by = {(r.iteration, r.name): r for r in PipelineStage.objects.filter(pipeline=pipeline)}
    assert [name for _, name in sorted(by, key=lambda k: by[k].pk)] == [
        "collect",
        "score",
        "calibrate",
        "dataset",
        "train",
        "register",
        "evaluate",
    ]
    calibrate = by[(1, "calibrate")].job
    assert calibrate.kind == Kinds.CALIBRATE_SIMULATED and calibrate.status == JobStatus.SUCCEEDED
    assert calibrate.parent_id == pipeline.job_id
    annotation = calibrate.simulated_annotation
    assert annotation.queue.source == AnnotationQueue.Source.SIMULATED
    assert annotation.queue.items.count() == 10  # capped at calibrate.trajectories
    _labels_match_the_annotator(annotation)

    # the calibration was fitted on exactly the simulated labels, and applied as a new version
    calibration = annotation.calibration
    labelled_steps = StepLabel.objects.filter(item__queue=annotation.queue).count()
    assert calibration.reward_model_id == old.pk and calibration.labels == labelled_steps
    new = calibration.applied_as
    assert new.parent_id == old.pk and new.calibration == calibration.result
    rescoring = calibration.rescoring_run
    assert rescoring.job.parent_id == calibrate.pk and rescoring.job.status == JobStatus.SUCCEEDED
    collected = collected_ids(collect_run_id=by[(1, "collect")].collect_run_id)
    assert sorted(rescoring.trajectory_ids) == sorted(collected)  # the whole iteration
    assert TrajectoryScore.objects.filter(reward_model=new).count() == len(collected)

    # the GRPO dataset was built from the calibrated version's scores, which differ
    dataset = by[(1, "dataset")].dataset
    assert dataset.reward_model_id == new.pk and dataset.kind == "grpo"
    _dataset_uses(dataset, new)
    old_totals = {
        (s.trajectory_id, s.index): s.total for s in StepScore.objects.filter(reward_model=old)
    }
    new_totals = {
        (s.trajectory_id, s.index): s.total for s in StepScore.objects.filter(reward_model=new)
    }
    assert set(old_totals) == set(new_totals)  # the old version's scores are kept
    changed = [k for k in new_totals if new_totals[k] != old_totals[k]]
    assert changed, "calibrating changed no step score"
    assert annotation.summary["auroc_after"] is not None
    assert calibrate.result["new_reward_model"] == new.pk

    # the pages say where the labels came from
    client.force_login(make_user(Role.OPERATOR))
    page = client.get(reverse("evaluation:pipeline", args=[pipeline.pk])).content.decode()
    assert 'data-stage="calibrate"' in page and "simulated annotator" in page
    assert new.label in page
    queue_page = client.get(reverse("calibration:queue", args=[annotation.queue_id]))
    assert b'data-testid="simulated-provenance"' in queue_page.content
    fitted = client.get(reverse("calibration:fitted", args=[calibration.pk]))
    assert b'data-testid="simulated-provenance"' in fitted.content
    job_page = client.get(reverse("jobs:detail", args=[calibrate.pk]))
    assert b"simulated annotator" in job_page.content
    assert Job.objects.filter(parent_id=pipeline.job_id).count() == 6  # register is inline

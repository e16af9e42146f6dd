"""The simulated annotator in the database: its labels go through the queue services under its
own user, a resumed pass labels nothing twice, held-out trajectories are refused, and the AUROC of
a version's step totals against its truth."""

from __future__ import annotations

import pytest

from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Step, TaskRef, Trajectory
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.calibration import selectors, services
from webapp.calibration.models import AnnotationQueue, LabelEdit, StepLabel, Submission
from webapp.common.errors import ApplicationError
from webapp.jobs.names import Kinds
from webapp.rewards.models import StepScore
from webapp.rewards.services import reward_model_create, rubrics_seed
from webapp.tasks.models import Task
from webapp.tasks.services import task_set_import
from webapp.trajectories import services as store
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.django_db]


def _played(task, calls: list[tuple[str, dict]], episode: int) -> Trajectory:
    return Trajectory(
        task=TaskRef(id=task.external_id, domain="arithmetic", prompt=task.prompt),
        environment="steplab/arithmetic",
        steps=[
            Step(index=i, tool=t, params=p, observation=f"episode {episode}")
            for i, (t, p) in enumerate(calls)
        ],
    )


def _import(split: str, episodes) -> tuple[object, list[int]]:
    """A task set of ``split`` and trajectories of its first task linked to it."""
    task_set, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks(split, n=1)), name=f"arith-{split}"
    )
    task = Task.objects.get(task_set=task_set)
    ref = task.data["reference_solution"]
    calls = {
        "on_path": [(c["tool"], c["params"]) for c in ref],
        "wrong_tool": [("calculator_v2", ref[0]["params"])]
        + [(c["tool"], c["params"]) for c in ref],
        "wrong_answer": [(ref[0]["tool"], ref[0]["params"]), ("submit", {"answer": "-1"})],
    }
    ids = store.trajectories_import(
        results=[
            ImportResult(
                "sim.jsonl",
                "test",
                "1",
                [_played(task, calls[e], n) for n, e in enumerate(episodes)],
            )
        ]
    ).created
    TrajectoryRow.objects.filter(pk__in=ids).update(task=task)
    return task_set, ids


def _launch(task_set, ids, **options):
    rubrics_seed(domain="arithmetic")
    version = reward_model_create(domain="arithmetic")
    return services.simulated_calibration_launch(
        name="sim", reward_model=version, trajectory_ids=ids, task_set=task_set, **options
    )


def test_labels_go_through_the_queue_under_the_simulated_annotators_name():
    task_set, ids = _import("train", ["on_path", "wrong_tool", "wrong_answer"])
    annotation = _launch(task_set, ids, error_rate=0.0, seed=1)
    assert annotation.job.kind == Kinds.CALIBRATE_SIMULATED
    assert services.simulated_label(annotation=annotation) == 3
    queue = annotation.queue
    assert queue.source == AnnotationQueue.Source.SIMULATED and queue.scale_points == 2
    assert "simulated annotator" in queue.guidelines and "reference" in queue.guidelines
    labels = {
        (label.trajectory_id, label.index): label.value
        for label in StepLabel.objects.filter(item__queue=queue)
    }
    on_path, wrong_tool, wrong_answer = ids
    assert labels == {
        (on_path, 0): 1.0,
        (on_path, 1): 1.0,
        (wrong_tool, 0): 0.0,  # the deviation and every later step are bad
        (wrong_tool, 1): 0.0,
        (wrong_tool, 2): 0.0,
        (wrong_answer, 0): 1.0,
        (wrong_answer, 1): 0.0,
    }
    annotators = set(
        StepLabel.objects.filter(item__queue=queue).values_list("annotator__username", flat=True)
    )
    assert annotators == {services.SIMULATED_USERNAME}
    user = services.simulated_annotator_user()
    assert not user.is_active and not user.has_usable_password()
    edits = LabelEdit.objects.filter(item__queue=queue, field="step")
    assert edits.count() == 7 and all("simulated annotator" in e.reason for e in edits)
    # a resumed job labels nothing twice
    assert services.simulated_label(annotation=annotation) == 0
    assert Submission.objects.filter(item__queue=queue).count() == 3
    assert LabelEdit.objects.filter(item__queue=queue, field="step").count() == 7


def test_error_rate_one_flips_every_label_and_the_cap_is_kept():
    task_set, ids = _import("train", ["on_path"] * 3 + ["wrong_answer"] * 3)
    assert len(ids) == 6, ids
    annotation = _launch(task_set, ids, error_rate=1.0, seed=2, max_trajectories=4, max_steps=1)
    services.simulated_label(annotation=annotation)
    assert annotation.queue.items.count() == 4
    for entry in annotation.labels.values():
        assert entry["index"] == [0] and entry["truth"] == [True]  # only the first step
        assert entry["given"] == [False]
    assert set(
        StepLabel.objects.filter(item__queue=annotation.queue).values_list("value", flat=True)
    ) == {0.0}


def test_held_out_trajectories_are_refused():
    task_set, ids = _import("heldout", ["on_path"])
    annotation = _launch(task_set, ids)
    with pytest.raises(ApplicationError, match="training trajectories only"):
        services.simulated_label(annotation=annotation)
    assert annotation.queue_id is None


def test_too_few_labels_to_fit_say_what_to_do():
    task_set, ids = _import("train", ["on_path", "wrong_answer"])
    annotation = _launch(task_set, ids)
    services.simulated_label(annotation=annotation)
    with pytest.raises(ApplicationError, match=r"needs at least 20\. Queue more trajectories"):
        services.simulated_fit_apply(annotation=annotation)


def test_auroc_of_a_versions_step_totals_against_the_truth():
    task_set, ids = _import("train", ["on_path", "wrong_tool"])
    annotation = _launch(task_set, ids)
    on_path, wrong_tool = ids
    totals = {(on_path, 0): 0.9, (on_path, 1): 0.6, (wrong_tool, 0): 0.2}  # step 1, 2 unscored
    for (tid, index), total in totals.items():
        StepScore.objects.create(
            reward_model=annotation.reward_model, trajectory_id=tid, index=index, total=total
        )
    truth = selectors.reference_truth(trajectory_ids=ids)
    assert truth[str(wrong_tool)]["truth"] == [False, False, False]
    figures = selectors.truth_auroc(reward_model=annotation.reward_model, labels=truth)
    assert figures == {"auroc": 1.0, "steps": 3, "good": 2, "bad": 1}
    StepScore.objects.filter(trajectory_id=wrong_tool).update(total=0.6)
    figures = selectors.truth_auroc(reward_model=annotation.reward_model, labels=truth)
    assert figures["auroc"] == pytest.approx(0.75)  # 0.9 > 0.6, 0.6 = 0.6 counts a half

"""Evaluation runs and pipelines on real Celery workers: an evaluation's statistics, a small
two-iteration pipeline (SFT then GRPO on a tiny local model), and a pipeline whose worker is
SIGKILLed in the middle of a stage and resumes with no stage run twice."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.conftest import wait_for
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.evaluation import services as evaluation
from webapp.evaluation.models import EvaluationRun, PipelineStage
from webapp.evaluation.pipeline_config import ITERATION_STAGES
from webapp.evaluation.services import pipeline_launch
from webapp.jobs.models import Job, JobStatus
from webapp.rewards.services import reward_model_create, rubrics_seed
from webapp.rollouts.models import Policy
from webapp.tasks.services import task_set_import
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.worker]

SMALL_PIPELINE = """
baseline: true
evaluate: {samples_per_task: 1, max_steps: 3, concurrency: 1}
iterations:
- collect: {policy: scripted, episodes_per_task: 2, max_steps: 4}
  dataset: {kind: sft, outcome: success}
  train: {method: sft, values: {max_steps: 30, batch_size: 2, save_every: 10}}
- collect: {policy: current, episodes_per_task: 2, max_steps: 3, temperature: 1.0}
  dataset: {kind: grpo}
  train: {method: grpo, values: {max_steps: 2, batch_size: 1}}
"""


def _task_set(split: str, n: int, name: str):
    task_set, _ = task_set_import(text=dump_tasks_jsonl(arithmetic_tasks(split, n=n)), name=name)
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    return task_set


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


@pytest.mark.slow
def test_an_evaluation_run_plays_k_samples_and_summarises(celery_worker):
    Policy.objects.create(name="scripted", kind="scripted")
    noisy = Policy.objects.create(
        name="noisy", kind="scripted", parameters={"mistakes": {"wrong_answer": 0.5}}
    )
    task_set = _task_set("heldout", 4, "held-4")
    run = evaluation.evaluation_launch(
        policy=noisy, task_set=task_set, samples_per_task=3, max_steps=6, seed=3
    )
    job = wait_for(lambda: _finished(run.job_id), timeout=120, what="evaluation job")
    assert job.status == JobStatus.SUCCEEDED, job.error
    run = EvaluationRun.objects.get(pk=run.pk)
    m = run.metrics
    assert m["n"] == 12 and m["tasks"] == 4 and m["k"] == 3
    successes = run.collect_run.episodes.filter(success=True).count()
    assert m["successes"] == successes and 0 < successes < 12  # wrong half the time
    assert m["success_low"] <= m["success_rate"] <= m["success_high"]
    assert set(m["pass_at_k"]) == {"1", "2", "3"}
    assert m["pass_at_k"]["1"] == pytest.approx(m["success_rate"])
    assert m["pass_at_k"]["3"] >= m["pass_at_k"]["1"] >= m["pass_hat_k"]["3"]
    # the collect run is the evaluation job's child: one job tree
    assert run.collect_run.job.parent_id == run.job_id


def _small_pipeline(tmp_path, name: str):
    from trainer_core.training.tiny import build_tiny_model

    # models are read only from the model roots: Steplab's data directory here
    model_dir = build_tiny_model(
        settings.STEPLAB_DATA_DIR / "models" / f"tiny-{name}", hidden_size=64, num_layers=2
    )
    base = Policy.objects.create(
        name=f"tiny-{name}",
        kind="local",
        model=str(model_dir),
        parameters={
            "model_dir": str(model_dir),
            "temperature": 0.0,
            "max_new_tokens": 24,
            "system": "Use the calculator.",
            "list_tools": False,
        },
    )
    Policy.objects.get_or_create(name="scripted", kind="scripted")
    rubrics_seed(domain="arithmetic")
    reward_model = reward_model_create(domain="arithmetic")
    return pipeline_launch(
        name=name,
        base_policy=base,
        train_task_set=_task_set("train", 3, f"{name}-train"),
        eval_task_set=_task_set("heldout", 2, f"{name}-heldout"),
        reward_model=reward_model,
        config=SMALL_PIPELINE,
    )


def _episodes_report(pipeline) -> str:
    lines = []
    for row in PipelineStage.objects.filter(pipeline=pipeline, name="collect"):
        for e in row.collect_run.episodes.select_related("trajectory"):
            status = e.trajectory.status if e.trajectory else None
            lines.append(f"i{row.iteration} {e.task_id}/{e.index} {e.status} {status} {e.error}")
        for child in Job.objects.filter(parent_id=row.collect_run.job_id):
            lines.append(f"  child {child.pk} {child.status} {child.error[:300]}")
    return "\n".join(lines)


def _assert_complete(pipeline) -> None:
    rows = list(PipelineStage.objects.filter(pipeline=pipeline))
    expected = {(0, "baseline")} | {(i, s) for i in (1, 2) for s in ITERATION_STAGES}
    assert {(r.iteration, r.name) for r in rows} == expected, "every stage, each once"
    with_jobs = [r for r in rows if r.job_id]
    children = Job.objects.filter(parent_id=pipeline.job_id)
    assert sorted(children.values_list("pk", flat=True)) == sorted(r.job_id for r in with_jobs)
    assert set(children.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    by = {(r.iteration, r.name): r for r in rows}
    # iteration 1 trains from the base model, iteration 2 from iteration 1's checkpoint
    first, second = by[(1, "train")].training_run, by[(2, "train")].training_run
    assert first.base_checkpoint is None and second.base_checkpoint is not None
    assert second.base_checkpoint.policy_id == by[(1, "register")].policy_id
    assert second.method == "grpo" and by[(2, "dataset")].dataset.kind == "grpo"
    assert second.config["group_size"] == 2  # every collected sample of a task, by default
    # iteration 2 collected with the SFT policy at temperature 1
    assert by[(2, "collect")].policy.parameters["temperature"] == 1.0
    assert by[(2, "collect")].policy.parameters["model_dir"] == second.base_checkpoint.path
    # every registered policy is prompted like the starting one, and trained on that prompt
    for it in (1, 2):
        params = by[(it, "register")].policy.parameters
        assert params["list_tools"] is False and params["system"] == "Use the calculator."
    import json
    from pathlib import Path

    from webapp.training.selectors import dataset_train_path

    first_row = json.loads(
        Path(dataset_train_path(snapshot=by[(1, "dataset")].dataset)).read_text().splitlines()[0]
    )
    assert first_row["messages"][0] == {"role": "system", "content": "Use the calculator."}
    # the reference trajectories of iteration 1: 3 tasks x 2 episodes, stored once each
    collect = by[(1, "collect")].collect_run
    assert Trajectory.objects.filter(metadata__collect_run=collect.pk).count() == 6
    for key in ((0, "baseline"), (1, "evaluate"), (2, "evaluate")):
        assert by[key].evaluation.metrics["n"] == 2


@pytest.mark.slow
def test_a_two_iteration_pipeline_survives_a_sigkill_mid_stage(worker_factory, tmp_path):
    pipeline = _small_pipeline(tmp_path, "kill")
    doomed = worker_factory("doomed")

    def training_mid_way():
        ended = _finished(pipeline.job_id)
        assert ended is None, f"the pipeline ended early: {ended.status} {ended.error}"
        row = PipelineStage.objects.filter(pipeline=pipeline, iteration=1, name="train").first()
        return row is not None and Job.objects.get(pk=row.job_id).progress > 0.1

    wait_for(training_mid_way, timeout=240, interval=0.05, what="iteration 1 training running")
    finished_before = {
        (r.iteration, r.name): Job.objects.get(pk=r.job_id).attempts
        for r in PipelineStage.objects.filter(pipeline=pipeline).exclude(job=None)
        if Job.objects.get(pk=r.job_id).status == JobStatus.SUCCEEDED
    }
    assert {(1, "collect"), (1, "score"), (1, "dataset")} <= set(finished_before)
    doomed.kill()  # SIGKILL: main process and pool
    assert not _finished(pipeline.job_id)
    worker_factory("rescuer")
    job = wait_for(lambda: _finished(pipeline.job_id), timeout=480, what="pipeline to end")
    assert job.status == JobStatus.SUCCEEDED, f"{job.error}\n{_episodes_report(pipeline)}"
    _assert_complete(pipeline)
    for (it, name), attempts in finished_before.items():
        row = PipelineStage.objects.get(pipeline=pipeline, iteration=it, name=name)
        assert Job.objects.get(pk=row.job_id).attempts == attempts, f"{it}:{name} ran again"
    train = PipelineStage.objects.get(pipeline=pipeline, iteration=1, name="train").job
    assert train.attempts >= 2, "the killed training was resumed"
    curve = job.result["curve"]
    assert [p["label"] for p in curve] == ["start", "iteration 1 (SFT)", "iteration 2 (GRPO)"]


DPO_PIPELINE = """
baseline: false
evaluate: {samples_per_task: 1, max_steps: 3, concurrency: 1}
iterations:
- collect: {policy: noisy-half, episodes_per_task: 4, max_steps: 4}
  dataset: {kind: dpo}
  train: {method: dpo, values: {max_steps: 2, batch_size: 1}}
"""


@pytest.mark.slow
def test_a_pipeline_iteration_trains_dpo_on_pairs_of_its_own_samples(tmp_path, celery_worker):
    """A DPO iteration builds its preference pairs among the samples it collected (by the
    reward-model version's totals) in its dataset job, instead of failing for want of pairs."""
    from trainer_core.training.tiny import build_tiny_model

    model_dir = build_tiny_model(
        settings.STEPLAB_DATA_DIR / "models" / "tiny-dpo", hidden_size=32, num_layers=1
    )
    base = Policy.objects.create(
        name="tiny-dpo", kind="local", model=str(model_dir),
        parameters={"model_dir": str(model_dir), "temperature": 0.0, "max_new_tokens": 16},
    )  # fmt: skip
    Policy.objects.create(
        name="noisy-half", kind="scripted", parameters={"mistakes": {"wrong_answer": 0.5}}
    )
    rubrics_seed(domain="arithmetic")
    pipeline = pipeline_launch(
        name="dpo-pipeline",
        base_policy=base,
        train_task_set=_task_set("train", 3, "dpo-train"),
        eval_task_set=_task_set("heldout", 2, "dpo-heldout"),
        reward_model=reward_model_create(domain="arithmetic"),
        config=DPO_PIPELINE,
    )
    job = wait_for(lambda: _finished(pipeline.job_id), timeout=300, what="DPO pipeline")
    assert job.status == JobStatus.SUCCEEDED, job.error
    dataset = PipelineStage.objects.get(pipeline=pipeline, iteration=1, name="dataset").dataset
    assert dataset.kind == "dpo" and dataset.counts["train"] > 0
    training = PipelineStage.objects.get(pipeline=pipeline, iteration=1, name="train").training_run
    assert training.method == "dpo"

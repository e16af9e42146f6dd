"""A pipeline's reward-hacking flags (issue 21): its GRPO run's process reward rising while the
held-out success from the evaluation before the iteration to the one after stays flat fires
``process_vs_outcome`` with the held-out success named; with held-out success improving, the
samples' own flat success still flags it (either outcome flat is enough), naming only that one."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from tests.webapp.training.flag_runs import build_run
from webapp.accounts.models import Role
from webapp.api import services as token_services
from webapp.evaluation.flags import pipeline_flags_compute
from webapp.evaluation.models import EvaluationRun, Pipeline, PipelineStage
from webapp.rollouts.models import Policy
from webapp.tasks.models import TaskSet
from webapp.training.models import RunFlag

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _pipeline(before: float, after: float):
    run = build_run(hacked=False, rising=True)
    tag = uuid.uuid4().hex[:8]
    policy = Policy.objects.create(name=f"p-{tag}", kind="scripted")
    tasks = TaskSet.objects.create(name=f"ts-{tag}")
    pipeline = Pipeline.objects.create(
        name=f"pipe-{tag}",
        base_policy=policy,
        train_task_set=tasks,
        eval_task_set=tasks,
        reward_model=run.dataset.reward_model,
        base_model=run.base_model,
        config={"iterations": [{"train": {"method": "grpo"}}]},
    )
    for it, name, success in ((0, "baseline", before), (1, "evaluate", after)):
        evaluation = EvaluationRun.objects.create(
            policy=policy, task_set=tasks, metrics={"success_rate": success}
        )
        PipelineStage.objects.create(
            pipeline=pipeline, iteration=it, name=name, evaluation=evaluation
        )
    PipelineStage.objects.create(pipeline=pipeline, iteration=1, name="train", training_run=run)
    return pipeline, run


def test_process_rising_with_flat_held_out_success_fires_naming_the_flat_outcome():
    pipeline, run = _pipeline(0.60, 0.60)
    results = pipeline_flags_compute(pipeline=pipeline)[f"training run {run.pk}"]
    flag = RunFlag.objects.get(training_run=run, kind="process_vs_outcome")
    assert flag.details["heldout_change"] == 0.0
    assert "held-out success" in flag.details["outcome"]
    assert flag.statistic == "kendall_tau" and flag.p_value < 0.05
    assert [r.fired for r in results if r.kind == "process_vs_outcome"] == [True]

    improved, run2 = _pipeline(0.40, 0.70)
    pipeline_flags_compute(pipeline=improved)
    flag2 = RunFlag.objects.filter(training_run=run2, kind="process_vs_outcome").first()
    # the samples' own success is flat too (one in two each step): that alone still flags it
    assert flag2 is not None and flag2.details["outcome"] == "training success"
    assert flag2.details["heldout_change"] == pytest.approx(0.3)


def test_a_pipelines_flags_over_the_api(client, make_user):
    pipeline, run = _pipeline(0.60, 0.60)
    pipeline_flags_compute(pipeline=pipeline)
    _, secret = token_services.token_create(user=make_user(Role.VIEWER), name="t", scope="full")
    headers = {"Authorization": f"Bearer {secret}"}
    listed = client.get(f"/api/v1/pipelines/{pipeline.pk}/flags", headers=headers).json()
    assert (run.pk, "process_vs_outcome") in [(f["training_run_id"], f["kind"]) for f in listed]
    assert {f["source"] for f in listed} == {"training"}  # its rounds stored no episodes here
    assert client.get("/api/v1/pipelines/999999/flags", headers=headers).status_code == 404


def test_a_pipelines_page_lists_its_flags(client, make_user):
    pipeline, run = _pipeline(0.60, 0.60)
    pipeline_flags_compute(pipeline=pipeline)
    flag = RunFlag.objects.get(training_run=run, kind="process_vs_outcome")
    client.force_login(make_user(Role.VIEWER))
    page = client.get(reverse("evaluation:pipeline", args=[pipeline.pk])).content.decode()
    assert f'href="{reverse("training:flag", args=[flag.pk])}"' in page
    assert f'href="{reverse("training:detail", args=[run.pk])}"' in page
    assert "no-pipeline-flags" not in page
    quiet, quiet_run = _pipeline(0.40, 0.70)
    RunFlag.objects.filter(training_run=quiet_run).delete()
    page = client.get(reverse("evaluation:pipeline", args=[quiet.pk])).content.decode()
    assert "no-pipeline-flags" in page

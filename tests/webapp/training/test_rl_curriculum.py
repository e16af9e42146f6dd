"""An RL run with ``target_pass_rate`` draws its groups' tasks near that pass rate: measured on
every stored episode of a task until the run has played it, then on the run's own groups; a
quarantined task is not in a run launched while it is quarantined (docs/task-health.md)."""

from __future__ import annotations

from collections import Counter

import pytest

from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.jobs.models import Job, JobStatus
from webapp.tasks.services import task_quarantine, task_set_import
from webapp.training import rl_pages, rl_selectors, rl_services
from webapp.training.models import RLRun, SampleGroup, TrainingRun
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_groups_are_drawn_near_the_target_pass_rate():
    task_set, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("train", n=3)), name="rl-curriculum"
    )
    never, half, always = task_set.tasks.order_by("external_id")
    Trajectory.objects.bulk_create(
        Trajectory(task=task, source="rollout", status="finished", success=i < passed)
        for task, passed in ((never, 0), (half, 5), (always, 10))
        for i in range(10)
    )
    training = TrainingRun.objects.create(
        method="grpo", base_model="/m", config={"target_pass_rate": 0.5, "pass_rate_bandwidth": 0.1}
    )
    run = RLRun.objects.create(
        training_run=training, task_set=task_set, environment="steplab/arithmetic", seed=3,
        task_ids=sorted(task_set.tasks.values_list("pk", flat=True)),
    )  # fmt: skip
    job = Job.objects.create(kind="training.rl_sampler", status=JobStatus.RUNNING)
    picked = Counter(
        rl_services.group_claim(run=run, job_id=job.pk, version=0).task_id for _ in range(40)
    )
    assert picked[half.pk] >= 34, picked
    # once the run has played a task, its own groups decide: "always" now reads as half solved
    SampleGroup.objects.filter(run=run).delete()
    SampleGroup.objects.create(
        run=run, index=999, task=always, version=0, status="consumed", episodes=8, success_rate=0.5
    )
    assert rl_selectors.curriculum_counts(run=run, task_ids=run.task_ids)[always.pk] == (4, 8)


def test_a_quarantined_task_is_left_out_of_an_rl_run():
    task_set, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("train", n=2)), name="rl-quarantine"
    )
    first, second = task_set.tasks.order_by("external_id")
    task_quarantine(task=first, user=None, reason="flaky checker")
    ids = rl_services._check_launch(
        task_set=task_set, environment="steplab/arithmetic", samplers=1, sampler_policy=None,
        reward_model=None, values={},
    )  # fmt: skip
    assert ids == [second.pk]


def test_the_rl_launch_form_offers_the_curriculum_with_its_help():
    fields = {f["name"]: f for f in rl_pages.form_fields()}
    assert fields["target_pass_rate"]["default"] == 0.0
    assert "docs/task-health.md" in fields["target_pass_rate"]["help"]
    assert fields["pass_rate_bandwidth"]["group"] == "decoupled"

"""Reusing a finished collect run (a pipeline's ``collect: {reuse: true}``): only a run that
played exactly the same episodes, and across seeds only for a policy that plays deterministically."""

from __future__ import annotations

import pytest

from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts.models import CollectRun, Policy
from webapp.rollouts.selectors import policy_is_deterministic, reusable_collect_run
from webapp.tasks.services import task_set_import

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.fixture
def task_set():
    ts, _ = task_set_import(text=dump_tasks_jsonl(arithmetic_tasks("train", n=3)), name="arith-3")
    ts.environment = "steplab/arithmetic"
    ts.save()
    return ts


def _run(policy, task_set, *, seed=1, status=JobStatus.SUCCEEDED, done=3, **fields) -> CollectRun:
    job = Job.objects.create(kind="rollouts.collect", status=status, celery_task_id="t")
    values = {
        "policy": policy,
        "task_set": task_set,
        "environment": task_set.environment,
        "episodes_per_task": 1,
        "max_steps": 4,
        "seed": seed,
        "episodes_total": 3,
        "episodes_done": done,
        "job": job,
    }
    values.update(fields)
    return CollectRun.objects.create(**values)


def _find(policy, task_set, *, seed=2, episodes=1, max_steps=4):
    return reusable_collect_run(
        policy=policy,
        task_set=task_set,
        episodes_per_task=episodes,
        max_steps=max_steps,
        seed=seed,
    )


def test_which_policies_play_the_same_episodes_whatever_the_seed():
    def policy(kind, **parameters):
        return Policy(name="p", kind=kind, parameters=parameters)

    assert policy_is_deterministic(policy=policy("scripted"))
    assert policy_is_deterministic(policy=policy("scripted", mistakes={"wrong_answer": 0}))
    assert not policy_is_deterministic(policy=policy("scripted", mistakes={"wrong_answer": 0.1}))
    assert policy_is_deterministic(policy=policy("local", temperature=0.0))
    assert not policy_is_deterministic(policy=policy("local", temperature=1.0))
    assert not policy_is_deterministic(policy=policy("local"))  # the default samples at 0.7
    assert not policy_is_deterministic(policy=policy("anthropic", temperature=0.0))


def test_a_deterministic_policys_finished_run_is_reused_whatever_its_seed(task_set):
    scripted = Policy.objects.create(name="scripted", kind="scripted")
    run = _run(scripted, task_set, seed=1)
    assert _find(scripted, task_set, seed=2) == run
    assert _find(scripted, task_set, episodes=2) is None, "other episode counts are other runs"
    assert _find(scripted, task_set, max_steps=6) is None


def test_a_sampling_policys_run_is_reused_only_at_the_same_seed(task_set):
    sampler = Policy.objects.create(name="m", kind="local", parameters={"temperature": 1.0})
    run = _run(sampler, task_set, seed=1)
    assert _find(sampler, task_set, seed=2) is None
    assert _find(sampler, task_set, seed=1) == run


def test_unfinished_failed_or_stopped_runs_are_never_reused(task_set):
    scripted = Policy.objects.create(name="scripted", kind="scripted")
    _run(scripted, task_set, status=JobStatus.RUNNING)
    _run(scripted, task_set, status=JobStatus.FAILED)
    _run(scripted, task_set, done=2)  # an episode skipped
    _run(scripted, task_set, stop_reason="spend cap reached")
    assert _find(scripted, task_set) is None

"""A branch job whose worker died mid-continuation resumes safely: the continuation it was
playing starts over under its idempotency key (same trajectory, each step stored once), the
finished ones are kept, and the set closes with its value (the job's runner, run here)."""

from __future__ import annotations

import pytest

from tests.workers.test_branch_job import _parent
from webapp.jobs.context import JobContext
from webapp.jobs.services import job_start
from webapp.rollouts import branch_services
from webapp.rollouts.branch_jobs import branch_run
from webapp.rollouts.models import BranchContinuation, Policy
from webapp.trajectories import services as store
from webapp.trajectories.models import Step, Trajectory

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_a_resumed_branch_job_plays_the_interrupted_continuation_over_once():
    parent = _parent()
    policy = Policy.objects.create(name="scripted", kind="scripted")
    branch_set = branch_services.branch_launch(
        trajectory=parent, step=2, policy=policy, samples=2, max_steps=4
    )
    # the first attempt died while playing continuation 0: it had stored one bogus step
    first = branch_set.continuations.get(number=0)
    crashed = branch_services.continuation_begin(branch_set=branch_set, continuation=first)
    store.trajectory_append_steps(trajectory=crashed, steps=[_bogus()])
    job = job_start(job_id=branch_set.job_id, task_id=None, worker="test")
    branch_run(ctx=JobContext(job, worker="test"))

    continuations = list(branch_set.continuations.order_by("number"))
    assert [c.status for c in continuations] == ["finished", "finished"]
    assert continuations[0].trajectory_id == crashed.pk  # the same trajectory, started over
    assert Trajectory.objects.filter(metadata__branch_set=branch_set.pk).count() == 2
    for continuation in continuations:
        steps = list(Step.objects.filter(trajectory_id=continuation.trajectory_id))
        indexes = [s.index for s in steps]
        assert sorted(indexes) == list(range(len(indexes))), "each step stored once"
        assert [s.tool for s in sorted(steps, key=lambda s: s.index)] == [
            "read_file",
            "edit_file",
            "bash",
            "submit",
        ]
    branch_set.refresh_from_db()
    assert branch_set.value == 1.0 and branch_set.known == 2 and branch_set.pairs == []
    assert BranchContinuation.objects.filter(branch_set=branch_set).count() == 2


def _bogus():
    from trainer_core.recording.schema import Step as StepSpec

    return StepSpec(index=0, tool="bash", params={"command": "half-done"}, observation="…")

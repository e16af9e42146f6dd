"""The database store of decoupled RL runs (issue 19): group indexes claimed once each, a dead
sampler's group played again under its index, the trainer taking ready groups in arrival order,
settling them, and a resumed trainer putting back exactly the groups after its checkpoint;
versions published without a gap; samplers waiting while the queue is full (decoupled) or while
the trainer has the newest version's groups (synchronous)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from trainer_core.training.data import Encoded
from trainer_core.training.episodes import Completion, Group
from webapp.jobs.models import Job, JobStatus
from webapp.tasks.services import task_set_import
from webapp.training import rl_selectors, rl_services
from webapp.training.models import RLRun, SampleGroup, TrainingRun

pytestmark = [pytest.mark.django_db]


def _run(n_tasks: int = 3, *, seed: int = 5, max_queue: int = 0) -> RLRun:
    task_set, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("train", n=n_tasks)), name=f"arith-rl-{seed}"
    )
    training = TrainingRun.objects.create(method="grpo", base_model="/models/x", config={})
    return RLRun.objects.create(
        training_run=training,
        task_set=task_set,
        task_ids=sorted(task_set.tasks.values_list("pk", flat=True)),
        environment="steplab/arithmetic",
        seed=seed,
        max_queue=max_queue,
    )


def _group(reward: float = 1.0) -> Group:
    completion = Completion(Encoded([1, 2, 3], [-100, 2, 3], [-1, 0, 0], [1.0] * 3), reward, [None])
    completion.behaviour_logprobs = [0.0, -0.5, -0.25]
    return Group([completion, completion], key="t")


def _sampler_job() -> Job:
    return Job.objects.create(kind="training.rl_sampler", status=JobStatus.RUNNING)


def _ready(run: RLRun, job: Job, version: int = 0) -> SampleGroup:
    row = rl_services.group_claim(run=run, job_id=job.pk, version=version)
    assert rl_services.group_store(
        run=run, row=row, job_id=job.pk, group=_group(), trajectory_ids=[]
    )
    return row


def test_each_index_is_claimed_once_and_every_task_is_played_once_per_pass():
    run = _run(n_tasks=3)
    job = _sampler_job()
    rows = [rl_services.group_claim(run=run, job_id=job.pk, version=0) for _ in range(6)]
    assert [r.index for r in rows] == list(range(6))
    assert sorted(r.task_id for r in rows[:3]) == sorted(run.task_ids)
    assert sorted(r.task_id for r in rows[3:]) == sorted(run.task_ids)
    assert len({r.seed for r in rows}) == 6
    # the order is a function of the run seed and the index
    assert [rl_selectors.group_task(run=run, index=i)[0] for i in range(6)] == [
        r.task_id for r in rows
    ]


def test_a_dead_samplers_group_is_played_again_under_its_index_by_the_next_claim():
    run = _run()
    dead, other = _sampler_job(), _sampler_job()
    first = rl_services.group_claim(run=run, job_id=dead.pk, version=0)
    # the resumed attempt releases what it was playing; the next claim (any sampler) takes it
    assert rl_services.groups_release(run=run, job_id=dead.pk) == 1
    again = rl_services.group_claim(run=run, job_id=other.pk, version=3)
    assert (again.pk, again.index, again.seed, again.version) == (first.pk, 0, first.seed, 3)
    # the dead attempt's late store is refused: the group is no longer its own
    assert not rl_services.group_store(
        run=run, row=first, job_id=dead.pk, group=_group(), trajectory_ids=[]
    )
    # a sampler job that ended for good leaves its group to the others as well
    left = rl_services.group_claim(run=run, job_id=dead.pk, version=0)
    Job.objects.filter(pk=dead.pk).update(status=JobStatus.FAILED)
    assert rl_services.groups_release_abandoned(run=run) == 1
    assert rl_services.group_claim(run=run, job_id=other.pk, version=3).pk == left.pk
    assert RLRun.objects.get(pk=run.pk).next_index == 2


def test_the_trainer_takes_in_arrival_order_settles_and_a_resume_releases_after_its_step():
    run = _run()
    job = _sampler_job()
    rows = [_ready(run, job, version=v) for v in (0, 0, 1, 1, 1)]
    source = rl_services.DbGroupSource(run)
    taken = source.take(2, timeout=0)
    assert [g.id for g in taken] == [rows[0].pk, rows[1].pk]
    assert [g.version for g in taken] == [0, 0]
    assert taken[0].completions[0].behaviour_logprobs == [0.0, -0.5, -0.25]
    source.settle(1, 1, [taken[0]], [taken[1]])
    second = source.take(3, timeout=0)
    assert [g.id for g in second] == [r.pk for r in rows[2:]]
    source.settle(2, 2, second[:2], [])  # the third stays taken (the trainer died in step 3)
    by_pk = {r.pk: r for r in SampleGroup.objects.filter(run=run)}
    assert (by_pk[rows[0].pk].status, by_pk[rows[0].pk].step) == ("consumed", 1)
    assert (by_pk[rows[1].pk].status, by_pk[rows[1].pk].staleness) == ("dropped", 1)
    assert by_pk[rows[2].pk].staleness == 1 and by_pk[rows[4].pk].status == "taken"
    assert source.take(1, timeout=0) == []  # nothing ready
    # resumed from the checkpoint of step 1: step 2's groups and the taken one are ready again
    assert source.release_after(1) == 3
    statuses = dict(SampleGroup.objects.filter(run=run).values_list("pk", "status"))
    assert [statuses[r.pk] for r in rows] == ["consumed", "dropped", "ready", "ready", "ready"]
    assert [g.id for g in source.take(5, timeout=0)] == [r.pk for r in rows[2:]]


def test_versions_are_published_once_each_and_the_newest_is_latest():
    run = _run()
    publisher = rl_services.DbPublisher(run)
    assert publisher.latest() is None
    publisher.publish(0, "/models/x", 0)
    publisher.publish(1, "/out/checkpoint-1", 1)
    publisher.publish(1, "/out/checkpoint-1b", 1)  # a resumed trainer publishes it again
    assert publisher.latest() == (1, "/out/checkpoint-1b")
    assert list(run.versions.values_list("version", flat=True)) == [0, 1]


def test_samplers_wait_while_the_queue_is_full_or_the_newest_version_has_its_groups():
    run = _run(max_queue=2)
    job = _sampler_job()
    decoupled = SimpleNamespace(synchronous=False, groups_per_step=2, publish_every=1)
    assert rl_selectors.sampling_wait_reason(run=run, config=decoupled, version=0, newest=0) == ""
    _ready(run, job)
    rl_services.group_claim(run=run, job_id=job.pk, version=0)  # one being sampled
    assert "queued" in rl_selectors.sampling_wait_reason(
        run=run, config=decoupled, version=0, newest=0
    )
    # a group a dead sampler left is claimed next: it does not fill the queue
    rl_services.groups_release(run=run, job_id=job.pk)
    assert rl_selectors.sampling_wait_reason(run=run, config=decoupled, version=0, newest=0) == ""
    synchronous = SimpleNamespace(synchronous=True, groups_per_step=2, publish_every=1)
    rl_services.group_claim(run=run, job_id=job.pk, version=0)
    assert "load it first" in rl_selectors.sampling_wait_reason(
        run=run, config=synchronous, version=0, newest=1
    )
    assert "has its 2 groups" in rl_selectors.sampling_wait_reason(
        run=run, config=synchronous, version=0, newest=0
    )
    assert rl_selectors.sampling_wait_reason(run=run, config=synchronous, version=1, newest=1) == ""
    # the claim checks again while it holds the run's row: no third group of version 0
    assert rl_services.group_claim(run=run, job_id=job.pk, version=0, config=synchronous) is None
    assert rl_services.group_claim(run=run, job_id=job.pk, version=0, config=decoupled) is None
    assert SampleGroup.objects.filter(run=run).count() == 2


def test_stop_keeps_the_first_reason():
    run = _run()
    assert rl_services.rl_run_stop(run_id=run.pk, reason="the trainer ended")
    assert not rl_services.rl_run_stop(run_id=run.pk, reason="cancelled by x")
    run.refresh_from_db()
    assert run.stopping and run.stop_reason == "the trainer ended"


# --- launching, adding a sampler, cancelling --------------------------------------------------


@pytest.fixture
def launched(settings, operator):
    model = settings.STEPLAB_DATA_DIR / "models" / "rl-store-model"
    model.mkdir(parents=True, exist_ok=True)  # launching only checks the directory
    task_set = _run().task_set
    task_set.environment = "steplab/arithmetic"
    task_set.save()
    return rl_services.rl_run_create(
        task_set=task_set,
        base_model=str(model),
        values={"max_steps": 4, "batch_size": 2, "max_staleness": 1, "synchronous": "false"},
        samplers=3,
        user=operator,
    )


def test_a_launch_makes_the_training_run_version_0_and_the_parent_job(launched):
    run = launched
    training = run.training_run
    assert training.method == "grpo" and training.job is None  # the parent starts the trainer
    assert training.config["env_id"] == "steplab/arithmetic"
    assert training.config["max_staleness"] == 1 and training.config["synchronous"] is False
    assert training.config["num_tasks"] == len(run.task_ids) == 3
    assert "max_staleness: 1" in training.config_yaml
    assert [(v.version, v.path, v.step) for v in run.versions.all()] == [
        (0, training.base_model, 0)
    ]
    assert (run.job.kind, run.job.status, run.job.queue) == ("training.rl", "queued", "default")
    assert run.samplers == 3 and not run.stopping


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"advantage": "process"}, "needs a reward model's step scores"),
        ({"env_id": "steplab/other"}, "env_id is set by the run itself"),
        ({"stale_groups": "keep"}, "stale_groups must be one of drop, downweight"),
    ],
)
def test_a_launch_that_cannot_work_is_refused_with_the_reason(settings, values, problem):
    from webapp.common.errors import ApplicationError

    model = settings.STEPLAB_DATA_DIR / "models" / "rl-store-model"
    model.mkdir(parents=True, exist_ok=True)
    task_set = _run().task_set
    with pytest.raises(ApplicationError, match=problem):
        rl_services.rl_run_create(
            task_set=task_set,
            environment="steplab/arithmetic",
            base_model=str(model),
            values=values,
        )
    assert not RLRun.objects.exclude(training_run__config={}).exists()


def test_a_sampler_is_added_only_while_the_run_goes_on_and_cancel_stops_it(launched, operator):
    from webapp.common.errors import ApplicationError

    run = launched
    with pytest.raises(ApplicationError, match="has not started its samplers yet"):
        rl_services.rl_run_add_sampler(run=run, user=operator)
    Job.objects.filter(pk=run.job_id).update(status=JobStatus.RUNNING, awaiting_children=True)
    added = rl_services.rl_run_add_sampler(run=run, user=operator)
    assert (added.kind, added.queue, added.parent_id) == (
        "training.rl_sampler",
        "rollouts",
        run.job_id,
    )
    rl_services.rl_run_cancel(run=run, user=operator)
    run.refresh_from_db()
    assert run.stopping and run.stop_reason == f"cancelled by {operator.username}"
    assert Job.objects.get(pk=run.job_id).status == JobStatus.CANCELLED
    assert Job.objects.get(pk=added.pk).status == JobStatus.CANCELLED
    with pytest.raises(ApplicationError, match="has ended or is stopping"):
        rl_services.rl_run_add_sampler(run=run, user=operator)

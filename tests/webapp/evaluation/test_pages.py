"""Evaluation pages on constructed runs (no worker): the leaderboard's order, tie groups and
rank bounds, the significance matrix, a comparison, and the links from a cell to its
trajectories and from two policies on one task to their diff."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.urls import reverse

from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.accounts.models import Role
from webapp.evaluation.models import EvaluationRun
from webapp.evaluation.pipeline_config import parse_config
from webapp.jobs.models import Job, JobStatus
from webapp.rollouts.models import CollectRun, Episode, Policy
from webapp.tasks.services import task_set_import

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

N_TASKS = 40


@pytest.fixture
def task_set():
    ts, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("heldout", n=N_TASKS)), name="held-out-40"
    )
    ts.environment = "steplab/arithmetic"
    ts.save()
    return ts


def make_evaluation(task_set, policy_name: str, successes: list[bool]) -> EvaluationRun:
    """A finished evaluation whose i-th task succeeded when ``successes[i]``."""
    policy = Policy.objects.create(name=policy_name, kind="scripted")
    job = Job.objects.create(kind="evaluation.run", status=JobStatus.SUCCEEDED)
    collect = CollectRun.objects.create(
        task_set=task_set, policy=policy, environment="steplab/arithmetic", episodes_total=N_TASKS
    )
    tasks = list(task_set.tasks.order_by("external_id"))
    Episode.objects.bulk_create(
        [
            Episode(
                run=collect,
                task=task,
                index=0,
                seed=i,
                status=Episode.Status.FINISHED,
                success=ok,
                reward=1.0 if ok else 0.0,
                steps=2,
                tokens_in=10,
                tokens_out=5,
            )
            for i, (task, ok) in enumerate(zip(tasks, successes, strict=True))
        ]
    )
    run = EvaluationRun.objects.create(
        policy=policy, task_set=task_set, collect_run=collect, job=job, samples_per_task=1
    )
    from webapp.evaluation.services import evaluation_summarize

    evaluation_summarize(run=run)
    return run


@pytest.fixture
def three_runs(task_set):
    strong = make_evaluation(task_set, "strong", [True] * 38 + [False] * 2)
    # as good as strong: a statistical tie at the top
    twin = make_evaluation(task_set, "twin", [True] * 37 + [False] * 3)
    weak = make_evaluation(task_set, "weak", [i % 4 == 0 for i in range(N_TASKS)])
    return strong, twin, weak


def test_summary_has_wilson_interval_and_counts(three_runs):
    strong, _, weak = three_runs
    m = strong.metrics
    assert m["n"] == 40 and m["successes"] == 38 and m["tasks"] == 40
    assert m["success_rate"] == pytest.approx(0.95)
    assert m["success_low"] < 0.95 < m["success_high"] <= 1.0
    assert weak.metrics["success_rate"] == pytest.approx(0.25)


def test_leaderboard_orders_ranks_and_shows_the_statistical_tie(client, make_user, three_runs):
    strong, twin, weak = three_runs
    client.force_login(make_user(Role.VIEWER))
    page = client.get(reverse("evaluation:leaderboard", args=[strong.task_set_id])).content.decode()
    rows = re.findall(r'data-key="run(\d+)" data-rank="(\d+)" data-tie-group="(\d+)"', page)
    assert [int(r[0]) for r in rows] == [strong.pk, twin.pk, weak.pk]
    ranks = {int(pk): (int(rank), int(group)) for pk, rank, group in rows}
    # strong and twin are one statistical tie: both rank 1, same group; weak is below both
    assert ranks[strong.pk] == (1, 1) and ranks[twin.pk] == (1, 1)
    assert ranks[weak.pk][0] == 3 and ranks[weak.pk][1] == 2
    # a cell opens the trajectories behind it; a matrix cell opens the comparison
    assert f"collect_run={strong.collect_run_id}" in page
    assert f"?a={twin.pk}&amp;b={strong.pk}" in page or f"?a={strong.pk}&amp;b={twin.pk}" in page


def test_comparison_page_runs_the_paired_and_unpaired_tests(client, make_user, three_runs):
    strong, _, weak = three_runs
    client.force_login(make_user(Role.VIEWER))
    url = reverse("evaluation:compare") + f"?a={weak.pk}&b={strong.pk}"
    page = client.get(url).content.decode()
    assert "40 shared tasks" in page
    for name in re.findall(r'data-test="([^"]+)"', page):
        assert name  # every test row is named
    assert len(re.findall(r'data-test="', page)) >= 6  # 4 paired + 2 unpaired
    assert "<strong>yes</strong>" in page  # 25% vs 95% on 40 paired tasks is significant


def test_the_cell_filter_lists_exactly_the_runs_trajectories(client, make_user, three_runs):
    from webapp.trajectories import services as store
    from webapp.trajectories.models import Trajectory

    strong, twin, _ = three_runs
    made = {}
    for run in (strong, twin):
        episode = run.collect_run.episodes.order_by("task__external_id").first()
        trajectory = store.trajectory_begin(
            key=episode.idempotency_key,
            prompt="p",
            task=episode.task,
            task_ref=episode.task.external_id,
            domain="arithmetic",
            agent="steplab",
            model="scripted",
            policy=run.policy.name,
            environment="steplab/arithmetic",
        )
        Episode.objects.filter(pk=episode.pk).update(trajectory=trajectory)
        made[run.pk] = trajectory
    client.force_login(make_user(Role.VIEWER))
    page = client.get(
        reverse("trajectories:list") + f"?collect_run={strong.collect_run_id}"
    ).content.decode()
    assert f"/trajectories/{made[strong.pk].pk}/" in page
    assert f"/trajectories/{made[twin.pk].pk}/" not in page
    assert Trajectory.objects.count() == 2
    compare = client.get(
        reverse("evaluation:compare") + f"?a={strong.pk}&b={twin.pk}"
    ).content.decode()
    assert f"?a={made[strong.pk].pk}&amp;b={made[twin.pk].pk}" in compare  # the diff link


def test_viewers_read_but_cannot_launch(client, make_user, task_set):
    client.force_login(make_user(Role.VIEWER))
    assert client.get(reverse("evaluation:index")).status_code == 200
    assert client.get(reverse("evaluation:pipelines")).status_code == 200
    assert client.get(reverse("evaluation:new")).status_code == 403
    assert client.get(reverse("evaluation:pipeline_new")).status_code == 403


def test_launching_an_evaluation_from_the_form(client, make_user, task_set):
    client.force_login(make_user(Role.OPERATOR))
    policy = Policy.objects.create(name="scripted", kind="scripted")
    data = {
        "policy": policy.pk,
        "task_set": task_set.pk,
        "samples_per_task": 3,
        "max_steps": 6,
        "concurrency": 2,
        "seed": 7,
        "name": "",
    }
    response = client.post(reverse("evaluation:new"), data)
    assert response.status_code == 302
    run = EvaluationRun.objects.get()
    assert run.samples_per_task == 3 and run.seed == 7 and run.job.kind == "evaluation.run"
    bad = client.post(reverse("evaluation:new"), {**data, "samples_per_task": 0})
    assert bad.status_code == 200 and EvaluationRun.objects.count() == 1


def test_pipeline_config_errors_name_the_field():
    from webapp.common.errors import ApplicationError

    with pytest.raises(ApplicationError, match=r"iterations: .*at least 1"):
        parse_config({"iterations": []})
    with pytest.raises(ApplicationError, match=r"iterations\.0\.train\.method"):
        parse_config({"iterations": [{"train": {"method": "ppo"}}]})
    with pytest.raises(ApplicationError, match=r"iterations\.0\.collect\.episodes"):
        parse_config("iterations:\n- collect: {episodes: 3}\n")
    with pytest.raises(ApplicationError, match="not valid YAML"):
        parse_config("iterations: [")
    from webapp.evaluation.demo import DEFAULT_PIPELINE_YAML

    config = parse_config(DEFAULT_PIPELINE_YAML)
    assert [i.train.method for i in config.iterations] == ["sft", "grpo"]


def test_every_checkpoint_is_evaluated_once_and_plotted_by_step(client, make_user, task_set):
    from webapp.evaluation.selectors import checkpoint_curve
    from webapp.evaluation.services import checkpoints_evaluate
    from webapp.training.models import Checkpoint, TrainingRun

    out = settings.STEPLAB_DATA_DIR / "training" / "7-sft"  # where the app writes checkpoints
    run = TrainingRun.objects.create(method="sft", base_model="/models/base", output_dir=str(out))
    for step in (20, 10):
        Checkpoint.objects.create(run=run, step=step, path=str(out / f"checkpoint-{step}"))
    launched = checkpoints_evaluate(training_run=run, task_set=task_set, samples_per_task=2)
    assert [r.checkpoint.step for r in launched] == [10, 20]
    assert all(r.policy.kind == "local" and r.samples_per_task == 2 for r in launched)
    assert checkpoints_evaluate(training_run=run, task_set=task_set, samples_per_task=2) == []
    assert checkpoint_curve(training_run=run) == []  # nothing finished yet
    for run_row, rate in zip(launched, (0.25, 0.75), strict=True):
        run_row.metrics = {"success_rate": rate, "success_low": 0.1, "success_high": 0.9, "n": 8}
        run_row.save()
        Job.objects.filter(pk=run_row.job_id).update(status=JobStatus.SUCCEEDED)
    curve = checkpoint_curve(training_run=run)
    assert [(p["step"], p["success_rate"]) for p in curve] == [(10, 0.25), (20, 0.75)]
    client.force_login(make_user(Role.VIEWER))
    page = client.get(reverse("training:detail", args=[run.pk])).content.decode()
    assert 'id="curve-data"' in page and "step 20" in page


def test_the_pipeline_form_offers_the_demo_and_each_ablation_arm_as_a_preset(client, make_user):
    from webapp.evaluation.ablation import ARMS, arm_config

    client.force_login(make_user(Role.OPERATOR))
    page = client.get(reverse("evaluation:pipeline_new")).content.decode()
    for arm in ARMS:
        assert f"?preset=ablation-arithmetic-{arm}" in page
    page = client.get(
        reverse("evaluation:pipeline_new"), {"preset": "ablation-arithmetic-calibrated"}
    ).content.decode()
    assert "annotator: simulated" in page and "advantage: mixed" in page
    configs = {arm: parse_config(arm_config("arithmetic", arm, seed=1)) for arm in ARMS}
    grpo = {arm: c.iterations[-1] for arm, c in configs.items()}
    assert grpo["outcome"].train.values["advantage"] == "outcome"
    assert grpo["calibrated"].calibrate is not None and grpo["process"].calibrate is None
    # the same samples and compute in every arm: only the advantage and calibration differ
    assert len({c.iterations[-1].collect.model_dump_json() for c in configs.values()}) == 1
    steps = {c.iterations[-1].train.values["max_steps"] for c in configs.values()}
    assert len(steps) == 1 and all(c.seed == 1 for c in configs.values())


def test_an_iteration_collects_on_a_named_training_set_never_the_evaluation_set(task_set):
    from webapp.common.errors import ApplicationError
    from webapp.evaluation.services import pipeline_launch
    from webapp.rewards.services import reward_model_create, rubrics_seed

    practice, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("practice", n=4)), name="practice-4"
    )
    train, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("train_wide", n=4)), name="train-4"
    )
    policy = Policy.objects.create(
        name="tiny", kind="local", model="/models/tiny", parameters={"model_dir": "/models/tiny"}
    )
    rubrics_seed(domain="arithmetic")
    reward_model = reward_model_create(domain="arithmetic", note="t")

    def launch(name, collect_on):
        config = {
            "iterations": [
                {
                    "collect": {"policy": "current", "task_set": collect_on},
                    "dataset": {"kind": "grpo"},
                    "train": {"method": "grpo"},
                }
            ]
        }
        return pipeline_launch(
            name=name, base_policy=policy, train_task_set=train, eval_task_set=task_set,
            reward_model=reward_model, config=config,
        )  # fmt: skip

    with pytest.raises(ApplicationError, match="is the evaluation task set"):
        launch("p1", task_set.name)
    with pytest.raises(ApplicationError, match="no task set is named 'nope'"):
        launch("p2", "nope")
    pipeline = launch("p3", practice.name)
    assert pipeline.config["iterations"][0]["collect"]["task_set"] == "practice-4"
